/* Release: which fetched jobs enter Redis now (see include/release.h). */
#include "fmacros.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "job_build.h"
#include "log.h"
#include "release.h"

/* A queue whose released jobs met a key of the wrong type waits this long
 * before it is released again (the old gaps' pace: held rows the same). */
#define RELEASE_RETRY_MS 500
/* How often rows held for a gone target are counted again. */
#define RELEASE_GONE_RELOAD_MS 10000

void release_init(struct release *rl, const struct config *cfg)
{
	memset(rl, 0, sizeof(*rl));
	rl->cfg = cfg;
	rounds_init(&rl->rounds, ROUNDS_MAX_TENANTS);
	pg_held_init(&rl->held);
	buf_init(&rl->key);
	rl->capped = cfg->max_queue_length > 0;
	for (size_t i = 0; i < cfg->queue_limits.n; i++)
		rl->capped = rl->capped || cfg->queue_limits.v[i].cap > 0;
}

void release_free(struct release *rl)
{
	if (!rl)
		return;
	rounds_free(&rl->rounds);
	pg_held_free(&rl->held);
	buf_free(&rl->key);
	free(rl->tqs);
	free(rl->jq);
	free(rl->qs);
	free(rl->in_qs);
	free(rl->mv);
	free(rl->want);
	free(rl->order);
	free(rl->waits);
	memset(rl, 0, sizeof(*rl));
}

/* A queue's held figures, by its name (the target's part of the key left out). */
static void held_metrics(struct metrics *m, const struct rounds_queue *q, long long nheld, long long released,
			 double waited_s)
{
	const char *target, *queue;
	size_t tlen, qlen;

	rounds_key_split(q->name, q->len, &target, &tlen, &queue, &qlen);
	metrics_held(m, queue, qlen, q->now.held, nheld, released, waited_s);
}

void release_targets(struct release *rl, const struct release_target *ts, size_t n)
{
	rl->ts = ts;
	rl->nts = n;
}

/* Target t's jobs of queue may go now: it is up and, on a cluster, the
 * queue's slot settled; and row id, if given, is not one a fence unread
 * since the takeover may name. */
static bool queue_up(const struct release *rl, size_t t, const char *queue, size_t len, long long id)
{
	const struct release_target *rt = &rl->ts[t];

	if (id > 0 && id <= rl->hold_through)
		return false;
	return rt->up && (!rt->queue_up || rt->queue_up(rt->arg, queue, len));
}

/* Its rows may be released now: its target is here, up, its fence settled. */
static bool key_up(const struct release *rl, const char *key, size_t len)
{
	size_t t = release_key_target(rl, key, len), tlen, qlen;
	const char *target, *queue;

	if (t == RELEASE_KEY_GONE)
		return false;
	rounds_key_split(key, len, &target, &tlen, &queue, &qlen);
	return queue_up(rl, t, queue, qlen, 0);
}

void release_forget(struct release *rl)
{
	rl->loaded = false;
}

int release_load(struct release *rl, struct pg_source *pg, struct metrics *m)
{
	long long now = clock_mono_ms();
	int rc;

	/* While rows wait for a gone target, read the table again now and
	 * then: an operator's `held release|dead` shows in the figures. */
	if (rl->loaded && !(rl->gone_held && now >= rl->reload_ms))
		return 0;
	for (size_t i = 0; rl->loaded && i < rl->rounds.nq; i++)
		if (release_key_target(rl, rl->rounds.q[i].name, rl->rounds.q[i].len) == RELEASE_KEY_GONE) {
			struct rounds_queue gone = rl->rounds.q[i];
			gone.now.held = 0;
			held_metrics(m, &gone, 0, 0, 0);
		}
	if ((rc = release_dead_gone_routes(rl, pg)) < 0 || (rc = pg_held_load(&rl->held, pg, &rl->rounds)) < 0)
		return rc;
	rl->loaded = true;
	rl->reload_ms = now + RELEASE_GONE_RELOAD_MS;
	for (size_t i = 0; i < rl->rounds.nq; i++)
		held_metrics(m, &rl->rounds.q[i], 0, 0, 0);
	if (rounds_held(&rl->rounds) > release_gone_held(rl))
		log_info("jobs wait in staged_jobs_held; releasing them as their queues have room",
			 LOGF(F_INT("jobs_held", rounds_held(&rl->rounds)), F_INT("queues", rl->rounds.nq)));
	release_warn_gone(rl);
	return 0;
}

