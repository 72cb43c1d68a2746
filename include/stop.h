/* The stop signal as the batch sees it: when it was first seen, and the deadline it puts on the work in flight. */
#ifndef STAGEDRAIN_STOP_H
#define STAGEDRAIN_STOP_H

#include <signal.h>
#include <stdbool.h>

#include "fmacros.h"

/*
 * After SIGTERM or SIGINT the batch in flight may take --stop-timeout more
 * to finish; past that every wait inside it gives up (redis_io closes its
 * socket, pg_source cancels its statement), and the fence decides what the
 * next leader pushes. The signal handler only sets the flag; the time is
 * taken by whichever wait first sees it, within one poll slice.
 */
struct stop {
	volatile sig_atomic_t *flag; /* set by the signal handler; NULL: never */
	int grace_ms;                /* --stop-timeout */
	long long seen_ms;           /* monotonic ms the flag was first seen set; 0: not yet */
};

/* Waits that watch a stop wake this often to look at the flag. */
#define STOP_SLICE_MS 50

void stop_init(struct stop *s, volatile sig_atomic_t *flag, int grace_ms);
/* True once the flag is set; notes when it was first seen. s may be NULL. */
bool stop_seen(struct stop *s);
/* When the work in flight must end: LLONG_MAX until a stop is seen (and for s NULL). */
long long stop_deadline(struct stop *s);
/* True once a stop was seen and its deadline has passed. */
bool stop_overdue(struct stop *s);

#endif
