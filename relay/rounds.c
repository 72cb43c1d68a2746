/* Fair release's bookkeeping: see include/rounds.h. */
#include "fmacros.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "rounds.h"

#define NONE LLONG_MIN

void rounds_init(struct rounds *r, size_t max_tenants)
{
	memset(r, 0, sizeof(*r));
	r->max_tenants = max_tenants;
}

static void drop_tenants(struct rounds *r)
{
	for (size_t i = 0; i < r->capt; i++)
		if (r->t[i].queue != SIZE_MAX)
			free(r->t[i].name);
	free(r->t);
	r->t = NULL;
	r->nt = r->capt = 0;
	r->ntouched = 0;
}

void rounds_reset(struct rounds *r, long long base)
{
	for (size_t i = 0; i < r->nq; i++)
		free(r->q[i].name);
	r->nq = 0;
	drop_tenants(r);
	r->base = base;
	r->next_first = base;
}

void rounds_free(struct rounds *r)
{
	if (!r)
		return;
	rounds_reset(r, 0);
	free(r->q);
	free(r->by_name);
	free(r->touched);
	rounds_init(r, r->max_tenants);
}

/* ---- queues: stable indices, found through by_name ---- */

int rounds_cmp_name(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	return c ? c : (alen > blen) - (alen < blen);
}

/* Where queue is in by_name, or where it would go; *found says which. */
static size_t find_queue(const struct rounds *r, const char *queue, size_t len, bool *found)
{
	size_t lo = 0, hi = r->nq;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct rounds_queue *q = &r->q[r->by_name[mid]];
		int c = rounds_cmp_name(q->name, q->len, queue, len);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

static int grow_queues(struct rounds *r)
{
	size_t cap = r->capq ? r->capq * 2 : 8;
	struct rounds_queue *q;
	size_t *order;

	if (r->nq < r->capq)
		return 0;
	if (!(q = realloc(r->q, cap * sizeof(*q))))
		return -ENOMEM;
	r->q = q;
	if (!(order = realloc(r->by_name, cap * sizeof(*order))))
		return -ENOMEM;
	r->by_name = order;
	r->capq = cap;
	return 0;
}

/* A queue with nothing held yet: its cursor sits just below base. */
static long add_queue(struct rounds *r, size_t at, const char *queue, size_t len, long cap)
{
	struct rounds_queue *q;

	if (grow_queues(r) < 0)
		return -ENOMEM;
	q = &r->q[r->nq];
	memset(q, 0, sizeof(*q));
	if (!(q->name = malloc(len + 1)))
		return -ENOMEM;
	memcpy(q->name, queue, len);
	q->name[len] = '\0';
	q->len = len;
	q->cap = cap;
	q->now = (struct rounds_pos){ .held = 0, .round = r->base, .hid = 0, .top = r->base - 1 };
	q->pend = q->now;
	memmove(&r->by_name[at + 1], &r->by_name[at], (r->nq - at) * sizeof(*r->by_name));
	r->by_name[at] = r->nq;
	return (long)r->nq++;
}

void rounds_by_rule(struct rounds *r, size_t qi, long long first)
{
	struct rounds_queue *q = &r->q[qi];

	if (!q->by_rule || first < q->first)
		q->first = first;
	q->by_rule = true;
	/* base is 1 when the hold sequence could not be read: still above. */
	if (first >= r->next_first)
		r->next_first = first + 1;
}

long rounds_find(const struct rounds *r, const char *queue, size_t len)
{
	bool found;
	size_t at = find_queue(r, queue, len, &found);

	return found ? (long)r->by_name[at] : -1;
}

long rounds_queue(struct rounds *r, const char *queue, size_t len, long cap)
{
	bool found;
	size_t at = find_queue(r, queue, len, &found);

	if (found) {
		r->q[r->by_name[at]].cap = cap;
		return (long)r->by_name[at];
	}
	if (r->nq >= ROUNDS_MAX_QUEUES)
		return -ENOSPC;
	return add_queue(r, at, queue, len, cap);
}

/* ---- tenants: (queue, name) -> round of the last held job ---- */

static unsigned hash_tenant(size_t queue, const char *name, size_t len)
{
	uint32_t h = 2166136261u ^ (uint32_t)queue;

	h = (h ^ (name ? 1u : 0u)) * 16777619u;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)name[i]) * 16777619u;
	return h;
}

