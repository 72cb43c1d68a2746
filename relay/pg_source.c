/* The batch's statements on the relay's session (pg_session.c): the read in
 * one snapshot, the dead rows' move, the delete and commit, the further
 * reads of a pipelined transaction, the fence's delete, the idle wait. */
#include "fmacros.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_source.h"

/* The read's statements follow (pg_read.c), its snapshot first. */
#define BEGIN_SQL "BEGIN ISOLATION LEVEL REPEATABLE READ;"

/* After next_result closed the session: the statement was abandoned. */
static int abandoned(struct pg_source *pg, const char *what)
{
	snprintf(pg->errstr, sizeof(pg->errstr),
		 "%s: abandoned: no answer within %d ms of the relay's --stop-timeout; session closed", what,
		 PG_SOURCE_CANCEL_MS);
	pg->sqlstate[0] = '\0';
	return -EIO;
}

static int take_counted(struct pg_source *pg, const char *what, unsigned long long *count, PGresult **rows);

/* The reads' statements, prepared once per session (pg_read_prepare_sql),
 * waited for as any statement of a batch (a table locked against it waits
 * no longer than a stop allows). */
static int prepare_next(struct pg_source *pg)
{
	static const char what[] = "could not prepare the read of staged jobs";
	int rc;

	if (pg->next_prepared)
		return 0;
	buf_reset(&pg->sql);
	if (pg_read_prepare_sql(&pg->sql, pg->cfg) < 0)
		return -ENOMEM;
	if (!PQsendQuery(pg->conn, pg->sql.data))
		return pg_source_fail(pg, NULL, what);
	rc = take_counted(pg, what, NULL, NULL);
	pg->next_prepared = rc == 0;
	return rc;
}

/* BEGIN, the statement bound, then the read's own statements. */
static int build_fetch(struct pg_source *pg, const struct gaps *g, int limit, long long young_since, long max_bytes)
{
	struct buf *sql = &pg->sql;
	int rc;

	if ((rc = prepare_next(pg)) < 0)
		return rc;
	buf_reset(sql);
	rc = buf_puts(sql, BEGIN_SQL);
	/* LOCAL: it ends with the batch, so the lock wait and migrations keep theirs. */
	if (rc == 0 && pg->statement_bound_ms)
		rc = buf_printf(sql, "SET LOCAL statement_timeout = %d;", pg->statement_bound_ms);
	return rc ? rc : pg_read_build(&pg->read, sql, pg->cfg, g, limit, young_since, max_bytes, true);
}

/* Reads every result of the fetch: the read keeps the rows and notes the
 * rest; rows_only: the rows statement ran again alone. */
