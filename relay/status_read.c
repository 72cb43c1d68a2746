/* Reads `stagedrain status`'s facts: the leader lock, the tables, the horizon (Postgres); the targets' Redis in status_targets.c. */
#include "fmacros.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "lock_holder.h"
#include "pg_conn.h"
#include "pg_privileges.h"
#include "pg_source.h"
#include "status_read.h"
#include "status_targets.h"

#define STR_(x) #x
#define STR(x) STR_(x)
#define STATEMENT_TIMEOUT_SQL "SET statement_timeout = " STR(STATUS_STATEMENT_TIMEOUT_MS)

/* How long the leader lock's holder has been connected: the closest Postgres
 * shows to how long it has led (hidden, NULL, from roles that may not see it). */
#define LEADER_AGE_SQL                                                                                                 \
	"SELECT extract(epoch FROM clock_timestamp() - backend_start)::float8 FROM pg_stat_activity"                   \
	" WHERE pid = $1 AND backend_start IS NOT NULL"

/* An exact count, one pass over the table and bounded by the statement
 * timeout: an operator asks rarely, and an estimate (pg_stat_user_tables)
 * lags by as much as autovacuum's last visit. Grouped by queue, for the caps. */
#define STAGED_SQL                                                                                                     \
	"SELECT queue, count(*), greatest(0, extract(epoch FROM clock_timestamp() - min(created_at)))::float8"         \
	" FROM staged_jobs GROUP BY queue"

/* When the count outlasts the timeout: the statistics' live rows (what
 * autovacuum and the relay's /metrics read), and the lowest id's age, one
 * step down the primary key's index (which, under a held horizon, may walk
 * every drained row's entry first: it is bounded by the same timeout). */
#define ESTIMATE_SQL "SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = 'staged_jobs'::regclass"
#define LOWEST_SQL                                                                                                     \
	"SELECT greatest(0, extract(epoch FROM clock_timestamp() - created_at))::float8"                               \
	" FROM staged_jobs ORDER BY id LIMIT 1"

/* SQLSTATE query_canceled: what the statement timeout raises. */
#define SQLSTATE_CANCELED "57014"

/* The held rows by the target they wait for (NULL: the default) and queue:
 * how long the oldest has been held (held_at: the queue line's), and how long
 * ago the oldest was staged (created_at: the ages judged, as a staged row's). */
#define HELD_SQL                                                                                                       \
	"SELECT target, queue, count(*), greatest(0, extract(epoch FROM clock_timestamp() - min(held_at)))::float8,"   \
	" greatest(0, extract(epoch FROM clock_timestamp() - min(created_at)))::float8"                                \
	" FROM staged_jobs_held GROUP BY target, queue"

/* And those staged for a place no worker of the target reads (JOB_MISDIRECTED, format.h). */
#define DEAD_SQL                                                                                                       \
	"SELECT count(*), coalesce(greatest(0, extract(epoch FROM clock_timestamp() - min(failed_at))), 0)::float8,"   \
	" count(*) FILTER (WHERE reason LIKE '" JOB_MISDIRECTED "%')"                                                  \
	" FROM staged_jobs_dead"

/*
 * The relay keeps its gaps in the leader's memory only. What opens one and
 * keeps it open is a transaction that took an id from staged_jobs' sequence
 * and has not ended: such a transaction holds RowExclusiveLock on the table
 * until it ends (pg_locks shows it, to any role). Counted here, but for the
 * leader's own session ($1) and this one; a prepared transaction counts too:
 * its lock has no pid, its virtualtransaction is "-1/<its xid>", and its age
 * is since it was prepared (pg_prepared_xacts), as the horizon line's.
 */
