/* The watcher: low-rate readings of the database and Redis, off the drain's session. */
#include "fmacros.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "format.h"
#include "log.h"
#include "pg_conn.h"
#include "watch.h"
#include "watch_held.h"

#define WATCH_STR_(x) #x
#define WATCH_STR(x) WATCH_STR_(x)

_Static_assert(XMIN_NKINDS == METRICS_XMIN_KINDS, "metrics.h and xmin_holders.h name the same kinds");

/* The backlog and dead rows: the statistics PostgreSQL keeps anyway (what
 * autovacuum reads), not a count(*), which would walk every dead row under a
 * long transaction, the very moment the numbers matter. The backlog counts
 * the held rows too (a target down, a queue at its cap): they wait as well. */
#define STATS_SQL                                                                                                      \
	"SELECT s.n_live_tup + coalesce((SELECT h.n_live_tup FROM pg_stat_user_tables h"                               \
	" WHERE h.relid = to_regclass('staged_jobs_held')), 0), s.n_dead_tup"                                          \
	" FROM pg_stat_user_tables s WHERE s.relid = 'staged_jobs'::regclass"

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

/*
 * staged_jobs_dead by queue, the most rows first, and one last row (q NULL)
 * with every row, the oldest failure and the misdirected rows (JOB_MISDIRECTED). A walk of the dead table, which
 * stays small while someone looks after it: on the leader only, like the
 * oldest job's, under the same statement timeout.
 */
#define DEAD_SQL                                                                                                         \
	"WITH g AS (SELECT coalesce(queue, '') AS q, count(*) AS n, min(failed_at) AS f,"                                \
	" count(*) FILTER (WHERE reason LIKE '" JOB_MISDIRECTED "%') AS m FROM staged_jobs_dead GROUP BY 1)"             \
	" SELECT * FROM (SELECT q, n, NULL::float8, NULL::bigint FROM g ORDER BY n DESC, q LIMIT " DEAD_LIMIT ") t"      \
	" UNION ALL SELECT NULL, coalesce(sum(n), 0)::bigint,"                                                           \
	" coalesce(greatest(0, extract(epoch FROM clock_timestamp() - min(f)))::float8, 0), coalesce(sum(m), 0)::bigint" \
	" FROM g"
#define DEAD_LIMIT WATCH_STR(METRICS_DEAD_QUEUES)

/* Bounds every query, so stopping waits no longer than this. */
#define WATCH_TIMEOUT_MS 10000
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
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		pg_error(w, res, "could not set up the watching session");
		PQclear(res);
		return -EIO;
	}
	PQclear(res);
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

/* Says once when a reading starts to outlast the statement timeout (warn),
 * and once when it no longer does (back); *was remembers which it is. */
static void note_slow(bool *was, bool slow, const char *warn, const char *back)
{
	if (slow == *was)
		return;
	*was = slow;
	if (slow)
		log_warn(warn, LOGF(F_INT("timeout_ms", WATCH_TIMEOUT_MS)));
	else
		log_info(back, NULL);
}

#define OLDEST_SLOW                                                                                                    \
	"reading the oldest staged job's age outlasted the watcher's statement timeout; "                              \
	"stagedrain_oldest_staged_job_age_seconds is left out until a reading succeeds "                               \
	"(the walk crosses every row drained since the oldest open transaction began, "                                \
	"or a lock on staged_jobs held it up)"
#define OLDEST_BACK "the oldest staged job's age is read again"

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
		note_slow(&w->oldest_slow, false, OLDEST_SLOW, OLDEST_BACK);
	} else if (state && strcmp(state, "57014") == 0) { /* query_canceled: the statement timeout */
		note_slow(&w->oldest_slow, true, OLDEST_SLOW, OLDEST_BACK);
	} else {
		pg_error(w, res, "could not read the oldest staged job");
		rc = -EIO;
	}
	PQclear(res);
	return rc;
}

#define HELD_SLOW                                                                                                      \
	"reading staged_jobs_held outlasted the watcher's statement timeout; "                                         \
	"stagedrain_oldest_staged_job_age_seconds and stagedrain_held_jobs are left out until a reading succeeds"
#define HELD_BACK "staged_jobs_held is read again"

/* The held rows by target and queue, on the leader: into the metrics, and
 * into the oldest job's age (a held row may be the oldest job waiting). */
static int read_held(struct watch *w, struct metrics_db *db)
{
	struct metrics_held_row *rows = NULL;
	long long cursor;
	double oldest = 0;
	size_t n = 0;
	int rc;

	if (!metrics_leader_cursor(w->m, &cursor)) {
		metrics_held_reading(w->m, NULL, 0, false);
		return 0;
	}
	rc = watch_held_read(w->pg, &rows, &n, &oldest, w->errstr, sizeof(w->errstr));
	metrics_held_reading(w->m, rows, n, rc == 0);
	free(rows);
	if (rc == 0 && oldest > db->oldest_job_age_s)
		db->oldest_job_age_s = oldest;
	else if (rc < 0) /* unknown: a held row may be older than any staged one */
		db->oldest_job_age_s = NAN;
	if (rc == 0 || rc == -ETIMEDOUT)
		note_slow(&w->held_slow, rc == -ETIMEDOUT, HELD_SLOW, HELD_BACK);
	return rc == 0 || rc == -ETIMEDOUT ? 0 : -EIO;
}

