/* Transaction snapshots and the xids that ended between two: see include/snapshot.h. */
#include "fmacros.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "snapshot.h"

void snapshot_init(struct snapshot *s)
{
	memset(s, 0, sizeof(*s));
}

void snapshot_clear(struct snapshot *s)
{
	s->xmin = s->xmax = 0;
	s->n = 0;
}

void snapshot_free(struct snapshot *s)
{
	if (!s)
		return;
	free(s->xip);
	snapshot_init(s);
}

/* One unsigned decimal xid, ended by stop; *at moves past it. */
static int parse_xid(const char **at, char stop, uint64_t *xid)
{
	const char *p = *at;
	uint64_t v = 0;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (*p != stop)
		return -EINVAL;
	*xid = v;
	*at = *p ? p + 1 : p;
	return 0;
}

static int by_xid(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int parse_xip(struct snapshot *s, const char *p)
{
	bool sorted = true;
	int rc = 0;

	while (rc == 0 && *p) {
		const char *comma = strchr(p, ',');
		uint64_t xid;
		if ((rc = buf_grow_array((void **)&s->xip, &s->cap, s->n + 1, sizeof(*s->xip))) < 0)
			break;
		if ((rc = parse_xid(&p, comma ? ',' : '\0', &xid)) < 0)
			break;
		if (comma && !*p)
			rc = -EINVAL; /* a trailing comma */
		sorted = sorted && (s->n == 0 || s->xip[s->n - 1] < xid);
		s->xip[s->n++] = xid;
	}
	/* Postgres sorts the list; a search relies on it, so make sure. */
	if (rc == 0 && !sorted)
		qsort(s->xip, s->n, sizeof(*s->xip), by_xid);
	return rc;
}

int snapshot_parse(struct snapshot *s, const char *text)
{
	const char *p = text;
	int rc;

	snapshot_clear(s);
	if ((rc = parse_xid(&p, ':', &s->xmin)) == 0 && (rc = parse_xid(&p, ':', &s->xmax)) == 0)
		rc = parse_xip(s, p);
	if (rc == 0 && s->xmin > s->xmax)
		rc = -EINVAL;
	if (rc < 0)
		snapshot_clear(s);
	return rc;
}

int snapshot_copy(struct snapshot *dst, const struct snapshot *src)
{
	if (buf_grow_array((void **)&dst->xip, &dst->cap, src->n, sizeof(*dst->xip)) < 0)
		return -ENOMEM;
	if (src->n)
		memcpy(dst->xip, src->xip, src->n * sizeof(*dst->xip));
	dst->n = src->n;
	dst->xmin = src->xmin;
	dst->xmax = src->xmax;
	return 0;
}

/* The first index of v (ascending) whose xid is at least x. */
static size_t lower_bound(const uint64_t *v, size_t n, uint64_t x)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool running(const struct snapshot *s, uint64_t xid)
{
	size_t i = lower_bound(s->xip, s->n, xid);

	return xid >= s->xmax || (i < s->n && s->xip[i] == xid);
}

int snapshot_ended_init(struct snapshot_ended *e, const struct snapshot *prev, const struct snapshot *cur)
{
	*e = (struct snapshot_ended){ .prev = prev, .cur = cur };
	if (prev->n == 0)
		return 0;
	if (!(e->xids = malloc(prev->n * sizeof(*e->xids))))
		return -ENOMEM;
	for (size_t i = 0; i < prev->n; i++)
		if (!running(cur, prev->xip[i]))
			e->xids[e->n++] = prev->xip[i];
	return 0;
}

/*
 * Two parts: prev's xip that ended (listed), and the xids from prev's xmax
 * to cur's xmax that cur does not show running: that range holds an ended
 * one unless cur's xip covers it all.
 */
bool snapshot_ended_within(const struct snapshot_ended *e, uint64_t lo, uint64_t hi)
{
	size_t i = lower_bound(e->xids, e->n, lo);
	uint64_t from = lo > e->prev->xmax ? lo : e->prev->xmax, to = hi < e->cur->xmax ? hi : e->cur->xmax;

	if (i < e->n && e->xids[i] < hi)
		return true;
	if (from >= to)
		return false;
	return lower_bound(e->cur->xip, e->cur->n, to) - lower_bound(e->cur->xip, e->cur->n, from) < to - from;
}

void snapshot_ended_free(struct snapshot_ended *e)
{
	if (!e)
		return;
	free(e->xids);
	e->xids = NULL;
	e->n = 0;
}
