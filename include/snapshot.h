/* Transaction snapshots as pg_current_snapshot() gives them, and which xids
 * ended between two of them. Pure: no I/O. */
#ifndef STAGEDRAIN_SNAPSHOT_H
#define STAGEDRAIN_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fmacros.h"

/*
 * What a snapshot says of an xid: below xmin it had ended; in xip it was
 * running; at or above xmax it was running or not assigned yet; any other
 * xid below xmax had ended. xip holds top-level xids only, ascending (see
 * gaps.h for why the subtransactions' xids are not needed). The empty
 * snapshot (xmin = xmax = 0) knows nothing: measured from it, every xid a
 * later snapshot shows ended counts as ended since.
 */
struct snapshot {
	uint64_t xmin, xmax;
	uint64_t *xip;
	size_t n, cap;
};

void snapshot_init(struct snapshot *s);
/* Back to the empty snapshot; keeps the memory. */
void snapshot_clear(struct snapshot *s);
void snapshot_free(struct snapshot *s);
/* Parses pg_snapshot text, "xmin:xmax:xip1,xip2,...". 0, -EINVAL (s is then
 * the empty snapshot) or -ENOMEM. */
int snapshot_parse(struct snapshot *s, const char *text) SD_MUSTCHECK;
/* 0 or -ENOMEM (dst unchanged). */
int snapshot_copy(struct snapshot *dst, const struct snapshot *src) SD_MUSTCHECK;

/* The xids that ended between two snapshots of one server: running by prev
 * (in its xip, or at or above its xmax), ended by cur (below its xmax, not in
 * its xip). Aborted ones count: a caller only ever reads more for them. */
struct snapshot_ended {
	const struct snapshot *prev, *cur;
	uint64_t *xids; /* prev's xip that cur shows ended, ascending */
	size_t n;
};

/* prev and cur must outlive e. 0 or -ENOMEM. */
int snapshot_ended_init(struct snapshot_ended *e, const struct snapshot *prev, const struct snapshot *cur) SD_MUSTCHECK;
/* Whether an xid in lo..hi-1 ended between the two snapshots. */
bool snapshot_ended_within(const struct snapshot_ended *e, uint64_t lo, uint64_t hi);
void snapshot_ended_free(struct snapshot_ended *e);

#endif
