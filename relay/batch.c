/* One batch in flight: the jobs built from the rows read, and the rows rejected. */
#include "fmacros.h"

#include <errno.h>
#include <stdlib.h>

#include "batch.h"

void batch_init(struct batch *b)
{
	buf_init(&b->payloads);
	b->jobs = NULL;
	b->dead = NULL;
	b->kept = NULL;
	b->njobs = b->ndead = b->nkept = b->cap = 0;
}

int batch_reset(struct batch *b, size_t n)
{
	buf_reset(&b->payloads);
	b->njobs = b->ndead = b->nkept = 0;
	return batch_grow(b, n);
}

int batch_grow(struct batch *b, size_t more)
{
	size_t n = b->njobs + b->ndead + more;

	if (n > b->cap) {
		long long *kept = realloc(b->kept, n * sizeof(*kept));
		if (!kept)
			return -ENOMEM;
		b->kept = kept;
		struct batch_job *jobs = realloc(b->jobs, n * sizeof(*jobs));
		if (!jobs)
			return -ENOMEM;
		b->jobs = jobs;
		struct batch_dead *dead = realloc(b->dead, n * sizeof(*dead));
		if (!dead)
			return -ENOMEM;
		b->dead = dead;
		b->cap = n;
	}
	return 0;
}

size_t batch_keep(struct batch *b, bool (*keep)(const struct batch_job *j, void *arg), void *arg)
{
	size_t n = 0, moved = 0;

	for (size_t i = 0; i < b->njobs; i++) {
		if (keep(&b->jobs[i], arg)) {
			if (b->jobs[i].hold_id == 0)
				b->kept[b->nkept++] = b->jobs[i].id;
			moved++;
		} else {
			b->jobs[n++] = b->jobs[i];
		}
	}
	b->njobs = n;
	return moved;
}

size_t batch_keep_dead(struct batch *b)
{
	size_t released = 0;

	for (size_t i = 0; i < b->ndead; i++) {
		if (b->dead[i].hold_id == 0)
			b->kept[b->nkept++] = b->dead[i].id;
		else
			released++;
	}
	b->ndead = 0;
	return released;
}

static int cmp_id(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

void batch_sort_kept(struct batch *b)
{
	qsort(b->kept, b->nkept, sizeof(*b->kept), cmp_id);
}

void batch_free(struct batch *b)
{
	if (!b)
		return;
	buf_free(&b->payloads);
	free(b->jobs);
	free(b->dead);
	free(b->kept);
	batch_init(b);
}
