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

void drain_init(struct drain *d, const struct config *cfg, volatile sig_atomic_t *stop)
{
	d->cfg = cfg;
	pg_source_init(&d->pg, cfg);
	redis_sink_init(&d->redis, cfg);
	batch_init(&d->batch);
	pipe_init(&d->pipe);
	gaps_init(&d->gaps, GAPS_MAX);
	backoff_init(&d->pg_backoff, BACKOFF_BASE_MS, BACKOFF_CAP_MS, (unsigned)getpid());
	backoff_init(&d->redis_backoff, BACKOFF_BASE_MS, BACKOFF_CAP_MS, (unsigned)getpid() * 31u);
	d->state = DRAIN_STANDBY;
	d->old_read_ms = 0;
	d->old_read_cost_ms = 0;
	d->wrongtype_log_ms = 0;
	fence_init(&d->fence);
	buf_init(&d->fence_text);
	d->redis_where[0] = '\0';
	d->redis_policy[0] = '\0';
	sidekiq_probe_init(&d->sidekiq, cfg);
	release_init(&d->release, cfg);
	narrow_init(&d->narrow);
	note_origin(d);
	memset(&d->once, 0, sizeof(d->once));
	d->relayed = d->dead = 0;
	d->metrics = NULL;
	stop_init(&d->stopping, stop, cfg->stop_timeout_ms);
	pg_source_stop_on(&d->pg, &d->stopping);
	redis_sink_stop_on(&d->redis, &d->stopping);
}

void drain_free(struct drain *d)
{
	if (!d)
		return;
	pg_source_free(&d->pg);
	redis_sink_free(&d->redis);
	batch_free(&d->batch);
	pipe_free(&d->pipe);
	gaps_free(&d->gaps);
	fence_free(&d->fence);
	buf_free(&d->fence_text);
	release_free(&d->release);
}

/* Turns the fetched rows into jobs and dead rows, then lets release hold
 * and release jobs (with opts, for the released rows). */
