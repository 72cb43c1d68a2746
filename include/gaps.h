/* The read cursor and the gaps below it: ids the relay passed without seeing,
 * kept until no transaction that could still commit them is running, and ids
 * it saw but had to leave staged. Pure: bookkeeping only, no I/O.
 *
 * Why this is sound. Every staging transaction takes its xid before its id
 * (sql/002), and the sequence hands ids out in order (CACHE 1). Say a read R
 * under snapshot S passes an id i it does not see: i is below an id R sees,
 * or at most a sequence value R read after S was taken. Either way i was
 * handed out before that moment, so the transaction T that holds i took its
 * xid before it too. After that moment R takes an xid of its own, B (the
 * gap's bound): xids are assigned in order, so T's xid < B. Once a later
 * snapshot's xmin is at least B, every xid below B has ended, T included: if
 * i is not visible to that snapshot, it never will be, and the gap retires.
 *
 * S's xmax would not do as the bound: it is the latest *completed* xid + 1,
 * so T can hold an xid at or above it while running, and appear nowhere in S.
 *
 * Reads need not visit every gap every time. A gap is young for a short while
 * after it opened (a concurrent writer still committing) and read by every
 * batch; after that it is old and read on a timer. A long transaction that
 * holds an xid keeps gaps from retiring; re-reading only the young ones per
 * batch keeps each batch's cost flat however many old ones pile up.
 *
 * A row the relay read but could not move (its Redis key has the wrong type,
 * its dead-letter insert failed) stays staged: its id becomes a kept gap of
 * its own, which no xmin retires, read with the old gaps until it moves. */
#ifndef STAGEDRAIN_GAPS_H
#define STAGEDRAIN_GAPS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fmacros.h"

/* The bound of a kept gap: no xmin reaches it. */
#define GAP_KEPT UINT64_MAX
/* opened_ms of a gap that is old from the start. */
#define GAP_OLD LLONG_MIN

struct gap {
	long long lo, hi;    /* ids lo..hi, inclusive */
	uint64_t bound;      /* retire once a read's xmin >= bound; GAP_KEPT: never */
	long long opened_ms; /* when it opened; young while recent */
};

struct gaps {
	long long cursor; /* every id <= cursor was read or is in a gap */
	struct gap *v;    /* sorted by lo, disjoint */
	size_t n;
	size_t max; /* at the bound, the closest neighbours merge */
};

/* What one committed (or empty) read saw. */
struct gaps_read {
	const long long *ids; /* every id the read returned, ascending */
	size_t n;
	const long long *kept; /* those of ids left staged, ascending */
	size_t nkept;
	uint64_t xmin;          /* the read snapshot's xmin */
	uint64_t bound;         /* an xid assigned after the snapshot (see above) */
	long long young_since;  /* gaps opened at or after this were read; GAP_OLD: all */
	long long retire_below; /* the gap read was cut short here; LLONG_MAX: it was not */
	long long skip_to;      /* nothing read above the cursor, and every id up to this
				   was handed out before bound: the cursor may jump here */
	long long now_ms;
};

void gaps_init(struct gaps *g, size_t max);
/* Forgets everything: the next read starts from id 0 (after a takeover). */
void gaps_reset(struct gaps *g);
void gaps_free(struct gaps *g);
/* Whether a read that reads the gaps opened at or after young_since reads gap i. */
bool gaps_reads(const struct gaps *g, size_t i, long long young_since);
/*
 * Records a read: ids read leave the gaps they were in; ids between the old
 * cursor and the highest id read that were not read become gaps (old at once
 * when the cursor was 0: they may span everything a previous leader drained);
 * kept ids become kept gaps; gaps the read covered retire once their bound
 * <= xmin, except at or above retire_below. Returns 0 or -ENOMEM (the state is
 * then unchanged).
 */
int gaps_advance(struct gaps *g, const struct gaps_read *r) SD_MUSTCHECK;
/* Number of ids the gaps cover, for logs and metrics. */
long long gaps_ids(const struct gaps *g);
/* Number of kept gaps: rows read but left staged. */
size_t gaps_kept(const struct gaps *g);

#endif
