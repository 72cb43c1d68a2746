/* The relay's Postgres session: its settings, the schema it needs, the
 * leader lock, the primary check, and every statement's bounded wait. The
 * batch's own statements on it are pg_source.c's. */
#include "fmacros.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "pg_conn.h"
#include "pg_source.h"

void pg_source_init(struct pg_source *pg, const struct config *cfg)
{
	memset(pg, 0, sizeof(*pg));
	pg->cfg = cfg;
	pg_read_init(&pg->read);
	buf_init(&pg->sql);
}

void pg_source_stop_on(struct pg_source *pg, struct stop *stop)
{
	pg->stop = stop;
}

int pg_source_fail(struct pg_source *pg, const PGresult *res, const char *what)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

	pg_conn_error(pg->errstr, sizeof(pg->errstr), pg->conn, res, what);
	snprintf(pg->sqlstate, sizeof(pg->sqlstate), "%s", state ? state : "");
	return -EIO;
}

/* How long a batch's transaction may wait on anything: a batch waits on Redis
 * at most a few --redis-timeouts, and on Postgres itself no longer than that. */
static int tx_bound_ms(const struct config *cfg)
{
	return cfg->redis_timeout_ms * 4 > 10000 ? cfg->redis_timeout_ms * 4 : 10000;
}

/*
 * The server side of a dead peer: without keepalives a relay whose host
 * vanished keeps the leader lock for the kernel's two hours; with them the
 * session, and the lock, end within seconds. The idle timeout keeps a stuck
 * relay's transaction from ever becoming the long transaction that bloats
 * every hot table. The last statement asks whether anyone (URL options, role,
 * database, server configuration) chose a statement_timeout: if not, each
 * batch bounds its own statements too; if so, theirs wins.
 */
