/* A transaction of several batches, overlapped (see include/pipe.h). */
#include "fmacros.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "drain.h"
#include "pipe.h"

void pipe_init(struct pipe *p)
{
	memset(p, 0, sizeof(*p));
	buf_init(&p->del);
}

void pipe_free(struct pipe *p)
{
	if (!p)
		return;
	buf_free(&p->del);
	free(p->ids);
	pipe_init(p);
}

bool pipe_fits(const struct drain *d, int nrows, int limit, long max_bytes)
{
	const struct pg_read *r = &d->pg.read;
	const struct batch *b = &d->batch;

	return nrows == limit && nrows > 0 && limit == d->cfg->batch_size && !release_needed(&d->release) &&
	       b->ndead == 0 && b->nkept == 0 && b->njobs == (size_t)nrows && r->seen.retire_below == LLONG_MAX &&
	       r->ids[r->seen.n - 1] > r->above && b->payloads.len <= (size_t)max_bytes / 2;
}

/* The last id the current read took: the next read starts above it. */
static long long last_id(const struct drain *d)
{
	return d->pg.read.ids[d->pg.read.seen.n - 1];
}

/* The current batch went to Redis: its ids join the transaction's
 * (gaps_advance takes them at the commit), its jobs the metrics. */
static int note_pushed(struct pipe *p, struct drain *d)
{
	const struct pg_read *r = &d->pg.read;
	int rc = buf_grow_array((void **)&p->ids, &p->cap, p->nids + r->seen.n, sizeof(*p->ids));

	if (rc < 0)
		return rc;
	memcpy(p->ids + p->nids, r->ids, r->seen.n * sizeof(*p->ids));
	p->nids += r->seen.n;
	if (p->batches++ > 0)
		metrics_batch_also(d->metrics, &d->batch);
	p->jobs += (long long)d->batch.njobs;
	p->bytes += (long)d->batch.payloads.len;
	p->last = r->ids[r->seen.n - 1];
	return 0;
}

/* Builds the rows read into the batch; plain false when one of them is not
 * a plain job (dead, or anything the first batch's path must see to): the
 * transaction ends before it, and the next one reads it first. */
static int build_next(struct drain *d, int nrows, bool *plain)
{
	int rc = batch_reset(&d->batch, (size_t)nrows);
	long long now_us = clock_wall_us();

	for (size_t t = 0; t < d->nt; t++)
		d->t[t].opts.now_us = now_us;
	for (int i = 0; rc == 0 && i < nrows; i++) {
		struct job_row row;
		pg_source_row(&d->pg, i, &row);
		rc = drain_add_row(d, &row);
	}
	*plain = rc == 0 && d->batch.ndead == 0 && d->batch.njobs == (size_t)nrows;
	return rc;
}

/* The next read's byte budget: half of what the transaction may still take.
 * The whole transaction stays within the one batch's budget that
 * --max-redis-memory set before it (nothing reads Redis's memory again until
 * it commits), counted in payload bytes, which are more than the rows' text;
 * halves, because the rows read arrive while the last batch's are still held. */
static long next_budget(const struct pipe *p, long max_bytes)
{
	return (max_bytes - p->bytes) / 2;
}

/* Whether to read one more batch after the one read. */
static bool go_on(const struct pipe *p, struct drain *d, int nrows, int limit, long max_bytes, long long t0)
{
	return nrows == limit && p->batches + 1 < PIPE_MAX_BATCHES && clock_mono_ms() - t0 < PIPE_MAX_MS &&
	       next_budget(p, max_bytes) > 0 && !stop_seen(&d->stopping);
}

/* A push (target t's) failed while Postgres may be running a read: take
 * its results (whatever they say) and roll back. */
static int push_failed(struct pipe *p, struct drain *d, struct target *t, int rc, bool pg_busy)
{
	if (pg_busy)
		pg_source_discard(&d->pg);
	p->push_rc = rc;
	p->push_rows = d->batch.njobs;
	p->failed = t;
	pg_source_rollback(&d->pg);
	return PIPE_PUSH_FAILED;
}

/* Postgres failed. A push still in flight may land or not: its connection
 * goes (its reply would be read as another's) and so does the epoch. */
