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

struct routes_chaos {
	struct redis_server redis[ROUTES_EXTRA];
	char flag[ROUTES_EXTRA][160]; /* each target's --route value */
	int restarts[ROUTES_EXTRA];
};

/* Starts the two Redis in the run's directory; 0 or -1 (said why). */
int routes_start(struct routes_chaos *rc, struct env *e) SD_MUSTCHECK;
/* Appends "--route VALUE" for each target to args at *n. */
void routes_args(const struct routes_chaos *rc, const char **args, size_t *n);
/* SIGKILLs target k's Redis, leaves it down up to a second, starts it again
 * on the same port with the same data; 0 or -1. */
int routes_restart(struct routes_chaos *rc, int k, unsigned long long *rng) SD_MUSTCHECK;
/* Loads every job of the targets' Redis into chaos_seen too (seen_load's),
 * adding to *entries; with each routed queue's Redis in e->queue_redis for
 * the checker. 0 or -1. */
int routes_seen_load(struct routes_chaos *rc, struct env *e, long long *entries) SD_MUSTCHECK;
void routes_stop(struct routes_chaos *rc, struct env *e);

#endif