/* The dead-letter table by queue, on the leader. A role that may not read it
 * (sql/roles.sql grants the relay INSERT only) leaves the gauges out, said once. */
static int read_dead(struct watch *w, struct metrics_db *db)
{
	long long cursor, named = 0, total = 0;
	const char *state;
	PGresult *res;
	int rc = 0, n;

	if (!metrics_leader_cursor(w->m, &cursor))
		return 0;
	res = PQexec(w->pg, DEAD_SQL);
	state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		if (state && strcmp(state, "42501") == 0) { /* insufficient_privilege */
			/* Info, not a warning: sql/roles.sql's least privilege leaves it out on purpose. */
			if (!w->told_dead)
				log_info("cannot read staged_jobs_dead; stagedrain_dead_jobs and "
					 "stagedrain_dead_oldest_age_seconds are left out "
					 "(grant SELECT on it to the relay's role to have them)",
					 NULL);
			w->told_dead = true;
		} else if (!(state && strcmp(state, "57014") == 0)) { /* past the timeout: left out */
			pg_error(w, res, "could not read staged_jobs_dead");
			rc = -EIO;
		}
		PQclear(res);
		return rc;
	}
	n = PQntuples(res);
	db->ndead = 0;
	for (int i = 0; i < n; i++) {
		long long rows = strtoll(PQgetvalue(res, i, 1), NULL, 10);
		const char *q = PQgetvalue(res, i, 0);
		if (PQgetisnull(res, i, 0)) {
			total = rows;
			db->dead_oldest_age_s = strtod(PQgetvalue(res, i, 2), NULL);
			db->dead_misdirected = strtod(PQgetvalue(res, i, 3), NULL);
		} else if (db->ndead < METRICS_DEAD_QUEUES) {
			metrics_short_label(q, strlen(q), db->dead[db->ndead].queue);
			db->dead[db->ndead++].rows = rows;
			named += rows;
		}
	}
	if (total > named) {
		snprintf(db->dead[db->ndead].queue, sizeof(db->dead[0].queue), "%s", METRICS_OTHER_QUEUE);
		db->dead[db->ndead++].rows = total - named;
	}
	PQclear(res);
	return 0;
}

static struct watch_held *find_held(struct watch *w, const char *id)
{
	for (size_t i = 0; i < w->nheld; i++)
		if (strcmp(w->held[i].h.id, id) == 0)
			return &w->held[i];
	return NULL;
}

/* The holding's entry, added on first sight (NULL past WATCH_MAX_HELD). */
static struct watch_held *track(struct watch *w, const struct xmin_holder *h, long long now)
{
	struct watch_held *x = find_held(w, h->id);

	if (!x && w->nheld < WATCH_MAX_HELD) {
		x = &w->held[w->nheld++];
		memset(x, 0, sizeof(*x));
		x->since_ms = now;
	}
	if (!x)
		return NULL;
	x->h = *h;
	x->seen = true;
	/* An idle standby's feedback, or a slot, holds an xmin no transaction
	 * has passed yet: it holds nothing back until one does. */
	if (isnan(h->age_s) && h->xids <= 0)
		x->since_ms = now;
	return x;
}

/* How long h has held: PostgreSQL's time, or since the watcher saw it begin to. */
static double held_age(const struct xmin_holder *h, const struct watch_held *x, long long now)
{
	if (!isnan(h->age_s))
		return h->age_s;
	return x ? (double)(now - x->since_ms) / 1000 : 0;
}

static void warn_backend(const struct xmin_holder *h, double age, const char *remedy)
{
	log_warn("a transaction has been open longer than --warn-xact-age; vacuum cannot remove "
		 "rows deleted since it began, in staged_jobs or any other table",
		 LOGF(F_STR("kind", "backend"), F_INT("pid", h->pid), F_STR("user", h->user),
		      F_STR("application", h->name), F_INT("age_s", (long long)age), F_STR("state", h->where),
		      F_STR("xact_start", h->since), F_INT("xids", h->xids), F_STR("end_it", remedy)));
}

static void warn_standby(const struct xmin_holder *h, double age, const char *remedy)
{
	log_warn("a standby's feedback (hot_standby_feedback) has held back the xmin horizon longer than "
		 "--warn-xact-age: a query or transaction on the standby; vacuum cannot remove rows deleted "
		 "since, in staged_jobs or any other table",
		 LOGF(F_STR("kind", "standby"), F_STR("application", h->name), F_STR("client_addr", h->where),
		      F_INT("walsender_pid", h->pid), F_STR("user", h->user), F_INT("age_s", (long long)age),
		      F_INT("xids", h->xids), F_STR("xmin", h->xmin), F_STR("end_it", remedy)));
}

