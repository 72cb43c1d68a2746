/* A transaction of several batches, overlapped: while Redis runs batch N's
 * push and the relay builds batch N+1, Postgres reads batch N+2, in the first
 * batch's snapshot, on the one session that holds the lock; the deletes of
 * them all go with the COMMIT, once Redis acknowledged every push. */
#ifndef STAGEDRAIN_PIPE_H
#define STAGEDRAIN_PIPE_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "fmacros.h"
#include "gaps.h"

/* Batches one transaction takes at most, and how long it stays open at
 * most: it holds a snapshot (an xmin) and the rows it deleted, and the
 * fence names every batch in it, so it stays short. */
#define PIPE_MAX_BATCHES 16
#define PIPE_MAX_MS 200

/* Why pipe_run stopped short (the transaction is rolled back). */
#define PIPE_PUSH_FAILED 1   /* a push failed: the drain handles it as its own (redis errstr) */
#define PIPE_COMMIT_FAILED 2 /* a read, a delete or the COMMIT failed: pg errstr; the fence has the pushes */

struct pipe {
	struct buf del; /* the deletes and the COMMIT */
	long long *ids; /* every id the transaction's batches read, ascending */
	size_t nids, cap;
	size_t batches;        /* batches pushed in the transaction */
	long long jobs;        /* their jobs */
	long bytes;            /* their payloads' bytes: the transaction keeps within one batch's budget */
	long long first_last;  /* the first batch's last id: the later batches' rows are above it */
	long long last;        /* the last id pushed */
	bool epoch_lost;       /* with PIPE_COMMIT_FAILED: a push was in flight, its outcome unknown */
	int push_rc;           /* with PIPE_PUSH_FAILED: the push's code, as redis_sink_push returns it */
	size_t push_rows;      /* and the rows of the batch it pushed */
	struct target *failed; /* and the target whose push it was */
};

struct drain;
struct target;

void pipe_init(struct pipe *p);
void pipe_free(struct pipe *p);
/* Whether the batch just pushed may be the first of such a transaction: it
 * was full (more rows wait), plain (no dead, kept, held or released rows,
 * no gap cut short), read above the cursor, and within half the byte budget
 * (max_bytes): the whole transaction keeps within it, and two batches are
 * held at once. */
bool pipe_fits(const struct drain *d, int nrows, int limit, long max_bytes);
/*
 * Goes on from the first batch, pushed and acknowledged, uncommitted: reads,
 * builds and pushes more batches as long as they come full and plain, then
 * deletes every acknowledged one and commits. Each push appends to the fence
 * (redis_sink_send's more), so the fence names every batch pushed and not
 * committed. *seen is what gaps_advance takes for the whole transaction: the
 * first read's, with every batch's ids. 0, PIPE_PUSH_FAILED,
 * PIPE_COMMIT_FAILED (rolled back either way) or -ENOMEM.
 */
int pipe_run(struct pipe *p, struct drain *d, int limit, long max_bytes, struct gaps_read *seen) SD_MUSTCHECK;

#endif
