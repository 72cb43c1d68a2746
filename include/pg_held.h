/* The held table's statements, on the leader's session: a new leader's
 * reading of it, and each batch's move of held rows and read of released
 * ones (see README "How held jobs are kept, found and released"). */
#ifndef STAGEDRAIN_PG_HELD_H
#define STAGEDRAIN_PG_HELD_H

#include <libpq-fe.h>
#include <stddef.h>

#include "buf.h"
#include "fmacros.h"
#include "job.h"
#include "pg_source.h"
#include "rounds.h"

/* A staged row to move to the held table, with the round rounds gave it. */
struct held_move {
	long long id, round;
	const char *target; /* the route it waits for; NULL: the default target */
};

/* Up to limit rows of queue qi to read after its release cursor. */
struct held_want {
	size_t qi;
	long limit;
};

struct pg_held {
	PGresult *rows; /* the released rows, until pg_held_clear */
	long long *ids; /* their ids, parsed once */
	size_t cap;
	struct buf sql;
	struct buf key; /* a key pg_held_load built */
};

void pg_held_init(struct pg_held *h);
void pg_held_free(struct pg_held *h);
/* Reads the held table into r (rounds_reset, then rounds_load per queue and
 * tenant), outside a batch. 0, -EIO (pg->errstr) or -ENOMEM. */
int pg_held_load(struct pg_held *h, struct pg_source *pg, struct rounds *r) SD_MUSTCHECK;
/* Outside a batch: moves the held rows whose route column names none of
 * names (n of them) to staged_jobs_dead with the reason; *moved says how
 * many. 0, -EIO (pg->errstr) or -ENOMEM. */
int pg_held_dead_gone_routes(struct pg_held *h, struct pg_source *pg, const char *const *names, size_t n,
			     long long *moved) SD_MUSTCHECK;
/*
 * In the batch's transaction, one round trip: moves the rows in mv from
 * staged_jobs to staged_jobs_held (all of them, or the statement fails),
 * then reads the wanted rows in (queue, round, hold_id) order, their text
 * within max_bytes. 0, -EIO (pg->errstr) or -ENOMEM.
 */
int pg_held_move_read(struct pg_held *h, struct pg_source *pg, const struct rounds *r, const struct held_move *mv,
		      size_t nmv, const struct held_want *w, size_t nw, long max_bytes) SD_MUSTCHECK;
int pg_held_nrows(const struct pg_held *h);
/* Where a released row was in the held table, and how long it waited there. */
struct held_row {
	long long round, hold_id, held_us;
	const char *target; /* the route it waited for; NULL: the default target */
	size_t target_len;
};

/* Row i read; pointers stay valid until pg_held_clear. */
void pg_held_row(const struct pg_held *h, int i, struct job_row *row, struct held_row *hr);
void pg_held_clear(struct pg_held *h);

#endif
