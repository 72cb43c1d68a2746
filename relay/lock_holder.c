/* Who holds the leader lock, and the companion lock that marks a relay (lock_holder.h). */
#include "fmacros.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock_holder.h"

/*
 * pg_advisory_lock(bigint k) shows in pg_locks as classid (k's high 32 bits)
 * and objid (its low 32 bits) with objsubid 1; pg_advisory_lock(int4 a,
 * int4 b) as classid a and objid b with objsubid 2. Cut from k that way, the
 * companion has the same classid and objid as the leader lock, and objsubid 2:
 * another lock (taking one never waits on the other), which no program but a
 * relay has a reason to take. Both are try-locks, so the pair cannot deadlock.
 */
#define COMPANION_SQL "SELECT pg_try_advisory_lock(($1::int8 >> 32)::bit(32)::int4, $1::int8::bit(32)::int4)"

/*
 * The holder of the leader lock (objsubid 1), whether it also holds the
 * companion (objsubid 2), and who it is. pid, user and application_name are
 * shown to any role; the address and backend_start only to the session's own
 * role, a superuser and pg_read_all_stats: backend_start is NULL exactly when
 * they are hidden. A NULL pid is a prepared transaction's lock (a
 * pg_advisory_xact_lock taken before PREPARE TRANSACTION).
 */
#define HOLDER_SQL                                                                                                     \
	"WITH l AS (SELECT pid, objsubid FROM pg_locks WHERE locktype = 'advisory' AND granted"                        \
	" AND objsubid IN (1, 2) AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"      \
	" AND classid = (($1::int8 >> 32) & 4294967295)::oid AND objid = ($1::int8 & 4294967295)::oid)"                \
	" SELECT coalesce(h.pid, 0), coalesce(a.usename::text, ''), coalesce(a.application_name, ''),"                 \
	" CASE WHEN a.backend_start IS NOT NULL THEN coalesce(host(a.client_addr), 'local socket') END,"               \
	" to_char(a.backend_start AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),"                              \
	" h.pid IS NOT NULL AND EXISTS (SELECT FROM l c WHERE c.objsubid = 2 AND c.pid = h.pid)"                       \
	" FROM l h LEFT JOIN pg_stat_activity a ON a.pid = h.pid WHERE h.objsubid = 1 LIMIT 1"

/* Runs sql with the lock key as its one parameter. */
static PGresult *exec_key(struct pg_source *pg, const char *sql)
{
	char key[32];
	const char *params[1] = { key };

	snprintf(key, sizeof(key), "%lld", pg->cfg->lock_key);
	return PQexecParams(pg->conn, sql, 1, NULL, params, NULL, NULL, 0);
}

int lock_holder_mark(struct pg_source *pg, bool *marked)
{
	PGresult *res = exec_key(pg, COMPANION_SQL);
	int rc = 0;

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		rc = pg_source_fail(pg, res, "could not take the relay's companion lock");
	else
		*marked = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	return rc;
}

/* Column col of the holder's row, or what a hidden or empty one is called. */
static void column(char *out, size_t len, const PGresult *res, int col, const char *if_null)
{
	snprintf(out, len, "%s", PQgetisnull(res, 0, col) ? if_null : PQgetvalue(res, 0, col));
}

int lock_holder_read(struct pg_source *pg, struct lock_holder *h)
{
	PGresult *res = exec_key(pg, HOLDER_SQL);
	int rc = 0;

	memset(h, 0, sizeof(*h));
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		rc = pg_source_fail(pg, res, "could not read who holds the leader lock");
	} else if (PQntuples(res) == 1) {
		h->pid = atoi(PQgetvalue(res, 0, 0));
		column(h->user, sizeof(h->user), res, 1, "");
		column(h->app, sizeof(h->app), res, 2, "");
		column(h->addr, sizeof(h->addr), res, 3, LOCK_HOLDER_HIDDEN);
		column(h->since, sizeof(h->since), res, 4, LOCK_HOLDER_HIDDEN);
		h->kind = strcmp(PQgetvalue(res, 0, 5), "t") == 0 ? LOCK_HOLDER_RELAY : LOCK_HOLDER_FOREIGN;
	}
	PQclear(res);
	return rc;
}

bool lock_holder_same(const struct lock_holder *a, const struct lock_holder *b)
{
	return a->kind == b->kind && a->pid == b->pid && strcmp(a->since, b->since) == 0;
}

void lock_holder_describe(const struct lock_holder *h, char *out, size_t len)
{
	const char *kind = h->kind == LOCK_HOLDER_RELAY ? "another relay" : "a session that is not a relay";

	if (h->kind == LOCK_HOLDER_NONE)
		snprintf(out, len, "no session now");
	else if (h->pid == 0)
		snprintf(out, len, "a prepared transaction (see pg_prepared_xacts)");
	else
		snprintf(out, len, "%s, pid %d, user %s, application_name \"%s\", from %s, session started %s", kind,
			 h->pid, h->user, h->app, h->addr, h->since);
}