bool release_needed(const struct release *rl)
{
	for (size_t i = 0; i < rl->nts; i++)
		if (!rl->ts[i].up || rl->ts[i].partial)
			return true;
	return rl->hold_through > 0 || rl->capped || rounds_held(&rl->rounds) > 0;
}

int release_memory(struct release *rl, struct backpressure *bp, struct redis_conn *conn, long *max_bytes,
		   struct metrics *m)
{
	long long now = clock_mono_ms();
	long budget;
	int rc = backpressure_memory(bp, conn, &budget);

	if (rc < 0) {
		snprintf(rl->errstr, sizeof(rl->errstr), "%s", bp->errstr);
		return rc;
	}
	if (rl->paused_ms)
		metrics_backpressure(m, METRICS_HELD_MEMORY, (double)(now - rl->paused_ms) / 1000, rc == 1);
	rl->paused_ms = rc == 1 ? now : 0;
	if (budget < *max_bytes)
		*max_bytes = budget;
	return rc;
}

static int add_measured(struct release *rl, size_t qi)
{
	size_t had = rl->capin;

	if (buf_grow_array((void **)&rl->in_qs, &rl->capin, qi + 1, sizeof(*rl->in_qs)) < 0)
		return -ENOMEM;
	if (rl->capin > had)
		memset(rl->in_qs + had, 0, (rl->capin - had) * sizeof(*rl->in_qs));
	if (rl->in_qs[qi])
		return 0;
	if (buf_grow_array((void **)&rl->qs, &rl->capqs, rl->nqs + 1, sizeof(*rl->qs)) < 0)
		return -ENOMEM;
	rl->in_qs[qi] = true;
	rl->qs[rl->nqs++] = qi;
	return 0;
}

/* Forgets the last batch's measured queues: as many steps as there were. */
static void clear_measured(struct release *rl)
{
	for (size_t i = 0; i < rl->nqs; i++)
		rl->in_qs[rl->qs[i]] = false;
	rl->nqs = 0;
}

/* The job's queue's key in the rounds: its name, or with its target's
 * (then in rl->key, until the next call). */
static int job_key(struct release *rl, const struct batch_job *j, const char **key, size_t *len)
{
	const char *name = rl->ts[j->target].name;

	*key = j->queue;
	*len = j->queue_len;
	if (!name)
		return 0;
	if (rounds_key(&rl->key, name, strlen(name), j->queue, j->queue_len) < 0)
		return -ENOMEM;
	*key = rl->key.data;
	*len = rl->key.len;
	return 0;
}

/* The queue a job is decided in (its index), or -1 when it goes straight
 * to Redis: scheduled, or for an uncapped queue with nothing held, of a
 * target that is up. Every job of a target that is down is held, in order. */
static long queue_of(struct release *rl, const struct batch_job *j)
{
	const struct config *cfg = rl->cfg;
	bool up = queue_up(rl, j->target, j->queue, j->queue_len, j->id);
	const char *key;
	size_t len;
	long cap, qi;

	if (up && j->out.scheduled)
		return -1;
	if (rl->norder && (qi = release_behind(rl, j)) >= 0)
		return qi; /* its queue's younger rows wait held for another target: behind them */
	if (job_key(rl, j, &key, &len) < 0)
		return -ENOMEM;
	cap = queue_limits_cap(&cfg->queue_limits, j->queue, j->queue_len, cfg->max_queue_length);
	/* While rows at or below hold_through wait, a newer row of their queue
	 * in the same batch must be decided after them (it waits behind them). */
	if (cap == 0 && up && !rl->hold_through)
		return (qi = rounds_find(&rl->rounds, key, len)) >= 0 && rl->rounds.q[qi].pend.held > 0 ? qi : -1;
	qi = rounds_queue(&rl->rounds, key, len, cap);
	if (qi == -ENOSPC && !rl->said_queue_bound) {
		rl->said_queue_bound = true;
		log_warn("too many capped queues to track; the new ones are not capped",
			 LOGF(F_INT("queues", ROUNDS_MAX_QUEUES)));
	}
	return qi == -ENOSPC ? -1 : qi;
}