static int set_session(struct pg_source *pg)
{
	char sql[600];
	PGresult *res;
	int rc = 0;

	snprintf(sql, sizeof(sql),
		 "SET idle_in_transaction_session_timeout = %d; SET tcp_keepalives_idle = 5;"
		 " SET tcp_keepalives_interval = 2; SET tcp_keepalives_count = 3;"
		 " SET tcp_user_timeout = 10000;"
		 " SELECT source = 'default' FROM pg_settings WHERE name = 'statement_timeout'",
		 tx_bound_ms(pg->cfg));
	res = PQexec(pg->conn, sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		rc = pg_source_fail(pg, res, "could not configure the session");
	else
		pg->statement_bound_ms = strcmp(PQgetvalue(res, 0, 0), "t") == 0 ? tx_bound_ms(pg->cfg) : 0;
	PQclear(res);
	return rc;
}

/* Notices, and errors the server sends outside a query (a terminated
 * session's FATAL), go to the log as one line instead of raw to stderr. */
static void log_notice(void *arg, const PGresult *res)
{
	char msg[512];
	const char *severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
	bool notice = severity && (strcmp(severity, "NOTICE") == 0 || strcmp(severity, "INFO") == 0 ||
				   strcmp(severity, "LOG") == 0 || strcmp(severity, "DEBUG") == 0);

	(void)arg;
	snprintf(msg, sizeof(msg), "%s", PQresultErrorMessage(res));
	pg_conn_one_line(msg);
	log_event(notice ? LOG_DEBUG : LOG_WARN, "postgres says",
		  LOGF(F_STR("severity", severity ? severity : ""), F_STR("message", msg)));
}

int pg_source_connect(struct pg_source *pg)
{
	pg_source_close(pg);
	pg->conn = pg_conn_open(pg->cfg, "stagedrain", false);
	if (!pg->conn)
		return -ENOMEM;
	PQsetNoticeReceiver(pg->conn, log_notice, NULL);
	if (PQstatus(pg->conn) != CONNECTION_OK)
		return pg_source_fail(pg, NULL, "could not connect to postgres");
	return set_session(pg);
}

bool pg_source_broken(const struct pg_source *pg)
{
	return !pg->conn || PQstatus(pg->conn) != CONNECTION_OK;
}

/* The tables, and what the cursor relies on (sql/002): ids taken after the
 * transaction's xid, from a sequence that hands them out in order. */
#define SCHEMA_SQL                                                                                                        \
	"SELECT 'staged_jobs_dead'::regclass IS NOT NULL,"                                                                \
	" coalesce(pg_get_expr(d.adbin, d.adrelid), '') LIKE '%pg_current_xact_id()%nextval(%',"                          \
	" (SELECT seqcache FROM pg_sequence"                                                                              \
	"  WHERE seqrelid = pg_get_serial_sequence('staged_jobs', 'id')::regclass),"                                      \
	" EXISTS (SELECT FROM pg_attribute u WHERE u.attrelid IN ('staged_jobs'::regclass,"                               \
	"  'staged_jobs_dead'::regclass) AND u.attname = 'uuid' AND NOT u.attisdropped HAVING count(*) = 2),"             \
	" to_regclass('staged_jobs_held') IS NOT NULL AND EXISTS (SELECT FROM pg_attribute t"                             \
	"  WHERE t.attrelid = 'staged_jobs'::regclass AND t.attname = 'tenant' AND NOT t.attisdropped),"                  \
	" EXISTS (SELECT FROM pg_attribute r WHERE r.attrelid IN ('staged_jobs'::regclass, 'staged_jobs_dead'::regclass)" \
	"  AND r.attname = 'route' AND NOT r.attisdropped HAVING count(*) = 2),"                                          \
	" (SELECT atttypid FROM pg_attribute j WHERE j.attrelid = 'staged_jobs'::regclass"                                \
	"  AND j.attname = 'args') = 'json'::regtype,"                                                                    \
	" to_regclass('staged_jobs_held') IS NULL"                                                                        \
	"  OR (has_table_privilege('staged_jobs_held', 'SELECT') AND has_table_privilege('staged_jobs_held', 'INSERT')"   \
	"  AND has_table_privilege('staged_jobs_held', 'DELETE'))"                                                        \
	" FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"                    \
	" WHERE a.attrelid = 'staged_jobs'::regclass AND a.attname = 'id'"

/* What each column of SCHEMA_SQL after the first must say, and what to run
 * when it does not; show puts the column's value between the two halves. */
static const struct schema_need {
	const char *want, *say, *then;
	bool show;
} schema_needs[] = {
	{ "t", "staged_jobs.id does not take the xid before the id (migration 002): run `stagedrain migrate`", "",
	  false },
	{ "1", "sequence of staged_jobs.id has CACHE ",
	  "; the relay needs ids in order: ALTER SEQUENCE staged_jobs_id_seq CACHE 1", true },
	{ "t", "staged_jobs has no uuid column (migration 004): run `stagedrain migrate`", "", false },
	{ "t",
	  "staged_jobs has no tenant column or staged_jobs_held is missing (migration 005): run `stagedrain migrate`",
	  "", false },
	{ "t", "staged_jobs has no route column (migration 006): run `stagedrain migrate`", "", false },
	{ "t", "staged_jobs.args is not json (migration 007): run `stagedrain migrate`", "", false },
	{ "t",
	  "the relay's role may not SELECT, INSERT and DELETE on staged_jobs_held: "
	  "run sql/roles.sql again (after migration 005)",
	  "", false },
};

int pg_source_check_schema(struct pg_source *pg)
{
	PGresult *res = PQexec(pg->conn, SCHEMA_SQL);
	int rc = 0;

	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		rc = pg_source_fail(pg, res, "schema check failed");
		if (strcmp(pg->sqlstate, "42P01") == 0)
			snprintf(pg->errstr, sizeof(pg->errstr),
				 "table staged_jobs or staged_jobs_dead is missing: run `stagedrain migrate` first");
		PQclear(res);
		return rc;
	}
	for (int col = 1; rc == 0 && col <= (int)(sizeof(schema_needs) / sizeof(schema_needs[0])); col++) {
		const struct schema_need *n = &schema_needs[col - 1];
		const char *got = PQntuples(res) == 1 ? PQgetvalue(res, 0, col) : "";

		if (strcmp(got, n->want) != 0) {
			snprintf(pg->errstr, sizeof(pg->errstr), "%s%s%s", n->say, n->show ? got : "", n->then);
			rc = -EIO;
		}
	}
	PQclear(res);
	return rc;
}

