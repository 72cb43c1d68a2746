/* The Postgres side: the session and its leader lock (relay/pg_session.c)
 * and, on the same session, each batch's read, delete and commit
 * (relay/pg_source.c). */
#ifndef STAGEDRAIN_PG_SOURCE_H
#define STAGEDRAIN_PG_SOURCE_H

#include <libpq-fe.h>
#include <signal.h>
#include <stdbool.h>

#include "batch.h"
#include "buf.h"
#include "config.h"
#include "fence.h"
#include "gaps.h"
#include "fmacros.h"
#include "pg_read.h"
#include "stop.h"

struct pg_source {
	PGconn *conn;
	const struct config *cfg;
	bool in_tx;
	struct pg_read read;    /* the batch pg_source_fetch read, until commit or rollback */
	int statement_bound_ms; /* nobody chose a statement_timeout: each batch sets this one; else 0 */
	bool next_prepared;     /* the session has the reads' statements (pg_read_prepare_sql) */
	struct buf sql;         /* the statement being sent (fetch, dead move, commit, fence delete), reused */
	PGresult *fenced;       /* queue, count of the rows the last fence delete took */
	PGresult *dead_moved;   /* the rows the last dead-row move took, for the warning */
	struct stop *stop;      /* NULL: statements run to their end; else bounded by its deadline */
	char sqlstate[6];
	char errstr[256];
};

/* Errors: -EIO (server or connection; errstr says why; broken tells which),
 * -EROFS (a hot standby: pg_source_check_primary), -ENOMEM. */

void pg_source_init(struct pg_source *pg, const struct config *cfg);
/* Bounds the batch's statements (fetch, dead move, commit, rollback, fence
 * delete) by stop's deadline: past it the running statement is cancelled,
 * and if it has not ended PG_SOURCE_CANCEL_MS after the deadline the session
 * is closed (the server rolls the transaction back, and the lock goes). */
void pg_source_stop_on(struct pg_source *pg, struct stop *stop);
#define PG_SOURCE_CANCEL_MS 1000
/* PQgetResult and PQexec (its last result) bounded so: NULL when the session
 * was closed (pg->conn is then NULL) or there is no more result. */
PGresult *pg_source_next_result(struct pg_source *pg);
PGresult *pg_source_exec(struct pg_source *pg, const char *sql);
int pg_source_connect(struct pg_source *pg) SD_MUSTCHECK;
/* True when the session is gone and only a new connection helps. */
bool pg_source_broken(const struct pg_source *pg);
/* Fails with a hint to run `stagedrain migrate` if the tables are missing. */
int pg_source_check_schema(struct pg_source *pg) SD_MUSTCHECK;
/* Asks for the leader lock without waiting: *held says whether this session
 * now holds it (false: another session does). */
int pg_source_try_lock(struct pg_source *pg, bool *held) SD_MUSTCHECK;
/* The highest id staged or held now (0: none), read on the lock's session:
 * any row a leader before this one pushed is at or below it. */
int pg_source_staged_top(struct pg_source *pg, long long *top) SD_MUSTCHECK;
/* Records digest (ladder_reroute.c's digest of the routes) as this lock
 * key's leader's in staged_jobs_leader, and says whether the last leader's
 * was the same and settled (true when none is recorded: the first leader,
 * or one of a release before this table; then it is recorded settled).
 * Otherwise it is recorded unsettled. *recorded is false when the table is
 * missing (migration 008) or this role may not write it (sql/roles.sql):
 * nothing is recorded then, and *same is true. */
int pg_source_note_routes(struct pg_source *pg, const char *digest, bool *same, bool *recorded) SD_MUSTCHECK;
/* Records that the leader routing by digest has settled every target's fence. */
int pg_source_routes_settled(struct pg_source *pg, const char *digest) SD_MUSTCHECK;
/* Checks that the session may lead: 0 on a primary, where it then listens
 * for staged_jobs notifications; -EROFS on a hot standby (in recovery), where
 * the relay could read and push but never delete (errstr says so, and the
 * session is closed). */
int pg_source_check_primary(struct pg_source *pg) SD_MUSTCHECK;
/* Opens a REPEATABLE READ transaction and reads up to limit rows in id order,
 * their text at most max_bytes (at least one row): first those in the gaps
 * opened since young_since (GAP_OLD: every gap) and the due ones, marked by
 * this read's snapshot (gaps_mark_due: the one change it makes to g), then
 * above the cursor. Then takes the transaction's xid, the bound of the gaps this read
 * opens. Fills pg->read. Unless the session has a statement_timeout of its
 * own, the statements are bounded like its idle time (4 x --redis-timeout,
 * >= 10 s). */
