/* Chaos with routes (chaos --routes): two more Redis (tests/support/redis_server.h: AOF fsynced at each
 * write, like the test Redis), and the relays route two of the four queues
 * to them, one each; the killer restarts any of the three Redis. The checker
 * reads every target's lists. */
#ifndef STAGEDRAIN_CHAOS_ROUTES_H
#define STAGEDRAIN_CHAOS_ROUTES_H

#include "common.h"
#include "support/redis_server.h"

/* Targets beyond the default one; queues[ROUTES_FIRST_QUEUE + k] goes to target k. */
#define ROUTES_EXTRA 2
#define ROUTES_FIRST_QUEUE 2

/*
 * The route sets a relay may be started with. Route changes between
 * restarts: some restarts (chaos.c) start a relay without r2 (its queue then
 * goes to the default target; rows held for r2 stay held until a relay with
 * r2 leads) or with r3, a route-column-only route to r1's Redis that no row
 * names; a later restart brings the normal set back, and the final drain
 * always runs with it.
 */
enum routes_set { ROUTES_NORMAL, ROUTES_NO_R2, ROUTES_EXTRA_R3, ROUTES_NSETS };

struct routes_chaos {
	struct redis_server redis[ROUTES_EXTRA];
	char flag[ROUTES_EXTRA][160]; /* each target's --route value */
	char flag_r3[160];            /* "r3 - --redis-url <r1's>" */
	int restarts[ROUTES_EXTRA];
};

/* What a set does, for the events log. */
const char *routes_set_text(enum routes_set set);
/* The event kind of a start with this set (chaos_events.kind). */
const char *routes_set_kind(enum routes_set set);
/* Whether relays with this set send r2's queue to r2. */
bool routes_set_has_r2(enum routes_set set);

/* Starts the two Redis in the run's directory; 0 or -1 (said why). */
int routes_start(struct routes_chaos *rc, struct env *e) SD_MUSTCHECK;
/* Adds "--route VALUE" to a for each route of the set. */
void routes_args(const struct routes_chaos *rc, enum routes_set set, struct relay_argv *a);
/* Notes in the checker's chaos_routed that r2's queue may be on the default
 * target (once a relay without r2 started); 0 or -1. */
int routes_note_removed(struct env *e) SD_MUSTCHECK;
/* SIGKILLs target k's Redis; routes_revive starts it again on the same port
 * with the same data (0 or -1) and counts the restart. */
void routes_kill(struct routes_chaos *rc, int k);
int routes_revive(struct routes_chaos *rc, int k) SD_MUSTCHECK;
/* Both, with the Redis down up to a second in between; 0 or -1. */
int routes_restart(struct routes_chaos *rc, int k, unsigned long long *rng) SD_MUSTCHECK;
/* Loads every job of the targets' Redis into chaos_seen too (seen_load's),
 * adding to *entries; with each routed queue's Redis in e->queue_redis for
 * the checker. 0 or -1. */
int routes_seen_load(struct routes_chaos *rc, struct env *e, long long *entries) SD_MUSTCHECK;
void routes_stop(struct routes_chaos *rc, struct env *e);

#endif
