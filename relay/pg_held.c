/* The held table's statements: see include/pg_held.h. */
#include "fmacros.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pg_held.h"
#include "pg_read.h"

/* The columns after a job row's, in a released row. */
enum { COL_ROUND = READ_BOUNDS_NCOLS, COL_HOLD_ID, COL_HELD_US, COL_TARGET };

void pg_held_init(struct pg_held *h)
{
	memset(h, 0, sizeof(*h));
	buf_init(&h->sql);
	buf_init(&h->key);
}

void pg_held_clear(struct pg_held *h)
{
	PQclear(h->rows);
	h->rows = NULL;
}

void pg_held_free(struct pg_held *h)
{
	if (!h)
		return;
	pg_held_clear(h);
	free(h->ids);
	buf_free(&h->sql);
	buf_free(&h->key);
	pg_held_init(h);
}

/*
 * One pass over the table (once per leadership; only the relay writes it, and
 * this session holds the lock). The hold sequence's last value bounds every
 * round ever assigned, since a round never exceeds its row's hold_id: queues
 * with nothing held start above it, past the index entries of rows released
 * by earlier leaders. Without SELECT on the sequence they start at 1, which
 * costs only walking those entries. Per key, the oldest row its queue's rule
 * sent: of one queue's keys, the oldest leaves first (release_routes.c).
 */
#define LOAD_SQL                                                                                                       \
	"SELECT 0 AS k, NULL AS queue, NULL AS tenant, 0::int8, coalesce((SELECT CASE"                                 \
	" WHEN has_sequence_privilege(q.seq, 'SELECT') THEN pg_sequence_last_value(q.seq::regclass) END"               \
	" FROM (SELECT pg_get_serial_sequence('staged_jobs_held', 'hold_id') AS seq) q), 0), 0::int8, NULL AS target," \
	" false, NULL::int8 UNION ALL SELECT 1, queue, tenant, count(*), min(round), max(round), target,"              \
	" bool_or(coalesce(route, '') = ''), min(hold_id) FILTER (WHERE coalesce(route, '') = '')"                     \
	" FROM staged_jobs_held GROUP BY queue, target, tenant ORDER BY k"

int pg_held_load(struct pg_held *h, struct pg_source *pg, struct rounds *r)
{
	PGresult *res = pg_source_exec(pg, LOAD_SQL);
	int rc = 0;

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) < 1) {
		rc = pg_source_fail(pg, res, "could not read staged_jobs_held");
		PQclear(res);
		return rc;
	}
	rounds_reset(r, strtoll(PQgetvalue(res, 0, 4), NULL, 10) + 1);
	for (int i = 1; rc == 0 && i < PQntuples(res); i++) {
		rc = rounds_key(&h->key, PQgetisnull(res, i, 6) ? NULL : PQgetvalue(res, i, 6),
				(size_t)PQgetlength(res, i, 6), PQgetvalue(res, i, 1), (size_t)PQgetlength(res, i, 1));
		if (rc == 0)
			rc = rounds_load(r, h->key.data, h->key.len,
					 PQgetisnull(res, i, 2) ? NULL : PQgetvalue(res, i, 2),
					 (size_t)PQgetlength(res, i, 2), strtoll(PQgetvalue(res, i, 3), NULL, 10),
					 strtoll(PQgetvalue(res, i, 4), NULL, 10),
					 strtoll(PQgetvalue(res, i, 5), NULL, 10));
		if (rc == 0 && strcmp(PQgetvalue(res, i, 7), "t") == 0)
			rounds_by_rule(r, (size_t)rounds_find(r, h->key.data, h->key.len),
				       strtoll(PQgetvalue(res, i, 8), NULL, 10));
	}
	PQclear(res);
	return rc;
}

/*
 * Held rows whose route column names a route this relay does not have (it
 * was removed or renamed since they were held) go to the dead table, as a
 * fresh row naming no route would: at a new leadership's reading, before the
 * rounds count what is left. Looked for first, so that a relay whose role
 * may not write the dead table (or a held table without such rows, the
 * common case) runs no statement that fails.
 */
#define ROUTE_GONE_WHERE " FROM staged_jobs_held WHERE route <> '' AND NOT route = ANY($1::text[])"
#define ROUTE_GONE_ANY_SQL "SELECT EXISTS (SELECT 1" ROUTE_GONE_WHERE ")"
#define ROUTE_GONE_SQL                                                                                                 \
	"WITH g AS (DELETE" ROUTE_GONE_WHERE                                                                           \
	" RETURNING *), i AS (INSERT INTO staged_jobs_dead (id, queue, job_class,"                                     \
	" args, run_at, options, created_at, jid, uuid, tenant, route, reason) SELECT id, queue, job_class, args,"     \
	" run_at, options, created_at, jid, uuid, tenant, route, 'route \"' || left(route, 100) || '\" is not a route" \
	" of this relay (--route); it was held for target ' || coalesce(target, 'default') FROM g ORDER BY hold_id"    \
	" RETURNING 1) SELECT count(*) FROM i"

