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

int release_find_moved(struct release *rl)
{
	const struct rounds *r = &rl->rounds;

	rl->nmoved = 0;
	if (rl->cfg->routes.n <= 1) /* one target: every rule names it */
		return 0;
	for (size_t i = 0; i < r->nq; i++) {
		const char *target, *queue;
		size_t tlen, qlen, t = release_key_target(rl, r->q[i].name, r->q[i].len);
		if (!r->q[i].by_rule || r->q[i].pend.held == 0 || t == RELEASE_KEY_GONE)
			continue;
		rounds_key_split(r->q[i].name, r->q[i].len, &target, &tlen, &queue, &qlen);
		if (rule_target(rl, queue, qlen) == t)
			continue;
		if (buf_grow_array((void **)&rl->moved, &rl->capmoved, rl->nmoved + 1, sizeof(*rl->moved)) < 0)
			return -ENOMEM;
		rl->moved[rl->nmoved++] = i;
	}
	return 0;
}

long release_behind_moved(struct release *rl, const struct batch_job *j)
{
	for (size_t m = 0; m < rl->nmoved; m++) {
		const struct rounds_queue *q = &rl->rounds.q[rl->moved[m]];
		const char *target, *queue;
		size_t tlen, qlen;
		rounds_key_split(q->name, q->len, &target, &tlen, &queue, &qlen);
		if (qlen == j->queue_len && memcmp(queue, j->queue, qlen) == 0 &&
		    rule_target(rl, queue, qlen) == j->target)
			return (long)rl->moved[m];
	}
	return -1;
}