#define STAGING_SQL                                                                                                    \
	"SELECT count(*), coalesce(max(greatest(0, extract(epoch FROM clock_timestamp() - s.since))), 0)::float8,"     \
	" coalesce((array_agg(s.pid ORDER BY s.since NULLS LAST))[1], 0),"                                             \
	" coalesce((array_agg(s.gid ORDER BY s.since NULLS LAST))[1], '')"                                             \
	" FROM (SELECT l.pid, coalesce(a.xact_start, p.prepared) AS since, p.gid"                                      \
	" FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid"                                               \
	" LEFT JOIN pg_prepared_xacts p ON l.pid IS NULL AND l.virtualtransaction = '-1/' || p.transaction::text"      \
	" WHERE l.locktype = 'relation' AND l.granted AND l.mode = 'RowExclusiveLock'"                                 \
	" AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"                           \
	" AND l.relation = 'staged_jobs'::regclass"                                                                    \
	" AND l.pid IS DISTINCT FROM pg_backend_pid() AND l.pid IS DISTINCT FROM $1::int) s"

/* Keeps the first failure: the one line status shows for Postgres. */
static void pg_failed_with(struct status *s, const char *msg)
{
	if (!s->pg_ok)
		return;
	s->pg_ok = false;
	snprintf(s->pg_err, sizeof(s->pg_err), "%s", msg);
}

static void pg_failed(struct status *s, PGconn *conn, const PGresult *res, const char *what)
{
	char msg[sizeof(s->pg_err)];

	pg_conn_error(msg, sizeof(msg), conn, res, what);
	pg_failed_with(s, msg);
}

/* SQLSTATE insufficient_privilege. */
#define SQLSTATE_DENIED "42501"

static PGresult *query(struct status *s, PGconn *conn, const char *sql, const int *param, const char *what);

/*
 * Runs a statement over table, like query; a role that may not read table
 * leaves why saying so (the relay's role reads no dead rows) instead of a
 * failure: a status run with the relay's credentials is not unhealthy for it.
 */
static PGresult *query_table(struct status *s, PGconn *conn, const char *sql, const char *table, char *why,
			     const char *what)
{
	PGresult *res = PQexecParams(conn, sql, 0, NULL, NULL, NULL, NULL, 0);
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		return res;
	if (state && strcmp(state, SQLSTATE_DENIED) == 0)
		snprintf(why, STATUS_WHY_LEN, "this role may not read %s", table);
	else
		pg_failed(s, conn, res, what);
	PQclear(res);
	return NULL;
}

/* Runs sql with at most one integer parameter; NULL (and the failure noted) unless it returned rows. */
static PGresult *query(struct status *s, PGconn *conn, const char *sql, const int *param, const char *what)
{
	char val[16];
	const char *params[1] = { val };
	PGresult *res;

	if (param)
		snprintf(val, sizeof(val), "%d", *param);
	res = PQexecParams(conn, sql, param ? 1 : 0, NULL, param ? params : NULL, NULL, NULL, 0);
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		return res;
	pg_failed(s, conn, res, what);
	PQclear(res);
	return NULL;
}

static double num(const PGresult *res, int row, int col)
{
	return strtod(PQgetvalue(res, row, col), NULL);
}

static void read_leader(struct status *s, const struct config *cfg, PGconn *conn)
{
	struct pg_source pg;
	PGresult *res;

	/* lock_holder reads through a pg_source; this one only lends it the session. */
	pg_source_init(&pg, cfg);
	pg.conn = conn;
	if (lock_holder_read(&pg, &s->leader) < 0) {
		pg_failed_with(s, pg.errstr);
		return;
	}
	s->leader_read = true;
	if (s->leader.pid <= 0 || !(res = query(s, conn, LEADER_AGE_SQL, &s->leader.pid, "could not read the leader")))
		return;
	if (PQntuples(res) == 1)
		s->leader_age_s = num(res, 0, 0);
	PQclear(res);
}

/* The cap of queue on target t (--queue-limit, else --max-queue-length); 0: none. */
static long cap_of(const struct status *s, const struct config *cfg, size_t t, const char *name)
{
	const struct config *tc = s->targets[t].cfg ? s->targets[t].cfg : cfg;

	return queue_limits_cap(&tc->queue_limits, name, strlen(name), tc->max_queue_length);
}