static bool same_tenant(const struct rounds_tenant *t, size_t queue, const char *name, size_t len)
{
	if (t->queue != queue || !t->name != !name)
		return false;
	return !name || (t->len == len && memcmp(t->name, name, len) == 0);
}

/* The slot holding the tenant, or the free slot where it would go. */
static size_t probe(const struct rounds *r, size_t queue, const char *name, size_t len, unsigned h)
{
	size_t i = h & (r->capt - 1);

	while (r->t[i].queue != SIZE_MAX && !(r->t[i].hash == h && same_tenant(&r->t[i], queue, name, len)))
		i = (i + 1) & (r->capt - 1);
	return i;
}

/* A tenant whose jobs are all released (its last round is below the
 * cursor's) has nothing to keep, unless this batch touched it. */
static bool stale(const struct rounds *r, const struct rounds_tenant *t)
{
	return !t->touched && (t->last == NONE || t->last < r->q[t->queue].now.round);
}

/* Rebuilds the table with room for need entries, dropping stale tenants. */
static int rehash(struct rounds *r, size_t need)
{
	struct rounds_tenant *old = r->t;
	size_t oldcap = r->capt, cap = 64;

	while (cap < need * 2)
		cap *= 2;
	if (!(r->t = malloc(cap * sizeof(*r->t)))) {
		r->t = old;
		return -ENOMEM;
	}
	for (size_t i = 0; i < cap; i++)
		r->t[i].queue = SIZE_MAX;
	r->capt = cap;
	r->nt = 0;
	r->ntouched = 0;
	for (size_t i = 0; i < oldcap; i++) {
		struct rounds_tenant *t = &old[i];
		size_t at;
		if (t->queue == SIZE_MAX)
			continue;
		if (stale(r, t)) {
			free(t->name);
			continue;
		}
		at = probe(r, t->queue, t->name, t->len, t->hash);
		r->t[at] = *t;
		r->nt++;
		if (t->touched)
			r->touched[r->ntouched++] = at;
	}
	free(old);
	return 0;
}

/* The tenant's slot, added if there is room: *at is SIZE_MAX when the table
 * is at max_tenants (the caller puts the job at the end of the queue). */
static int tenant_slot(struct rounds *r, size_t queue, const char *name, size_t len, size_t *at)
{
	unsigned h = hash_tenant(queue, name, len);
	struct rounds_tenant *t;

	if ((r->nt + 1) * 4 > r->capt * 3 && rehash(r, r->nt + 1 > r->nt * 2 ? r->nt + 1 : r->nt * 2) < 0)
		return -ENOMEM;
	*at = probe(r, queue, name, len, h);
	t = &r->t[*at];
	if (t->queue != SIZE_MAX)
		return 0;
	/* Full: forget the tenants released since, at most once per commit. */
	if (r->nt >= r->max_tenants && r->swept != r->commits) {
		r->swept = r->commits;
		if (rehash(r, r->nt) < 0)
			return -ENOMEM;
		*at = probe(r, queue, name, len, h);
		t = &r->t[*at];
	}
	if (r->nt >= r->max_tenants) {
		*at = SIZE_MAX;
		return 0;
	}
	t->name = NULL;
	if (name && !(t->name = malloc(len ? len : 1)))
		return -ENOMEM;
	if (name)
		memcpy(t->name, name, len);
	t->queue = queue;
	t->len = name ? len : 0;
	t->hash = h;
	t->last = t->pend = NONE;
	t->touched = false;
	r->nt++;
	return 0;
}

int rounds_load(struct rounds *r, const char *queue, size_t qlen, const char *tenant, size_t tlen, long long count,
		long long min_round, long long max_round)
{
	bool found;
	size_t at = find_queue(r, queue, qlen, &found), ti;
	long qi = found ? (long)r->by_name[at] : add_queue(r, at, queue, qlen, 0);
	struct rounds_queue *q;

	if (qi < 0)
		return (int)qi;
	q = &r->q[qi];
	if (q->now.held == 0 || min_round < q->now.round)
		q->now.round = min_round; /* hid 0: the cursor is just below that round */
	if (q->now.held == 0 || max_round > q->now.top)
		q->now.top = max_round;
	q->now.held += count;
	q->pend = q->now;
	if (tenant_slot(r, (size_t)qi, tenant, tlen, &ti) < 0)
		return -ENOMEM;
	if (ti != SIZE_MAX)
		r->t[ti].last = r->t[ti].pend = max_round;
	return 0;
}