/* One boolean, the first column of a one-row query (params as PQexecParams'). */
static int query_flag(struct pg_source *pg, const char *sql, int n, const char *const *params, const char *what,
		      bool *flag)
{
	PGresult *res = PQexecParams(pg->conn, sql, n, NULL, params, NULL, NULL, 0);
	int rc = 0;

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		rc = pg_source_fail(pg, res, what);
	else
		*flag = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	return rc;
}

int pg_source_try_lock(struct pg_source *pg, bool *held)
{
	char key[32];
	const char *params[1] = { key };

	snprintf(key, sizeof(key), "%lld", pg->cfg->lock_key);
	return query_flag(pg, "SELECT pg_try_advisory_lock($1::int8)", 1, params, "could not take the leader lock",
			  held);
}

int pg_source_staged_top(struct pg_source *pg, long long *top)
{
	PGresult *res = PQexec(pg->conn, "SELECT coalesce(greatest((SELECT max(id) FROM staged_jobs),"
					 " (SELECT max(id) FROM staged_jobs_held)), 0)");
	int rc = 0;

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		rc = pg_source_fail(pg, res, "could not read the highest staged id");
	else
		*top = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return rc;
}

/* Whether staged_jobs_leader is there for this role to read and write. */
static int leader_table(struct pg_source *pg, bool *usable)
{
	return query_flag(pg,
			  "SELECT to_regclass('staged_jobs_leader') IS NOT NULL"
			  " AND has_table_privilege('staged_jobs_leader', 'SELECT, INSERT, UPDATE')",
			  0, NULL, "could not look for staged_jobs_leader", usable);
}

int pg_source_note_routes(struct pg_source *pg, const char *digest, bool *same, bool *recorded)
{
	char key[32];
	const char *params[2] = { key, digest };
	int rc;

	*same = true;
	if ((rc = leader_table(pg, recorded)) < 0 || !*recorded)
		return rc;
	snprintf(key, sizeof(key), "%lld", pg->cfg->lock_key);
	return query_flag(pg,
			  "WITH last AS (SELECT routes = $2 AND settled AS same FROM staged_jobs_leader"
			  "   WHERE lock_key = $1::int8)"
			  " , mine AS (INSERT INTO staged_jobs_leader (lock_key, routes) VALUES ($1::int8, $2)"
			  "   ON CONFLICT (lock_key) DO UPDATE SET routes = EXCLUDED.routes, settled = false,"
			  "   since = now() WHERE NOT (SELECT same FROM last))"
			  " SELECT coalesce((SELECT same FROM last), true)",
			  2, params, "could not record the leader's routes", same);
}

