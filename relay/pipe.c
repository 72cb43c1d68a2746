/* A transaction of several batches, overlapped: what it keeps (pipe.h). */
#include "fmacros.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
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

bool pipe_fits(const struct pg_read *r, const struct batch *b, int nrows, int limit, long max_bytes)
{
	return nrows == limit && nrows > 0 && b->ndead == 0 && b->nkept == 0 && b->njobs == (size_t)nrows &&
	       r->seen.retire_below == LLONG_MAX && r->ids[r->seen.n - 1] > r->above &&
	       b->payloads.len <= (size_t)max_bytes / 2;
}

int pipe_add(struct pipe *p, const struct pg_read *r, const struct batch *b)
{
	int rc = buf_grow_array((void **)&p->ids, &p->cap, p->nids + r->seen.n, sizeof(*p->ids));

	if (rc < 0)
		return rc;
	memcpy(p->ids + p->nids, r->ids, r->seen.n * sizeof(*p->ids));
	p->nids += r->seen.n;
	p->batches++;
	p->jobs += (long long)b->njobs;
	p->bytes += (long)b->payloads.len;
	p->last = r->ids[r->seen.n - 1];
	return 0;
}

int pipe_begin(struct pipe *p, const struct pg_source *pg, const struct batch *b)
{
	int rc;

	p->nids = p->batches = 0;
	p->jobs = 0;
	p->bytes = 0;
	p->start_ms = clock_mono_ms();
	buf_reset(&p->del);
	if ((rc = pipe_add(p, &pg->read, b)) < 0 || (rc = pg_source_append_delete(pg, b, &p->del)) < 0)
		return rc;
	p->first_jobs = p->jobs;
	p->first_last = p->last;
	return 0;
}

/* The whole transaction stays within the one batch's budget that
 * --max-redis-memory set before it (nothing reads Redis's memory again until
 * it commits), counted in payload bytes, which are more than the rows' text;
 * halves, because the rows read arrive while the last batch's are still held. */
long pipe_budget(const struct pipe *p, long max_bytes)
{
	return (max_bytes - p->bytes) / 2;
}

bool pipe_go_on(const struct pipe *p, int nrows, int limit, long max_bytes)
{
	return nrows == limit && p->batches + 1 < PIPE_MAX_BATCHES && clock_mono_ms() - p->start_ms < PIPE_MAX_MS &&
	       pipe_budget(p, max_bytes) > 0;
}

/* The first batch's delete (any shape), then one range for the rest. */
int pipe_commit(struct pipe *p, struct pg_source *pg)
{
	int rc = pg_source_append_range_delete(&p->del, p->first_last, p->last, p->jobs - p->first_jobs);

	if (rc < 0)
		return rc;
	return pg_source_commit_deletes(pg, &p->del) < 0 ? -EIO : 0;
}

void pipe_seen(const struct pipe *p, const struct gaps_read *first, struct gaps_read *seen)
{
	*seen = *first;
	seen->ids = p->ids;
	seen->n = p->nids;
}
