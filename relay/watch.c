/* The watcher: low-rate readings of the database and Redis, off the drain's session. */
#include "fmacros.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "pg_conn.h"
#include "watch.h"

/* The backlog and dead rows: the statistics PostgreSQL keeps anyway (what
 * autovacuum reads), not a count(*), which would walk every dead row under a
 * long transaction, the very moment the numbers matter. */
#define STATS_SQL "SELECT n_live_tup, n_dead_tup FROM pg_stat_user_tables WHERE relid = 'staged_jobs'::regclass"

/*
 * The oldest staged job is the lowest id staged, wherever it lies. A row below
 * the leader's cursor that no gap covers (a late commit the relay missed, an
 * id chosen by hand) is never read again: it is the stuck job this reading is
 * for, and a probe above the cursor would say 0 while it waits for ever.
 *
 * The one query here that walks staged_jobs: from the head of the id index to
 * the first live row, it crosses every entry of a drained row not yet cleaned
 * up. Few, normally: this walk marks the entries dead to every snapshot and
 * vacuum removes them. While a long transaction pins the xmin horizon it is
 * every row drained since that transaction began (seed 000's failure).
 * Measured on 2 shared cores: 22 ms for 200,000 such rows (all in shared
 * buffers), 100-200 ms for 1,000,000 (read from disk), against 1.5 ms for a
 * probe above the cursor; 4 ms and 15 ms once the transaction ended. So it
 * runs only on the leader (one walker per deployment, not one per relay), on
 * the watcher's own session (the drain never waits for it), once per
 * --watch-interval, and the watcher's statement timeout bounds it (tens of
 * millions of rows drained under one transaction): past that the sample is
 * left out and a warning says why, and Postgres still counts as reachable.
 */
#define OLDEST_SQL                                                                                                     \
	"SELECT greatest(0, extract(epoch FROM clock_timestamp() - created_at))::float8"                               \
	" FROM staged_jobs ORDER BY id LIMIT 1"

/* Transactions that hold back vacuum: those with an xid or a snapshot (an idle
 * READ COMMITTED transaction has neither and does not). In PostgreSQL 14 and
 * later only sessions of the same database hold back its tables' cleanup. */
#define XACTS_SQL                                                                                                      \
	"SELECT pid, coalesce(usename, ''), coalesce(application_name, ''), coalesce(state, ''),"                      \
	" extract(epoch FROM clock_timestamp() - xact_start)::float8, xact_start::text"                                \
	" FROM pg_stat_activity"                                                                                       \
	" WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL"                   \
	" AND (backend_xid IS NOT NULL OR backend_xmin IS NOT NULL)"                                                   \
	" ORDER BY xact_start LIMIT 16"

/* Without it, other roles' sessions show no transaction at all. */
#define PRIV_SQL "SELECT pg_has_role('pg_read_all_stats', 'USAGE')"

/* Bounds every query, so stopping waits no longer than this. */
#define WATCH_TIMEOUT_MS 10000
#define WATCH_STR_(x) #x
#define WATCH_STR(x) WATCH_STR_(x)
#define WATCH_STATEMENT_TIMEOUT "SET statement_timeout = " WATCH_STR(WATCH_TIMEOUT_MS)

static void pg_error(struct watch *w, const PGresult *res, const char *what)
{
	pg_conn_error(w->errstr, sizeof(w->errstr), w->pg, res, what);
}

static int pg_connect(struct watch *w)
{
	PGresult *res;

	/* Named whatever the URL says, so pg_stat_activity tells it from the drain's session. */
	w->pg = pg_conn_open(w->cfg, "stagedrain-watch", true);
	if (!w->pg || PQstatus(w->pg) != CONNECTION_OK) {
		pg_error(w, NULL, "could not connect to postgres");
		return -EIO;
	}
	res = PQexec(w->pg, WATCH_STATEMENT_TIMEOUT);
	if (PQresultStatus(res) == PGRES_COMMAND_OK) {
		PQclear(res);
		res = PQexec(w->pg, PRIV_SQL);
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		pg_error(w, res, "could not set up the watching session");
		PQclear(res);
		return -EIO;
	}
	w->sees_all = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	if (!w->sees_all && !w->told_priv) {
		w->told_priv = true;
		log_warn("cannot see other roles' transactions; not reporting the oldest transaction's age "
			 "(grant pg_read_all_stats or pg_monitor to the relay's role)",
			 NULL);
	}
	return 0;
}

