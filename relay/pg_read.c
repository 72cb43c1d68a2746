/* A batch's read of staged_jobs: the statements (the gaps' LATERAL probes,
 * the byte budget, the xid bound), what their results say, and the rows. */
#include "fmacros.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_read.h"

/* The snapshot comes first, right after BEGIN: in REPEATABLE READ the first
 * statement's snapshot is the snapshot of every read that follows. */
#define SNAPSHOT_SQL "SELECT pg_current_snapshot()::text;"
/* Taken after the snapshot and after the sequence was read: the gaps' bound
 * (gaps.h), an xid. A read that finds nothing above the cursor opens no gap,
 * and then takes none: an idle relay's polls would spend one each. The
 * bound is needed besides only where the cursor may jump (a first read) and
 * where a kept gap is read (it becomes an ordinary gap with this bound).
 * A scalar subquery, not EXISTS: the planner drops an EXISTS's ORDER BY
 * and may scan the table from its head, through every row drained since
 * the last vacuum. */
#define BOUND_SQL "SELECT pg_current_xact_id()::text"
#define BOUND_IF_ROWS_SQL                                                                                              \
	"SELECT CASE WHEN (SELECT id FROM staged_jobs WHERE id > %lld ORDER BY id LIMIT 1) IS NOT NULL"                \
	" THEN pg_current_xact_id()::text END"
/* On a first read that finds nothing, how far ids were handed out: the cursor
 * jumps there instead of every empty read walking from the table's head. The
 * relay may lack SELECT on the sequence (sql/roles.sql grants it): then NULL. */
#define SKIP_SQL                                                                                                       \
	"SELECT CASE WHEN has_sequence_privilege(q.seq, 'SELECT')"                                                     \
	" THEN pg_sequence_last_value(q.seq::regclass) END"                                                            \
	" FROM (SELECT pg_get_serial_sequence('staged_jobs', 'id') AS seq) q;"

enum {
	COL_ID,
	COL_QUEUE,
	COL_CLASS,
	COL_ARGS,
	COL_OPTIONS,
	COL_JID,
	COL_CREATED,
	COL_RUN_AT,
	COL_MORE,
	COL_UUID,
	COL_TENANT,
	COL_ROUTE,
	COL_UNFIT
};

void pg_read_init(struct pg_read *r)
{
	memset(r, 0, sizeof(*r));
	snapshot_init(&r->snap);
}

/* Rows in the gaps this read covers (late commits), as a subquery; lo and hi
 * as array literals. LATERAL makes each range its own index probe: a plain
 * join ordered by id lets the planner walk the whole index from its head,
 * crossing every drained row a long transaction keeps, and filter. */
static int append_gap_read(struct buf *sql, const struct gaps *g, long long young_since, int limit)
{
	int rc = buf_puts(sql, "(SELECT s.* FROM unnest('{");
	bool any = false;

	for (size_t i = 0; rc == 0 && i < g->n; i++)
		if (gaps_reads(g, i, young_since) && (rc = buf_printf(sql, "%s%lld", any ? "," : "", g->v[i].lo)) == 0)
			any = true;
	if (rc == 0)
		rc = buf_puts(sql, "}'::int8[], '{");
	any = false;
	for (size_t i = 0; rc == 0 && i < g->n; i++)
		if (gaps_reads(g, i, young_since) && (rc = buf_printf(sql, "%s%lld", any ? "," : "", g->v[i].hi)) == 0)
			any = true;
	return rc ? rc
		  : buf_printf(sql,
			       "}'::int8[]) AS g(lo, hi) CROSS JOIN LATERAL (SELECT s.*"
			       " FROM staged_jobs s WHERE s.id BETWEEN g.lo AND g.hi ORDER BY s.id LIMIT %d) s"
			       " ORDER BY s.id LIMIT %d) UNION ALL ",
			       limit, limit);
}

static bool reads_any_gap(const struct gaps *g, long long young_since)
{
	for (size_t i = 0; i < g->n; i++)
		if (gaps_reads(g, i, young_since))
			return true;
	return false;
}

static bool reads_kept_gap(const struct gaps *g, long long young_since)
{
	for (size_t i = 0; i < g->n; i++)
		if (g->v[i].bound == GAP_KEPT && gaps_reads(g, i, young_since))
			return true;
	return false;
}

