/*
 * A route change across a leader's crash (ladder.h, sql/008_leader.sql).
 * A leader killed before its commit left the rows it pushed staged, named
 * by the fence of the Redis they went to. A successor that routes as it did
 * sends them to that same target, which reads its fence first; one that
 * routes otherwise could push them to another target before that fence is
 * read. So each leader records a digest of its routes, and whether it has
 * settled every target's fence since it led: a successor whose digest is
 * not the recorded one, or finds it unsettled (an earlier change's rows may
 * still be in an unread fence), holds the rows staged before it led until
 * every target of its own has settled its fence.
 */
#include "fmacros.h"

#include <stdio.h>
#include <string.h>

#include "ladder.h"
#include "log.h"

/* FNV-1a, 64 bits, of n bytes on top of h. */
static unsigned long long fnv(unsigned long long h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

static unsigned long long fnv_str(unsigned long long h, const char *s)
{
	return fnv(h, s ? s : "", s ? strlen(s) + 1 : 1);
}

/* A digest of the targets (name, Redis, format, key prefix) and the rules,
 * as 16 hex digits: equal for two relays that route every row alike. */
static void routes_digest(const struct routes *r, char *out, size_t len)
{
	unsigned long long h = 0xcbf29ce484222325ULL;
	char where[300];

	for (size_t i = 0; i < r->n; i++) {
		const struct config *c = r->t[i].cfg;
		int format = (int)c->format;
		redis_target_describe(&c->redis, where, sizeof(where));
		h = fnv_str(fnv_str(fnv_str(h, r->t[i].name), where), c->key_prefix);
		h = fnv(h, &format, sizeof(format));
	}
	for (size_t i = 0; i < r->nrules; i++) {
		h = fnv(fnv_str(h, r->rules[i].pattern), &r->rules[i].target, sizeof(r->rules[i].target));
	}
	snprintf(out, len, "%016llx", h);
}

int ladder_hold_if_rerouted(struct ladder *l)
{
	bool same = false, recorded = false;
	int rc;

	l->hold_through = 0;
	l->routes_unsettled = false;
	routes_digest(&l->cfg->routes, l->routes, sizeof(l->routes));
	if ((rc = pg_source_note_routes(l->pg, l->routes, &same, &recorded)) < 0)
		return rc;
	if (!recorded && l->nt > 1)
		log_warn(
			"staged_jobs_leader is missing or the relay's role may not write it: a route changed across a "
			"leader's crash goes unseen; run `stagedrain migrate` (migration 008), then sql/roles.sql again",
			NULL);
	if (same)
		return 0;
	l->routes_unsettled = true;
	if ((rc = pg_source_staged_top(l->pg, &l->hold_through)) == 0 && l->hold_through > 0 && l->nt > 1)
		log_info(
			"the last leader routed otherwise, or had not settled every fence: rows staged before this one "
			"led wait until every target has settled its fence",
			LOGF(F_INT("through_id", l->hold_through)));
	return rc;
}

/* Outside a batch's transaction: a successor routing alike need hold
 * nothing once this leader has read every fence. A failed write only
 * makes a successor hold what it need not: said, and tried again. */
void ladder_note_settled(struct ladder *l)
{
	if (!l->routes_unsettled || !ladder_all_settled(l) || pg_source_broken(l->pg))
		return;
	if (pg_source_routes_settled(l->pg, l->routes) < 0) {
		log_warn("could not record that every fence is settled; will retry",
			 LOGF(F_STR("error", l->pg->errstr)));
		return;
	}
	l->routes_unsettled = false;
}
