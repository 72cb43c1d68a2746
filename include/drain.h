/* The relay loop: one batch's way, top to bottom (drain.c), on the leader's
 * ladder (ladder.h). */
#ifndef STAGEDRAIN_DRAIN_H
#define STAGEDRAIN_DRAIN_H

#include <signal.h>
#include <stdbool.h>

#include "batch.h"
#include "build.h"
#include "config.h"
#include "fault.h"
#include "fmacros.h"
#include "gaps.h"
#include "ladder.h"
#include "metrics.h"
#include "narrow.h"
#include "once.h"
#include "pg_source.h"
#include "pipe.h"
#include "push.h"
#include "read_plan.h"
#include "release.h"
#include "report.h"
#include "stop.h"
#include "tally.h"
#include "target.h"

/*
 * Everything the relay keeps, owned here; each step borrows the parts it
 * needs (set by drain_init), so a drain stays where drain_init made it.
 */
struct drain {
	const struct config *cfg;
	struct metrics *metrics; /* NULL: none */
	struct stop stopping;    /* the SIGTERM/SIGINT flag with --stop-timeout: read between steps */
	struct pg_source pg;     /* the session, its lock, the reads and deletes */
	struct target *t;        /* the targets, as routes.t: t[0] is the default one */
	size_t nt;
	struct release_target *rts; /* what release sees of them */
	struct batch batch;
	struct gaps gaps;
	struct release release; /* queue caps, the memory bound, fair release */
	struct narrow narrow;   /* finding the row of a batch Redis refuses */
	struct once once;       /* with --once: what the last batch did, whether to stop */
	struct tally tally;
	struct ladder ladder;
	struct read_plan plan;
	struct build build;
	struct push push;
	struct pipe pipe; /* a transaction of several batches, overlapped */
	struct fault fault;
	struct report report;
};

void drain_init(struct drain *d, const struct config *cfg, volatile sig_atomic_t *stop, struct metrics *m);
/* ladder_start: the servers reached and the schema checked (ladder.h). */
int drain_start(struct drain *d) SD_MUSTCHECK;
/* drain_run with --once stopped with jobs left behind (once.h): exit 3. */
#define DRAIN_LEFT ONCE_LEFT

/* Runs until *stop is set, or with --once until a read of everything finds
 * nothing it can move (or it may not lead, or the memory bound pauses it):
 * then 0, or DRAIN_LEFT when jobs are left. Server faults are logged and
 * retried; only -ENOMEM ends it early, and with --once -ETIMEDOUT after
 * ONCE_SERVER_WAIT_MS of faults without a batch going through. */
int drain_run(struct drain *d) SD_MUSTCHECK;
void drain_free(struct drain *d);

#endif