/* Runs sql with the one parameter names; NULL after pg_source_fail. */
static PGresult *exec_names(struct pg_source *pg, const char *sql, const char *names, const char *what)
{
	PGresult *res = PQexecParams(pg->conn, sql, 1, NULL, &names, NULL, NULL, 0);

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
		return res;
	pg_source_fail(pg, res, what);
	PQclear(res);
	return NULL;
}

int pg_held_dead_gone_routes(struct pg_held *h, struct pg_source *pg, const char *const *names, size_t n,
			     long long *moved)
{
	PGresult *res;
	bool any;
	int rc;

	*moved = 0;
	buf_reset(&h->sql);
	rc = buf_puts(&h->sql, "{");
	for (size_t i = 0; rc == 0 && i < n; i++) /* route names need no quoting (routes.h) */
		rc = buf_printf(&h->sql, "%s\"%s\"", i ? "," : "", names[i]);
	if (rc < 0 || (rc = buf_puts(&h->sql, "}")) < 0)
		return rc;
	if (!(res = exec_names(pg, ROUTE_GONE_ANY_SQL, h->sql.data, "could not read staged_jobs_held")))
		return -EIO;
	any = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	if (!any)
		return 0;
	if (!(res = exec_names(pg, ROUTE_GONE_SQL, h->sql.data, "could not dead-letter held rows of a removed route")))
		return -EIO;
	*moved = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return 0;
}

/* Appends "{a,b,c}" of n values got(i). */
static int put_ints(struct buf *sql, size_t n, long long (*got)(const void *v, size_t i), const void *v)
{
	int rc = buf_puts(sql, "'{");

	for (size_t i = 0; rc == 0 && i < n; i++)
		if (!i || (rc = buf_puts(sql, ",")) == 0)
			rc = buf_put_int(sql, got(v, i));
	return rc ? rc : buf_puts(sql, "}'::int8[]");
}

static long long mv_id(const void *v, size_t i)
{
	return ((const struct held_move *)v)[i].id;
}

static long long mv_round(const void *v, size_t i)
{
	return ((const struct held_move *)v)[i].round;
}

/* Appends the targets of mv as a text[]: NULL for the default one. Route
 * names are letters, digits, '_', '-' and '.' (routes.h): no quoting needed. */
static int put_targets(struct buf *sql, const struct held_move *mv, size_t nmv)
{
	int rc = buf_puts(sql, "'{");

	for (size_t i = 0; rc == 0 && i < nmv; i++)
		rc = buf_printf(sql, "%s%s%s%s", i ? "," : "", mv[i].target ? "\"" : "",
				mv[i].target ? mv[i].target : "NULL", mv[i].target ? "\"" : "");
	return rc ? rc : buf_puts(sql, "}'::text[]");
}

/* Moves every row of mv, in id order (so hold_id follows id within a batch),
 * and fails the statement unless it moved exactly those: a row changed under
 * the batch rolls it back, as the commit's check does. */
static int append_move(struct buf *sql, const struct held_move *mv, size_t nmv)
{
	int rc = buf_puts(sql, "WITH m AS (DELETE FROM staged_jobs s USING unnest(");

	if (rc == 0 && (rc = put_ints(sql, nmv, mv_id, mv)) == 0 && (rc = buf_puts(sql, ", ")) == 0)
		rc = put_ints(sql, nmv, mv_round, mv);
	if (rc == 0 && (rc = buf_puts(sql, ", ")) == 0)
		rc = put_targets(sql, mv, nmv);
	if (rc == 0)
		rc = buf_printf(sql,
				") AS h(id, round, target) WHERE s.id = h.id"
				" RETURNING s.*, h.round AS held_round, h.target AS held_target),"
				" i AS (INSERT INTO staged_jobs_held (id, queue, job_class, args, run_at, options,"
				" created_at, jid, uuid, tenant, route, round, target)"
				" SELECT id, queue, job_class, args, run_at, options, created_at, jid, uuid, tenant,"
				" route, held_round, held_target FROM m ORDER BY id RETURNING 1)"
				" SELECT CASE WHEN n = %zu THEN n ELSE ('held ' || n || ' rows of %zu:"
				" rows changed under the batch')::int8 END FROM (SELECT count(*) AS n FROM i) c;",
				nmv, nmv);
	return rc;
}

/* The wanted queues' names (part 1) or targets (part 0) as an array of literals. */
static int put_queues(struct buf *sql, PGconn *conn, const struct rounds *r, const struct held_want *w, size_t nw,
		      int part)
{
	int rc = buf_puts(sql, "ARRAY[");

	for (size_t i = 0; rc == 0 && i < nw; i++) {
		const struct rounds_queue *q = &r->q[w[i].qi];
		const char *target, *queue;
		size_t tlen, qlen;
		char *lit;
		rounds_key_split(q->name, q->len, &target, &tlen, &queue, &qlen);
		if (part == 0 && !target) {
			rc = buf_printf(sql, "%sNULL", i ? "," : "");
			continue;
		}
		if (!(lit = part ? PQescapeLiteral(conn, queue, qlen) : PQescapeLiteral(conn, target, tlen)))
			return -ENOMEM;
		rc = buf_printf(sql, "%s%s", i ? "," : "", lit);
		PQfreemem(lit);
	}
	return rc ? rc : buf_puts(sql, "]::text[]");
}

