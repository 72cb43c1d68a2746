/*
 * Held rows and today's routes (release.c's part for a route change between
 * starts, docs/topologies.md): which target a held queue's key names, or
 * none now; rows whose route is gone; where a released row goes by today's
 * rules; and keys whose rule rows now go to another target, which new rows
 * of their queue wait behind, so a queue keeps its order across the change.
 */
#ifndef STAGEDRAIN_RELEASE_ROUTES_H
#define STAGEDRAIN_RELEASE_ROUTES_H

#include <stddef.h>

#include "batch.h"
#include "fmacros.h"
#include "job.h"
#include "release.h"

/* A key's target this relay does not have: its route was removed or renamed
 * (the relay knows targets by name). Its Redis may hold a late copy of a
 * push that timed out, so its rows go nowhere else unasked: they wait,
 * counted, for the target to come back or for `stagedrain held`. */
#define RELEASE_KEY_GONE ((size_t)-1)

/* The target index a rounds key names, or RELEASE_KEY_GONE. */
size_t release_key_target(const struct release *rl, const char *key, size_t len);
/* Moves the held rows whose route column names a route that is gone to the
 * dead table (warned of); one that cannot leaves them held. 0 or -ENOMEM. */
int release_dead_gone_routes(struct release *rl, struct pg_source *pg) SD_MUSTCHECK;
/* Rows held for targets that are gone, in all. */
long long release_gone_held(const struct release *rl);
/* Warns of each queue held for a target that is gone, when their number changed. */
void release_warn_gone(struct release *rl);
/* Where a released row goes now: its route column's target, else today's
 * rule for its queue; ROUTES_NONE when its route is gone. */
size_t release_row_target(const struct release *rl, const struct job_row *row);
/* Before a batch: the keys holding rows their queue's rule sent to a target
 * that today's rule does not name (a target still configured). 0 or -ENOMEM. */
int release_find_moved(struct release *rl) SD_MUSTCHECK;
/* The moved key j must wait behind (same queue, whose rows go where j
 * goes), or -1. */
long release_behind_moved(struct release *rl, const struct batch_job *j);

#endif
