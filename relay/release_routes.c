/* Held rows and today's routes: see include/release.h. */
#include "fmacros.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "log.h"
#include "release.h"
#include "routes.h"

size_t release_key_target(const struct release *rl, const char *key, size_t len)
{
	const char *target, *queue;
	size_t tlen, qlen;

	rounds_key_split(key, len, &target, &tlen, &queue, &qlen);
	if (!target)
		return 0;
	for (size_t i = 1; i < rl->nts; i++)
		if (strlen(rl->ts[i].name) == tlen && memcmp(rl->ts[i].name, target, tlen) == 0)
			return i;
	return RELEASE_KEY_GONE;
}

/* Held rows whose route column names a route that is gone are dead, held
 * or not (as drain_add_row does a fresh one's). */
int release_dead_gone_routes(struct release *rl, struct pg_source *pg)
{
	const char **names = malloc((rl->nts + 1) * sizeof(*names));
	size_t n = 0;
	long long moved = 0;
	int rc;

	if (!names)
		return -ENOMEM;
	names[n++] = "default";
	for (size_t i = 1; i < rl->nts; i++)
		names[n++] = rl->ts[i].name;
	rc = pg_held_dead_gone_routes(&rl->held, pg, names, n, &moved);
	free(names);
	/* Not moved (this role may not write the dead table): they stay held
	 * for their gone target, counted and warned of, as the drain goes on. */
	if (rc == -EIO)
		log_warn("could not dead-letter held rows whose route is gone; they stay held",
			 LOGF(F_STR("error", pg->errstr)));
	if (rc == -ENOMEM)
		return rc;
	if (moved)
		log_warn("held rows name a route this relay does not have; moved them to staged_jobs_dead",
			 LOGF(F_INT("rows", moved)));
	return 0;
}

/* Rows held for targets that are gone, in all. */
long long release_gone_held(const struct release *rl)
{
	long long n = 0;

	for (size_t i = 0; i < rl->rounds.nq; i++)
		if (release_key_target(rl, rl->rounds.q[i].name, rl->rounds.q[i].len) == RELEASE_KEY_GONE)
			n += rl->rounds.q[i].now.held;
	return n;
}

/* Warns of each queue held for a target that is gone, whenever their
 * number changed. */
void release_warn_gone(struct release *rl)
{
	long long all = release_gone_held(rl);

	for (size_t i = 0; all != rl->gone_held && i < rl->rounds.nq; i++) {
		const struct rounds_queue *q = &rl->rounds.q[i];
		const char *target, *queue;
		size_t tlen, qlen;
		if (!q->now.held || release_key_target(rl, q->name, q->len) != RELEASE_KEY_GONE)
			continue;
		rounds_key_split(q->name, q->len, &target, &tlen, &queue, &qlen);
		log_warn("jobs wait held for a target this relay no longer has; they stay held until it is"
			 " configured again, or `stagedrain held release|dead --target` moves them",
			 LOGF(F_STR("target", target), F_STR("queue", queue), F_INT("jobs_held", q->now.held)));
	}
	rl->gone_held = all;
}

/* The target today's rules give queue (no route column). */
static size_t rule_target(const struct release *rl, const char *queue, size_t len)
{
	const struct routes *r = &rl->cfg->routes;

	return r->n > 1 ? routes_find(r, queue, len, NULL, 0) : 0;
}

/* Where a released row goes now: the target its route column names, else
 * the one today's rules pick for its queue; ROUTES_NONE if its route is gone. */
size_t release_row_target(const struct release *rl, const struct job_row *row)
{
	if (row->route && row->route_len > 0)
		return routes_find(&rl->cfg->routes, row->queue, row->queue_len, row->route, row->route_len);
	return rule_target(rl, row->queue, row->queue_len);
}

static int cmp_order(const void *a, const void *b)
{
	const struct release_order *x = a, *y = b;
	int c = rounds_cmp_name(x->queue, x->qlen, y->queue, y->qlen);

	return c ? c : (x->first > y->first) - (x->first < y->first);
}

/* Room for the batch's order and a flag per key (new ones clear). */
static int grow_order(struct release *rl, size_t nq)
{
	size_t had = rl->capwaits;

	if (buf_grow_array((void **)&rl->order, &rl->caporder, nq, sizeof(*rl->order)) < 0 ||
	    buf_grow_array((void **)&rl->waits, &rl->capwaits, nq, sizeof(*rl->waits)) < 0)
		return -ENOMEM;
	if (rl->capwaits > had)
		memset(rl->waits + had, 0, (rl->capwaits - had) * sizeof(*rl->waits));
	return 0;
}

int release_order_keys(struct release *rl)
{
	const struct rounds *r = &rl->rounds;

	for (size_t i = 0; i < rl->norder; i++)
		rl->waits[rl->order[i].qi] = false;
	rl->norder = 0;
	if (rl->cfg->routes.n <= 1) /* one target: one key a queue */
		return 0;
	if (grow_order(rl, r->nq) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < r->nq; i++) {
		struct release_order *o = &rl->order[rl->norder];
		const char *target;
		size_t tlen;
		if (!r->q[i].by_rule || r->q[i].pend.held == 0 ||
		    release_key_target(rl, r->q[i].name, r->q[i].len) == RELEASE_KEY_GONE)
			continue;
		rounds_key_split(r->q[i].name, r->q[i].len, &target, &tlen, &o->queue, &o->qlen);
		o->first = r->q[i].first;
		o->qi = i;
		rl->norder++;
	}
	if (rl->norder < 2) /* none, or a key alone: nothing waits */
		return 0;
	qsort(rl->order, rl->norder, sizeof(*rl->order), cmp_order);
	for (size_t k = 1; k < rl->norder; k++)
		if (rounds_cmp_name(rl->order[k].queue, rl->order[k].qlen, rl->order[k - 1].queue,
				    rl->order[k - 1].qlen) == 0)
			rl->waits[rl->order[k].qi] = true;
	return 0;
}

bool release_key_waits(const struct release *rl, size_t qi)
{
	return qi < rl->capwaits && rl->waits[qi];
}

long release_behind(struct release *rl, const struct batch_job *j)
{
	size_t lo = 0, hi = rl->norder;
	const struct release_order *o;

	while (lo < hi) { /* past the last key of j's queue */
		size_t mid = lo + (hi - lo) / 2;
		if (rounds_cmp_name(rl->order[mid].queue, rl->order[mid].qlen, j->queue, j->queue_len) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -1;
	o = &rl->order[lo - 1];
	if (rounds_cmp_name(o->queue, o->qlen, j->queue, j->queue_len) != 0 ||
	    rule_target(rl, o->queue, o->qlen) != j->target)
		return -1;
	/* Its own key is the youngest: the caller's usual way holds it there. */
	if (release_key_target(rl, rl->rounds.q[o->qi].name, rl->rounds.q[o->qi].len) == j->target)
		return -1;
	return (long)o->qi;
}