/* Which queues the batch decides in, and whose lists it measures: capped
 * ones among its jobs, and every capped queue holding jobs, of targets that
 * are up. Uncapped queues still holding jobs (their cap was lifted, or their
 * target was down) have unbounded room; a down target's queues none. */
static int classify(struct release *rl, const struct batch *b)
{
	const struct config *cfg = rl->cfg;
	struct rounds *r = &rl->rounds;
	long long now = clock_mono_ms();
	int rc = 0;

	if (buf_grow_array((void **)&rl->jq, &rl->capjq, b->njobs, sizeof(*rl->jq)) < 0)
		return -ENOMEM;
	clear_measured(rl);
	for (size_t i = 0; rc == 0 && i < b->njobs; i++) {
		rl->jq[i] = queue_of(rl, &b->jobs[i]);
		if (rl->jq[i] == -ENOMEM)
			return -ENOMEM;
		if (rl->jq[i] >= 0 && r->q[rl->jq[i]].cap > 0 &&
		    queue_up(rl, b->jobs[i].target, b->jobs[i].queue, b->jobs[i].queue_len, b->jobs[i].id))
			rc = add_measured(rl, (size_t)rl->jq[i]);
	}
	for (size_t qi = 0; rc == 0 && qi < r->nq; qi++) {
		struct rounds_queue *q = &r->q[qi];
		const char *target, *queue;
		size_t tlen, qlen;
		if (q->pend.held == 0 || !key_up(rl, q->name, q->len))
			continue;
		rounds_key_split(q->name, q->len, &target, &tlen, &queue, &qlen);
		q->cap = queue_limits_cap(&cfg->queue_limits, queue, qlen, cfg->max_queue_length);
		if (q->cap == 0)
			q->room = LONG_MAX;
		else if (now >= q->retry_ms)
			rc = add_measured(rl, qi);
	}
	return rc;
}

/* The target name a job held in queue qi is held for: the key's (behind a
 * moved key, not the job's own). */
static const char *held_for(const struct release *rl, long qi)
{
	const struct rounds_queue *q = &rl->rounds.q[qi];

	return rl->ts[release_key_target(rl, q->name, q->len)].name;
}

/* Each job of a capped queue goes now if the queue has room and nothing
 * held, else is held with its tenant's round; the rest stay in b. */
static int decide(struct release *rl, struct batch *b)
{
	size_t n = 0, njobs = b->njobs;

	rl->nmv = 0;
	if (buf_grow_array((void **)&rl->mv, &rl->capmv, njobs, sizeof(*rl->mv)) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < njobs; i++) {
		struct batch_job *j = &b->jobs[i];
		long long round;
		bool up = queue_up(rl, j->target, j->queue, j->queue_len, j->id);
		if (rl->jq[i] < 0 || (up && (rl->hold_only || rounds_admit(&rl->rounds, (size_t)rl->jq[i])))) {
			b->jobs[n++] = *j;
			continue;
		}
		if (rounds_hold(&rl->rounds, (size_t)rl->jq[i], j->tenant, j->tenant_len, &round) < 0)
			return -ENOMEM;
		rl->mv[rl->nmv++] =
			(struct held_move){ .id = j->id, .round = round, .target = held_for(rl, rl->jq[i]) };
	}
	b->njobs = n;
	return 0;
}

/* What to read from the held table: each queue with jobs held and room, in
 * turn from next_queue, at most --batch-size jobs in all. */