/* A queue is shown when capped (a cap above 0) or when it has held rows; on target t. */
static struct status_queue *note_queue(struct status *s, const struct config *cfg, size_t t, const char *name,
				       bool held, int *rc)
{
	long cap = cap_of(s, cfg, t, name);
	struct status_queue *q;

	if (cap <= 0 && !held)
		return NULL;
	if (!(q = status_queue_add(s, t, name, cap)))
		*rc = -ENOMEM;
	return q;
}

/* The estimate and the lowest id's age, for a table too large to count in time. */
static void estimate_backlog(struct status *s, PGconn *conn)
{
	PGresult *res = query(s, conn, ESTIMATE_SQL, NULL, "could not estimate staged_jobs' rows");

	if (!res)
		return;
	s->backlog_read = s->staged_estimated = true;
	s->staged = PQntuples(res) == 1 ? atoll(PQgetvalue(res, 0, 0)) : 0;
	PQclear(res);
	if (!(res = query(s, conn, LOWEST_SQL, NULL, "could not read the oldest staged job")))
		return;
	s->staged_oldest_s = PQntuples(res) == 1 ? num(res, 0, 0) : 0;
	PQclear(res);
}

static int read_backlog(struct status *s, const struct config *cfg, PGconn *conn)
{
	PGresult *res = PQexecParams(conn, STAGED_SQL, 0, NULL, NULL, NULL, NULL, 0);
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	int rc = 0;

	s->staged_oldest_s = NAN;
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		if (state && strcmp(state, SQLSTATE_CANCELED) == 0)
			estimate_backlog(s, conn);
		else if (state && strcmp(state, SQLSTATE_DENIED) == 0)
			snprintf(s->backlog_why, sizeof(s->backlog_why), "this role may not read staged_jobs");
		else
			pg_failed(s, conn, res, "could not count staged_jobs");
		PQclear(res);
		return 0;
	}
	s->backlog_read = true;
	for (int i = 0; rc == 0 && i < PQntuples(res); i++) {
		double age = num(res, i, 2);
		s->staged += atoll(PQgetvalue(res, i, 1));
		if (i == 0 || age > s->staged_oldest_s)
			s->staged_oldest_s = age;
		(void)note_queue(s, cfg, status_targets_of(cfg, PQgetvalue(res, i, 0)), PQgetvalue(res, i, 0), false,
				 &rc);
	}
	PQclear(res);
	return rc;
}

static int read_held(struct status *s, const struct config *cfg, PGconn *conn)
{
	PGresult *res =
		query_table(s, conn, HELD_SQL, "staged_jobs_held", s->queues_why, "could not count staged_jobs_held");
	int rc = 0;

	if (!res)
		return 0;
	s->queues_read = true;
	for (int i = 0; rc == 0 && i < PQntuples(res); i++) {
		int t = status_targets_held(s, PQgetisnull(res, i, 0) ? NULL : PQgetvalue(res, i, 0));
		struct status_queue *q;
		struct status_target *x;
		long long n = atoll(PQgetvalue(res, i, 2));
		double staged_age = num(res, i, 4);
		if (t < 0) {
			rc = t;
			break;
		}
		if (!(q = note_queue(s, cfg, (size_t)t, PQgetvalue(res, i, 1), true, &rc)))
			break;
		q->held = n;
		q->held_oldest_s = num(res, i, 3);
		x = &s->targets[t];
		if (x->held == 0 || staged_age > x->held_oldest_s)
			x->held_oldest_s = staged_age;
		x->held += n;
		if (s->held == 0 || staged_age > s->held_oldest_s)
			s->held_oldest_s = staged_age;
		s->held += n;
	}
	PQclear(res);
	return rc;
}

