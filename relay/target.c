/* One target's Redis side (see include/target.h). */
#include "fmacros.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "target.h"

#define BACKOFF_BASE_MS 100
#define BACKOFF_CAP_MS 10000

void target_init(struct target *t, size_t index, const char *name, const struct config *cfg, struct stop *stop)
{
	memset(t, 0, sizeof(*t));
	t->index = index;
	t->name = name;
	t->route = index ? name : NULL;
	t->cfg = cfg;
	redis_sink_init(&t->redis, cfg);
	redis_sink_stop_on(&t->redis, stop);
	t->state = TARGET_NEED_EPOCH;
	fence_init(&t->fence);
	buf_init(&t->fence_text);
	backoff_init(&t->backoff, BACKOFF_BASE_MS, BACKOFF_CAP_MS, (unsigned)getpid() * 31u + (unsigned)index);
	sidekiq_probe_init(&t->sidekiq, cfg);
	backpressure_init(&t->bp, cfg);
}

void target_free(struct target *t)
{
	if (!t)
		return;
	target_connect_wait(t);
	redis_sink_free(&t->redis);
	fence_free(&t->fence);
	buf_free(&t->fence_text);
	backpressure_free(&t->bp);
}

bool target_up(const struct target *t)
{
	/* The state first: a target connecting (its redis the connector's) is
	 * never READY. */
	return t->state == TARGET_READY && !t->paused && redis_sink_connected(&t->redis);
}

void target_view(struct target *t, const struct batch *b, const struct batch_job *grouped)
{
	size_t i = 0, n = 0;

	while (i < b->njobs && grouped[i].target < t->index)
		i++;
	while (i + n < b->njobs && grouped[i + n].target == t->index)
		n++;
	t->part = *b;
	t->part.jobs = (struct batch_job *)grouped + i;
	t->part.njobs = n;
	t->part.ndead = t->part.nkept = 0;
}

const struct batch_job *target_group(const struct batch *b, size_t n, struct batch_job **scratch, size_t *cap)
{
	size_t at = 0;
	bool sorted = true;

	for (size_t i = 1; sorted && i < b->njobs; i++)
		sorted = b->jobs[i - 1].target <= b->jobs[i].target;
	if (sorted)
		return b->jobs; /* one target, or grouped already: the common case costs a scan */
	if (buf_grow_array((void **)scratch, cap, b->njobs, sizeof(**scratch)) < 0)
		return NULL;
	for (size_t t = 0; t < n; t++)
		for (size_t i = 0; i < b->njobs; i++)
			if (b->jobs[i].target == t)
				(*scratch)[at++] = b->jobs[i];
	return *scratch;
}