static int wants(struct release *rl)
{
	struct rounds *r = &rl->rounds;
	long left = rl->cfg->batch_size;
	long long now = clock_mono_ms();

	rl->nwant = 0;
	if (buf_grow_array((void **)&rl->want, &rl->capwant, r->nq, sizeof(*rl->want)) < 0)
		return -ENOMEM;
	for (size_t k = 0; left > 0 && k < r->nq; k++) {
		size_t qi = (rl->next_queue + k) % r->nq;
		struct rounds_queue *q = &r->q[qi];
		long lim = q->room < left ? q->room : left;
		if (q->pend.held == 0 || lim <= 0 || now < q->retry_ms || release_key_waits(rl, qi))
			continue;
		rl->want[rl->nwant++] = (struct held_want){ .qi = qi, .limit = lim };
		left -= lim;
	}
	if (r->nq)
		rl->next_queue = (rl->next_queue + 1) % r->nq;
	return 0;
}

/* One wanted queue's released rows so far in this batch, to take back
 * whole when one of them may not go yet. */
struct release_run_of {
	long qi;
	size_t njobs, ndead, released_dead;
	long long n, waited_us;
};

/* The run's rows wait again, in order, and its queue a while: a row's
 * target by today's rules is not up. */
static void take_back(struct release *rl, struct batch *b, const struct release_run_of *run)
{
	b->njobs = run->njobs;
	b->ndead = run->ndead;
	rl->released_dead = run->released_dead;
	rl->rounds.q[run->qi].waited_us -= run->waited_us;
	rounds_unrelease(&rl->rounds, (size_t)run->qi, run->n, clock_mono_ms() + RELEASE_RETRY_MS);
}

/*
 * Builds the released rows into b, after its staged jobs, each where today's
 * rules send it (a route change between restarts moves a queue's held rows
 * to its new target; their old target, up, has settled its fence, so no late
 * copy of theirs is pending), with that target's opts. A row whose route is
 * gone is dead; a queue with a row whose new target is not up waits whole.
 */
static int build_released(struct release *rl, struct batch *b)
{
	int n = pg_held_nrows(&rl->held), rc;
	struct release_run_of run = { .qi = -1 };
	long skip = -1;

	rl->released_dead = 0;
	if ((rc = batch_grow(b, (size_t)n)) < 0)
		return rc;
	for (int i = 0; i < n; i++) {
		struct job_row row;
		struct held_row hr;
		char why[JOB_REASON_SIZE];
		size_t ndead = b->ndead, t;
		long qi;
		pg_held_row(&rl->held, i, &row, &hr);
		if ((rc = rounds_key(&rl->key, hr.target, hr.target_len, row.queue, row.queue_len)) < 0)
			return rc;
		if ((qi = rounds_find(&rl->rounds, rl->key.data, rl->key.len)) < 0)
			return -EINVAL; /* read only for queues asked for */
		if (qi == skip)
			continue;
		if (qi != run.qi)
			run = (struct release_run_of){ qi, b->njobs, b->ndead, rl->released_dead, 0, 0 };
		if ((t = release_row_target(rl, &row)) == ROUTES_NONE) {
			snprintf(why, sizeof(why), "route \"%.*s\" is not a route of this relay (--route)",
				 (int)(row.route_len < 100 ? row.route_len : 100), row.route);
			row.unfit = row.unfit ? row.unfit : why;
			t = release_key_target(rl, rl->key.data, rl->key.len);
		} else if (!queue_up(rl, t, row.queue, row.queue_len, row.id)) {
			take_back(rl, b, &run);
			skip = qi;
			continue;
		}
		rounds_released(&rl->rounds, (size_t)qi, hr.round, hr.hold_id);
		rl->rounds.q[qi].waited_us += hr.held_us;
		run.n++;
		run.waited_us += hr.held_us;
		if ((rc = job_build_add(b, &row, rl->ts[t].opts, hr.hold_id)) < 0)
			return rc;
		rl->released_dead += b->ndead - ndead;
	}
	return 0;
}

