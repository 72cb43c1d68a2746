/* Chaos with queue caps (chaos --caps N): the tenants rows are staged for, and
 * a consumer that frees the lists while keeping what it popped, so the checker
 * still reads every job that arrived, in push order. One queue stays uncapped
 * (--queue-limit Q=0): its jobs are never held and keep id order. */
#ifndef STAGEDRAIN_CHAOS_CAPS_H
#define STAGEDRAIN_CHAOS_CAPS_H

#include "common.h"

/* The index in queues[] of the queue --queue-limit leaves uncapped. */
#define CAPS_UNCAPPED 3

/* Shared with the forked consumer (it lives in the run's shared mapping). */
struct caps_stats {
	_Atomic int pace;       /* 1: at most rate jobs/s, so held backlogs build; 0: as fast as it can */
	_Atomic int finish;     /* exit once every queue list is empty */
	_Atomic long long rate; /* jobs/s while pacing */
	_Atomic long long popped;
	_Atomic long long longest; /* the longest capped list seen (sampled every 10 ms) */
};

/* A row's tenant as an SQL literal: skewed (7 rows in 10 are one tenant's),
 * with a few small tenants and NULL, the shared one. */
const char *caps_tenant(unsigned long long *rng);
/* The consumer's body (a forked child): moves jobs from the right of each
 * queue:<q> to the left of chaos:popped:<q>, round-robin over the queues,
 * riding out Redis restarts; 0 when told to finish and the lists are empty. */
int caps_consume(struct env *e, struct caps_stats *st);
/* After the consumer finished: each chaos:popped:<q> becomes queue:<q> again
 * (same orientation, newest first), so the checker reads the whole push order.
 * -1 if a queue list still holds jobs or Redis fails. */
int caps_restore(struct env *e);

#endif
