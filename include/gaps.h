/* The read cursor and the gaps below it: ids the relay passed without seeing,
 * kept until no transaction that could still commit them is running. Pure:
 * bookkeeping only, no I/O.
 *
 * Why this is sound: every staging transaction takes its xid before its id
 * (sql/002), and ids are handed out in order (sequence CACHE 1). An id below
 * one a snapshot S sees committed was therefore handed out before S, to a
 * transaction whose xid is below S's xmax. Once a later snapshot's xmin
 * reaches that xmax, the transaction has ended: if the row is not visible
 * then, it never will be. */
#ifndef STAGEDRAIN_GAPS_H
#define STAGEDRAIN_GAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fmacros.h"

struct gap {
	long long lo, hi; /* ids lo..hi, inclusive */
	uint64_t xmax;    /* xmax of the snapshot that first passed them */
};

struct gaps {
	long long cursor; /* every id <= cursor was read or is in a gap */
	struct gap *v;    /* sorted by lo, disjoint */
	size_t n;
	size_t max;       /* at the bound, the closest neighbours merge */
};

void gaps_init(struct gaps *g, size_t max);
/* Forgets everything: the next read starts from id 0 (after a takeover). */
void gaps_reset(struct gaps *g);
void gaps_free(struct gaps *g);
/*
 * Records a committed batch read under a snapshot (xmin, xmax). ids: every id
 * the batch read, ascending (from gaps and from above the cursor). Ids between
 * the old cursor and the highest id read that were not read become gaps;
 * ids read leave the gaps; gaps whose xmax <= xmin are retired, except at or
 * above retire_below when the gap read was cut short by its limit (pass
 * LLONG_MAX otherwise). Returns 0 or -ENOMEM (the state is then unchanged
 * except that it may hold more gaps than needed, never fewer).
 */
int gaps_advance(struct gaps *g, const long long *ids, size_t n, uint64_t xmin, uint64_t xmax,
		 long long retire_below) SD_MUSTCHECK;
/* Number of ids the gaps cover, for logs and metrics. */
long long gaps_ids(const struct gaps *g);

#endif
