/* The Postgres side: the leader lock and, on the same session, each batch's
 * read, delete and commit. */
#include "fmacros.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pg_source.h"

/* The snapshot's bounds come first: in REPEATABLE READ they are the bounds of
 * every read that follows in the transaction. */
#define BEGIN_SQL "BEGIN ISOLATION LEVEL REPEATABLE READ;"
#define SNAPSHOT_SQL "SELECT pg_snapshot_xmin(s)::text, pg_snapshot_xmax(s)::text FROM pg_current_snapshot() s;"
#define COLUMNS                                                                          \
	"s.id, s.queue, s.job_class, s.args::text, s.options::text, s.jid,"              \
	" (extract(epoch FROM s.created_at) * 1000000)::int8 AS created_us,"             \
	" (extract(epoch FROM s.run_at) * 1000000)::int8 AS run_at_us"

enum { COL_ID, COL_QUEUE, COL_CLASS, COL_ARGS, COL_OPTIONS, COL_JID, COL_CREATED, COL_RUN_AT };

void pg_source_init(struct pg_source *pg, const struct config *cfg)
{
	memset(pg, 0, sizeof(*pg));
	pg->cfg = cfg;
	buf_init(&pg->sql);
}

/* libpq's messages end in newlines, may join several and indent hints with
 * tabs; a log line wants single spaces. */
static void one_line(char *str)
{
	char *out = str;
	bool space = false;

	for (const char *s = str; *s; s++) {
		bool ws = *s == '\n' || *s == '\t' || *s == ' ';
		if (!ws || !space)
			*out++ = ws ? ' ' : *s;
		space = ws;
	}
	while (out > str && out[-1] == ' ')
		out--;
	*out = '\0';
}

/* Records why a call failed: the message on one line, and the SQLSTATE. */
static int pg_fail(struct pg_source *pg, const PGresult *res, const char *what)
{
	const char *msg = res ? PQresultErrorMessage(res) : "";
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

	if (!*msg)
		msg = PQerrorMessage(pg->conn);
	snprintf(pg->errstr, sizeof(pg->errstr), "%s: %s", what, *msg ? msg : "no message");
	one_line(pg->errstr);
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
		 " SET tcp_user_timeout = 10000; LISTEN staged_jobs;"
		 " SELECT source = 'default' FROM pg_settings WHERE name = 'statement_timeout'",
		 tx_bound_ms(pg->cfg));
	res = PQexec(pg->conn, sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		rc = pg_fail(pg, res, "could not configure the session");
	else
		pg->bound_statements = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
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
	one_line(msg);
	log_event(notice ? LOG_DEBUG : LOG_WARN, "postgres says",
		  LOGF(F_STR("severity", severity ? severity : ""), F_STR("message", msg)));
}

int pg_source_connect(struct pg_source *pg)
{
	/* Ours come before dbname, so the same settings in the URL win. Client-side
	 * keepalives notice a vanished server as the server notices us. */
	const char *keys[] = { "connect_timeout", "fallback_application_name", "keepalives",
			       "keepalives_idle", "keepalives_interval", "keepalives_count",
			       "tcp_user_timeout", "dbname", NULL, NULL };
	const char *vals[] = { "10", "stagedrain", "1", "5", "2", "3", "10000", pg->cfg->pg_url, NULL, NULL };

	/* After dbname, so the password file's password beats one in the URL. */
	if (pg->cfg->pg_password) {
		keys[8] = "password";
		vals[8] = pg->cfg->pg_password;
	}
	pg_source_close(pg);
	pg->conn = PQconnectdbParams(keys, vals, 1);
	if (!pg->conn)
		return -ENOMEM;
	PQsetNoticeReceiver(pg->conn, log_notice, NULL);
	if (PQstatus(pg->conn) != CONNECTION_OK)
		return pg_fail(pg, NULL, "could not connect to postgres");
	return set_session(pg);
}

