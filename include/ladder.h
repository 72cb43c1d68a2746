/* The drain's ladder (enum drain_state, enum target_state): leading, then
 * bringing each target to READY, restoring the sessions, the lock, each
 * epoch and each fence on the way, and falling back to the rung a fault
 * requires. drain.c runs the batches on top of it. */
#ifndef STAGEDRAIN_LADDER_H
#define STAGEDRAIN_LADDER_H

#include <stdbool.h>

#include "drain.h"

/* After a fault: the target back down to the rung that must be climbed again, never up. */
void ladder_fall_back(struct target *t, enum target_state to);
/* Sleeps in short slices so a stop signal is honoured within 50 ms. */
void ladder_nap(struct drain *d, int ms);
/* Any Postgres fault: end the transaction (or the session, if it is gone) and wait. */
void ladder_pg_trouble(struct drain *d, const char *what);
/* Any fault rc of target t's Redis: log it; t waits out its back-off while
 * the other targets go on. */
void ladder_redis_trouble(struct drain *d, struct target *t, int rc, const char *what);
/* Milliseconds until the first target's back-off ends (1 at least). */
int ladder_next_try_ms(const struct drain *d);
/* Leads and brings the targets up: true when a batch may go (one target
 * at least is READY), false to try again (the fault was logged and, when
 * no target is up, waited out). */
bool ladder_ensure_ready(struct drain *d);

#endif
