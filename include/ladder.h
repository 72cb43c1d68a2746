/* The drain's ladder (enum drain_state): climbing to READY, restoring the
 * sessions, the lock, the epoch and the fence on the way, and falling back
 * to the rung a fault requires. drain.c runs the batches on top of it. */
#ifndef STAGEDRAIN_LADDER_H
#define STAGEDRAIN_LADDER_H

#include <stdbool.h>

#include "drain.h"

/* After a fault: back down to the rung that must be climbed again, never up. */
void ladder_fall_back(struct drain *d, enum drain_state to);
/* Sleeps in short slices so a stop signal is honoured within 50 ms. */
void ladder_nap(struct drain *d, int ms);
/* Any Postgres fault: end the transaction (or the session, if it is gone) and wait. */
void ladder_pg_trouble(struct drain *d, const char *what);
/* Any Redis fault rc: log it and wait. */
void ladder_redis_trouble(struct drain *d, int rc, const char *what);
/* Climbs to READY: true when a batch may push, false to try again (the
 * fault was logged and waited out). */
bool ladder_ensure_ready(struct drain *d);

#endif