bool pg_source_broken(const struct pg_source *pg)
{
	return !pg->conn || PQstatus(pg->conn) != CONNECTION_OK;
}

/* The tables, and what the cursor relies on (sql/002): ids taken after the
 * transaction's xid, from a sequence that hands them out in order. */
#define SCHEMA_SQL                                                                          \
	"SELECT 'staged_jobs_dead'::regclass IS NOT NULL,"                                  \
	" coalesce(pg_get_expr(d.adbin, d.adrelid), '') LIKE '%pg_current_xact_id()%nextval(%',"  \
	" (SELECT seqcache FROM pg_sequence"                                               \
	"  WHERE seqrelid = pg_get_serial_sequence('staged_jobs', 'id')::regclass)"         \
	" FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum" \
	" WHERE a.attrelid = 'staged_jobs'::regclass AND a.attname = 'id'"

int pg_source_check_schema(struct pg_source *pg)
{
	PGresult *res = PQexec(pg->conn, SCHEMA_SQL);
	int rc = 0;

	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		rc = pg_fail(pg, res, "schema check failed");
		if (strcmp(pg->sqlstate, "42P01") == 0)
			snprintf(pg->errstr, sizeof(pg->errstr),
				 "table staged_jobs or staged_jobs_dead is missing: run `stagedrain migrate` first");
	} else if (PQntuples(res) != 1 || strcmp(PQgetvalue(res, 0, 1), "t") != 0) {
		snprintf(pg->errstr, sizeof(pg->errstr),
			 "staged_jobs.id does not take the xid before the id (migration 002): "
			 "run `stagedrain migrate`");
		rc = -EIO;
	} else if (strcmp(PQgetvalue(res, 0, 2), "1") != 0) {
		snprintf(pg->errstr, sizeof(pg->errstr),
			 "sequence of staged_jobs.id has CACHE %s; the relay needs ids in order: "
			 "ALTER SEQUENCE staged_jobs_id_seq CACHE 1",
			 PQgetvalue(res, 0, 2));
		rc = -EIO;
	}
	PQclear(res);
	return rc;
}

int pg_source_try_lock(struct pg_source *pg)
{
	char key[32];
	const char *params[1] = { key };
	PGresult *res;
	int rc;

	snprintf(key, sizeof(key), "%lld", pg->cfg->lock_key);
	res = PQexecParams(pg->conn, "SELECT pg_try_advisory_lock($1::int8)", 1, NULL, params, NULL, NULL, 0);

	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		rc = pg_fail(pg, res, "could not take the leader lock");
	} else {
		rc = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	}
	PQclear(res);
	return rc;
}

/* Rows in gap ranges (late commits), as a subquery; lo and hi as array literals. */
static int append_gap_read(struct buf *sql, const struct gaps *g, int limit)
{
	int rc = buf_puts(sql, "(SELECT " COLUMNS " FROM unnest('{");

	for (size_t i = 0; rc == 0 && i < g->n; i++)
		rc = buf_printf(sql, "%s%lld", i ? "," : "", g->v[i].lo);
	if (rc == 0)
		rc = buf_puts(sql, "}'::int8[], '{");
	for (size_t i = 0; rc == 0 && i < g->n; i++)
		rc = buf_printf(sql, "%s%lld", i ? "," : "", g->v[i].hi);
	return rc ? rc
		  : buf_printf(sql,
			       "}'::int8[]) AS g(lo, hi) JOIN staged_jobs s ON s.id BETWEEN g.lo AND g.hi"
			       " ORDER BY s.id LIMIT %d) UNION ALL ",
			       limit);
}

/* Reads above the cursor, and in the gaps below it: no query starts below the
 * oldest gap, so drained rows' dead index entries are never walked. */