static void read_dead_and_gaps(struct status *s, PGconn *conn)
{
	int leader = s->leader.pid;
	PGresult *res =
		query_table(s, conn, DEAD_SQL, "staged_jobs_dead", s->dead_why, "could not count staged_jobs_dead");

	if (res) {
		s->dead_read = true;
		s->dead = atoll(PQgetvalue(res, 0, 0));
		s->dead_oldest_s = num(res, 0, 1);
		s->dead_misdirected = atoll(PQgetvalue(res, 0, 2));
		PQclear(res);
	}
	if ((res = query(s, conn, STAGING_SQL, &leader, "could not read the staging transactions"))) {
		s->gaps_read = true;
		s->staging_xacts = atoll(PQgetvalue(res, 0, 0));
		s->staging_oldest_s = num(res, 0, 1);
		s->staging_oldest_pid = atoi(PQgetvalue(res, 0, 2));
		snprintf(s->staging_oldest_gid, sizeof(s->staging_oldest_gid), "%s", PQgetvalue(res, 0, 3));
		PQclear(res);
	}
}

/* Other roles' transactions show without their xid, xmin and start to a role
 * without pg_read_all_stats: "not held" would then be a guess. */
static void read_horizon(struct status *s, PGconn *conn)
{
	char err[256];

	if (status_horizon_read(conn, &s->horizon, err, sizeof(err)) < 0)
		pg_failed_with(s, err);
	else if (!s->horizon.sees_all)
		snprintf(s->horizon_why, sizeof(s->horizon_why),
			 "this role cannot see other roles' transactions (grant pg_read_all_stats or pg_monitor)");
	else
		s->horizon_read = true;
}

static void read_privileges(struct status *s, PGconn *conn)
{
	char err[256];

	if (pg_privileges_read(conn, &s->privileges, err, sizeof(err)) < 0)
		pg_failed_with(s, err);
	else
		s->privileges_read = true;
}

static int read_pg(struct status *s, const struct config *cfg)
{
	PGconn *conn = pg_conn_open(cfg, "stagedrain-status", true);
	PGresult *res;
	int rc = 0;

	s->pg_ok = true;
	if (!conn || PQstatus(conn) != CONNECTION_OK) {
		pg_failed(s, conn, NULL, "could not connect to postgres");
		goto done;
	}
	res = PQexec(conn, STATEMENT_TIMEOUT_SQL);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		pg_failed(s, conn, res, "could not set up the session");
		PQclear(res);
		goto done;
	}
	PQclear(res);
	read_leader(s, cfg, conn);
	if ((rc = read_backlog(s, cfg, conn)) < 0 || (rc = read_held(s, cfg, conn)) < 0)
		goto done;
	read_dead_and_gaps(s, conn);
	read_horizon(s, conn);
	read_privileges(s, conn);
done:
	PQfinish(conn);
	return rc;
}

/* By name, then by target (the default first). */
static int by_name(const void *a, const void *b)
{
	const struct status_queue *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : (x->target > y->target) - (x->target < y->target);
}

int status_read(struct status *s, const struct config *cfg)
{
	int rc;

	if ((rc = status_targets_init(s, cfg)) < 0)
		return rc;
	/* The queues --queue-limit caps are shown even when Postgres cannot say which hold jobs. */
	for (size_t i = 0; i < cfg->queue_limits.n; i++) {
		const char *name = cfg->queue_limits.v[i].queue;
		if (cfg->queue_limits.v[i].cap > 0 && !status_queue_add(s, status_targets_of(cfg, name), name, 0))
			return -ENOMEM;
	}
	for (size_t i = 0; i < s->nqueues; i++)
		s->queues[i].cap = cap_of(s, cfg, s->queues[i].target, s->queues[i].name);
	if ((rc = read_pg(s, cfg)) < 0)
		return rc;
	if (s->nqueues > 1) /* qsort may not be given NULL, even for none */
		qsort(s->queues, s->nqueues, sizeof(*s->queues), by_name);
	return status_targets_read_redis(s, cfg);
}