/* Each wanted queue's rows after its cursor, one index range each (LATERAL),
 * in queue, round, hold_id order, within max_bytes. */
static int append_read(struct buf *sql, PGconn *conn, const struct rounds *r, const struct held_want *w, size_t nw,
		       long max_job, long max_bytes)
{
	static const char order[] = "ord, round, hold_id";
	int rc = read_bounds_head(sql, max_job, ", round, hold_id, held_us, target", false);

	if (rc == 0)
		rc = buf_puts(sql, "SELECT s.*, c.ord FROM unnest(");
	if (rc == 0 && (rc = put_queues(sql, conn, r, w, nw, 1)) == 0 && (rc = buf_puts(sql, ", ")) == 0)
		rc = put_queues(sql, conn, r, w, nw, 0);
	for (int col = 0; col < 3 && rc == 0; col++) {
		if ((rc = buf_puts(sql, ", '{")) < 0)
			break;
		for (size_t i = 0; rc == 0 && i < nw; i++) {
			const struct rounds_pos *p = &r->q[w[i].qi].pend;
			long long v = col == 0 ? p->round : col == 1 ? p->hid : w[i].limit;
			if (!i || (rc = buf_puts(sql, ",")) == 0)
				rc = buf_put_int(sql, v);
		}
		if (rc == 0)
			rc = buf_puts(sql, "}'::int8[]");
	}
	if (rc == 0)
		rc = buf_printf(
			sql,
			") WITH ORDINALITY AS c(queue, target, round, hid, lim, ord) CROSS JOIN LATERAL (SELECT %s,"
			" s.round, s.hold_id, floor(extract(epoch FROM clock_timestamp() - s.held_at) * 1000000)::int8"
			" AS held_us, s.target FROM staged_jobs_held s WHERE s.queue = c.queue"
			" AND s.target IS NOT DISTINCT FROM c.target"
			" AND (s.round, s.hold_id) > (c.round, c.hid) ORDER BY s.round, s.hold_id LIMIT c.lim) s",
			read_bounds_columns);
	return rc ? rc : read_bounds_tail_n(sql, max_bytes, order);
}

int pg_held_move_read(struct pg_held *h, struct pg_source *pg, const struct rounds *r, const struct held_move *mv,
		      size_t nmv, const struct held_want *w, size_t nw, long max_bytes)
{
	PGresult *res;
	int rc = 0;

	pg_held_clear(h);
	buf_reset(&h->sql);
	if (nmv && (rc = append_move(&h->sql, mv, nmv)) < 0)
		return rc;
	if (nw && (rc = append_read(&h->sql, pg->conn, r, w, nw, pg->cfg->max_job_bytes, max_bytes)) < 0)
		return rc;
	if (!PQsendQuery(pg->conn, h->sql.data))
		return pg_source_fail(pg, NULL, "could not hold or release jobs");
	while (pg->conn && (res = pg_source_next_result(pg)) != NULL) {
		ExecStatusType st = PQresultStatus(res);
		if (rc == 0 && st != PGRES_TUPLES_OK)
			rc = pg_source_fail(pg, res, "could not hold or release jobs");
		else if (rc == 0 && nw && PQnfields(res) > COL_TARGET && !h->rows) {
			h->rows = res;
			continue;
		}
		PQclear(res);
	}
	if (rc == 0 && !pg->conn)
		rc = pg_source_fail(pg, NULL, "could not hold or release jobs: abandoned to stop");
	if (rc == 0 && nw && !h->rows)
		rc = pg_source_fail(pg, NULL, "the release read returned nothing");
	if (rc == 0 && h->rows)
		rc = pg_read_ids(h->rows, &h->ids, &h->cap);
	if (rc < 0)
		pg_held_clear(h);
	return rc;
}

int pg_held_nrows(const struct pg_held *h)
{
	return h->rows ? PQntuples(h->rows) : 0;
}

void pg_held_row(const struct pg_held *h, int i, struct job_row *row, struct held_row *hr)
{
	pg_read_row_of(h->rows, i, h->ids[i], row);
	hr->round = strtoll(PQgetvalue(h->rows, i, COL_ROUND), NULL, 10);
	hr->hold_id = strtoll(PQgetvalue(h->rows, i, COL_HOLD_ID), NULL, 10);
	hr->held_us = strtoll(PQgetvalue(h->rows, i, COL_HELD_US), NULL, 10);
	hr->target = PQgetisnull(h->rows, i, COL_TARGET) ? NULL : PQgetvalue(h->rows, i, COL_TARGET);
	hr->target_len = (size_t)PQgetlength(h->rows, i, COL_TARGET);
}