/* Reads the measured queues' lengths, each target's on its own Redis. */
static int measure(struct release *rl)
{
	for (size_t t = 0; t < rl->nts; t++) {
		const struct release_target *ts = &rl->ts[t];
		size_t n = 0;
		if (buf_grow_array((void **)&rl->tqs, &rl->captqs, rl->nqs, sizeof(*rl->tqs)) < 0)
			return -ENOMEM;
		for (size_t i = 0; i < rl->nqs; i++)
			if (release_key_target(rl, rl->rounds.q[rl->qs[i]].name, rl->rounds.q[rl->qs[i]].len) == t)
				rl->tqs[n++] = rl->qs[i];
		if (n && backpressure_rooms(ts->bp, ts->conn, &rl->rounds, rl->tqs, n) < 0) {
			snprintf(rl->errstr, sizeof(rl->errstr), "%s", ts->bp->errstr);
			rl->failed_target = t;
			return RELEASE_REDIS_FAILED;
		}
	}
	return 0;
}

int release_run(struct release *rl, struct pg_source *pg, struct batch *b, long max_bytes)
{
	long long t0 = clock_mono_us();
	int rc;

	rl->nmv = rl->nwant = 0;
	rl->release_us = 0;
	if (!release_needed(rl))
		return 0;
	rounds_begin(&rl->rounds);
	if ((rc = release_order_keys(rl)) < 0 || (rc = classify(rl, b)) < 0)
		return rc;
	if (rl->nqs && !rl->hold_only && (rc = measure(rl)) < 0)
		return rc;
	if ((rc = decide(rl, b)) < 0 || (!rl->hold_only && (rc = wants(rl)) < 0))
		return rc;
	if (rl->nmv || rl->nwant) {
		rc = pg_held_move_read(&rl->held, pg, &rl->rounds, rl->mv, rl->nmv, rl->want, rl->nwant, max_bytes);
		if (rc == -EIO)
			return RELEASE_PG_FAILED;
		if (rc < 0 || (rc = build_released(rl, b)) < 0)
			return rc;
	}
	rl->release_us = clock_mono_us() - t0;
	return 0;
}

void release_counts(const struct release *rl, size_t *held, size_t *released)
{
	*held = rl->nmv;
	*released = rl->nwant ? (size_t)pg_held_nrows(&rl->held) : 0;
}

void release_unrelease(struct release *rl, const struct batch_job *j)
{
	const char *key;
	size_t len;
	long qi = job_key(rl, j, &key, &len) < 0 ? -1 : rounds_find(&rl->rounds, key, len);

	if (qi >= 0)
		rounds_unrelease(&rl->rounds, (size_t)qi, 1, clock_mono_ms() + RELEASE_RETRY_MS);
}

void release_dead_kept(struct release *rl)
{
	if (rl->released_dead)
		release_forget(rl);
}

/* The time since backlog_ms counts as held back by a queue's cap while any
 * capped queue holds jobs. */
static void note_backlog(struct release *rl, struct metrics *m)
{
	long long now = clock_mono_ms();
	bool any = false;

	for (size_t i = 0; !any && i < rl->rounds.nq; i++)
		any = rl->rounds.q[i].now.held > 0;
	if (rl->backlog_ms)
		metrics_backpressure(m, METRICS_HELD_QUEUE, (double)(now - rl->backlog_ms) / 1000, any);
	rl->backlog_ms = any ? now : 0;
}

long long release_held_for(const struct release *rl, size_t t)
{
	long long n = 0;

	for (size_t i = 0; i < rl->rounds.nq; i++)
		if (rl->rounds.q[i].now.held && release_key_target(rl, rl->rounds.q[i].name, rl->rounds.q[i].len) == t)
			n += rl->rounds.q[i].now.held;
	return n;
}

void release_commit(struct release *rl, struct metrics *m)
{
	struct rounds *r = &rl->rounds;

	rounds_commit(r);
	for (size_t i = 0; i < r->nq; i++) {
		const struct rounds_queue *q = &r->q[i];
		if (q->nheld || q->released)
			held_metrics(m, q, q->nheld, q->released, (double)q->waited_us / 1e6);
	}
	note_backlog(rl, m);
	for (size_t i = 0; i < rl->nts; i++)
		metrics_target_held(m, i, release_held_for(rl, i));
}
