/* The watcher's look, every few rounds, at whether each target's workers read where it pushes (readers.h). */
#ifndef STAGEDRAIN_WATCH_READERS_H
#define STAGEDRAIN_WATCH_READERS_H

#include "config.h"
#include "fmacros.h"
#include "metrics.h"
#include "readers.h"

/* Every this many watch rounds: 30 s at the default --watch-interval. */
#define WATCH_READERS_ROUNDS 6

struct watch_readers {
	int round;
	enum readers_verdict said[METRICS_MAX_TARGETS]; /* what the log last said of each target */
};

/* On the leader, each WATCH_READERS_ROUNDS-th call (not the first): one connection per
 * target, for the look only; a warning when a target's workers are found
 * elsewhere, an info line when that ends, and the metric. */
void watch_readers_round(struct watch_readers *wr, const struct config *cfg, struct metrics *m);

#endif
