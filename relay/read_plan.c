/* What the next read takes, and the gaps after it (read_plan.h). */
#include "fmacros.h"

#include <errno.h>
#include <stdio.h>

#include "clock.h"
#include "read_plan.h"

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

void read_plan_init(struct read_plan *rp, const struct config *cfg, struct ladder *l, struct gaps *g, struct narrow *n)
{
	*rp = (struct read_plan){ .cfg = cfg, .ladder = l, .gaps = g, .narrow = n };
}

/* Every batch reads the young gaps; the old ones and kept rows on a timer. */
static long long gaps_to_read(const struct read_plan *rp, bool read_all)
{
	long long now = clock_mono_ms(), every = rp->old_read_cost_ms * GAP_OLD_SHARE;

	if (read_all)
		return GAP_OLD;
	if (every < GAP_OLD_READ_MS)
		every = GAP_OLD_READ_MS;
	return now - rp->old_read_ms >= every ? GAP_OLD : now - GAP_YOUNG_MS;
}

/* The held table, read once per leadership, and each target's memory
 * bound. A target over its bound is paused: its rows wait held. As
 * read_plan_next, with *max_bytes the batch's bound (the smallest of
 * theirs). */
static int memory_bounds(struct read_plan *rp, long *max_bytes)
{
	struct ladder *l = rp->ladder;
	bool any = false;
	int rc;

	*max_bytes = rp->cfg->batch_max_bytes;
	if ((rc = release_load(l->release, l->pg, l->metrics)) < 0) {
		if (rc == -EIO)
			ladder_pg_trouble(l, "could not read staged_jobs_held; will retry");
		return rc;
	}
	for (size_t i = 0; i < l->nt; i++) {
		struct target *t = &l->t[i];
		long budget = *max_bytes;
		t->paused = false;
		if (!target_up(t))
			continue;
		if (i == 0)
			rc = release_memory(l->release, &t->bp, &t->redis.conn, &budget, l->metrics);
		else
			rc = backpressure_memory(&t->bp, &t->redis.conn, &budget);
		if (rc < 0) {
			snprintf(t->redis.errstr, sizeof(t->redis.errstr), "%.250s", t->bp.errstr);
			redis_sink_close(&t->redis);
			target_fall_back(t, TARGET_NEED_EPOCH);
			ladder_redis_trouble(l, t, rc, "could not read redis memory; will retry");
			continue;
		}
		t->paused = rc == 1;
		any = any || !t->paused;
		if (!t->paused && budget < *max_bytes)
			*max_bytes = budget;
	}
	if (any)
		return 0;
	for (size_t i = 0; i < l->nt; i++)
		if (l->t[i].paused)
			return 1;
	return -EIO;
}

int read_plan_next(struct read_plan *rp, bool read_all)
{
	rp->limit = narrow_limit(rp->narrow, rp->cfg->batch_size);
	rp->young_since = gaps_to_read(rp, read_all);
	return memory_bounds(rp, &rp->max_bytes);
}

void read_plan_read(struct read_plan *rp, long long took_ms)
{
	if (rp->young_since == GAP_OLD)
		rp->old_read_cost_ms = took_ms;
}

int read_plan_done(struct read_plan *rp, const struct gaps_read *seen, struct batch *committed, size_t nrows)
{
	struct gaps_read s = *seen;

	if (committed) {
		batch_sort_kept(committed);
		s.kept = committed->kept;
		s.nkept = committed->nkept;
		narrow_passed(rp->narrow, nrows);
	}
	s.now_ms = clock_mono_ms();
	/* A read of every gap cut short by its limit leaves the part it did not
	 * reach due (gaps.c), so the next batches read on from there. Starting
	 * over from the lowest gap instead read the same kept rows (a bad key's,
	 * more than a batch) again and again, and nothing above them. */
	if (s.young_since == GAP_OLD)
		rp->old_read_ms = s.now_ms;
	return gaps_advance(rp->gaps, &s);
}
