/* Capped exponential back-off with full jitter, for reconnect loops. */
#ifndef STAGEDRAIN_BACKOFF_H
#define STAGEDRAIN_BACKOFF_H

#include "fmacros.h"

struct backoff {
	int base_ms;
	int cap_ms;
	int attempt;
	unsigned int seed;
};

void backoff_init(struct backoff *b, int base_ms, int cap_ms, unsigned int seed);
/* The next delay: uniform in [ceiling/2, ceiling], ceiling doubling up to cap. */
int backoff_next(struct backoff *b);
/* A wait uniform in [ms/2, ms], from the same jitter: for a fixed-period
 * retry (a probe) that relays started together do not make in lock-step. */
int backoff_jitter(struct backoff *b, int ms);
/* After a success the next failure starts from base again. */
void backoff_reset(struct backoff *b);

#endif
