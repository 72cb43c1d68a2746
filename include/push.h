/* The push step of a batch: its jobs split by target, each target's part
 * sent to its Redis (appending to the fence of the transaction's earlier
 * pushes there), every reply read, and a part that met keys of the wrong
 * type pushed again without their jobs (kept staged). */
#ifndef STAGEDRAIN_PUSH_H
#define STAGEDRAIN_PUSH_H

#include <stdbool.h>
#include <stddef.h>

#include "batch.h"
#include "fmacros.h"
#include "metrics.h"
#include "release.h"
#include "target.h"

struct push {
	struct target *t; /* borrowed: the targets, t[0] the default one */
	size_t nt;
	struct release *release;   /* borrowed: a kept job that was released is held again */
	struct metrics *metrics;   /* borrowed; NULL: none */
	struct batch_job *scratch; /* target_group's copy, owned */
	size_t capscratch;
};

void push_init(struct push *p, struct target *t, size_t nt, struct release *release, struct metrics *metrics);
void push_free(struct push *p);
/* Sends each target's part of b; the target whose send failed in *failed.
 * 0 or as redis_sink_send. */
int push_send(struct push *p, struct batch *b, struct target **failed) SD_MUSTCHECK;
/* Reads every reply in flight: 0, or the first failure's code with its
 * target in *failed. With first (a transaction's first batch), a part that
 * met keys of the wrong type keeps their jobs in b and is pushed again. */
int push_replies(struct push *p, struct batch *b, struct target **failed, bool first) SD_MUSTCHECK;
/* A transaction's first batch: every part sent, so their Redis run them at
 * once, then every reply read. On a failure *failed is the first target
 * whose push failed; the others that acknowledged theirs have their fences
 * name them. */
int push_first(struct push *p, struct batch *b, struct target **failed) SD_MUSTCHECK;
/* The transaction rolled back: targets that acknowledged a push of it fall
 * back to to (NEED_FENCE), so the rows their fences name are deleted before
 * they push again. */
void push_undo(struct push *p, enum target_state to);
/* Postgres failed while pushes were in flight: their connections go (a
 * reply would be read as another's); whether they landed, their fences say. */
void push_drop_in_flight(struct push *p);
/* The transaction committed: each target that pushed counts what it relayed. */
void push_settle(struct push *p);

#endif