int pg_source_fetch(struct pg_source *pg, struct gaps *g, int limit, long long young_since, long max_bytes,
		    int *nrows) SD_MUSTCHECK;
/* The pause between polls: waits up to ms (less if stop is set), outside a
 * transaction. Staging commits notify nobody unless sql/notify.sql's optional
 * trigger is installed; where it is, a notification ends the wait early and
 * sets *woken (the session listens once pg_source_check_primary passed). */
int pg_source_wait_jobs(struct pg_source *pg, int ms, volatile sig_atomic_t *stop, bool *woken) SD_MUSTCHECK;
/* Fills row from the i-th fetched row; pointers stay valid until commit or rollback. */
void pg_source_row(const struct pg_source *pg, int i, struct job_row *row);
/* What the last fetch saw, for gaps_advance (held and now_ms are the caller's). */
const struct gaps_read *pg_source_seen(const struct pg_source *pg);
/* pg_source_move_dead could not move the dead rows: they are kept (left
 * staged) and the batch goes on without them; errstr says why. */
#define PG_SOURCE_DEAD_KEPT 1

/* Moves the dead rows to staged_jobs_dead with their reasons, in a savepoint:
 * 0 when they moved, or PG_SOURCE_DEAD_KEPT. */
int pg_source_move_dead(struct pg_source *pg, struct batch *b) SD_MUSTCHECK;
/* After pg_source_move_dead: the queue of the i-th row it moved, with its
 * dead_id, staged id, class and reason (names cut to 200 characters); NULL
 * past the last, or when the move failed. */
const char *pg_source_dead_moved(const struct pg_source *pg, int i, long long *dead_id, long long *id,
				 const char **job_class, const char **reason);
/*
 * A transaction's further batches, read while Redis pushes the one before
 * (pipe.c), in the first read's snapshot. append_delete appends the first
 * batch's delete (as pg_source_commit sends it) to out, for later; send_next
 * sends the read of the rows above `above` (prepared once per session),
 * without waiting; take_next takes its result and keeps the rows, which
 * pg_source_row then reads; commit_deletes sends deletes (the caller's
 * buffer, appended to) and COMMIT and waits.
 */
int pg_source_append_delete(const struct pg_source *pg, const struct batch *b, struct buf *out) SD_MUSTCHECK;
/* The delete of every row in (above, last], checked to be n: the later
 * batches of such a transaction, which took every row there in its snapshot. */
int pg_source_append_range_delete(struct buf *out, long long above, long long last, long long n) SD_MUSTCHECK;
int pg_source_send_next(struct pg_source *pg, long long above, int limit, long max_bytes) SD_MUSTCHECK;
int pg_source_take_next(struct pg_source *pg, const struct gaps *g, int limit, int *nrows) SD_MUSTCHECK;
int pg_source_commit_deletes(struct pg_source *pg, struct buf *deletes) SD_MUSTCHECK;
/* Takes and drops the results of what was sent, before a rollback. */
void pg_source_discard(struct pg_source *pg);
/* Deletes the pushed rows, leaving the kept ones, and commits only if
 * exactly the pushed rows went; otherwise fails with the transaction still
 * open, for pg_source_rollback. One round trip. */
int pg_source_commit(struct pg_source *pg, const struct batch *b) SD_MUSTCHECK;
/* Deletes, in its own transaction, the rows a fence names that are still
 * staged: their push landed but their delete did not. */
int pg_source_delete_fenced(struct pg_source *pg, const struct fence *f, long long *deleted) SD_MUSTCHECK;
/* After pg_source_delete_fenced: the i-th queue it deleted rows of, and how
 * many (i < the number of queues; NULL past the last). */
const char *pg_source_fenced_queue(const struct pg_source *pg, int i, size_t *len, long long *n);
/* Records why a call failed (for another module's statement on the session):
 * the message on one line in errstr, and the SQLSTATE. Returns -EIO. */
int pg_source_fail(struct pg_source *pg, const PGresult *res, const char *what);
/* Ends the open transaction, if any, without keeping anything. */
void pg_source_rollback(struct pg_source *pg);
/* Host, port and database for logs: never the password. */
void pg_source_describe(const struct pg_source *pg, char *out, size_t outlen);
/* Ends the session, which frees the lock; connect may be called again. */
void pg_source_close(struct pg_source *pg);
void pg_source_free(struct pg_source *pg);

#endif