int pg_source_routes_settled(struct pg_source *pg, const char *digest)
{
	char key[32];
	const char *params[2] = { key, digest };
	PGresult *res;
	int rc = 0;

	snprintf(key, sizeof(key), "%lld", pg->cfg->lock_key);
	res = PQexecParams(pg->conn,
			   "UPDATE staged_jobs_leader SET settled = true WHERE lock_key = $1::int8 AND routes = $2", 2,
			   NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		rc = pg_source_fail(pg, res, "could not record that every fence is settled");
	PQclear(res);
	return rc;
}

/* Why the session may not lead, for errstr; closes it, so the next connect
 * may find the primary (a failover, several hosts in --pg-url). */
static int on_standby(struct pg_source *pg)
{
	char where[120];

	pg_source_describe(pg, where, sizeof(where));
	snprintf(pg->errstr, sizeof(pg->errstr),
		 "postgres at %.120s is a hot standby (in recovery): it cannot delete what the relay pushes", where);
	*pg->sqlstate = '\0';
	pg_source_close(pg);
	return -EROFS;
}

/* A standby refuses LISTEN, so the session listens only once it is known to
 * be on a primary. */
int pg_source_check_primary(struct pg_source *pg)
{
	PGresult *res;
	bool standby = false;
	int rc;

	if ((rc = query_flag(pg, "SELECT pg_is_in_recovery()", 0, NULL, "could not ask whether postgres is in recovery",
			     &standby)) < 0)
		return rc;
	if (standby)
		return on_standby(pg);
	res = PQexec(pg->conn, "LISTEN staged_jobs");
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		rc = pg_source_fail(pg, res, "could not listen for staged jobs");
	PQclear(res);
	return rc;
}

/* Asks the server to cancel the running statement; best effort: if the
 * request cannot be sent, the session is closed a moment later anyway. */
static void cancel_statement(struct pg_source *pg)
{
	PGcancel *c = PQgetCancel(pg->conn);
	char err[256];

	if (!c)
		return;
	(void)PQcancel(c, err, sizeof(err));
	PQfreeCancel(c);
}

/*
 * PQgetResult, waiting no later than the stop deadline allows: past it the
 * statement is cancelled (it then ends with sqlstate 57014, its transaction
 * aborted), and if it has not ended PG_SOURCE_CANCEL_MS after the deadline
 * (a server that does not answer) the session is closed. NULL when there is
 * no more result, or the session was closed (pg->conn is then NULL).
 */
PGresult *pg_source_next_result(struct pg_source *pg)
{
	struct pollfd p = { .fd = PQsocket(pg->conn), .events = POLLIN };
	bool cancelled = false;

	while (pg->stop && PQisBusy(pg->conn)) {
		long long now = clock_mono_ms(), end = stop_deadline(pg->stop);
		if (now >= end && !cancelled) {
			cancel_statement(pg);
			cancelled = true;
		} else if (now >= end && now - end >= PG_SOURCE_CANCEL_MS) {
			pg_source_close(pg);
			return NULL;
		}
		if (poll(&p, 1, STOP_SLICE_MS) < 0 && errno != EINTR)
			break;
		if (!PQconsumeInput(pg->conn))
			break; /* PQgetResult says why */
	}
	return PQgetResult(pg->conn);
}

/* As PQexec (the last result; NULL if the session was closed), bounded as next_result. */
PGresult *pg_source_exec(struct pg_source *pg, const char *sql)
{
	PGresult *res, *last = NULL;

	if (!PQsendQuery(pg->conn, sql))
		return NULL;
	while (pg->conn && (res = pg_source_next_result(pg)) != NULL) {
		PQclear(last);
		last = res;
	}
	if (!pg->conn) {
		PQclear(last);
		return NULL;
	}
	return last;
}

void pg_source_describe(const struct pg_source *pg, char *out, size_t outlen)
{
	const char *host = pg->conn ? PQhost(pg->conn) : NULL;
	const char *port = pg->conn ? PQport(pg->conn) : NULL;
	const char *db = pg->conn ? PQdb(pg->conn) : NULL;

	snprintf(out, outlen, "%s:%s/%s", host && *host ? host : "(default)", port && *port ? port : "(default)",
		 db ? db : "");
}

void pg_source_close(struct pg_source *pg)
{
	pg->next_prepared = false;
	pg_read_clear(&pg->read);
	pg->in_tx = false;
	if (pg->conn)
		PQfinish(pg->conn);
	pg->conn = NULL;
}

void pg_source_free(struct pg_source *pg)
{
	if (!pg)
		return;
	pg_source_close(pg);
	PQclear(pg->fenced);
	pg->fenced = NULL;
	PQclear(pg->dead_moved);
	pg->dead_moved = NULL;
	buf_free(&pg->sql);
	pg_read_free(&pg->read);
}