static void warn_slot(const struct xmin_holder *h, double age, const char *remedy)
{
	log_warn(h->catalog_only ? "a replication slot has held back the system catalogs' xmin horizon longer than "
				   "--warn-xact-age; vacuum cannot clean them up, and the server keeps its WAL"
				 : "a replication slot has held back the xmin horizon longer than --warn-xact-age; "
				   "vacuum cannot remove rows deleted since, in staged_jobs or any other table",
		 LOGF(F_STR("kind", "slot"), F_STR("slot", h->name), F_STR("type", h->where),
		      F_STR("active", h->active ? "yes" : "no"), F_INT("active_pid", h->pid),
		      F_INT("age_s", (long long)age), F_INT("xids", h->xids), F_STR("xmin", h->xmin),
		      F_STR("end_it", remedy)));
}

static void warn_prepared(const struct xmin_holder *h, double age, const char *remedy)
{
	log_warn("a prepared transaction has been open longer than --warn-xact-age; vacuum cannot remove "
		 "rows deleted since it began, in staged_jobs or any other table",
		 LOGF(F_STR("kind", "prepared"), F_STR("gid", h->name), F_STR("owner", h->user),
		      F_INT("age_s", (long long)age), F_STR("prepared", h->since), F_INT("xids", h->xids),
		      F_STR("end_it", remedy)));
}

/* Warns once a holding passes --warn-xact-age, and again each time its
 * age doubles: a line per holding that stays, not one per reading. */
static void warn_held(struct watch *w, struct watch_held *x, double age)
{
	char remedy[512];

	if (!x || w->cfg->warn_xact_age_ms == 0 || age * 1000 < w->cfg->warn_xact_age_ms || age < x->next_age_s)
		return;
	xmin_holder_remedy(&x->h, remedy, sizeof(remedy));
	switch (x->h.kind) {
	case XMIN_BACKEND:
		warn_backend(&x->h, age, remedy);
		break;
	case XMIN_STANDBY:
		warn_standby(&x->h, age, remedy);
		break;
	case XMIN_SLOT:
		warn_slot(&x->h, age, remedy);
		break;
	default:
		warn_prepared(&x->h, age, remedy);
		break;
	}
	x->warned = true;
	x->next_age_s = age * 2;
}

/* Forgets the holdings that ended, with a line for each one warned about. */
static void prune_held(struct watch *w)
{
	size_t n = 0;

	for (size_t i = 0; i < w->nheld; i++) {
		struct watch_held *x = &w->held[i];
		if (x->seen) {
			w->held[n] = *x;
			w->held[n++].seen = false;
		} else if (x->warned) {
			log_info("cleared: no longer holds back the xmin horizon",
				 LOGF(F_STR("kind", xmin_holder_kind_name(x->h.kind)), F_INT("pid", x->h.pid),
				      F_STR("name", x->h.name), F_STR("where", x->h.where), F_STR("xmin", x->h.xmin),
				      F_INT("xids", x->h.xids)));
		}
	}
	w->nheld = n;
}

/* Says once that the role cannot see every holder, and what that leaves out. */
static void note_priv(struct watch *w, bool sees_all)
{
	if (sees_all || w->told_priv)
		return;
	w->told_priv = true;
	log_warn("cannot see other roles' transactions or the standbys' feedback; not reporting the oldest "
		 "transaction's age (grant pg_read_all_stats or pg_monitor to the relay's role)",
		 NULL);
}

static int read_holders(struct watch *w, struct metrics_db *db)
{
	struct xmin_holders *hs = &w->holders;
	long long now = clock_mono_ms();

	if (xmin_holders_read(w->pg, hs, w->errstr, sizeof(w->errstr)) < 0)
		return -EIO;
	note_priv(w, hs->sees_all);
	for (int k = 0; k < XMIN_NKINDS; k++)
		db->holder_age_s[k] = db->holder_xids[k] = 0;
	if (!hs->sees_all) /* PostgreSQL hides them: 0 would say none */
		db->holder_age_s[XMIN_BACKEND] = db->holder_xids[XMIN_BACKEND] = db->holder_age_s[XMIN_STANDBY] =
			db->holder_xids[XMIN_STANDBY] = NAN;
	for (size_t i = 0; i < hs->n; i++) {
		const struct xmin_holder *h = &hs->h[i];
		struct watch_held *x = track(w, h, now);
		double age = held_age(h, x, now);
		if (age > db->holder_age_s[h->kind])
			db->holder_age_s[h->kind] = age;
		if ((double)h->xids > db->holder_xids[h->kind])
			db->holder_xids[h->kind] = (double)h->xids;
		warn_held(w, x, age);
	}
	db->oldest_xact_age_s = db->holder_age_s[XMIN_BACKEND];
	prune_held(w);
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
	struct metrics_db db;
	int rc = 0;

	metrics_db_unknown(&db);
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
		rc = read_held(w, &db);
	if (rc == 0)
		rc = read_dead(w, &db);
	if (rc == 0)
		rc = read_holders(w, &db);
	if (rc < 0) {
		/* Whatever the session's state, start afresh next time. */
		PQfinish(w->pg);
		w->pg = NULL;
		metrics_db_unknown(&db);
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
		watch_readers_round(&w->readers, w->cfg, w->m);
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