/* The rows in id order, within max_bytes: read_bounds' wrapper round the
 * gaps' and the cursor's reads. */
static int append_rows(struct buf *sql, const struct config *cfg, const struct gaps *g, long long young_since,
		       int limit, long max_bytes, bool prepared)
{
	bool gaps = reads_any_gap(g, young_since);
	int rc;

	/* No gap to read: the statement pg_read_prepare_sql made, planned once. */
	if (!gaps && prepared)
		return buf_printf(sql, "EXECUTE " PG_READ_FIRST "(%lld, %d, %ld);", g->cursor, limit, max_bytes);
	rc = read_bounds_head(sql, cfg->max_job_bytes, "", false);

	if (rc == 0 && gaps && (rc = buf_puts(sql, "SELECT * FROM (")) == 0)
		rc = append_gap_read(sql, g, young_since, limit);
	if (rc == 0)
		rc = buf_printf(sql, "(SELECT s.* FROM staged_jobs s WHERE s.id > %lld ORDER BY s.id LIMIT %d)",
				g->cursor, limit);
	if (rc == 0 && gaps)
		rc = buf_printf(sql, ") b ORDER BY id LIMIT %d", limit);
	return rc ? rc : read_bounds_tail_n(sql, max_bytes, "id");
}

/* Reads above the cursor, and in the gaps below it: no query starts below the
 * oldest gap, so drained rows' dead index entries are not walked per batch. */
int pg_read_build(struct pg_read *r, struct buf *sql, const struct config *cfg, const struct gaps *g, int limit,
		  long long young_since, long max_bytes, bool prepared)
{
	int rc = buf_puts(sql, SNAPSHOT_SQL);

	pg_read_clear(r);
	snapshot_clear(&r->snap);
	r->above = g->cursor;
	r->seen = (struct gaps_read){ .young_since = young_since, .retire_below = LLONG_MAX };
	r->skip = g->cursor == 0;
	r->tables = 0;
	r->bound_taken = false;
	r->bad_snapshot = false;
	r->due = 0;
	if (rc == 0)
		rc = append_rows(sql, cfg, g, young_since, limit, max_bytes, prepared);
	if (rc == 0 && r->skip)
		rc = buf_puts(sql, SKIP_SQL);
	if (rc == 0 && (r->skip || reads_kept_gap(g, young_since)))
		return buf_puts(sql, BOUND_SQL);
	return rc ? rc : buf_printf(sql, BOUND_IF_ROWS_SQL, g->cursor);
}

/* The rows above $1, at most $2, within $3 bytes; s.*: a scan that need
 * not build a row of its own for the levels above. */
static int prepare_one(struct buf *sql, const struct config *cfg, const char *name, bool binary)
{
	int rc = buf_printf(sql, "PREPARE %s(int8, int8, int8) AS ", name);

	if (rc == 0)
		rc = read_bounds_head(sql, cfg->max_job_bytes, "", binary);
	if (rc == 0)
		rc = buf_puts(sql, "(SELECT s.* FROM staged_jobs s WHERE s.id > $1 ORDER BY s.id LIMIT $2)");
	return rc ? rc : read_bounds_tail(sql, "$3", "id");
}

int pg_read_prepare_sql(struct buf *sql, const struct config *cfg)
{
	/* A PREPARE that failed may leave the other behind: start clean. */
	int rc = buf_puts(sql, "DEALLOCATE ALL;");

	if (rc == 0)
		rc = prepare_one(sql, cfg, PG_READ_FIRST, false);

	return rc ? rc : prepare_one(sql, cfg, PG_READ_NEXT, true);
}

int pg_read_build_rows(struct buf *sql, const struct config *cfg, const struct gaps *g, int limit,
		       long long young_since, long max_bytes)
{
	return append_rows(sql, cfg, g, young_since, limit, max_bytes, false);
}

const struct snapshot *pg_read_snapshot(const struct pg_read *r)
{
	return r->tables > 0 && !r->bad_snapshot ? &r->snap : NULL;
}

void pg_read_take_rows(struct pg_read *r, PGresult *res)
{
	PQclear(r->rows);
	r->rows = res;
}

static uint64_t value_u64(const PGresult *res)
{
	return PQntuples(res) == 1 ? strtoull(PQgetvalue(res, 0, 0), NULL, 10) : 0;
}

