/* Grouping a batch's jobs by list: a stable sort by key, then the lists
 * put back in the order of their first job. */
#include "fmacros.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "queue_groups.h"

void queue_groups_init(struct queue_groups *g)
{
	memset(g, 0, sizeof(*g));
}

void queue_groups_free(struct queue_groups *g)
{
	if (!g)
		return;
	free(g->v);
	free(g->tmp);
	free(g->at);
	queue_groups_init(g);
}

void queue_groups_reset(struct queue_groups *g)
{
	g->n = 0;
}

int queue_groups_add(struct queue_groups *g, const char *queue, size_t len, int sub, size_t job)
{
	if (buf_grow_array((void **)&g->v, &g->capv, g->n + 1, sizeof(*g->v)) < 0)
		return -ENOMEM;
	g->v[g->n] = (struct queue_group_item){ .queue = queue, .len = len, .sub = sub, .job = job, .added = g->n };
	g->n++;
	return 0;
}

/* A total order of lists: by length, bytes, then sub (any order groups them). */
static int cmp_list(struct queue_groups *g, const struct queue_group_item *a, const struct queue_group_item *b)
{
	int c;

	g->compares++;
	if (a->len != b->len)
		return a->len < b->len ? -1 : 1;
	if ((c = memcmp(a->queue, b->queue, a->len)) != 0)
		return c;
	return (a->sub > b->sub) - (a->sub < b->sub);
}

/* tmp, written from v, becomes v. */
static void swap(struct queue_groups *g)
{
	struct queue_group_item *t = g->v;
	size_t cap = g->capv;

	g->v = g->tmp;
	g->capv = g->captmp;
	g->tmp = t;
	g->captmp = cap;
}

/* Bottom-up merge sort of v by list, stable (equal lists keep the order
 * added): at most n log2 n comparisons, whatever the names. */
static void sort_by_list(struct queue_groups *g)
{
	size_t n = g->n;

	for (size_t w = 1; w < n; w *= 2) {
		const struct queue_group_item *src = g->v;
		struct queue_group_item *dst = g->tmp;
		for (size_t lo = 0; lo < n; lo += 2 * w) {
			size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			size_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi)
				dst[k++] = cmp_list(g, &src[j], &src[i]) < 0 ? src[j++] : src[i++];
			while (i < mid)
				dst[k++] = src[i++];
			while (j < hi)
				dst[k++] = src[j++];
		}
		swap(g);
	}
}

/* Puts the sorted lists back in the order of their first item: at[k] is
 * where the list whose first item was added k-th starts, if one does. */
static void order_lists(struct queue_groups *g)
{
	size_t out = 0, n = g->n;

	for (size_t k = 0; k < n; k++)
		g->at[k] = SIZE_MAX;
	for (size_t i = 0; i < n; i++) {
		g->v[i].first = i == 0 || cmp_list(g, &g->v[i - 1], &g->v[i]) != 0;
		if (g->v[i].first)
			g->at[g->v[i].added] = i;
	}
	for (size_t k = 0; k < n; k++)
		for (size_t i = g->at[k]; i < n && (i == g->at[k] || !g->v[i].first); i++)
			g->tmp[out++] = g->v[i];
	swap(g);
}

int queue_groups_sort(struct queue_groups *g)
{
	if (buf_grow_array((void **)&g->tmp, &g->captmp, g->n, sizeof(*g->tmp)) < 0 ||
	    buf_grow_array((void **)&g->at, &g->capat, g->n, sizeof(*g->at)) < 0)
		return -ENOMEM;
	sort_by_list(g);
	order_lists(g);
	return 0;
}
