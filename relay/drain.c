/* The relay loop: leader lock, then batches of fetch, build, push, delete, commit. */
#include "fmacros.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "drain.h"
#include "format.h"
#include "ladder.h"
#include "log.h"
#include "signals.h"

#define BACKOFF_BASE_MS 100
#define BACKOFF_CAP_MS 10000
/* Gap ranges tracked at most; past it the closest merge (see gaps.h). */
#define GAPS_MAX 10000
/* A gap is young, and read by every batch, this long after it opened: the
 * time a concurrent writer takes from its id to its commit. */
#define GAP_YOUNG_MS 200
/* Old gaps (and kept rows) are read this often: a late commit arrives within
 * about this long, and however many old gaps a long transaction keeps open,
 * a batch does not read them. When reading them all takes long (thousands of
 * gaps a transaction holding an xid keeps from retiring), they are read less
 * often, so that they take at most 1/GAP_OLD_SHARE of the relay's time and
 * each batch costs the same however many there are. */
#define GAP_OLD_READ_MS 500
#define GAP_OLD_SHARE 10

static void note_origin(struct drain *d)
{
	char host[256] = "localhost";

	gethostname(host, sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	snprintf(d->origin, sizeof(d->origin), "gen%d@%s", (int)getpid(), host);
}

/* One target per route (routes.h), t[0] the default one; what release
 * sees of them points into them. Left empty when out of memory:
 * drain_start then fails. */
static void init_targets(struct drain *d)
{
	const struct routes *r = &d->cfg->routes;

	d->nt = 0;
	d->t = calloc(r->n ? r->n : 1, sizeof(*d->t));
	d->rts = calloc(r->n ? r->n : 1, sizeof(*d->rts));
	if (!d->t || !d->rts || r->n == 0)
		return;
	for (size_t i = 0; i < r->n; i++) {
		struct target *t = &d->t[i];
		target_init(t, i, r->t[i].name, r->t[i].cfg, &d->stopping);
		d->rts[i] = (struct release_target){
			.name = t->route, .bp = &t->bp, .conn = &t->redis.conn, .opts = &t->opts
		};
	}
	d->nt = r->n;
	release_targets(&d->release, d->rts, d->nt);
}

void drain_init(struct drain *d, const struct config *cfg, volatile sig_atomic_t *stop)
{
	d->cfg = cfg;
	pg_source_init(&d->pg, cfg);
	batch_init(&d->batch);
	d->scratch = NULL;
	d->memo.len = SIZE_MAX;
	d->capscratch = 0;
	pipe_init(&d->pipe);
	gaps_init(&d->gaps, GAPS_MAX);
	backoff_init(&d->pg_backoff, BACKOFF_BASE_MS, BACKOFF_CAP_MS, (unsigned)getpid());
	d->state = DRAIN_STANDBY;
	d->old_read_ms = 0;
	d->old_read_cost_ms = 0;
	release_init(&d->release, cfg);
	narrow_init(&d->narrow);
	note_origin(d);
	memset(&d->once, 0, sizeof(d->once));
	d->relayed = d->dead = 0;
	d->metrics = NULL;
	stop_init(&d->stopping, stop, cfg->stop_timeout_ms);
	pg_source_stop_on(&d->pg, &d->stopping);
	init_targets(d);
}

void drain_free(struct drain *d)
{
	if (!d)
		return;
	pg_source_free(&d->pg);
	for (size_t i = 0; i < d->nt; i++)
		target_free(&d->t[i]);
	free(d->t);
	free(d->rts);
	d->t = NULL;
	d->rts = NULL;
	d->nt = 0;
	batch_free(&d->batch);
	free(d->scratch);
	pipe_free(&d->pipe);
	gaps_free(&d->gaps);
	release_free(&d->release);
}

/* Each target's opts for this batch, and whether it may take jobs now. */
static void begin_targets(struct drain *d)
{
	long long now_us = clock_wall_us(), now_ms = clock_mono_ms();

	for (size_t i = 0; i < d->nt; i++) {
		struct target *t = &d->t[i];
		t->opts = (struct job_opts){
			.format = t->cfg->format,
			.sidekiq_version = target_up(t) ? sidekiq_probe_version(&t->sidekiq, &t->redis.conn, now_ms)
							: t->cfg->sidekiq_version,
			.max_job_bytes = d->cfg->max_job_bytes,
			.now_us = now_us,
			.rails_version = t->cfg->rails_version,
			.origin = d->origin,
			.target = i,
			.key_prefix = t->cfg->key_prefix,
		};
		/* A lone target that went down since the ladder saw it up
		 * fails its push (the batch rolls back, as ever); with others
		 * up, its rows wait held while theirs go. */
		d->rts[i].up = d->nt == 1 || target_up(t);
	}
}

/* The target of a row: the last queue's again when the rules pick it
 * (rows of a queue come in runs, and a glob costs an fnmatch per rule). */
static size_t row_target(struct drain *d, const struct job_row *row)
{
	struct route_memo *m = &d->memo;

	/* An empty route names nothing: as NULL, the rules pick. */
	if (row->route && row->route_len > 0)
		return routes_find(&d->cfg->routes, row->queue, row->queue_len, row->route, row->route_len);
	if (d->cfg->routes.nrules == 0)
		return 0;
	if (m->len == row->queue_len && memcmp(m->queue, row->queue, m->len) == 0)
		return m->target;
	m->target = routes_find(&d->cfg->routes, row->queue, row->queue_len, NULL, 0);
	m->len = row->queue_len < sizeof(m->queue) ? row->queue_len : SIZE_MAX;
	if (m->len != SIZE_MAX)
		memcpy(m->queue, row->queue, m->len);
	return m->target;
}

int drain_add_row(struct drain *d, struct job_row *row)
{
	char why[JOB_REASON_SIZE];
	size_t ti = row_target(d, row);

	if (ti == ROUTES_NONE) {
		ti = 0;
		if (!row->unfit) {
			snprintf(why, sizeof(why), "route \"%.*s\" is not a route of this relay (--route)",
				 (int)(row->route_len < 100 ? row->route_len : 100), row->route);
			row->unfit = why;
		}
	}
	return batch_add(&d->batch, row, &d->t[ti].opts, 0);
}

/* Turns the fetched rows into jobs and dead rows, then lets release hold
 * and release jobs (with opts, for the released rows). */
static int build_batch(struct drain *d, int nrows, long max_bytes)
{
	int rc = batch_reset(&d->batch, (size_t)nrows);
	bool sidekiq = d->cfg->format == FORMAT_SIDEKIQ || d->cfg->format == FORMAT_ACTIVEJOB;

	begin_targets(d);
	metrics_job_format(d->metrics, format_of(d->cfg->format)->name, sidekiq ? &d->t[0].sidekiq.seen : NULL);
	for (int i = 0; rc == 0 && i < nrows; i++) {
		struct job_row row;
		const char *refused;
		pg_source_row(&d->pg, i, &row);
		if (!row.unfit && (refused = narrow_unfit(&d->narrow, row.id)) != NULL)
			row.unfit = refused;
		rc = drain_add_row(d, &row);
	}
	if (rc < 0)
		return rc;
	rc = release_run(&d->release, &d->pg, &d->batch, max_bytes);
	if (rc == RELEASE_REDIS_FAILED) {
		struct target *t = &d->t[d->release.failed_target];
		snprintf(t->redis.errstr, sizeof(t->redis.errstr), "%.250s", d->release.errstr);
	}
	return rc;
}

/* Microseconds each step of a batch took, for the debug log and the bench. */
struct batch_times {
	long long fetch_us, push_us, commit_us;
	size_t held, released;
};

static void log_batch(struct drain *d, const struct batch_times *t)
{
	const struct batch *b = &d->batch;
	const char *queue, *job_class, *reason;
	long long dead_id, id;
	int n = 0;

	/* What `stagedrain dead show DEAD_ID` and `dead replay` take. */
	for (; (queue = pg_source_dead_moved(&d->pg, n, &dead_id, &id, &job_class, &reason)) != NULL; n++)
		log_warn("moved a row that cannot be a job to staged_jobs_dead",
			 LOGF(F_INT("dead_id", dead_id), F_INT("id", id), F_STR("queue", queue),
			      F_STR("class", job_class), F_STR("reason", reason)));
	/* A role that may not read the dead rows back (granted by an older roles.sql). */
	for (size_t i = 0; n == 0 && i < b->ndead; i++)
		log_warn("moved a row that cannot be a job to staged_jobs_dead",
			 LOGF(F_INT("id", b->dead[i].id), F_STR("reason", b->dead[i].reason)));
	d->relayed += (long long)b->njobs;
	d->dead += (long long)b->ndead;
	metrics_batch_done(d->metrics, b->ndead, (double)(t->fetch_us + t->push_us + t->commit_us) / 1e6,
			   d->gaps.cursor);
	if (log_enabled(LOG_DEBUG))
		log_debug("batch relayed",
			  LOGF(F_INT("jobs", b->njobs), F_INT("dead", b->ndead), F_INT("held", t->held),
			       F_INT("released", t->released), F_INT("release_us", d->release.release_us),
			       F_INT("first_id", b->njobs ? b->jobs[0].id : 0), F_INT("cursor", d->gaps.cursor),
			       F_INT("gaps", d->gaps.n), F_INT("due", d->pg.read.due), F_INT("fetch_us", t->fetch_us),
			       F_INT("push_us", t->push_us), F_INT("commit_us", t->commit_us)));
}

/* After a read that changed nothing or a batch that committed: the cursor
 * moves, gaps open and retire, kept rows become kept gaps. Never before the
 * commit, so a failed batch leaves every row it read where the next read
 * will find it. */
static int advance_seen(struct drain *d, struct gaps_read *seen);

static int advance_gaps(struct drain *d, bool committed)
{
	struct gaps_read seen = *pg_source_seen(&d->pg);

	if (committed) {
		batch_sort_kept(&d->batch);
		seen.kept = d->batch.kept;
		seen.nkept = d->batch.nkept;
	}
	return advance_seen(d, &seen);
}

static int advance_seen(struct drain *d, struct gaps_read *seen)
{
	seen->now_ms = clock_mono_ms();
	/* A read of every gap cut short by its limit leaves the part it did not
	 * reach due (gaps.c), so the next batches read on from there. Starting
	 * over from the lowest gap instead read the same kept rows (a bad key's,
	 * more than a batch) again and again, and nothing above them. */
	if (seen->young_since == GAP_OLD)
		d->old_read_ms = seen->now_ms;
	return gaps_advance(&d->gaps, seen);
}

/* Every batch reads the young gaps; the old ones and kept rows on a timer. */
static long long gaps_to_read(struct drain *d)
{
	long long now = clock_mono_ms(), every = d->old_read_cost_ms * GAP_OLD_SHARE;

	if (d->once.read_all)
		return GAP_OLD;
	if (every < GAP_OLD_READ_MS)
		every = GAP_OLD_READ_MS;
	return now - d->old_read_ms >= every ? GAP_OLD : now - GAP_YOUNG_MS;
}

/* Jobs of a target's part whose Redis keys have the wrong type. */
struct blocked_arg {
	struct target *t;
	struct release *release;
};

static bool job_blocked(const struct batch_job *j, void *arg)
{
	struct blocked_arg *a = arg;
	bool blocked = j->target == a->t->index && redis_sink_blocked(&a->t->redis, &a->t->part, j);

	if (blocked && j->hold_id)
		release_unrelease(a->release, j);
	return blocked;
}

/* Names the keys of the wrong type, at most once a minute while they stay so
 * (wrongtype_log_ms: when last named; 0: not since a clean push). */
static void log_wrong_types(struct target *t, size_t kept)
{
	long long now = clock_mono_ms();
	const char *type, *key = redis_sink_bad_key(&t->redis, 0, &type);

	if (t->wrongtype_log_ms && now - t->wrongtype_log_ms < 60000)
		return;
	t->wrongtype_log_ms = now;
	log_warn("a redis key the batch writes has the wrong type; its jobs stay staged until it is fixed",
		 LOGF(F_STR("key", key), F_STR("type", type), F_INT("keys", t->redis.nbad), F_INT("jobs_kept", kept),
		      F_STR("target", t->name)));
}

/*
 * A target's push found keys of the wrong type (rc) and wrote nothing: the
 * jobs for those keys are kept (staged, re-read with the old gaps) and the
 * rest is pushed again, so one bad key holds up only its own jobs.
 */
static int push_kept(struct drain *d, struct target *t, int rc)
{
	struct blocked_arg arg = { t, &d->release };
	const struct batch_job *grouped;
	size_t kept = d->batch.nkept;

	/* A part whose jobs were all kept pushes nothing. */
	for (int tries = 0; rc == REDIS_SINK_WRONGTYPE && tries < 4; tries++) {
		batch_keep(&d->batch, job_blocked, &arg);
		if (!(grouped = target_group(&d->batch, d->nt, &d->scratch, &d->capscratch)))
			return -ENOMEM;
		target_view(t, &d->batch, grouped);
		log_wrong_types(t, d->batch.nkept - kept);
		rc = redis_sink_push(&t->redis, &t->part);
	}
	if (rc == REDIS_SINK_WRONGTYPE) {
		snprintf(t->redis.errstr, sizeof(t->redis.errstr), "keys of the wrong type kept changing");
		return -EIO;
	}
	return rc;
}

int drain_send_parts(struct drain *d, struct target **failed)
{
	const struct batch_job *grouped = target_group(&d->batch, d->nt, &d->scratch, &d->capscratch);
	long long now = clock_mono_us();
	int rc = grouped ? 0 : -ENOMEM;

	*failed = &d->t[0];
	for (size_t i = 0; rc == 0 && i < d->nt; i++) {
		struct target *t = &d->t[i];
		target_view(t, &d->batch, grouped);
		if (t->part.njobs == 0)
			continue;
		*failed = t;
		/* A push that left may land: the fence names it from now. */
		if ((rc = redis_sink_send(&t->redis, &t->part, t->pushed)) != 0)
			break;
		t->in_flight = t->pushed = true;
		t->push_us = now;
	}
	return rc;
}

int drain_reply_parts(struct drain *d, struct target **failed, bool first)
{
	int rc = 0;

	for (size_t i = 0; i < d->nt; i++) {
		struct target *t = &d->t[i];
		int one;
		if (!t->in_flight)
			continue;
		t->in_flight = false;
		one = redis_sink_reply(&t->redis);
		if (first && one == 0)
			t->wrongtype_log_ms = 0; /* the keys are fixed: say so again if they break */
		if (first && one == REDIS_SINK_WRONGTYPE)
			one = push_kept(d, t, one);
		t->push_us = clock_mono_us() - t->push_us;
		if (one == 0)
			t->txn_jobs += (long long)t->part.njobs;
		else if (rc == 0) {
			rc = one;
			*failed = t;
		}
	}
	return rc;
}

/* The first batch of a transaction: every target's part is sent, so their
 * Redis run them at once, then every reply read. On a failure *failed is
 * the first target whose push failed; the others that acknowledged theirs
 * have their fences name them. */
static int push_batch(struct drain *d, struct target **failed)
{
	struct target *later = NULL;
	int rc = drain_send_parts(d, failed);
	int replies = drain_reply_parts(d, rc ? &later : failed, true);

	return rc ? rc : replies;
}

/* The transaction rolled back: targets that acknowledged a push of it fall
 * back to NEED_FENCE (to), so the rows their fences name are deleted
 * before they push again. */
static void unpush(struct drain *d, enum target_state to)
{
	for (size_t i = 0; i < d->nt; i++) {
		if (d->t[i].pushed)
			ladder_fall_back(&d->t[i], to);
		d->t[i].pushed = false;
		d->t[i].txn_jobs = 0;
	}
}

void drain_pushed(struct drain *d)
{
	for (size_t i = 0; i < d->nt; i++) {
		struct target *t = &d->t[i];
		if (!t->pushed)
			continue;
		t->pushed = false;
		backoff_reset(&t->backoff);
		t->relayed += t->txn_jobs;
		metrics_target_pushed(d->metrics, i, t->txn_jobs, (double)t->push_us / 1e6);
		t->txn_jobs = 0;
	}
}

/*
 * Before a fetch: the held table, read once per leadership, and each
 * target's memory bound. A target over its bound is paused: its rows wait
 * held. 1 while every target that is up is paused, 0 with *max_bytes the
 * batch's bound (the smallest of theirs), or a negative code after the
 * fault was logged.
 */
static int before_fetch(struct drain *d, long *max_bytes)
{
	bool any = false;
	int rc;

	*max_bytes = d->cfg->batch_max_bytes;
	if ((rc = release_load(&d->release, &d->pg, d->metrics)) < 0) {
		if (rc == -EIO)
			ladder_pg_trouble(d, "could not read staged_jobs_held; will retry");
		return rc;
	}
	for (size_t i = 0; i < d->nt; i++) {
		struct target *t = &d->t[i];
		long budget = *max_bytes;
		t->paused = false;
		if (!target_up(t))
			continue;
		if (i == 0)
			rc = release_memory(&d->release, &t->bp, &t->redis.conn, &budget, d->metrics);
		else
			rc = backpressure_memory(&t->bp, &t->redis.conn, &budget);
		if (rc < 0) {
			snprintf(t->redis.errstr, sizeof(t->redis.errstr), "%.250s", t->bp.errstr);
			redis_sink_close(&t->redis);
			ladder_fall_back(t, TARGET_NEED_EPOCH);
			ladder_redis_trouble(d, t, rc, "could not read redis memory; will retry");
			continue;
		}
		t->paused = rc == 1;
		any = any || !t->paused;
		if (!t->paused && budget < *max_bytes)
			*max_bytes = budget;
	}
	if (any)
		return 0;
	for (size_t i = 0; i < d->nt; i++)
		if (d->t[i].paused)
			return 1;
	return -EIO;
}

/* Whatever went wrong after the fetch and before the push: blamed on its side. */
static int build_trouble(struct drain *d, int rc)
{
	if (rc == RELEASE_PG_FAILED) {
		ladder_pg_trouble(d, "could not hold or release jobs; will retry");
		return -EIO;
	}
	pg_source_rollback(&d->pg);
	if (rc == RELEASE_REDIS_FAILED) {
		struct target *t = &d->t[d->release.failed_target];
		ladder_fall_back(t, TARGET_NEED_EPOCH);
		ladder_redis_trouble(d, t, -EIO, "could not read the capped queues' lengths; rolled back, will retry");
		return -EIO;
	}
	return rc;
}

/*
 * Redis refused the batch, it seems for what it holds. If Redis is down
 * (no fresh connection answers PING), this is ordinary trouble: back off.
 * Otherwise read fewer rows next time, at once, until one job is refused
 * alone, twice; it is dead-lettered with Redis's answer if Redis still runs
 * a push of nothing, so a Redis refusing every push never costs a job.
 */
static int push_refused(struct drain *d, struct target *t, size_t nrows)
{
	char answer[sizeof(t->redis.errstr)];
	const struct batch *b = &t->part;

	memcpy(answer, t->redis.errstr, sizeof(answer));
	if (redis_sink_connect(&t->redis) < 0) {
		narrow_calm(&d->narrow);
		ladder_redis_trouble(d, t, -EIO,
				     "could not push a batch to redis, nor reach it again; rolled back, will retry");
		return -EIO;
	}
	if (narrow_refused(&d->narrow, nrows, b->njobs, b->jobs[0].id, answer)) {
		if (redis_sink_probe(&t->redis) < 0) {
			narrow_calm(&d->narrow);
			ladder_redis_trouble(d, t, -EIO,
					     "redis refuses even a push of nothing; rolled back, will retry");
			return -EIO;
		}
		narrow_condemn(&d->narrow);
		log_warn("redis refused one job twice, alone; it goes to staged_jobs_dead",
			 LOGF(F_INT("id", b->jobs[0].id), F_STR("error", answer)));
		return -EIO;
	}
	/* Released jobs are not narrowed (the held read keeps its own size): with
	 * them in the batch, wait as for any trouble rather than spin. */
	if (b->jobs[b->njobs - 1].hold_id) {
		ladder_redis_trouble(d, t, -EIO, "redis refused a batch with released jobs; rolled back, will retry");
		return -EIO;
	}
	log_warn("redis refused a batch for what it holds; reading fewer rows to find the one it refuses",
		 LOGF(F_STR("error", answer), F_INT("rows", nrows), F_INT("next_rows", d->narrow.limit)));
	return -EIO;
}

/*
 * The batch at a stop (hold_at_stop) held its down targets' rows: that is
 * committed, nothing else (the other rows stay staged). A target whose push
 * failed may have taken those rows (the reply lost, not the push), and only
 * its fence can tell: held for it, a successor without that target leaves
 * them be, where staged it would push them elsewhere (docs/topologies.md).
 */
static int commit_holds(struct drain *d, size_t held)
{
	PGresult *res = pg_source_exec(&d->pg, "COMMIT");
	bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;

	PQclear(res);
	if (!ok) {
		pg_source_rollback(&d->pg);
		log_warn("stopping: could not commit the rows the batch held; they stay staged",
			 LOGF(F_INT("rows", (long long)held), F_STR("error", PQerrorMessage(d->pg.conn))));
		return -EIO;
	}
	log_info("stopping: held the rows of the targets that are down, so that a relay without their routes leaves "
		 "them be; the other rows stay staged",
		 LOGF(F_INT("held", (long long)held)));
	return 0;
}

/*
 * A stop signal cut the batch short (or came before its push): roll back and
 * say where its rows are. Not pushed, they stay staged. A push cut short may
 * still have landed whole (Redis had the script), and one that landed before
 * its delete was cut short did: either way its fence names the rows, so the
 * next leader deletes them instead of pushing them again.
 */
static int abandon_batch(struct drain *d, bool at_delete, const char *error)
{
	size_t held, released;

	release_counts(&d->release, &held, &released);
	if (!error && d->release.hold_only && held > 0)
		return commit_holds(d, held);
	pg_source_rollback(&d->pg);
	if (!error) {
		log_info("stopping: the batch read was not pushed; its rows stay staged", LOGF(F_STR("step", "push")));
		return 0;
	}
	log_warn(at_delete ? "stopping: abandoned the batch in flight at its delete and rolled back; redis has "
			     "its push and the fence names its rows, so the next leader deletes them"
			   : "stopping: abandoned the batch in flight at its push and rolled back; its rows stay "
			     "staged, or, if redis ran the push, the fence names them",
		 LOGF(F_STR("step", at_delete ? "delete" : "push"), F_INT("jobs", d->batch.njobs),
		      F_STR("error", error)));
	return -EIO;
}

/* Target t's push failed (rc): roll back and let t back off, or narrow. */
static int push_trouble(struct drain *d, struct target *t, int rc, size_t nrows)
{
	/* Stale: another relay took an epoch since ours. Otherwise the push
	 * may still land (a reply lost or late): either way this epoch must
	 * not push again. A new one refuses the old push if it comes late,
	 * and the fence, read after, names it if it came first. The targets
	 * that acknowledged theirs settle their fences. */
	unpush(d, TARGET_NEED_FENCE);
	ladder_fall_back(t, TARGET_NEED_EPOCH);
	if (stop_seen(&d->stopping))
		return abandon_batch(d, false, t->redis.errstr);
	pg_source_rollback(&d->pg);
	if (rc == REDIS_SINK_REFUSED)
		return push_refused(d, t, nrows);
	if (rc == REDIS_SINK_WRONGTYPE)
		snprintf(t->redis.errstr, sizeof(t->redis.errstr),
			 "a later batch of the transaction has keys of the wrong type; its first batch keeps them");
	ladder_redis_trouble(d, t, rc > 0 ? -EIO : rc, "could not push a batch to redis; rolled back, will retry");
	return -EIO;
}

/* The delete or the COMMIT after acknowledged pushes failed (or with
 * epoch_lost, a read while a push was in flight, whose target's
 * connection the pipe closed). */
static int commit_trouble(struct drain *d, bool epoch_lost)
{
	unpush(d, TARGET_NEED_FENCE);
	for (size_t i = 0; epoch_lost && i < d->nt; i++)
		if (!redis_sink_connected(&d->t[i].redis))
			ladder_fall_back(&d->t[i], TARGET_NEED_EPOCH);
	if (stop_seen(&d->stopping))
		return abandon_batch(d, true, d->pg.errstr);
	ladder_pg_trouble(d, "pushed a batch but could not delete it; the fence will delete it");
	return -EIO;
}

/* The first batch went through and more rows wait: the transaction goes on
 * with more batches (pipe.h) before its commit. */
static int drain_pipe(struct drain *d, int limit, long max_bytes, struct batch_times *t, long long t0)
{
	struct gaps_read seen;
	int rc = pipe_run(&d->pipe, d, limit, max_bytes, &seen);

	if (rc == PIPE_PUSH_FAILED)
		return push_trouble(d, d->pipe.failed, d->pipe.push_rc, d->pipe.push_rows);
	if (rc == PIPE_COMMIT_FAILED)
		return commit_trouble(d, d->pipe.epoch_lost);
	if (rc < 0) {
		pg_source_rollback(&d->pg);
		return rc;
	}
	t->commit_us = clock_mono_us() - t0 - t->fetch_us - t->push_us;
	d->once.moved = d->pipe.jobs;
	backoff_reset(&d->pg_backoff);
	drain_pushed(d);
	if ((rc = advance_seen(d, &seen)) < 0)
		return rc;
	d->relayed += d->pipe.jobs;
	metrics_batches_done(d->metrics, d->pipe.batches, 0, (double)(clock_mono_us() - t0) / 1e6, d->gaps.cursor);
	/* One line for the transaction: its times are its batches' together. */
	if (log_enabled(LOG_DEBUG))
		log_debug("batch relayed", LOGF(F_INT("batches", d->pipe.batches), F_INT("jobs", d->pipe.jobs),
						F_INT("first_id", d->pipe.ids[0]), F_INT("cursor", d->gaps.cursor),
						F_INT("gaps", d->gaps.n), F_INT("fetch_us", t->fetch_us),
						F_INT("push_us", t->push_us), F_INT("commit_us", t->commit_us)));
	return (int)d->pipe.jobs;
}

static int drain_batch(struct drain *d)
{
	struct batch_times t;
	struct target *failed = NULL;
	long long t0 = clock_mono_us(), young_since = gaps_to_read(d);
	int nrows = 0, rc, limit = narrow_limit(&d->narrow, d->cfg->batch_size);
	long max_bytes;

	d->once.moved = 0;
	d->once.all_read = false;
	if ((rc = before_fetch(d, &max_bytes)) != 0)
		return rc > 0 ? 0 : rc;
	if (pg_source_fetch(&d->pg, &d->gaps, limit, young_since, max_bytes, &nrows) < 0) {
		ladder_pg_trouble(d, "could not read a batch; will retry");
		return -EIO;
	}
	d->once.all_read = young_since == GAP_OLD;
	d->once.read_all = false;
	if (young_since == GAP_OLD)
		d->old_read_cost_ms = (clock_mono_us() - t0) / 1000;
	if (nrows == 0 && !release_needed(&d->release)) {
		pg_source_rollback(&d->pg);
		return d->gaps.n || pg_source_seen(&d->pg)->skip_to ? advance_gaps(d, false) : 0;
	}
	if ((rc = build_batch(d, nrows, max_bytes)) < 0)
		return build_trouble(d, rc);
	release_counts(&d->release, &t.held, &t.released);
	if (nrows == 0 && t.released == 0) {
		pg_source_rollback(&d->pg);
		return d->gaps.n || pg_source_seen(&d->pg)->skip_to ? advance_gaps(d, false) : 0;
	}
	if ((rc = pg_source_move_dead(&d->pg, &d->batch)) < 0) {
		ladder_pg_trouble(d, "could not move rows to staged_jobs_dead; will retry");
		return rc;
	}
	if (rc == PG_SOURCE_DEAD_KEPT)
		release_dead_kept(&d->release);
	if (rc == PG_SOURCE_DEAD_KEPT)
		log_warn("could not move rows that cannot be jobs to staged_jobs_dead; they stay staged and"
			 " are tried again, the batch goes on",
			 LOGF(F_STR("error", d->pg.errstr), F_STR("sqlstate", d->pg.sqlstate),
			      F_INT("rows", d->batch.nkept)));
	t.fetch_us = clock_mono_us() - t0;
	if (stop_seen(&d->stopping))
		return abandon_batch(d, false, NULL);
	if ((rc = push_batch(d, &failed)) != 0)
		return push_trouble(d, failed, rc, (size_t)nrows + t.released);
	t.push_us = clock_mono_us() - t0 - t.fetch_us;
	metrics_batch_pushed(d->metrics, &d->batch); /* the commit frees the queue names */
	if (pipe_fits(d, nrows, limit, max_bytes))
		return drain_pipe(d, limit, max_bytes, &t, t0);
	if ((rc = pg_source_commit(&d->pg, &d->batch)) < 0)
		return commit_trouble(d, false);
	t.commit_us = clock_mono_us() - t0 - t.fetch_us - t.push_us;
	d->once.moved = (long long)(d->batch.njobs + d->batch.ndead + t.held);
	backoff_reset(&d->pg_backoff);
	drain_pushed(d);
	narrow_passed(&d->narrow, (size_t)nrows + t.released);
	if (release_needed(&d->release)) {
		release_commit(&d->release, d->metrics);
		for (size_t i = 0; i < d->nt; i++)
			metrics_target_held(d->metrics, i, release_held_for(&d->release, i));
	}
	if ((rc = advance_gaps(d, true)) < 0)
		return rc;
	log_batch(d, &t);
	return nrows ? nrows : (int)t.released;
}

/*
 * Staging transactions notify nobody by default (a NOTIFY serialises their
 * commits: sql/notify.sql, opt-in), so the relay polls: at once after a batch,
 * then 1 ms, 2 ms, 4 ms ... after each empty read, up to --poll-interval. A
 * busy table is read again within a millisecond or two; an idle one costs a
 * few reads a second. A notification, where the trigger is installed, ends
 * the wait early.
 */
static void idle_wait(struct drain *d, int *wait_ms)
{
	bool woken = false;

	if (pg_source_wait_jobs(&d->pg, *wait_ms, d->stopping.flag, &woken) < 0)
		ladder_pg_trouble(d, "lost postgres while idle; will reconnect");
	*wait_ms = woken ? 1 : *wait_ms * 2 > d->cfg->poll_interval_ms ? d->cfg->poll_interval_ms : *wait_ms * 2;
}

/*
 * Stopping while leading with a target down and another up: one more batch,
 * which only holds the down targets' rows (commit_holds). A push to it that failed just before the stop may have
 * landed, and its rows, still staged, would go elsewhere under a successor
 * without that route.
 */
static void hold_at_stop(struct drain *d)
{
	bool up = false, down = false;

	if (d->state != DRAIN_LEADS || pg_source_broken(&d->pg))
		return;
	for (size_t i = 0; i < d->nt; i++) {
		up = up || d->t[i].state == TARGET_READY;
		down = down || d->t[i].state != TARGET_READY;
	}
	if (!up || !down)
		return;
	d->release.hold_only = true;
	(void)drain_batch(d);
	d->release.hold_only = false;
}

int drain_run(struct drain *d)
{
	int rc = 0, wait_ms = 1;

	while (!stop_seen(&d->stopping)) {
		long long cursor = d->gaps.cursor;
		bool ready = ladder_ensure_ready(d);

		if (d->once.gave_up) {
			rc = 0;
			break;
		}
		if (stop_seen(&d->stopping))
			break; /* read no batch after a stop */
		rc = ready ? drain_batch(d) : -EAGAIN;
		if (rc == -ENOMEM)
			break;
		if (once_trouble_over(d, rc < 0)) {
			rc = -ETIMEDOUT;
			break;
		}
		signals_note_hup();
		if (rc >= 0 && d->cfg->once && once_over(d, cursor))
			break;
		if (rc > 0 || d->cfg->once)
			wait_ms = 1;
		else if (rc == 0)
			idle_wait(d, &wait_ms);
		rc = 0;
	}
	pg_source_rollback(&d->pg);
	if (stop_seen(&d->stopping))
		hold_at_stop(d);
	if (rc >= 0 && d->cfg->once && !stop_seen(&d->stopping))
		return once_report(d);
	/* Held and kept rows stay staged: say how many. */
	/* stop_ms: from the stop signal, as first seen, to here. */
	log_info(stop_seen(&d->stopping) ? "stopped on signal" : "stopped",
		 LOGF(F_INT("jobs_relayed", d->relayed), F_INT("jobs_dead", d->dead),
		      F_INT("jobs_held", rounds_held(&d->release.rounds)), F_INT("rows_kept", gaps_kept(&d->gaps)),
		      F_INT("stop_ms", stop_seen(&d->stopping) ? clock_mono_ms() - d->stopping.seen_ms : 0)));
	return rc < 0 ? rc : 0;
}
