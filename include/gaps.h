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
 * But an old gap must be read in the very read that first sees its filler
 * committed, or that filler's later ids, above the cursor, reach their queue
 * before its first ones (a transaction staging while a read passes). Which
 * reads could that be? A filler of a gap opened by read k under snapshot S_k
 * has an xid in [xmin_k, B): below B (above), and not ended at S_k (its rows
 * were invisible), so at least xmin_k. Each gap keeps that window (merges
 * take the hull). Its rows turn visible in the first read whose snapshot
 * shows it ended, so, compared with the snapshot of the last read that
 * advanced the gaps (prev), its xid is among those that ended since: running
 * by prev, ended by the read's own. A read whose ended xids meet an old gap's
 * window reads that gap too, in the same snapshot and statement as the rows
 * above the cursor, so they come out in id order together. (The statement
 * goes out with the snapshot's; when the snapshot makes a gap due, it runs
 * again, in the same transaction.) The gap stays due until a read got
 * through it uncut: a read cut short by its limit leaves every part it did
 * not reach due. A failed batch leaves prev as it was: the next read
 * measures from the same prev, a superset. An ended xid that wrote nothing
 * there (a rollback, another table) costs one extra read, no more. Only the
 * end of a transaction that was running when the gap opened makes it due,
 * so however many old gaps a long transaction keeps, a batch reads none of
 * them until such a transaction ends (the holder's own end: one read).
 *
 * Subtransactions (a savepoint, Django's nested atomic, Rails' requires_new)
 * write their rows under a subxid, and the snapshot's xip lists top-level
 * xids only. Both arguments stand on the top-level xid: the id's default
 * takes pg_current_xact_id(), the top-level xid, before nextval (sql/002), so
 * that xid is below B; and a subtransaction's rows turn visible only when its
 * top-level transaction commits, so in the read that first shows that xid
 * ended. The subxid, taken later and possibly above B, decides nothing.
 *
 * A row the relay read but could not move (its Redis key has the wrong type,
 * its dead-letter insert failed) stays staged: its id becomes a kept gap of
 * its own, which no xmin retires, read with the old gaps until it moves; no
 * transaction can fill it, so its window is empty. */
#ifndef STAGEDRAIN_GAPS_H
#define STAGEDRAIN_GAPS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fmacros.h"
#include "snapshot.h"

/* The bound of a kept gap: no xmin reaches it. */
#define GAP_KEPT UINT64_MAX
/* opened_ms of a gap that is old from the start. */
#define GAP_OLD LLONG_MIN

struct gap {
	long long lo, hi;        /* ids lo..hi, inclusive */
	uint64_t bound;          /* retire once a read's xmin >= bound; GAP_KEPT: never */
	uint64_t xid_lo, xid_hi; /* a filler's xid is in xid_lo..xid_hi-1 (empty: none can fill it) */
	long long opened_ms;     /* when it opened; young while recent */
	bool due;                /* read by every read until one gets through it (see above) */
};

struct gaps {
	long long cursor; /* every id <= cursor was read or is in a gap */
	struct gap *v;    /* sorted by lo, disjoint */
	size_t n;
	size_t max;           /* at the bound, the closest neighbours merge */
	struct snapshot prev; /* the snapshot of the last read that advanced the gaps */
};

/* What one committed (or empty) read saw. */
struct gaps_read {
	const long long *ids; /* every id the read returned, ascending */
	size_t n;
	const long long *kept; /* those of ids left staged, ascending */
	size_t nkept;
	uint64_t xmin;               /* the read snapshot's xmin */
	const struct snapshot *snap; /* the read's snapshot (its xmin is xmin); NULL: unknown */
	uint64_t bound;              /* an xid assigned after the snapshot (see above) */
	long long young_since;       /* gaps opened at or after this were read; GAP_OLD: all */
	long long retire_below;      /* the gap read was cut short here; LLONG_MAX: it was not */
	long long skip_to;           /* nothing read above the cursor, and every id up to this
				   was handed out before bound: the cursor may jump here */
	long long now_ms;
};

void gaps_init(struct gaps *g, size_t max);
/* Forgets everything: the next read starts from id 0 (after a takeover). */
void gaps_reset(struct gaps *g);
void gaps_free(struct gaps *g);
/* Whether a read that reads the gaps opened at or after young_since (and the
 * due ones) reads gap i. */
bool gaps_reads(const struct gaps *g, size_t i, long long young_since);
/* Marks due each gap such a read leaves out whose window holds an xid that
 * ended between prev and cur, the read's snapshot: the read must read them
 * too, in that snapshot. Returns how many it marked, or -ENOMEM (nothing
 * marked). */
int gaps_mark_due(struct gaps *g, const struct snapshot *cur, long long young_since) SD_MUSTCHECK;
/*
 * Records a read: ids read leave the gaps they were in; ids between the old
 * cursor and the highest id read that were not read become gaps (old at once
 * when the cursor was 0: they may span everything a previous leader drained);
 * kept ids become kept gaps; gaps the read covered retire once their bound
 * <= xmin, except at or above retire_below, which stay due; the read's
 * snapshot becomes prev. Returns 0 or -ENOMEM (the state is then unchanged).
 */
int gaps_advance(struct gaps *g, const struct gaps_read *r) SD_MUSTCHECK;
/* Number of ids the gaps cover, for logs and metrics. */
long long gaps_ids(const struct gaps *g);
/* Number of kept gaps: rows read but left staged. */
size_t gaps_kept(const struct gaps *g);

#endif