/* Backlog and dead rows. */
static int read_stats(struct watch *w, struct metrics_db *db)
{
	PGresult *res = PQexec(w->pg, STATS_SQL);
	int rc = 0;

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		pg_error(w, res, "could not read staged_jobs statistics");
		rc = -EIO;
	} else {
		db->backlog_jobs = strtod(PQgetvalue(res, 0, 0), NULL);
		db->dead_tuples = strtod(PQgetvalue(res, 0, 1), NULL);
	}
	PQclear(res);
	return rc;
}

/* Says once when the oldest job's walk outlasts the statement timeout, and once when it no longer does. */
static void note_slow_oldest(struct watch *w, bool slow)
{
	if (slow == w->oldest_slow)
		return;
	w->oldest_slow = slow;
	if (slow)
		log_warn("reading the oldest staged job's age outlasted the watcher's statement timeout; "
			 "stagedrain_oldest_staged_job_age_seconds is left out until a reading succeeds "
			 "(the walk crosses every row drained since the oldest open transaction began, "
			 "or a lock on staged_jobs held it up)",
			 LOGF(F_INT("timeout_ms", WATCH_TIMEOUT_MS)));
	else
		log_info("the oldest staged job's age is read again", NULL);
}

/* The oldest staged job's age, on the leader; NAN on a standby or past the timeout. */
static int read_oldest(struct watch *w, struct metrics_db *db)
{
	long long cursor;
	PGresult *res;
	const char *state;
	int rc = 0;

	if (!metrics_leader_cursor(w->m, &cursor))
		return 0;
	res = PQexec(w->pg, OLDEST_SQL);
	state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	if (PQresultStatus(res) == PGRES_TUPLES_OK) {
		db->oldest_job_age_s = PQntuples(res) ? strtod(PQgetvalue(res, 0, 0), NULL) : 0;
		note_slow_oldest(w, false);
	} else if (state && strcmp(state, "57014") == 0) { /* query_canceled: the statement timeout */
		note_slow_oldest(w, true);
	} else {
		pg_error(w, res, "could not read the oldest staged job");
		rc = -EIO;
	}
	PQclear(res);
	return rc;
}

static struct watch_warned *find_warned(struct watch *w, int pid, const char *start)
{
	for (size_t i = 0; i < w->nwarned; i++)
		if (w->warned[i].pid == pid && strcmp(w->warned[i].xact_start, start) == 0)
			return &w->warned[i];
	return NULL;
}

/* Warns once a transaction passes --warn-xact-age, and again each time its
 * age doubles: a line per transaction that stays open, not one per reading. */
static void warn_xact(struct watch *w, const PGresult *res, int row)
{
	int pid = atoi(PQgetvalue(res, row, 0));
	const char *start = PQgetvalue(res, row, 5);
	double age = strtod(PQgetvalue(res, row, 4), NULL);
	struct watch_warned *x = find_warned(w, pid, start);

	if (x)
		x->seen = true;
	if (w->cfg->warn_xact_age_ms == 0 || age * 1000 < w->cfg->warn_xact_age_ms || (x && age < x->next_age_s))
		return;
	log_warn("a transaction has been open longer than --warn-xact-age; vacuum cannot remove "
		 "rows deleted since it began, in staged_jobs or any other table",
		 LOGF(F_INT("pid", pid), F_STR("user", PQgetvalue(res, row, 1)),
		      F_STR("application", PQgetvalue(res, row, 2)), F_INT("age_s", (long long)age),
		      F_STR("state", PQgetvalue(res, row, 3)), F_STR("xact_start", start)));
	if (!x && w->nwarned < WATCH_MAX_WARNED) {
		x = &w->warned[w->nwarned++];
		x->pid = pid;
		snprintf(x->xact_start, sizeof(x->xact_start), "%s", start);
		x->seen = true;
	}
	if (x)
		x->next_age_s = age * 2;
}

/* Forgets the transactions that ended. */
static void prune_warned(struct watch *w)
{
	size_t n = 0;

	for (size_t i = 0; i < w->nwarned; i++) {
		if (w->warned[i].seen) {
			w->warned[n] = w->warned[i];
			w->warned[n++].seen = false;
		}
	}
	w->nwarned = n;
}

static int read_xacts(struct watch *w, struct metrics_db *db)
{
	PGresult *res = PQexec(w->pg, XACTS_SQL);
	int n;

	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		pg_error(w, res, "could not read pg_stat_activity");
		PQclear(res);
		return -EIO;
	}
	n = PQntuples(res);
	if (w->sees_all)
		db->oldest_xact_age_s = n ? strtod(PQgetvalue(res, 0, 4), NULL) : 0;
	for (int i = 0; i < n; i++)
		warn_xact(w, res, i);
	prune_warned(w);
	PQclear(res);
	return 0;
}