static int build_fetch(struct pg_source *pg, const struct gaps *g, int limit)
{
	struct buf *sql = &pg->sql;
	int rc;

	buf_reset(sql);
	rc = buf_puts(sql, BEGIN_SQL);
	/* LOCAL: it ends with the batch, so the lock wait and migrations keep theirs. */
	if (rc == 0 && pg->bound_statements)
		rc = buf_printf(sql, "SET LOCAL statement_timeout = %d;", tx_bound_ms(pg->cfg));
	if (rc == 0)
		rc = buf_puts(sql, SNAPSHOT_SQL);
	if (rc == 0 && g->n && (rc = buf_puts(sql, "SELECT * FROM (")) == 0)
		rc = append_gap_read(sql, g, limit);
	if (rc == 0)
		rc = buf_printf(sql, "(SELECT " COLUMNS " FROM staged_jobs s WHERE s.id > %lld ORDER BY s.id LIMIT %d)",
				g->cursor, limit);
	if (rc == 0 && g->n)
		rc = buf_printf(sql, ") b ORDER BY id LIMIT %d", limit);
	return rc;
}

/* BEGIN and SET, then the snapshot's bounds and the rows: keeps the rows and
 * notes the bounds. */
static int read_fetch_results(struct pg_source *pg)
{
	PGresult *res;
	int rc = 0, tables = 0;

	while ((res = PQgetResult(pg->conn)) != NULL) {
		ExecStatusType st = PQresultStatus(res);
		if (rc == 0 && st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
			rc = pg_fail(pg, res, "could not read staged jobs");
		if (rc == 0 && st == PGRES_TUPLES_OK && tables++ == 0) {
			pg->read.xmin = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
			pg->read.xmax = strtoull(PQgetvalue(res, 0, 1), NULL, 10);
		} else if (rc == 0 && st == PGRES_TUPLES_OK && !pg->rows) {
			pg->rows = res;
			continue;
		}
		PQclear(res);
	}
	if (rc == 0 && !pg->rows)
		rc = pg_fail(pg, NULL, "could not read staged jobs");
	return rc;
}

/* The ids read, ascending, and how far the gap read got if its limit cut it short. */
static int note_ids(struct pg_source *pg, const struct gaps *g, int limit)
{
	struct pg_read *r = &pg->read;
	size_t n = (size_t)PQntuples(pg->rows), below = 0;

	if (n > r->cap) {
		long long *ids = realloc(r->ids, n * sizeof(*ids));
		if (!ids)
			return -ENOMEM;
		r->ids = ids;
		r->cap = n;
	}
	for (size_t i = 0; i < n; i++) {
		r->ids[i] = strtoll(PQgetvalue(pg->rows, (int)i, COL_ID), NULL, 10);
		below += r->ids[i] <= g->cursor;
	}
	r->n = n;
	r->retire_below = g->n && below >= (size_t)limit ? r->ids[below - 1] : LLONG_MAX;
	return 0;
}

int pg_source_wait_jobs(struct pg_source *pg, int ms, volatile sig_atomic_t *stop)
{
	struct pollfd pfd = { .fd = PQsocket(pg->conn), .events = POLLIN };

	for (;;) {
		PGnotify *note;
		bool woken = false;

		if (!PQconsumeInput(pg->conn))
			return pg_fail(pg, NULL, "lost the connection while waiting for jobs");
		while ((note = PQnotifies(pg->conn)) != NULL) {
			woken = true;
			PQfreemem(note);
		}
		if (woken || ms <= 0 || *stop)
			return woken;
		/* Short slices: a stop signal is honoured within 50 ms. */
		if (poll(&pfd, 1, ms < 50 ? ms : 50) < 0 && errno != EINTR)
			return pg_fail(pg, NULL, "waiting for jobs failed");
		ms -= 50;
	}
}

int pg_source_fetch(struct pg_source *pg, const struct gaps *g, int limit, int *nrows)
{
	int rc;

	pg->read.n = 0;
	pg->read.above = g->cursor;
	if ((rc = build_fetch(pg, g, limit)) < 0)
		return rc;
	pg->in_tx = true;
	if (!PQsendQuery(pg->conn, pg->sql.data))
		return pg_fail(pg, NULL, "could not read staged jobs");
	if ((rc = read_fetch_results(pg)) < 0 || (rc = note_ids(pg, g, limit)) < 0) {
		PQclear(pg->rows);
		pg->rows = NULL;
		return rc;
	}
	*nrows = PQntuples(pg->rows);
	return 0;
}

void pg_source_row(const struct pg_source *pg, int i, struct job_row *row)
{
	const PGresult *r = pg->rows;

	row->id = pg->read.ids[i]; /* parsed once, when the read noted its ids */
	row->queue = PQgetvalue(r, i, COL_QUEUE);
	row->queue_len = (size_t)PQgetlength(r, i, COL_QUEUE);
	row->job_class = PQgetvalue(r, i, COL_CLASS);
	row->class_len = (size_t)PQgetlength(r, i, COL_CLASS);
	row->args = PQgetvalue(r, i, COL_ARGS);
	row->args_len = (size_t)PQgetlength(r, i, COL_ARGS);
	row->options = PQgetvalue(r, i, COL_OPTIONS);
	row->options_len = (size_t)PQgetlength(r, i, COL_OPTIONS);
	row->jid = PQgetvalue(r, i, COL_JID);
	row->jid_len = (size_t)PQgetlength(r, i, COL_JID);
	row->created_at_us = strtoll(PQgetvalue(r, i, COL_CREATED), NULL, 10);
	row->has_run_at = !PQgetisnull(r, i, COL_RUN_AT);
	row->run_at_us = row->has_run_at ? strtoll(PQgetvalue(r, i, COL_RUN_AT), NULL, 10) : 0;
}

/*
 * Above the cursor the read took every visible id in order, so once the dead
 * rows have moved, the visible rows in (cursor, last id read] are exactly the
 * pushed ones: one range scan deletes them, where an id list costs a probe
 * per id. Rows from gaps go by id: `id = ANY('{1,2,3}')`, a literal of our own
 * integers.
 */
static int append_delete(struct pg_source *pg, const struct batch *b)
{
	const struct pg_read *r = &pg->read;
	struct buf *sql = &pg->sql;
	size_t below = 0;
	int rc = 0;

	while (below < b->njobs && b->jobs[below].id <= r->above)
		below++;
	if (below < b->njobs && (rc = buf_puts(sql, "DELETE FROM staged_jobs WHERE id > ")) == 0 &&
	    (rc = buf_put_int(sql, r->above)) == 0 && (rc = buf_puts(sql, " AND id <= ")) == 0 &&
	    (rc = buf_put_int(sql, r->ids[r->n - 1])) == 0)
		rc = buf_puts(sql, ";");
	if (rc || below == 0)
		return rc;
	rc = buf_puts(sql, "DELETE FROM staged_jobs WHERE id = ANY('{");
	for (size_t i = 0; rc == 0 && i < below; i++)
		if (!i || (rc = buf_append(sql, ",", 1)) == 0)
			rc = buf_put_int(sql, b->jobs[i].id);
	return rc ? rc : buf_puts(sql, "}'::int8[]);");
}

/* Moves rejected rows to staged_jobs_dead with their reasons, in the same transaction. */
static int append_dead(struct pg_source *pg, const struct batch *b)
{
	struct buf *sql = &pg->sql;
	int rc = buf_puts(sql, "WITH bad(id, reason) AS (VALUES ");

	for (size_t i = 0; rc == 0 && i < b->ndead; i++) {
		char *lit = PQescapeLiteral(pg->conn, b->dead[i].reason, strlen(b->dead[i].reason));
		if (!lit)
			return -ENOMEM;
		rc = buf_printf(sql, "%s(%lld::int8, %s)", i ? "," : "", b->dead[i].id, lit);
		PQfreemem(lit);
	}
	return rc ? rc
		  : buf_puts(sql, "), moved AS (DELETE FROM staged_jobs s USING bad"
				  " WHERE s.id = bad.id RETURNING s.*, bad.reason)"
				  " INSERT INTO staged_jobs_dead"
				  " (id, queue, job_class, args, run_at, options, created_at, jid, reason)"
				  " SELECT id, queue, job_class, args, run_at, options, created_at, jid,"
				  " reason FROM moved;");
}

/* Reads every result of the commit statement; all must succeed, counts must match. */
static int read_commit_results(struct pg_source *pg, const struct batch *b)
{
	PGresult *res;
	unsigned long long deleted = 0;
	int rc = 0;

	while ((res = PQgetResult(pg->conn)) != NULL) {
		if (rc == 0 && PQresultStatus(res) != PGRES_COMMAND_OK)
			rc = pg_fail(pg, res, "could not delete the pushed batch");
		else if (strncmp(PQcmdStatus(res), "DELETE", 6) == 0)
			deleted += strtoull(PQcmdTuples(res), NULL, 10);
		PQclear(res);
	}
	if (rc == 0 && deleted != b->njobs) {
		snprintf(pg->errstr, sizeof(pg->errstr),
			 "deleted %llu rows of %zu pushed: rows changed under the batch", deleted, b->njobs);
		rc = -EIO;
	}
	return rc;
}

int pg_source_commit(struct pg_source *pg, const struct batch *b)
{
	int rc = 0;

	/* The dead rows move first: the range delete must not take them. */
	buf_reset(&pg->sql);
	if (b->ndead)
		rc = append_dead(pg, b);
	if (rc == 0 && b->njobs)
		rc = append_delete(pg, b);
	if (rc == 0)
		rc = buf_puts(&pg->sql, "COMMIT");
	if (rc < 0)
		return rc;
	if (!PQsendQuery(pg->conn, pg->sql.data))
		return pg_fail(pg, NULL, "could not send the batch delete");
	rc = read_commit_results(pg, b);
	if (rc == 0) {
		pg->in_tx = false;
		PQclear(pg->rows);
		pg->rows = NULL;
	}
	return rc;
}

int pg_source_delete_fenced(struct pg_source *pg, const struct fence *f, long long *deleted)
{
	PGresult *res;
	int rc = 0;

	*deleted = 0;
	if (f->n == 0)
		return 0;
	/* fence_parse let only digits, hex and commas into these literals. */
	buf_reset(&pg->sql);
	if (buf_printf(&pg->sql,
		       "DELETE FROM staged_jobs s USING unnest('%s'::int8[], '%s'::text[]) AS f(id, jid)"
		       " WHERE s.id = f.id AND s.jid = f.jid",
		       f->ids.data, f->jids.data) < 0)
		return -ENOMEM;
	res = PQexec(pg->conn, pg->sql.data);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		rc = pg_fail(pg, res, "could not delete the rows the fence names");
	else
		*deleted = strtoll(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	return rc;
}

void pg_source_rollback(struct pg_source *pg)
{
	if (pg->in_tx && !pg_source_broken(pg))
		PQclear(PQexec(pg->conn, "ROLLBACK"));
	pg->in_tx = false;
	PQclear(pg->rows);
	pg->rows = NULL;
}

void pg_source_describe(const struct pg_source *pg, char *out, size_t outlen)
{
	const char *host = pg->conn ? PQhost(pg->conn) : NULL;
	const char *port = pg->conn ? PQport(pg->conn) : NULL;
	const char *db = pg->conn ? PQdb(pg->conn) : NULL;

	snprintf(out, outlen, "%s:%s/%s", host && *host ? host : "(default)",
		 port && *port ? port : "(default)", db ? db : "");
}

void pg_source_close(struct pg_source *pg)
{
	PQclear(pg->rows);
	pg->rows = NULL;
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
	buf_free(&pg->sql);
	free(pg->read.ids);
	pg->read.ids = NULL;
}