void rounds_begin(struct rounds *r)
{
	for (size_t i = 0; i < r->nq; i++) {
		r->q[i].pend = r->q[i].now;
		r->q[i].room = 0;
		r->q[i].nheld = r->q[i].released = r->q[i].waited_us = 0;
	}
	for (size_t i = 0; i < r->ntouched; i++)
		r->t[r->touched[i]].touched = false;
	r->ntouched = 0;
}

bool rounds_admit(struct rounds *r, size_t qi)
{
	struct rounds_queue *q = &r->q[qi];

	if (q->pend.held > 0)
		return false;
	if (q->cap == 0)
		return true;
	if (q->room <= 0)
		return false;
	q->room--;
	return true;
}

int rounds_hold(struct rounds *r, size_t qi, const char *tenant, size_t tlen, long long *round)
{
	struct rounds_queue *q = &r->q[qi];
	struct rounds_tenant *t;
	long long last;
	size_t at;

	if (buf_grow_array((void **)&r->touched, &r->captouched, r->ntouched + 1, sizeof(*r->touched)) < 0 ||
	    tenant_slot(r, qi, tenant, tlen, &at) < 0)
		return -ENOMEM;
	if (at == SIZE_MAX) {
		*round = q->pend.top + 1 > q->pend.round ? q->pend.top + 1 : q->pend.round;
	} else {
		t = &r->t[at];
		last = t->touched ? t->pend : t->last;
		*round = last != NONE && last + 1 > q->pend.round ? last + 1 : q->pend.round;
		t->pend = *round;
		if (!t->touched)
			r->touched[r->ntouched++] = at;
		t->touched = true;
	}
	if (*round > q->pend.top)
		q->pend.top = *round;
	/* Begins holding: its rows are younger than any key's held so far. A
	 * batch rolled back leaves it with nothing held, where first is unread. */
	if (q->now.held == 0 && q->pend.held == 0)
		q->first = r->next_first++;
	q->pend.held++;
	q->nheld++;
	return 0;
}

void rounds_released(struct rounds *r, size_t qi, long long round, long long hid)
{
	struct rounds_queue *q = &r->q[qi];

	q->pend.round = round;
	q->pend.hid = hid;
	q->pend.held--;
	q->released++;
	if (q->room > 0)
		q->room--;
}

void rounds_unrelease(struct rounds *r, size_t qi, long long n, long long retry_ms)
{
	struct rounds_queue *q = &r->q[qi];

	q->pend.round = q->now.round;
	q->pend.hid = q->now.hid;
	q->pend.held += n;
	q->released -= n;
	q->retry_ms = retry_ms;
}

void rounds_commit(struct rounds *r)
{
	for (size_t i = 0; i < r->nq; i++)
		r->q[i].now = r->q[i].pend;
	for (size_t i = 0; i < r->ntouched; i++) {
		struct rounds_tenant *t = &r->t[r->touched[i]];
		t->last = t->pend;
		t->touched = false;
	}
	r->ntouched = 0;
	r->commits++;
}

long long rounds_held(const struct rounds *r)
{
	long long n = 0;

	for (size_t i = 0; i < r->nq; i++)
		n += r->q[i].now.held;
	return n;
}

int rounds_key(struct buf *key, const char *target, size_t tlen, const char *queue, size_t qlen)
{
	int rc = 0;

	buf_reset(key);
	if (target && ((rc = buf_append(key, target, tlen)) < 0 || (rc = buf_append(key, "", 1)) < 0))
		return rc;
	return buf_append(key, queue, qlen);
}

void rounds_key_split(const char *key, size_t len, const char **target, size_t *tlen, const char **queue, size_t *qlen)
{
	const char *nul = memchr(key, '\0', len);

	*target = nul ? key : NULL;
	*tlen = nul ? (size_t)(nul - key) : 0;
	*queue = nul ? nul + 1 : key;
	*qlen = nul ? len - *tlen - 1 : len;
}
