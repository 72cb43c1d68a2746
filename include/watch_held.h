/* The watcher's reading of staged_jobs_held: its rows by target and queue, and their oldest. */
#ifndef STAGEDRAIN_WATCH_HELD_H
#define STAGEDRAIN_WATCH_HELD_H

#include <libpq-fe.h>
#include <stddef.h>

#include "fmacros.h"
#include "metrics.h"

/*
 * One pass over staged_jobs_held on pg (the watcher's session, under its
 * statement timeout): *rows (caller frees; NULL when none) and *n, by target
 * and queue, and *oldest_s the oldest held row's age by its created_at (0
 * when none). 0; -ETIMEDOUT past the statement timeout; -EIO with one line in
 * err; -ENOMEM.
 */
int watch_held_read(PGconn *pg, struct metrics_held_row **rows, size_t *n, double *oldest_s, char *err,
		    size_t errlen) SD_MUSTCHECK;

#endif
