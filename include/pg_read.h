/* A batch's read of staged_jobs: the statements (the gaps' LATERAL probes,
 * the byte budget, the xid bound), what their results say, and the rows. */
#ifndef STAGEDRAIN_PG_READ_H
#define STAGEDRAIN_PG_READ_H

#include <libpq-fe.h>
#include <stdbool.h>

#include "buf.h"
#include "config.h"
#include "gaps.h"
#include "fmacros.h"
#include "job.h"

/* What the last read saw. pg_source owns one and sends its statements. */
struct pg_read {
	PGresult *rows; /* the rows read, until pg_read_clear */
	long long *ids; /* every id read, ascending; seen.ids points here */
	size_t cap;
	long long above;       /* the cursor the read started above */
	struct gaps_read seen; /* for gaps_advance; held and now_ms are the caller's */
	int tables;            /* results taken so far */
	bool skip;             /* a first read: it asks how far the sequence went */
};

void pg_read_init(struct pg_read *r);
/*
 * Starts a read: appends to sql, after BEGIN, the statements that read up to
 * limit rows in id order, their text at most --batch-max-bytes (at least one
 * row): first those in the gaps opened since young_since (GAP_OLD: every
 * gap), then above the cursor. Then the transaction's xid, the bound of the
 * gaps this read opens. 0 or -ENOMEM.
 */
int pg_read_build(struct pg_read *r, struct buf *sql, const struct config *cfg, const struct gaps *g, int limit,
		  long long young_since) SD_MUSTCHECK;
/* Takes the next result that returned rows, in order; true when it kept res
 * (the rows: freed by pg_read_clear), false when the caller frees it. */
bool pg_read_take(struct pg_read *r, PGresult *res);
/* After the last result: notes the ids read and how far a cut gap read got.
 * -EIO when a result was missing, -ENOMEM; either way the rows are freed. */
int pg_read_finish(struct pg_read *r, const struct gaps *g, int limit) SD_MUSTCHECK;
int pg_read_nrows(const struct pg_read *r);
/* Fills row from the i-th row read; pointers stay valid until pg_read_clear. */
void pg_read_row(const struct pg_read *r, int i, struct job_row *row);
/* Frees the rows; the ids stay until the next read. */
void pg_read_clear(struct pg_read *r);
void pg_read_free(struct pg_read *r);

#endif
