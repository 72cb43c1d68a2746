/* What the next read of a batch takes, and what a read leaves behind: how
 * many rows (fewer while a batch Redis refuses is narrowed), which gaps
 * (the young ones each batch, the old ones and kept rows on a timer), how
 * many bytes (each target's memory bound, a target over it paused); then,
 * after a read that changed nothing or a batch that committed, the cursor
 * moved and the gaps opened and retired. */
#ifndef STAGEDRAIN_READ_PLAN_H
#define STAGEDRAIN_READ_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "batch.h"
#include "config.h"
#include "fmacros.h"
#include "gaps.h"
#include "ladder.h"
#include "narrow.h"

struct read_plan {
	const struct config *cfg;
	struct ladder *ladder; /* borrowed, as gaps and narrow: its targets, release, metrics */
	struct gaps *gaps;
	struct narrow *narrow;
	long long old_read_ms;      /* when a read last covered every gap */
	long long old_read_cost_ms; /* how long that read took */
	/* read_plan_next's answer */
	int limit;             /* rows */
	long long young_since; /* the gaps to read: GAP_OLD for all */
	long max_bytes;        /* the rows' bytes */
};

void read_plan_init(struct read_plan *rp, const struct config *cfg, struct ladder *l, struct gaps *g, struct narrow *n);
/*
 * Before a read: the held table, read once per leadership, each target's
 * memory bound, then the rows, gaps and bytes to read (read_all: every gap).
 * 1 while every target that is up is paused, 0 to read, or a negative code
 * after the fault was logged.
 */
int read_plan_next(struct read_plan *rp, bool read_all) SD_MUSTCHECK;
/* The read took took_ms: a read of every gap that takes long is made less often. */
void read_plan_read(struct read_plan *rp, long long took_ms);
/* After a read that changed nothing (committed NULL) or a batch that
 * committed (its kept rows become kept gaps; nrows of it passed, so a
 * narrowed read widens again): the gaps advance past what the read saw.
 * Never before the commit, so a failed batch leaves every row it read
 * where the next read will find it. 0 or -ENOMEM. */
int read_plan_done(struct read_plan *rp, const struct gaps_read *seen, struct batch *committed,
		   size_t nrows) SD_MUSTCHECK;

#endif
