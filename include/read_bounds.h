/* The SQL round a read of job rows (staged_jobs, staged_jobs_held, a dead
 * row replayed): each column within its bound, the rows within a byte
 * budget, whether a row the budget left out follows. */
#ifndef STAGEDRAIN_READ_BOUNDS_H
#define STAGEDRAIN_READ_BOUNDS_H

#include <stdbool.h>

#include "buf.h"
#include "fmacros.h"

/* The columns such a read takes from a table aliased s that has them all
 * (staged_jobs_held; staged_jobs reads s.*), for a subquery of the wrapper. */
extern const char read_bounds_columns[];
/* The columns of a job row the wrapper returns, before extra's:
 * id, queue, job_class, args, options, jid, created, run_at, more, uuid,
 * tenant, route, and the reason the row cannot be a job (NULL: none). */
#define READ_BOUNDS_NCOLS 13

/*
 * The wrapper round a subquery of job rows (it goes between head and tail):
 * the rows in order while their text, every column counted, stays within
 * max_bytes (the first always comes); args or options over max_job bytes,
 * and a queue, class, tenant or route over JOB_MAX_NAME_BYTES, stay in
 * Postgres: only the reason naming the column and its length comes (the row
 * is dead-lettered). binary: the times and the uuid as stored, for a binary
 * result; else as text (epoch microseconds, the uuid's 36 characters).
 * extra: more of the subquery's columns, after the row's READ_BOUNDS_NCOLS
 * (", round, hold_id"). order: the subquery's order ("id"); max_bytes: a
 * number or a parameter ("$3"), as SQL text. 0 or -ENOMEM.
 */
int read_bounds_head(struct buf *sql, long max_job, const char *extra, bool binary) SD_MUSTCHECK;
int read_bounds_tail(struct buf *sql, const char *max_bytes, const char *order) SD_MUSTCHECK;
/* read_bounds_tail with a number. */
int read_bounds_tail_n(struct buf *sql, long max_bytes, const char *order) SD_MUSTCHECK;

#endif
