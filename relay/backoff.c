/* Capped exponential back-off with jitter, so relays that lost a server together
 * do not reconnect in lock-step. */
#include "fmacros.h"

#include <stdlib.h>

#include "backoff.h"

void backoff_init(struct backoff *b, int base_ms, int cap_ms, unsigned int seed)
{
	b->base_ms = base_ms > 0 ? base_ms : 1;
	b->cap_ms = cap_ms >= b->base_ms ? cap_ms : b->base_ms;
	b->attempt = 0;
	b->seed = seed;
}

int backoff_jitter(struct backoff *b, int ms)
{
	int half = ms / 2;

	/* Half fixed, half random: never hammers, never waits needlessly long. */
	return ms - half + (half > 0 ? (int)(rand_r(&b->seed) % (unsigned)(half + 1)) : 0);
}

int backoff_next(struct backoff *b)
{
	long ceiling = b->base_ms;

	for (int i = 0; i < b->attempt && ceiling < b->cap_ms; i++)
		ceiling *= 2;
	if (ceiling > b->cap_ms)
		ceiling = b->cap_ms;
	if (b->attempt < 30)
		b->attempt++;
	return backoff_jitter(b, (int)ceiling);
}

void backoff_reset(struct backoff *b)
{
	b->attempt = 0;
}