static int pg_failed(struct pipe *p, struct drain *d, bool in_flight)
{
	p->epoch_lost = in_flight;
	for (size_t i = 0; i < d->nt; i++) {
		if (d->t[i].in_flight)
			redis_sink_close(&d->t[i].redis);
		d->t[i].in_flight = false;
	}
	pg_source_rollback(&d->pg);
	return PIPE_COMMIT_FAILED;
}

/* Out of memory mid-transaction: nothing in flight may stay (the relay
 * stops on -ENOMEM; the next leader reads the fence). */
static int out_of_memory(struct pipe *p, struct drain *d, int rc, bool busy, bool in_flight)
{
	if (busy)
		pg_source_discard(&d->pg);
	pg_failed(p, d, in_flight);
	return rc;
}

/* Sends the read of the rows above the last read. */
static int read_more(const struct pipe *p, struct drain *d, int limit, long max_bytes, bool *busy)
{
	*busy = true;
	return pg_source_send_next(&d->pg, last_id(d), limit, next_budget(p, max_bytes));
}

/* The first batch's delete (any shape), then one range for the rest. */
static int commit(struct pipe *p, struct drain *d, long long first_jobs)
{
	int rc = pg_source_append_range_delete(&p->del, p->first_last, p->last, p->jobs - first_jobs);

	if (rc < 0)
		return rc;
	return pg_source_commit_deletes(&d->pg, &p->del) < 0 ? pg_failed(p, d, false) : 0;
}

int pipe_run(struct pipe *p, struct drain *d, int limit, long max_bytes, struct gaps_read *seen)
{
	long long t0 = clock_mono_ms(), first_jobs = (long long)d->batch.njobs;
	bool in_flight = false, busy = false, plain = true;
	struct target *failed = NULL;
	int nrows = 0, rc;

	*seen = *pg_source_seen(&d->pg);
	p->nids = p->batches = 0;
	p->jobs = 0;
	p->bytes = 0;
	p->epoch_lost = false;
	buf_reset(&p->del);
	if ((rc = note_pushed(p, d)) < 0 || (rc = pg_source_append_delete(&d->pg, &d->batch, &p->del)) < 0)
		return rc;
	p->first_last = p->last;
	if (read_more(p, d, limit, max_bytes, &busy) < 0 || pg_source_take_next(&d->pg, &d->gaps, limit, &nrows) < 0)
		return pg_failed(p, d, false);
	/* Each turn: Postgres reads the next rows while the relay builds these
	 * and Redis runs the push before. */
	while (nrows > 0) {
		busy = false;
		if (go_on(p, d, nrows, limit, max_bytes, t0) && read_more(p, d, limit, max_bytes, &busy) < 0)
			return pg_failed(p, d, in_flight);
		if ((rc = build_next(d, nrows, &plain)) < 0)
			return out_of_memory(p, d, rc, busy, in_flight);
		if (in_flight && (rc = drain_reply_parts(d, &failed, false)) != 0)
			return push_failed(p, d, failed, rc, busy);
		in_flight = false;
		if (!plain || stop_seen(&d->stopping))
			break;
		in_flight = true;
		if ((rc = drain_send_parts(d, &failed)) != 0) {
			struct target *also;
			int before = drain_reply_parts(d, &also, false); /* the sends before: their fences name them */
			(void)before;
			return push_failed(p, d, failed, rc, busy);
		}
		if ((rc = note_pushed(p, d)) < 0)
			return out_of_memory(p, d, rc, busy, in_flight);
		if (!busy)
			break;
		if (pg_source_take_next(&d->pg, &d->gaps, limit, &nrows) < 0)
			return pg_failed(p, d, in_flight);
		busy = false;
	}
	if (busy)
		pg_source_discard(&d->pg); /* rows above a batch that stays: the next transaction reads them */
	if (in_flight && (rc = drain_reply_parts(d, &failed, false)) != 0)
		return push_failed(p, d, failed, rc, false);
	if ((rc = commit(p, d, first_jobs)) != 0)
		return rc;
	seen->ids = p->ids;
	seen->n = p->nids;
	return 0;
}