static int build_batch(struct drain *d, int nrows, long max_bytes)
{
	struct job_opts *opts = &d->opts;
	int rc = batch_reset(&d->batch, (size_t)nrows);
	bool sidekiq = d->cfg->format == FORMAT_SIDEKIQ || d->cfg->format == FORMAT_ACTIVEJOB;

	*opts = (struct job_opts){
		.format = d->cfg->format,
		.sidekiq_version = sidekiq_probe_version(&d->sidekiq, &d->redis.conn, clock_mono_ms()),
		.max_job_bytes = d->cfg->max_job_bytes,
		.now_us = clock_wall_us(),
		.rails_version = d->cfg->rails_version,
		.origin = d->origin,
	};

	metrics_job_format(d->metrics, format_of(d->cfg->format)->name, sidekiq ? &d->sidekiq.seen : NULL);
	for (int i = 0; rc == 0 && i < nrows; i++) {
		struct job_row row;
		const char *refused;
		pg_source_row(&d->pg, i, &row);
		if (!row.unfit && (refused = narrow_unfit(&d->narrow, row.id)) != NULL)
			row.unfit = refused;
		rc = batch_add(&d->batch, &row, opts, 0);
	}
	if (rc < 0)
		return rc;
	rc = release_run(&d->release, &d->pg, &d->redis.conn, &d->batch, opts, max_bytes);
	if (rc == RELEASE_REDIS_FAILED)
		snprintf(d->redis.errstr, sizeof(d->redis.errstr), "%.250s", d->release.errstr);
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

/* Jobs of a batch whose Redis keys have the wrong type. */
struct blocked_arg {
	struct redis_sink *rs;
	const struct batch *b;
	struct release *release;
};

static bool job_blocked(const struct batch_job *j, void *arg)
{
	struct blocked_arg *a = arg;
	bool blocked = redis_sink_blocked(a->rs, a->b, j);

	if (blocked && j->hold_id)
		release_unrelease(a->release, j);
	return blocked;
}

/* Names the keys of the wrong type, at most once a minute while they stay so
 * (wrongtype_log_ms: when last named; 0: not since a clean push). */
static void log_wrong_types(struct drain *d, size_t kept)
{
	long long now = clock_mono_ms();
	const char *type, *key = redis_sink_bad_key(&d->redis, 0, &type);

	if (d->wrongtype_log_ms && now - d->wrongtype_log_ms < 60000)
		return;
	d->wrongtype_log_ms = now;
	log_warn("a redis key the batch writes has the wrong type; its jobs stay staged until it is fixed",
		 LOGF(F_STR("key", key), F_STR("type", type), F_INT("keys", d->redis.nbad), F_INT("jobs_kept", kept)));
}

/*
 * Pushes the batch. A push that found keys of the wrong type wrote nothing:
 * the jobs for those keys are kept (staged, re-read with the old gaps) and
 * the rest is pushed again, so one bad key holds up only its own jobs.
 */
static int push_batch(struct drain *d)
{
	struct blocked_arg arg = { &d->redis, &d->batch, &d->release };
	int rc = 0;

	for (int tries = 0; tries < 4; tries++) {
		size_t kept;
		rc = redis_sink_push(&d->redis, &d->batch);
		if (rc != REDIS_SINK_WRONGTYPE)
			break;
		kept = batch_keep(&d->batch, job_blocked, &arg);
		log_wrong_types(d, kept);
	}
	if (rc == 0 && d->batch.nkept == 0)
		d->wrongtype_log_ms = 0; /* the keys are fixed: say so again if they break */
	if (rc == REDIS_SINK_WRONGTYPE) {
		snprintf(d->redis.errstr, sizeof(d->redis.errstr), "keys of the wrong type kept changing");
		return -EIO;
	}
	return rc;
}

/*
 * One batch. Returns the number of rows read (0: nothing new), or a negative
 * code after the fault was logged and waited out. A row is deleted only in
 * the transaction that read it, after Redis acknowledged its push.
 */
/* Before a fetch: the held table, read once per leadership, and the memory
 * bound. 1 while paused, 0 with *max_bytes the batch's bound, or a negative
 * code after the fault was logged and waited out. */
static int before_fetch(struct drain *d, long *max_bytes)
{
	int rc;

	*max_bytes = d->cfg->batch_max_bytes;
	if ((rc = release_load(&d->release, &d->pg, d->metrics)) < 0) {
		if (rc == -EIO)
			ladder_pg_trouble(d, "could not read staged_jobs_held; will retry");
		return rc;
	}
	if ((rc = release_memory(&d->release, &d->redis.conn, max_bytes, d->metrics)) < 0) {
		snprintf(d->redis.errstr, sizeof(d->redis.errstr), "%.250s", d->release.errstr);
		redis_sink_close(&d->redis);
		ladder_redis_trouble(d, rc, "could not read redis memory; will retry");
	}
	return rc;
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
		ladder_fall_back(d, DRAIN_NEED_EPOCH);
		ladder_redis_trouble(d, -EIO, "could not read the capped queues' lengths; rolled back, will retry");
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
static int push_refused(struct drain *d, size_t nrows)
{
	char answer[sizeof(d->redis.errstr)];
	const struct batch *b = &d->batch;

	memcpy(answer, d->redis.errstr, sizeof(answer));
	if (redis_sink_connect(&d->redis) < 0) {
		narrow_calm(&d->narrow);
		ladder_redis_trouble(d, -EIO,
				     "could not push a batch to redis, nor reach it again; rolled back, will retry");
		return -EIO;
	}
	if (narrow_refused(&d->narrow, nrows, b->njobs, b->jobs[0].id, answer)) {
		if (redis_sink_probe(&d->redis) < 0) {
			narrow_calm(&d->narrow);
			ladder_redis_trouble(d, -EIO, "redis refuses even a push of nothing; rolled back, will retry");
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
		ladder_redis_trouble(d, -EIO, "redis refused a batch with released jobs; rolled back, will retry");
		return -EIO;
	}
	log_warn("redis refused a batch for what it holds; reading fewer rows to find the one it refuses",
		 LOGF(F_STR("error", answer), F_INT("rows", nrows), F_INT("next_rows", d->narrow.limit)));
	return -EIO;
}

/*
 * A stop signal cut the batch short (or came before its push): roll back and
 * say where its rows are. Not pushed, they stay staged. A push cut short may
 * still have landed whole (Redis had the script), and one that landed before
 * its delete was cut short did: either way its fence names the rows, so the
 * next leader deletes them instead of pushing them again.
 */
static int abandon_batch(struct drain *d, enum drain_state to, const char *step, const char *error)
{
	ladder_fall_back(d, to);
	pg_source_rollback(&d->pg);
	if (!error) {
		log_info("stopping: the batch read was not pushed; its rows stay staged", LOGF(F_STR("step", step)));
		return 0;
	}
	log_warn(to == DRAIN_NEED_FENCE
			 ? "stopping: abandoned the batch in flight at its delete and rolled back; redis has "
			   "its push and the fence names its rows, so the next leader deletes them"
			 : "stopping: abandoned the batch in flight at its push and rolled back; its rows stay "
			   "staged, or, if redis ran the push, the fence names them",
		 LOGF(F_STR("step", step), F_INT("jobs", d->batch.njobs), F_STR("error", error)));
	return -EIO;
}

/* The push failed (rc): roll back and back off, or narrow. */
static int push_trouble(struct drain *d, int rc, size_t nrows)
{
	if (stop_seen(&d->stopping))
		return abandon_batch(d, DRAIN_NEED_EPOCH, "push", d->redis.errstr);
	/* Stale: another relay took an epoch since ours. Otherwise the push
	 * may still land (a reply lost or late): either way this epoch must
	 * not push again. A new one refuses the old push if it comes late,
	 * and the fence, read after, names it if it came first. */
	ladder_fall_back(d, DRAIN_NEED_EPOCH);
	pg_source_rollback(&d->pg);
	if (rc == REDIS_SINK_REFUSED)
		return push_refused(d, nrows);
	if (rc == REDIS_SINK_WRONGTYPE)
		snprintf(d->redis.errstr, sizeof(d->redis.errstr),
			 "a later batch of the transaction has keys of the wrong type; its first batch keeps them");
	ladder_redis_trouble(d, rc > 0 ? -EIO : rc, "could not push a batch to redis; rolled back, will retry");
	return -EIO;
}

/* The delete or the COMMIT after an acknowledged push failed (or with
 * epoch_lost, a read while a push was in flight). */
static int commit_trouble(struct drain *d, bool epoch_lost)
{
	enum drain_state to = epoch_lost ? DRAIN_NEED_EPOCH : DRAIN_NEED_FENCE;

	if (stop_seen(&d->stopping))
		return abandon_batch(d, to, "delete", d->pg.errstr);
	ladder_fall_back(d, to);
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
		return push_trouble(d, d->pipe.push_rc, d->pipe.push_rows);
	if (rc == PIPE_COMMIT_FAILED)
		return commit_trouble(d, d->pipe.epoch_lost);
	if (rc < 0) {
		pg_source_rollback(&d->pg);
		return rc;
	}
	t->commit_us = clock_mono_us() - t0 - t->fetch_us - t->push_us;
	d->once.moved = d->pipe.jobs;
	backoff_reset(&d->pg_backoff);
	backoff_reset(&d->redis_backoff);
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
		return abandon_batch(d, DRAIN_READY, "push", NULL);
	if ((rc = push_batch(d)) != 0)
		return push_trouble(d, rc, (size_t)nrows + t.released);
	t.push_us = clock_mono_us() - t0 - t.fetch_us;
	metrics_batch_pushed(d->metrics, &d->batch); /* the commit frees the queue names */
	if (pipe_fits(d, nrows, limit, max_bytes))
		return drain_pipe(d, limit, max_bytes, &t, t0);
	if ((rc = pg_source_commit(&d->pg, &d->batch)) < 0)
		return commit_trouble(d, false);
	t.commit_us = clock_mono_us() - t0 - t.fetch_us - t.push_us;
	d->once.moved = (long long)(d->batch.njobs + d->batch.ndead + t.held);
	backoff_reset(&d->pg_backoff);
	backoff_reset(&d->redis_backoff);
	narrow_passed(&d->narrow, (size_t)nrows + t.released);
	if (release_needed(&d->release))
		release_commit(&d->release, d->metrics);
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