/* The snapshot, the rows, the sequence (on a first read) and the bound, in
 * that order: keeps the rows and notes the rest. */
bool pg_read_take(struct pg_read *r, PGresult *res)
{
	int t = r->tables++;

	if (t == 0) {
		/* Unparsable or out of memory: the read fails (pg_read_finish). */
		r->bad_snapshot = PQntuples(res) != 1 || snapshot_parse(&r->snap, PQgetvalue(res, 0, 0)) < 0;
		r->seen.xmin = r->snap.xmin;
		r->seen.snap = &r->snap;
	} else if (t == 1)
		r->rows = res;
	else if (t == 2 && r->skip)
		r->seen.skip_to = PQgetisnull(res, 0, 0) ? 0 : (long long)value_u64(res);
	else {
		r->bound_taken = true;
		r->seen.bound = value_u64(res); /* 0: none was needed */
	}
	return t == 1;
}

/* A binary int8, timestamptz or the like: 8 bytes, most significant first. */
static uint64_t be64(const char *p)
{
	uint64_t v = 0;

	for (int k = 0; k < 8; k++)
		v = v << 8 | (unsigned char)p[k];
	return v;
}

int pg_read_ids(const PGresult *res, long long **ids, size_t *cap)
{
	size_t n = (size_t)PQntuples(res);
	bool binary = n > 0 && PQfformat(res, COL_ID) == 1;
	int rc = buf_grow_array((void **)ids, cap, n, sizeof(**ids));

	for (size_t i = 0; rc == 0 && i < n; i++)
		(*ids)[i] = binary ? (long long)be64(PQgetvalue(res, (int)i, COL_ID))
				   : strtoll(PQgetvalue(res, (int)i, COL_ID), NULL, 10);
	return rc;
}

/* A binary uuid's 16 bytes as its 36 characters, for the formats. */
static void uuid_text(const unsigned char *b, char out[PG_READ_UUID_SIZE])
{
	static const char hex[] = "0123456789abcdef";
	char *o = out;

	for (int k = 0; k < 16; k++) {
		if (k == 4 || k == 6 || k == 8 || k == 10)
			*o++ = '-';
		*o++ = hex[b[k] >> 4];
		*o++ = hex[b[k] & 15];
	}
	*o = '\0';
}

/* A binary result's uuids as text, one per row, where pg_read_row finds them. */
static int note_uuids(struct pg_read *r, size_t n)
{
	int rc;

	if (n == 0 || PQfformat(r->rows, COL_UUID) != 1)
		return 0;
	if ((rc = buf_grow_array((void **)&r->uuids, &r->uuid_cap, n, sizeof(*r->uuids))) < 0)
		return rc;
	for (size_t i = 0; i < n; i++)
		uuid_text((const unsigned char *)PQgetvalue(r->rows, (int)i, COL_UUID), r->uuids[i]);
	return 0;
}

/* The ids read, ascending, and how far the gap read got if its limit or the
 * size bound cut it short. */
static int note_ids(struct pg_read *r, const struct gaps *g, int limit)
{
	size_t n = (size_t)PQntuples(r->rows), below = 0;
	const char *more = n > 0 ? PQgetvalue(r->rows, (int)n - 1, COL_MORE) : "";
	bool cut = PQfformat(r->rows, COL_MORE) == 1 ? *more == 1 : strcmp(more, "t") == 0;
	int rc = pg_read_ids(r->rows, &r->ids, &r->cap);

	if (rc == 0)
		rc = note_uuids(r, n);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++)
		below += r->ids[i] <= g->cursor;
	/* Rows above the cursor open gaps, which need the bound (same snapshot:
	 * the bound's condition saw them too). */
	if (below < n && r->seen.bound == 0)
		return -EIO;
	r->seen.ids = r->ids;
	r->seen.n = n;
	if (below > 0 && (below >= (size_t)limit || (cut && below == n)))
		r->seen.retire_below = r->ids[below - 1];
	return 0;
}

int pg_read_finish(struct pg_read *r, const struct gaps *g, int limit)
{
	int rc;

	if (!r->rows || !r->bound_taken || r->bad_snapshot)
		rc = -EIO;
	else
		rc = note_ids(r, g, limit);
	if (rc < 0)
		pg_read_clear(r);
	return rc;
}