static int read_fetch_results(struct pg_source *pg, bool rows_only)
{
	PGresult *res;
	int rc = 0;

	while (pg->conn && (res = pg_source_next_result(pg)) != NULL) {
		ExecStatusType st = PQresultStatus(res);
		if (rc == 0 && st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
			rc = pg_source_fail(pg, res, "could not read staged jobs");
		if (rc == 0 && st == PGRES_TUPLES_OK && rows_only) {
			pg_read_take_rows(&pg->read, res);
			continue;
		}
		if (rc == 0 && st == PGRES_TUPLES_OK && pg_read_take(&pg->read, res))
			continue;
		PQclear(res);
	}
	return rc == 0 && !pg->conn ? abandoned(pg, "could not read staged jobs") : rc;
}

int pg_source_wait_jobs(struct pg_source *pg, int ms, volatile sig_atomic_t *stop, bool *woken)
{
	struct pollfd pfd = { .fd = PQsocket(pg->conn), .events = POLLIN };

	*woken = false;
	for (;;) {
		PGnotify *note;

		/* A session ended while idle may come back as a FATAL message the
		 * input consumed: the status tells, not the return value. */
		if (!PQconsumeInput(pg->conn) || PQstatus(pg->conn) != CONNECTION_OK)
			return pg_source_fail(pg, NULL, "lost the connection while waiting for jobs");
		while ((note = PQnotifies(pg->conn)) != NULL) {
			*woken = true;
			PQfreemem(note);
		}
		if (*woken || ms <= 0 || *stop)
			return 0;
		/* Short slices: a stop signal is honoured within 50 ms. */
		if (poll(&pfd, 1, ms < 50 ? ms : 50) < 0 && errno != EINTR)
			return pg_source_fail(pg, NULL, "waiting for jobs failed");
		ms -= 50;
	}
}

/* Sends the statements in pg->sql and takes every result. */
static int send_fetch(struct pg_source *pg, bool rows_only)
{
	int rc;

	if (!PQsendQuery(pg->conn, pg->sql.data))
		return pg_source_fail(pg, NULL, "could not read staged jobs");
	if ((rc = read_fetch_results(pg, rows_only)) < 0)
		pg_read_clear(&pg->read);
	return rc;
}

/*
 * The read went out before its snapshot came back. If that snapshot shows a
 * transaction ended that could fill an old gap the read left out, the gap is
 * due (gaps.h), and the rows statement runs again with it, in the same
 * transaction, so in the same snapshot: the gap's rows and those above the
 * cursor come out in id order together. That second round trip is rare: it
 * takes the end of a transaction that was running when the gap opened.
 */
static int read_due(struct pg_source *pg, struct gaps *g, int limit, long long young_since, long max_bytes)
{
	const struct snapshot *snap = pg_read_snapshot(&pg->read);
	int rc;

	if (!snap)
		return 0; /* pg_read_finish fails the read */
	if ((rc = gaps_mark_due(g, snap, young_since)) <= 0)
		return rc;
	pg->read.due = rc;
	buf_reset(&pg->sql);
	if ((rc = pg_read_build_rows(&pg->sql, pg->cfg, g, limit, young_since, max_bytes)) < 0)
		return rc;
	return send_fetch(pg, true);
}

/* After the rows came: their ids noted, their number in *nrows. */
static int finish_read(struct pg_source *pg, const struct gaps *g, int limit, int *nrows)
{
	int rc = pg_read_finish(&pg->read, g, limit);

	if (rc == -EIO)
		return pg_source_fail(pg, NULL, "could not read staged jobs");
	if (rc < 0)
		return rc;
	*nrows = pg_read_nrows(&pg->read);
	return 0;
}

int pg_source_fetch(struct pg_source *pg, struct gaps *g, int limit, long long young_since, long max_bytes, int *nrows)
{
	int rc;

	if ((rc = build_fetch(pg, g, limit, young_since, max_bytes)) < 0)
		return rc;
	pg->in_tx = true;
	if ((rc = send_fetch(pg, false)) < 0 || (rc = read_due(pg, g, limit, young_since, max_bytes)) < 0)
		return rc;
	return finish_read(pg, g, limit, nrows);
}

void pg_source_row(const struct pg_source *pg, int i, struct job_row *row)
{
	pg_read_row(&pg->read, i, row);
}

const struct gaps_read *pg_source_seen(const struct pg_source *pg)
{
	return &pg->read.seen;
}

/* Appends "{1,2,3}": a literal of our own integers. */
static int append_id_array(struct buf *sql, const long long *ids, size_t n)
{
	int rc = buf_puts(sql, "'{");

	for (size_t i = 0; rc == 0 && i < n; i++)
		if (!i || (rc = buf_append(sql, ",", 1)) == 0)
			rc = buf_put_int(sql, ids[i]);
	return rc ? rc : buf_puts(sql, "}'::int8[]");
}

/*
 * Above the cursor the read took every visible id in order, so once the dead
 * rows have moved, the visible rows in (cursor, last id read] are exactly the
 * pushed ones and the kept ones: one range scan, less the kept ids, deletes
 * them, where an id list costs a probe per id. Rows from gaps go by id.
 *
 * Jobs released from staged_jobs_held come after the staged ones and go by
 * hold_id. The deletes are data-modifying CTEs of one statement that
 * compares the rows they took with the rows pushed. Any other count (a row changed under
 * the batch, a range that took a row it should not) fails the statement with
 * a cast of the message, so the COMMIT sent after it in the same round trip
 * never runs: the batch rolls back and the fence deletes the pushed rows.
 */
static int append_delete(const struct pg_source *pg, const struct batch *b, struct buf *sql)
{
	const struct pg_read *r = &pg->read;
	size_t below = 0, staged = 0;
	int rc;

	while (staged < b->njobs && b->jobs[staged].hold_id == 0)
		staged++;
	while (below < staged && b->jobs[below].id <= r->above)
		below++;
	rc = buf_puts(sql, "WITH r AS (DELETE FROM staged_jobs WHERE id > ");
	if (rc == 0 && (rc = buf_put_int(sql, r->above)) == 0 && (rc = buf_puts(sql, " AND id <= ")) == 0)
		rc = buf_put_int(sql, below < staged ? r->ids[r->seen.n - 1] : r->above);
	if (rc == 0 && b->nkept && (rc = buf_puts(sql, " AND id <> ALL(")) == 0 &&
	    (rc = append_id_array(sql, b->kept, b->nkept)) == 0)
		rc = buf_puts(sql, ")");
	if (rc == 0)
		rc = buf_puts(sql, " RETURNING 1), l AS (DELETE FROM staged_jobs WHERE id = ANY(");
	for (size_t i = 0; rc == 0 && i < below; i++)
		if ((rc = buf_puts(sql, i ? "," : "'{")) == 0)
			rc = buf_put_int(sql, b->jobs[i].id);
	if (rc == 0)
		rc = buf_puts(sql, below ? "}'::int8[]" : "'{}'::int8[]");
	if (rc == 0)
		rc = buf_puts(sql, ") RETURNING 1), h AS (DELETE FROM staged_jobs_held WHERE hold_id = ANY('{");
	for (size_t i = staged; rc == 0 && i < b->njobs; i++)
		if ((rc = buf_puts(sql, i > staged ? "," : "")) == 0)
			rc = buf_put_int(sql, b->jobs[i].hold_id);
	if (rc == 0)
		rc = buf_puts(sql, "}'::int8[]) RETURNING 1) SELECT CASE WHEN n = ");
	if (rc == 0 && (rc = buf_put_int(sql, (long long)b->njobs)) == 0)
		rc = buf_puts(sql, " THEN n ELSE ('deleted ' || n || ' rows of ");
	if (rc == 0 && (rc = buf_put_int(sql, (long long)b->njobs)) == 0)
		rc = buf_puts(sql, " pushed: rows changed under the batch')::int8 END"
				   " FROM (SELECT (SELECT count(*) FROM r) + (SELECT count(*) FROM l)"
				   " + (SELECT count(*) FROM h) AS n) c;");
	return rc;
}

/* The columns a dead row keeps, from either table. */
#define DEAD_COLUMNS "id, queue, job_class, args, run_at, options, created_at, jid, uuid, tenant, route"
/* What the dead-letter warning names, read back from the move (a queue or
 * class too long to be a job's is cut: it is in the table whole). */
#define DEAD_LOGGED "dead_id, id, left(queue, 200), left(job_class, 200), reason"

/* Moves rejected rows to staged_jobs_dead with their reasons: a row read
 * from staged_jobs by id, one released from staged_jobs_held by hold_id. */
static int append_dead(struct pg_source *pg, const struct batch *b, bool read_back)
{
	struct buf *sql = &pg->sql;
	int rc = buf_puts(sql, "SAVEPOINT stagedrain_dead; WITH bad(id, hid, reason) AS (VALUES ");

	for (size_t i = 0; rc == 0 && i < b->ndead; i++) {
		char *lit = PQescapeLiteral(pg->conn, b->dead[i].reason, strlen(b->dead[i].reason));
		if (!lit)
			return -ENOMEM;
		rc = buf_printf(sql, "%s(%lld::int8, %lld::int8, %s)", i ? "," : "", b->dead[i].id, b->dead[i].hold_id,
				lit);
		PQfreemem(lit);
	}
	if (rc == 0)
		rc = buf_puts(sql, "), moved AS (DELETE FROM staged_jobs s USING bad"
				   " WHERE bad.hid = 0 AND s.id = bad.id RETURNING s.*, bad.reason),"
				   " moved_held AS (DELETE FROM staged_jobs_held s USING bad"
				   " WHERE bad.hid <> 0 AND s.hold_id = bad.hid RETURNING s.*, bad.reason)"
				   " INSERT INTO staged_jobs_dead (" DEAD_COLUMNS ", reason)"
				   " SELECT " DEAD_COLUMNS ", reason FROM moved"
				   " UNION ALL SELECT " DEAD_COLUMNS ", reason FROM moved_held");
	return rc == 0 && read_back ? buf_puts(sql, " RETURNING " DEAD_LOGGED) : rc;
}

/* Reads every result of what was sent: 0 when all succeeded; the rows each
 * DELETE or INSERT touched are added to *count, if given; with rows, the
 * last result that returned rows is kept there (the caller clears it). */
static int take_counted(struct pg_source *pg, const char *what, unsigned long long *count, PGresult **rows)
{
	PGresult *res;
	int rc = 0;

	while (pg->conn && (res = pg_source_next_result(pg)) != NULL) {
		ExecStatusType st = PQresultStatus(res);
		if (rc == 0 && st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
			rc = pg_source_fail(pg, res, what);
		else if (rc == 0 && count && *PQcmdTuples(res))
			*count += strtoull(PQcmdTuples(res), NULL, 10);
		if (rc == 0 && rows && st == PGRES_TUPLES_OK) {
			PQclear(*rows);
			*rows = res;
			continue;
		}
		PQclear(res);
	}
	return rc == 0 && !pg->conn ? abandoned(pg, what) : rc;
}

/* Sends sql and reads every result, as take_counted. */
static int run_counted(struct pg_source *pg, const char *sql, const char *what, unsigned long long *count,
		       PGresult **rows)
{
	if (!PQsendQuery(pg->conn, sql))
		return pg_source_fail(pg, NULL, what);
	return take_counted(pg, what, count, rows);
}

/*
 * Whether the role may read back what it moves, for the warning (INSERT ...
 * RETURNING needs SELECT on those columns): roles.sql grants it, but a relay
 * whose role an older roles.sql granted must still move rows. One round trip,
 * in batches with dead rows only.
 */
static bool may_read_back(struct pg_source *pg)
{
	PGresult *res = pg_source_exec(pg, "SELECT bool_and(has_column_privilege('staged_jobs_dead', c, 'SELECT'))"
					   " FROM unnest('{dead_id,id,queue,job_class,reason}'::text[]) c");
	bool yes = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && *PQgetvalue(res, 0, 0) == 't';

	PQclear(res);
	return yes;
}

/*
 * A row that cannot be a job must not hold up the batch it came in: if its
 * move fails (no INSERT privilege on staged_jobs_dead, a constraint someone
 * added), the savepoint undoes just the move and the row stays staged, kept,
 * to be tried again with the old gaps.
 */
int pg_source_move_dead(struct pg_source *pg, struct batch *b)
{
	unsigned long long moved = 0;
	char why[sizeof(pg->errstr)];
	int rc;

	PQclear(pg->dead_moved);
	pg->dead_moved = NULL;
	if (b->ndead == 0)
		return 0;
	buf_reset(&pg->sql);
	if ((rc = append_dead(pg, b, may_read_back(pg))) < 0)
		return rc;
	rc = run_counted(pg, pg->sql.data, "could not move rows to staged_jobs_dead", &moved, &pg->dead_moved);
	if (rc == 0 && moved == b->ndead)
		return 0;
	PQclear(pg->dead_moved);
	pg->dead_moved = NULL;
	if (pg_source_broken(pg))
		return -EIO;
	if (rc == 0)
		snprintf(pg->errstr, sizeof(pg->errstr), "moved %llu of %zu rows to staged_jobs_dead", moved, b->ndead);
	memcpy(why, pg->errstr, sizeof(why));
	if (run_counted(pg, "ROLLBACK TO SAVEPOINT stagedrain_dead", "could not undo the dead-row move", NULL, NULL) <
	    0)
		return -EIO;
	memcpy(pg->errstr, why, sizeof(why));
	batch_keep_dead(b);
	return PG_SOURCE_DEAD_KEPT;
}

/* Deletes, checks and commits in one round trip (see append_delete). */
int pg_source_commit(struct pg_source *pg, const struct batch *b)
{
	int rc = 0;

	buf_reset(&pg->sql);
	if (b->njobs && (rc = append_delete(pg, b, &pg->sql)) < 0)
		return rc;
	return pg_source_commit_deletes(pg, &pg->sql);
}

int pg_source_append_delete(const struct pg_source *pg, const struct batch *b, struct buf *out)
{
	return b->njobs ? append_delete(pg, b, out) : 0;
}

int pg_source_append_range_delete(struct buf *out, long long above, long long last, long long n)
{
	if (n == 0)
		return 0;
	return buf_printf(out,
			  "WITH r AS (DELETE FROM staged_jobs WHERE id > %lld AND id <= %lld RETURNING 1)"
			  " SELECT CASE WHEN n = %lld THEN n ELSE ('deleted ' || n || ' rows of %lld pushed:"
			  " rows changed under the batch')::int8 END FROM (SELECT count(*) AS n FROM r) c;",
			  above, last, n, n);
}

int pg_source_commit_deletes(struct pg_source *pg, struct buf *deletes)
{
	if (buf_puts(deletes, "COMMIT") < 0)
		return -ENOMEM;
	if (run_counted(pg, deletes->data, "could not delete the pushed batch", NULL, NULL) < 0)
		return -EIO;
	pg->in_tx = false;
	pg_read_clear(&pg->read);
	return 0;
}

int pg_source_send_next(struct pg_source *pg, long long above, int limit, long max_bytes)
{
	char a[24], l[16], m[24];
	const char *values[] = { a, l, m };

	if (prepare_next(pg) < 0)
		return -EIO;
	snprintf(a, sizeof(a), "%lld", above);
	snprintf(l, sizeof(l), "%d", limit);
	snprintf(m, sizeof(m), "%ld", max_bytes);
	pg->read.above = above;
	/* Binary: ids, times and the uuid as stored (pg_read_row decodes them). */
	if (!PQsendQueryPrepared(pg->conn, PG_READ_NEXT, 3, values, NULL, NULL, 1))
		return pg_source_fail(pg, NULL, "could not read staged jobs");
	return 0;
}

void pg_source_discard(struct pg_source *pg)
{
	PGresult *res;

	while (pg->conn && (res = pg_source_next_result(pg)) != NULL)
		PQclear(res);
}

int pg_source_take_next(struct pg_source *pg, const struct gaps *g, int limit, int *nrows)
{
	PGresult *rows = NULL;
	int rc = take_counted(pg, "could not read staged jobs", NULL, &rows);

	if (rc < 0) {
		PQclear(rows);
		return rc;
	}
	pg_read_take_rows(&pg->read, rows);
	return finish_read(pg, g, limit, nrows);
}

int pg_source_delete_fenced(struct pg_source *pg, const struct fence *f, long long *deleted)
{
	int rc = 0;

	*deleted = 0;
	PQclear(pg->fenced);
	pg->fenced = NULL;
	if (f->n == 0)
		return 0;
	/* fence_parse let only digits, hex and commas into these literals. */
	buf_reset(&pg->sql);
	if (buf_printf(
		    &pg->sql,
		    "WITH f AS (SELECT * FROM unnest('%s'::int8[], '%s'::text[]) AS f(id, jid)),"
		    " d AS (DELETE FROM staged_jobs s USING f WHERE s.id = f.id AND s.jid = f.jid RETURNING s.queue),"
		    " h AS (DELETE FROM staged_jobs_held s USING f WHERE s.id = f.id AND s.jid = f.jid"
		    " RETURNING s.queue)"
		    " SELECT queue, count(*) FROM (SELECT queue FROM d UNION ALL SELECT queue FROM h) x GROUP BY queue",
		    f->ids.data, f->jids.data) < 0)
		return -ENOMEM;
	pg->fenced = pg_source_exec(pg, pg->sql.data);
	if (!pg->conn)
		return abandoned(pg, "could not delete the rows the fence names");
	if (PQresultStatus(pg->fenced) != PGRES_TUPLES_OK) {
		rc = pg_source_fail(pg, pg->fenced, "could not delete the rows the fence names");
		PQclear(pg->fenced);
		pg->fenced = NULL;
		return rc;
	}
	for (int i = 0; i < PQntuples(pg->fenced); i++)
		*deleted += strtoll(PQgetvalue(pg->fenced, i, 1), NULL, 10);
	return 0;
}

const char *pg_source_fenced_queue(const struct pg_source *pg, int i, size_t *len, long long *n)
{
	if (!pg->fenced || i >= PQntuples(pg->fenced))
		return NULL;
	*len = (size_t)PQgetlength(pg->fenced, i, 0);
	*n = strtoll(PQgetvalue(pg->fenced, i, 1), NULL, 10);
	return PQgetvalue(pg->fenced, i, 0);
}

const char *pg_source_dead_moved(const struct pg_source *pg, int i, long long *dead_id, long long *id,
				 const char **job_class, const char **reason)
{
	if (!pg->dead_moved || i >= PQntuples(pg->dead_moved))
		return NULL;
	*dead_id = strtoll(PQgetvalue(pg->dead_moved, i, 0), NULL, 10);
	*id = strtoll(PQgetvalue(pg->dead_moved, i, 1), NULL, 10);
	*job_class = PQgetvalue(pg->dead_moved, i, 3);
	*reason = PQgetvalue(pg->dead_moved, i, 4);
	return PQgetvalue(pg->dead_moved, i, 2);
}

void pg_source_rollback(struct pg_source *pg)
{
	if (pg->in_tx && !pg_source_broken(pg))
		PQclear(pg_source_exec(pg, "ROLLBACK"));
	pg->in_tx = false;
	pg_read_clear(&pg->read);
}
