/* What a batch's failed step does: roll back, blame the side that failed
 * (the ladder falls back and waits), narrow a batch Redis refuses, and at
 * a stop say where the batch's rows are. Each returns the code the batch
 * ends with. */
#ifndef STAGEDRAIN_FAULT_H
#define STAGEDRAIN_FAULT_H

#include <stdbool.h>
#include <stddef.h>

#include "batch.h"
#include "ladder.h"
#include "narrow.h"
#include "push.h"

struct fault {
	struct ladder *ladder; /* borrowed, as the rest: its pg, targets, release, stop */
	struct push *push;
	struct narrow *narrow;
	const struct batch *batch;
};

void fault_init(struct fault *f, struct ladder *l, struct push *p, struct narrow *n, const struct batch *b);
/* Whatever went wrong after the read and before the push (rc: build_batch's). */
int fault_build(struct fault *f, int rc);
/* Target t's push failed (rc, as redis_sink_push's) with nrows rows in the batch. */
int fault_push(struct fault *f, struct target *t, int rc, size_t nrows);
/* The delete or the COMMIT after acknowledged pushes failed (or with
 * epoch_lost, a read while a push was in flight, whose target's connection
 * was closed). */
int fault_commit(struct fault *f, bool epoch_lost);
/* A read or a delete of a pipelined transaction failed: a push still in
 * flight may land or not, so its connection goes (its reply would be read
 * as another's) and so does the epoch. */
int fault_txn_pg(struct fault *f, bool in_flight);
/* A stop signal came before the push: roll back (or commit what
 * hold_only held) and say where the rows are. */
int fault_stopped(struct fault *f);

#endif
