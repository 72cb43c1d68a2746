/* A transaction of several batches, overlapped: while Redis runs batch N's
 * push and the relay builds batch N+1, Postgres reads batch N+2, in the first
 * batch's snapshot, on the one session that holds the lock; the deletes of
 * them all go with the COMMIT, once Redis acknowledged every push. The drain
 * runs its steps (drain.c); this is what the transaction keeps meanwhile. */
#ifndef STAGEDRAIN_PIPE_H
#define STAGEDRAIN_PIPE_H

#include <stdbool.h>
#include <stddef.h>

#include "batch.h"
#include "buf.h"
#include "fmacros.h"
#include "gaps.h"
#include "pg_source.h"

/* Batches one transaction takes at most, and how long it stays open at
 * most: it holds a snapshot (an xmin) and the rows it deleted, and the
 * fence names every batch in it, so it stays short. */
#define PIPE_MAX_BATCHES 16
#define PIPE_MAX_MS 200

struct pipe {
	struct buf del; /* the deletes and the COMMIT */
	long long *ids; /* every id the transaction's batches read, ascending */
	size_t nids, cap;
	size_t batches;       /* batches pushed in the transaction */
	long long jobs;       /* their jobs */
	long long first_jobs; /* the first batch's */
	long bytes;           /* their payloads' bytes: the transaction keeps within one batch's budget */
	long long first_last; /* the first batch's last id: the later batches' rows are above it */
	long long last;       /* the last id pushed */
	long long start_ms;   /* when it began */
};

void pipe_init(struct pipe *p);
void pipe_free(struct pipe *p);
/* Whether the batch just pushed (b, read as r) may be the first of such a
 * transaction: it was full (more rows wait), plain (no dead, kept, held or
 * released rows, no gap cut short), read above the cursor, and within half
 * the byte budget (max_bytes): the whole transaction keeps within it, and
 * two batches are held at once. */
bool pipe_fits(const struct pg_read *r, const struct batch *b, int nrows, int limit, long max_bytes);
/* The transaction begins with its first batch (b, read as pg's last read),
 * pushed and acknowledged, uncommitted: its ids and its delete. 0 or -ENOMEM. */
int pipe_begin(struct pipe *p, const struct pg_source *pg, const struct batch *b) SD_MUSTCHECK;
/* A later batch went to Redis: its ids join the transaction's (gaps_advance
 * takes them at the commit). 0 or -ENOMEM. */
int pipe_add(struct pipe *p, const struct pg_read *r, const struct batch *b) SD_MUSTCHECK;
/* The next read's byte budget: half of what the transaction may still take. */
long pipe_budget(const struct pipe *p, long max_bytes);
/* Whether to read one more batch after the one read (nrows of limit). */
bool pipe_go_on(const struct pipe *p, int nrows, int limit, long max_bytes);
/* Deletes every batch pushed and commits: 0, -EIO (pg's errstr; rolled
 * back by the caller) or -ENOMEM. */
int pipe_commit(struct pipe *p, struct pg_source *pg) SD_MUSTCHECK;
/* What gaps_advance takes for the whole transaction: the first read's
 * (first), with every batch's ids. */
void pipe_seen(const struct pipe *p, const struct gaps_read *first, struct gaps_read *seen);

#endif
