/* The read cursor and the gaps below it: see include/gaps.h for why it is sound. */
#include "fmacros.h"

#include <errno.h>
#include <stdlib.h>

#include "gaps.h"

void gaps_init(struct gaps *g, size_t max)
{
	g->cursor = 0;
	g->v = NULL;
	g->n = 0;
	g->max = max < 1 ? 1 : max;
}

void gaps_reset(struct gaps *g)
{
	g->cursor = 0;
	g->n = 0;
}

void gaps_free(struct gaps *g)
{
	if (!g)
		return;
	free(g->v);
	gaps_init(g, g->max);
}

/* A new range in out, unless it is retired already. */
static void emit(struct gap *out, size_t *n, long long lo, long long hi, uint64_t xmax, bool retire)
{
	if (lo > hi || retire)
		return;
	out[(*n)++] = (struct gap){ .lo = lo, .hi = hi, .xmax = xmax };
}

/* Merges the two neighbours with the fewest ids between them: the merged
 * range also covers ids already drained, which costs a little index walking
 * per read but never misses a row. */
static void merge_closest(struct gap *v, size_t *n)
{
	size_t best = 0;

	for (size_t i = 1; i + 1 < *n; i++)
		if (v[i + 1].lo - v[i].hi < v[best + 1].lo - v[best].hi)
			best = i;
	v[best].hi = v[best + 1].hi;
	if (v[best + 1].xmax > v[best].xmax)
		v[best].xmax = v[best + 1].xmax;
	for (size_t i = best + 1; i + 1 < *n; i++)
		v[i] = v[i + 1];
	(*n)--;
}

int gaps_advance(struct gaps *g, const long long *ids, size_t n, uint64_t xmin, uint64_t xmax,
		 long long retire_below)
{
	size_t k = 0, out_n = 0, need = g->n + n + 1;
	long long prev;
	struct gap *out = malloc(need * sizeof(*out));

	if (!out)
		return -ENOMEM;
	/* Old gaps, less the ids read in them; retired once their xmax has passed. */
	for (size_t i = 0; i < g->n; i++) {
		const struct gap *r = &g->v[i];
		bool retire = r->xmax <= xmin;
		long long lo = r->lo;
		while (k < n && ids[k] < lo)
			k++;
		for (; k < n && ids[k] <= r->hi; k++) {
			emit(out, &out_n, lo, ids[k] - 1, r->xmax, retire && ids[k] - 1 < retire_below);
			lo = ids[k] + 1;
		}
		emit(out, &out_n, lo, r->hi, r->xmax, retire && r->hi < retire_below);
	}
	/* New gaps: what the read above the cursor skipped. */
	while (k < n && ids[k] <= g->cursor)
		k++;
	for (prev = g->cursor; k < n; prev = ids[k++])
		emit(out, &out_n, prev + 1, ids[k] - 1, xmax, xmax <= xmin);
	while (out_n > g->max)
		merge_closest(out, &out_n);
	free(g->v);
	g->v = out;
	g->n = out_n;
	g->cursor = prev;
	return 0;
}

long long gaps_ids(const struct gaps *g)
{
	long long total = 0;

	for (size_t i = 0; i < g->n; i++)
		total += g->v[i].hi - g->v[i].lo + 1;
	return total;
}
