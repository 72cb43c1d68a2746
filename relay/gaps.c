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
	snapshot_init(&g->prev);
}

void gaps_reset(struct gaps *g)
{
	g->cursor = 0;
	g->n = 0;
	snapshot_clear(&g->prev);
}

void gaps_free(struct gaps *g)
{
	if (!g)
		return;
	free(g->v);
	snapshot_free(&g->prev);
	gaps_init(g, g->max);
}

bool gaps_reads(const struct gaps *g, size_t i, long long young_since)
{
	return g->v[i].due || g->v[i].opened_ms >= young_since;
}

static bool fillable(const struct gap *gp)
{
	return gp->xid_lo < gp->xid_hi;
}

/* Whether the read leaves out a gap that a transaction could still fill. */
static bool any_fillable_unread(const struct gaps *g, long long young_since)
{
	for (size_t i = 0; i < g->n; i++)
		if (!gaps_reads(g, i, young_since) && fillable(&g->v[i]))
			return true;
	return false;
}

int gaps_mark_due(struct gaps *g, const struct snapshot *cur, long long young_since)
{
	struct snapshot_ended ended;
	int marked = 0;

	if (!any_fillable_unread(g, young_since))
		return 0;
	if (snapshot_ended_init(&ended, &g->prev, cur) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < g->n; i++) {
		struct gap *gp = &g->v[i];
		if (!gaps_reads(g, i, young_since) && fillable(gp) &&
		    snapshot_ended_within(&ended, gp->xid_lo, gp->xid_hi)) {
			gp->due = true;
			marked++;
		}
	}
	snapshot_ended_free(&ended);
	return marked;
}

/*
 * Keeps lo..hi of a gap the read covered, unless it retires. A kept gap the
 * read got through no longer keeps anything there (a row still kept comes
 * back as a kept gap of its own), so what is left is an ordinary gap; this
 * read's bound is a sound bound for it, being later than its first. A part
 * the read did not reach (cut short) stays due, young or old: its rows, if
 * visible now, must come before any read above the cursor.
 */
static void keep(struct gap *out, size_t *n, long long lo, long long hi, const struct gap *from,
		 const struct gaps_read *r)
{
	bool seen = hi < r->retire_below;
	uint64_t bound = from->bound;

	if (lo > hi)
		return;
	if (seen && bound == GAP_KEPT)
		bound = r->bound;
	if (seen && bound <= r->xmin)
		return;
	out[(*n)++] = (struct gap){ .lo = lo,
				    .hi = hi,
				    .bound = bound,
				    .xid_lo = from->xid_lo,
				    .xid_hi = from->xid_hi,
				    .opened_ms = from->opened_ms,
				    .due = !seen };
}

/* A gap the read skipped above the cursor: retired at once if every
 * transaction that could fill it had ended before the read's snapshot;
 * otherwise a filler's xid is at least xmin and below the bound. */
static void open_gap(struct gap *out, size_t *n, long long lo, long long hi, long long opened,
		     const struct gaps_read *r)
{
	if (lo <= hi && r->bound > r->xmin)
		out[(*n)++] = (struct gap){ .lo = lo,
					    .hi = hi,
					    .bound = r->bound,
					    .xid_lo = r->xmin,
					    .xid_hi = r->bound,
					    .opened_ms = opened };
}

/* Merges the two neighbours with the fewest ids between them: the merged
 * range also covers ids already drained, which costs a little index walking
 * when it is read but never misses a row. It is old from then on, so that
 * walking happens on the timer, not in every batch. */
static void merge_closest(struct gap *v, size_t *n)
{
	size_t best = 0;

	for (size_t i = 1; i + 1 < *n; i++)
		if (v[i + 1].lo - v[i].hi < v[best + 1].lo - v[best].hi)
			best = i;
	v[best].hi = v[best + 1].hi;
	if (v[best + 1].bound > v[best].bound)
		v[best].bound = v[best + 1].bound;
	if (v[best + 1].opened_ms < v[best].opened_ms)
		v[best].opened_ms = v[best + 1].opened_ms;
	if (v[best + 1].xid_lo < v[best].xid_lo)
		v[best].xid_lo = v[best + 1].xid_lo;
	if (v[best + 1].xid_hi > v[best].xid_hi)
		v[best].xid_hi = v[best + 1].xid_hi;
	v[best].due = v[best].due || v[best + 1].due;
	for (size_t i = best + 1; i + 1 < *n; i++)
		v[i] = v[i + 1];
	(*n)--;
}

/* The gaps in a, less every id read, plus the new ones; a is sorted. */
static size_t carry_and_open(const struct gaps *g, const struct gaps_read *r, struct gap *out, long long *cursor)
{
	size_t k = 0, n = 0;
	long long prev = g->cursor, opened = g->cursor == 0 ? GAP_OLD : r->now_ms;

	for (size_t i = 0; i < g->n; i++) {
		const struct gap *gp = &g->v[i];
		long long lo = gp->lo;
		if (!gaps_reads(g, i, r->young_since)) {
			out[n++] = *gp;
			continue;
		}
		while (k < r->n && r->ids[k] < lo)
			k++;
		for (; k < r->n && r->ids[k] <= gp->hi; k++) {
			keep(out, &n, lo, r->ids[k] - 1, gp, r);
			lo = r->ids[k] + 1;
		}
		keep(out, &n, lo, gp->hi, gp, r);
	}
	while (k < r->n && r->ids[k] <= g->cursor)
		k++;
	for (; k < r->n; prev = r->ids[k++])
		open_gap(out, &n, prev + 1, r->ids[k] - 1, opened, r);
	if (prev == g->cursor && r->skip_to > prev) {
		open_gap(out, &n, prev + 1, r->skip_to, GAP_OLD, r);
		prev = r->skip_to;
	}
	*cursor = prev;
	return n;
}

int gaps_advance(struct gaps *g, const struct gaps_read *r)
{
	size_t need = g->n * 2 + r->n + r->nkept + 2, n, i = 0, h = 0, m = 0;
	struct gap *tmp = malloc(need * sizeof(*tmp)), *out = malloc(need * sizeof(*out));
	long long cursor;

	if (!tmp || !out) {
		free(tmp);
		free(out);
		return -ENOMEM;
	}
	n = carry_and_open(g, r, tmp, &cursor);
	/* Kept ids were read, so no range in tmp holds them: merge them in. */
	while (i < n || h < r->nkept) {
		if (h < r->nkept && (i == n || r->kept[h] < tmp[i].lo)) {
			out[m++] = (struct gap){ .lo = r->kept[h],
						 .hi = r->kept[h],
						 .bound = GAP_KEPT,
						 .xid_lo = UINT64_MAX,
						 .xid_hi = 0,
						 .opened_ms = GAP_OLD };
			h++;
		} else {
			out[m++] = tmp[i++];
		}
	}
	free(tmp);
	if (r->snap && snapshot_copy(&g->prev, r->snap) < 0) {
		free(out);
		return -ENOMEM;
	}
	if (!r->snap)
		snapshot_clear(&g->prev);
	while (m > g->max)
		merge_closest(out, &m);
	free(g->v);
	g->v = out;
	g->n = m;
	g->cursor = cursor;
	return 0;
}

long long gaps_ids(const struct gaps *g)
{
	long long total = 0;

	for (size_t i = 0; i < g->n; i++)
		total += g->v[i].hi - g->v[i].lo + 1;
	return total;
}

size_t gaps_kept(const struct gaps *g)
{
	size_t n = 0;

	for (size_t i = 0; i < g->n; i++)
		n += g->v[i].bound == GAP_KEPT;
	return n;
}
