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
#include "read_bounds.h"

/* A uuid's text and its NUL. */
#define PG_READ_UUID_SIZE 37

/* What the last read saw. pg_source owns one and sends its statements. */
struct pg_read {
	PGresult *rows; /* the rows read, until pg_read_clear */
	long long *ids; /* every id read, ascending; seen.ids points here */
	size_t cap;
	char (*uuids)[PG_READ_UUID_SIZE]; /* a binary read's uuids as text, per row */
	size_t uuid_cap;
	long long above;       /* the cursor the read started above */
	struct snapshot snap;  /* the read's snapshot; seen.snap points here */
	struct gaps_read seen; /* for gaps_advance; held and now_ms are the caller's */
	int tables;            /* results taken so far */
	bool skip;             /* a first read: it asks how far the sequence went */
	bool bad_snapshot;     /* the snapshot could not be parsed (or memory ran out) */
	bool bound_taken;      /* the bound's result came (seen.bound 0: none was needed) */
	int due;               /* old gaps this read marked due (gaps_mark_due), for the log */
};

void pg_read_init(struct pg_read *r);
/*
 * Starts a read: appends to sql, after BEGIN, the statement that takes the
 * read's snapshot, then those that read up to limit rows in id order, their
 * text at most --batch-max-bytes (at least one row; max_bytes where that is
 * less): first those in the gaps opened since young_since (GAP_OLD: every
 * gap) and the due ones, then above the cursor. Then the transaction's xid,
 * the bound of the gaps this read opens. prepared: the session has
 * pg_read_prepare_sql's statements, and a read of no gap executes
 * PG_READ_FIRST. 0 or -ENOMEM.
 */
int pg_read_build(struct pg_read *r, struct buf *sql, const struct config *cfg, const struct gaps *g, int limit,
		  long long young_since, long max_bytes, bool prepared) SD_MUSTCHECK;
/* The rows statement alone, to run again in the same transaction once more
 * gaps are due: the same snapshot, so the same rows and those gaps'. */
int pg_read_build_rows(struct buf *sql, const struct config *cfg, const struct gaps *g, int limit,
		       long long young_since, long max_bytes) SD_MUSTCHECK;
/*
 * The session's two statements, as one PREPARE each: PG_READ_FIRST, the
 * rows above $1 (the cursor), at most $2, their text within $3 bytes, as
 * pg_read_build reads them above the cursor, in a text result (the read of
 * a batch is a simple query of several statements); PG_READ_NEXT, the same
 * for a further read in the same transaction, so the same snapshot (above
 * the last id the read before took; no gap: that snapshot showed them all
 * to the first read), in a binary result (pg_read_row decodes either).
 */
#define PG_READ_FIRST "stagedrain_first"
#define PG_READ_NEXT "stagedrain_next"
int pg_read_prepare_sql(struct buf *sql, const struct config *cfg) SD_MUSTCHECK;
/* The read's snapshot, once its result was taken; NULL before, or if unparsable. */
const struct snapshot *pg_read_snapshot(const struct pg_read *r);
/* Keeps res, the rows statement's result run again, in place of the rows. */
void pg_read_take_rows(struct pg_read *r, PGresult *res);
/* Takes the next result that returned rows, in order; true when it kept res
 * (the rows: freed by pg_read_clear), false when the caller frees it. */
bool pg_read_take(struct pg_read *r, PGresult *res);
/* After the last result: notes the ids read and how far a cut gap read got.
 * -EIO when a result was missing, -ENOMEM; either way the rows are freed. */
int pg_read_finish(struct pg_read *r, const struct gaps *g, int limit) SD_MUSTCHECK;
int pg_read_nrows(const struct pg_read *r);
/* Fills row from the i-th row read; pointers stay valid until pg_read_clear. */
void pg_read_row(const struct pg_read *r, int i, struct job_row *row);

/* Parses the id of every row of such a read into *ids, of *cap elements,
 * grown as needed. 0 or -ENOMEM. */
int pg_read_ids(const PGresult *res, long long **ids, size_t *cap) SD_MUSTCHECK;
/* Fills row from row i of such a read, its id already parsed. */
void pg_read_row_of(const PGresult *res, int i, long long id, struct job_row *row);
/* Frees the rows; the ids stay until the next read. */
void pg_read_clear(struct pg_read *r);
void pg_read_free(struct pg_read *r);

#endif