/* Logs a server's state only when it changes: one line when it fails, one when it is back. */
static void note(struct watch *w, enum metrics_server s, bool ok, const char *err)
{
	static const char *const names[] = { "postgres", "redis" };

	metrics_probe(w->m, s, ok, err);
	if (ok == !w->failing[s])
		return;
	w->failing[s] = !ok;
	if (ok)
		log_info("watcher reaches the server again", LOGF(F_STR("server", names[s])));
	else
		log_warn("watcher cannot reach the server; /readyz reports not ready",
			 LOGF(F_STR("server", names[s]), F_STR("error", err)));
}

static void watch_pg(struct watch *w)
{
	struct metrics_db db = { NAN, NAN, NAN, NAN };
	int rc = 0;

	if (w->pg && PQstatus(w->pg) != CONNECTION_OK) {
		PQfinish(w->pg);
		w->pg = NULL;
	}
	if (!w->pg)
		rc = pg_connect(w);
	if (rc == 0)
		rc = read_stats(w, &db);
	if (rc == 0)
		rc = read_oldest(w, &db);
	if (rc == 0)
		rc = read_xacts(w, &db);
	if (rc < 0) {
		/* Whatever the session's state, start afresh next time. */
		PQfinish(w->pg);
		w->pg = NULL;
		db = (struct metrics_db){ NAN, NAN, NAN, NAN };
	}
	metrics_db_reading(w->m, &db);
	note(w, METRICS_PG, rc == 0, w->errstr);
}

static void watch_redis(struct watch *w)
{
	const char *ping[] = { "PING" };
	redisReply *r = NULL;
	int rc;

	/* After a failover the probe follows the drain to the new master. */
	if (redis_conn_master_moved(&w->redis))
		redis_conn_close(&w->redis);
	if (!redis_conn_connected(&w->redis))
		rc = redis_conn_connect(&w->redis);
	else
		rc = redis_conn_command(&w->redis, 1, ping, NULL, &r);
	freeReplyObject(r);
	note(w, METRICS_REDIS, rc == 0, w->redis.errstr);
}

static void *watch_main(void *arg)
{
	struct watch *w = arg;
	struct timespec until;

	pthread_mutex_lock(&w->lock);
	while (!w->stop) {
		pthread_mutex_unlock(&w->lock);
		watch_redis(w);
		watch_pg(w);
		until = clock_mono_after(w->cfg->watch_interval_ms);
		pthread_mutex_lock(&w->lock);
		while (!w->stop && pthread_cond_timedwait(&w->wake, &w->lock, &until) != ETIMEDOUT)
			;
	}
	w->done = true;
	pthread_cond_broadcast(&w->wake);
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

int watch_start(struct watch *w, const struct config *cfg, struct metrics *m)
{
	pthread_condattr_t attr;
	int rc;

	memset(w, 0, sizeof(*w));
	w->cfg = cfg;
	w->m = m;
	redis_conn_init(&w->redis, cfg);
	if ((rc = pthread_condattr_init(&attr)) != 0)
		goto fail_attr;
	if ((rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)) != 0 ||
	    (rc = pthread_cond_init(&w->wake, &attr)) != 0)
		goto fail_cond;
	if ((rc = pthread_mutex_init(&w->lock, NULL)) != 0)
		goto fail_mutex;
	if ((rc = pthread_create(&w->thread, NULL, watch_main, w)) != 0)
		goto fail_thread;
	pthread_condattr_destroy(&attr);
	w->running = true;
	return 0;
fail_thread:
	pthread_mutex_destroy(&w->lock);
fail_mutex:
	pthread_cond_destroy(&w->wake);
fail_cond:
	pthread_condattr_destroy(&attr);
fail_attr:
	redis_conn_free(&w->redis);
	return -rc;
}

bool watch_stop(struct watch *w, int wait_ms)
{
	struct timespec until;
	bool done;

	if (!w || !w->running)
		return true;
	until = clock_mono_after(wait_ms);
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->wake);
	while (!w->done && pthread_cond_timedwait(&w->wake, &w->lock, &until) != ETIMEDOUT)
		;
	done = w->done;
	pthread_mutex_unlock(&w->lock);
	if (!done)
		return false;
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->lock);
	PQfinish(w->pg);
	w->pg = NULL;
	redis_conn_free(&w->redis);
	w->running = false;
	return true;
}