int pg_read_nrows(const struct pg_read *r)
{
	return r->rows ? PQntuples(r->rows) : 0;
}

/* Where a binary timestamptz counts from: 2000-01-01, in epoch microseconds. */
#define PG_EPOCH_US 946684800000000LL

/* A time column's microseconds, or why the row cannot carry it. */
static long long time_us(const PGresult *r, int i, int col, const char **unfit)
{
	static const char *const why[2][3] = {
		{ "created_at is infinity: no job time can hold it", "created_at is -infinity: no job time can hold it",
		  "created_at is out of the range a job time can hold" },
		{ "run_at is infinity: no job time can hold it", "run_at is -infinity: no job time can hold it",
		  "run_at is out of the range a job time can hold" },
	};
	const char *text = PQgetvalue(r, i, col);
	int which = col == COL_RUN_AT;
	char *end;
	long long us;

	if (PQfformat(r, col) == 1) {
		int64_t t = (int64_t)be64(text);
		int kind = t == INT64_MAX ? 0 : t == INT64_MIN ? 1 : 2;
		if (kind == 2 && !__builtin_add_overflow(t, PG_EPOCH_US, &us))
			return us;
		if (!*unfit)
			*unfit = why[which][kind];
		return 0;
	}
	errno = 0;
	us = strtoll(text, &end, 10);
	if (errno == 0 && end != text && *end == '\0')
		return us;
	if (!*unfit)
		*unfit = why[which][strcmp(text, "infinity") == 0 ? 0 : strcmp(text, "-infinity") == 0 ? 1 : 2];
	return 0;
}

void pg_read_row(const struct pg_read *read, int i, struct job_row *row)
{
	pg_read_row_of(read->rows, i, read->ids[i], row); /* ids parsed once, when the read noted them */
	if (PQfformat(read->rows, COL_UUID) == 1) {
		row->uuid = read->uuids[i];
		row->uuid_len = PG_READ_UUID_SIZE - 1;
	}
}

void pg_read_row_of(const PGresult *r, int i, long long id, struct job_row *row)
{
	row->id = id;
	row->unfit = NULL;
	row->queue = PQgetvalue(r, i, COL_QUEUE);
	row->queue_len = (size_t)PQgetlength(r, i, COL_QUEUE);
	row->job_class = PQgetvalue(r, i, COL_CLASS);
	row->class_len = (size_t)PQgetlength(r, i, COL_CLASS);
	row->args = PQgetvalue(r, i, COL_ARGS);
	row->args_len = (size_t)PQgetlength(r, i, COL_ARGS);
	if (!PQgetisnull(r, i, COL_UNFIT))
		row->unfit = PQgetvalue(r, i, COL_UNFIT);
	row->options = PQgetvalue(r, i, COL_OPTIONS);
	row->options_len = (size_t)PQgetlength(r, i, COL_OPTIONS);
	row->jid = PQgetvalue(r, i, COL_JID);
	row->jid_len = (size_t)PQgetlength(r, i, COL_JID);
	row->uuid = PQgetvalue(r, i, COL_UUID);
	row->uuid_len = (size_t)PQgetlength(r, i, COL_UUID);
	row->tenant = PQgetisnull(r, i, COL_TENANT) ? NULL : PQgetvalue(r, i, COL_TENANT);
	row->tenant_len = (size_t)PQgetlength(r, i, COL_TENANT);
	row->route = PQgetisnull(r, i, COL_ROUTE) ? NULL : PQgetvalue(r, i, COL_ROUTE);
	row->route_len = (size_t)PQgetlength(r, i, COL_ROUTE);
	row->created_at_us = time_us(r, i, COL_CREATED, &row->unfit);
	row->has_run_at = !PQgetisnull(r, i, COL_RUN_AT);
	row->run_at_us = row->has_run_at ? time_us(r, i, COL_RUN_AT, &row->unfit) : 0;
}

void pg_read_clear(struct pg_read *r)
{
	PQclear(r->rows);
	r->rows = NULL;
}

void pg_read_free(struct pg_read *r)
{
	if (!r)
		return;
	pg_read_clear(r);
	free(r->ids);
	r->ids = NULL;
	r->cap = 0;
	free(r->uuids);
	r->uuids = NULL;
	r->uuid_cap = 0;
	snapshot_free(&r->snap);
}
