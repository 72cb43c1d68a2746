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
/* Taken after the snapshot and after the sequence was read: the gaps' bound (gaps.h). */
#define BOUND_SQL "SELECT pg_current_xact_id()::text"
/* On a first read that finds nothing, how far ids were handed out: the cursor
 * jumps there instead of every empty read walking from the table's head. The
 * relay may lack SELECT on the sequence (sql/roles.sql grants it): then NULL. */
#define SKIP_SQL                                                                                                       \
	"SELECT CASE WHEN has_sequence_privilege(q.seq, 'SELECT')"                                                     \
	" THEN pg_sequence_last_value(q.seq::regclass) END"                                                            \
	" FROM (SELECT pg_get_serial_sequence('staged_jobs', 'id') AS seq) q;"

/* Microseconds as text, or the time itself when it is infinite: no value a
 * timestamptz column holds can make the read fail (pg_read_row decides). */
#define TIME_US(col)                                                                                                   \
	"CASE WHEN isfinite(s." col ") THEN floor(extract(epoch FROM s." col ") * 1000000)::text"                      \
	" ELSE s." col "::text END"
#define TIMES TIME_US("created_at") " AS created_us, " TIME_US("run_at") " AS run_at_us"
const char pg_read_columns[] =
	"s.id, s.queue, s.job_class, s.args, s.options, s.jid, " TIMES ", s.uuid::text AS uuid, s.tenant, s.route";

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
			       "}'::int8[]) AS g(lo, hi) CROSS JOIN LATERAL (SELECT %s"
			       " FROM staged_jobs s WHERE s.id BETWEEN g.lo AND g.hi ORDER BY s.id LIMIT %d) s"
			       " ORDER BY s.id LIMIT %d) UNION ALL ",
			       pg_read_columns, limit, limit);
}

static bool reads_any_gap(const struct gaps *g, long long young_since)
{
	for (size_t i = 0; i < g->n; i++)
		if (gaps_reads(g, i, young_since))
			return true;
	return false;
}

/* The first column over its bound, as the row's dead-letter reason; NULL when
 * none is. Checked in the order the job is built. */
#define UNFIT_SQL                                                                                                            \
	"CASE WHEN queue_len > %d THEN 'queue is ' || queue_len || ' bytes, over the %d-byte limit of a queue name'"         \
	" WHEN job_class_len > %d THEN 'job_class is ' || job_class_len || ' bytes, over the %d-byte limit of a class name'" \
	" WHEN tenant_len > %d THEN 'tenant is ' || tenant_len || ' bytes, over the %d-byte limit of a tenant'"              \
	" WHEN route_len > %d THEN 'route is ' || route_len || ' bytes, over the %d-byte limit of a route name'"             \
	" WHEN args_len > %ld THEN 'args are larger than --max-job-bytes: ' || args_len || ' bytes, over %ld'"               \
	" WHEN options_len > %ld THEN 'options are larger than --max-job-bytes: ' || options_len || ' bytes, over %ld'"      \
	" END"

/* A column as read (name, or the text of a jsonb one, text): NULL when it is
 * over its bound and stays behind. */
#define PICK(col, text, bound) "CASE WHEN " col "_len > " bound " THEN NULL ELSE " text " END"
/* Its bytes as read: none when it stays behind. */
#define FIT(col, bound) "(CASE WHEN " col "_len > " bound " THEN 0 ELSE " col "_len END)"

/* The row's columns, each bounded; then UNFIT_SQL and the extra columns. */
#define PICK_SQL                                                                                                       \
	"SELECT id, " PICK("queue", "queue", "%d") ", " PICK("job_class", "job_class", "%d") ", " PICK(                \
		"args", "args_t", "%ld") ", " PICK("options", "options_t",                                             \
						   "%ld") ", jid, created_us, run_at_us, more,"                        \
							  " uuid, " PICK("tenant", "tenant",                           \
									 "%d") ", " PICK("route", "route", "%d") ", "
/* What the budget counts of a row: every column as read, and 64 for the rest. */
#define BYTES_SQL                                                                                                      \
	FIT("args", "%ld")                                                                                             \
	" + " FIT("options", "%ld") " + " FIT("queue", "%d") " + " FIT("job_class", "%d") " + " FIT(                   \
		"tenant",                                                                                              \
		"%d") " + " FIT("route",                                                                               \
				"%d") " + coalesce(octet_length(jid), 0) + coalesce(octet_length(uuid), 0) + 64"
#define LENS_SQL                                                                                                       \
	"octet_length(t.queue) AS queue_len, octet_length(t.job_class) AS job_class_len,"                              \
	" octet_length(t.args_t) AS args_len, coalesce(octet_length(t.options_t), 0) AS options_len,"                  \
	" coalesce(octet_length(t.tenant), 0) AS tenant_len, coalesce(octet_length(t.route), 0) AS route_len"

/*
 * A column over its bound stays in Postgres (NULL comes instead, and the
 * reason says which and how long): a hostile row costs the relay its short
 * columns, never its long ones. The budget counts every column as read.
 * Each jsonb becomes text once, in the level OFFSET 0 keeps apart; that
 * level is in order already, so the one window (running total, and whether
 * a row follows) sorts nothing.
 */
int pg_read_rows_head(struct buf *sql, long max_job, const char *extra)
{
	const int name = JOB_MAX_NAME_BYTES;

	return buf_printf(sql,
			  PICK_SQL UNFIT_SQL
			  "%s FROM (SELECT l.*, sum(l.bytes) OVER win AS total, lead(true, 1, false) OVER win AS more"
			  " FROM (SELECT m.*, " BYTES_SQL " AS bytes FROM (SELECT t.*, " LENS_SQL
			  " FROM (SELECT u.*, u.args::text AS args_t, u.options::text AS options_t FROM (",
			  name, name, max_job, max_job, name, name, /* PICK_SQL */
			  name, name, name, name, name, name, name, name, max_job, max_job, max_job,
			  max_job, /* UNFIT_SQL */
			  extra, max_job, max_job, name, name, name, name /* BYTES_SQL */);
}

/* The tail with the budget as SQL text: a number, or a parameter. */
static int rows_tail(struct buf *sql, const char *max_bytes, const char *order)
{
	return buf_printf(sql,
			  ") u ORDER BY %s OFFSET 0) t) m) l WINDOW win AS (ORDER BY %s ROWS UNBOUNDED PRECEDING)) w"
			  " WHERE w.total - w.bytes < %s ORDER BY %s;",
			  order, order, max_bytes, order);
}

int pg_read_rows_tail(struct buf *sql, long max_bytes, const char *order)
{
	char bound[24];

	snprintf(bound, sizeof(bound), "%ld", max_bytes);
	return rows_tail(sql, bound, order);
}

/* The rows in id order, within max_bytes: pg_read_rows_head's wrapper round
 * the gaps' and the cursor's reads. */
static int append_rows(struct buf *sql, const struct config *cfg, const struct gaps *g, long long young_since,
		       int limit, long max_bytes, const char *prepared)
{
	bool gaps = reads_any_gap(g, young_since);
	int rc;

	/* No gap to read: the statement pg_read_next_sql made, planned once. */
	if (!gaps && prepared)
		return buf_printf(sql, "EXECUTE %s(%lld, %d, %ld);", prepared, g->cursor, limit, max_bytes);
	rc = pg_read_rows_head(sql, cfg->max_job_bytes, "");

	if (rc == 0 && gaps && (rc = buf_puts(sql, "SELECT * FROM (")) == 0)
		rc = append_gap_read(sql, g, young_since, limit);
	if (rc == 0)
		rc = buf_printf(sql, "(SELECT %s FROM staged_jobs s WHERE s.id > %lld ORDER BY s.id LIMIT %d)",
				pg_read_columns, g->cursor, limit);
	if (rc == 0 && gaps)
		rc = buf_printf(sql, ") b ORDER BY id LIMIT %d", limit);
	return rc ? rc : pg_read_rows_tail(sql, max_bytes, "id");
}

/* Reads above the cursor, and in the gaps below it: no query starts below the
 * oldest gap, so drained rows' dead index entries are not walked per batch. */
int pg_read_build(struct pg_read *r, struct buf *sql, const struct config *cfg, const struct gaps *g, int limit,
		  long long young_since, long max_bytes, const char *prepared)
{
	int rc = buf_puts(sql, SNAPSHOT_SQL);

	pg_read_clear(r);
	snapshot_clear(&r->snap);
	r->above = g->cursor;
	r->seen = (struct gaps_read){ .young_since = young_since, .retire_below = LLONG_MAX };
	r->skip = g->cursor == 0;
	r->tables = 0;
	r->bad_snapshot = false;
	r->due = 0;
	if (rc == 0)
		rc = append_rows(sql, cfg, g, young_since, limit, max_bytes, prepared);
	if (rc == 0 && r->skip)
		rc = buf_puts(sql, SKIP_SQL);
	return rc ? rc : buf_puts(sql, BOUND_SQL);
}

int pg_read_next_sql(struct buf *sql, const struct config *cfg)
{
	int rc = pg_read_rows_head(sql, cfg->max_job_bytes, "");

	if (rc == 0)
		rc = buf_printf(sql, "(SELECT %s FROM staged_jobs s WHERE s.id > $1 ORDER BY s.id LIMIT $2)",
				pg_read_columns);
	return rc ? rc : rows_tail(sql, "$3", "id");
}

int pg_read_build_rows(struct buf *sql, const struct config *cfg, const struct gaps *g, int limit,
		       long long young_since, long max_bytes)
{
	return append_rows(sql, cfg, g, young_since, limit, max_bytes, NULL);
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
	else
		r->seen.bound = value_u64(res);
	return t == 1;
}

int pg_read_ids(const PGresult *res, long long **ids, size_t *cap)
{
	size_t n = (size_t)PQntuples(res);
	int rc = buf_grow_array((void **)ids, cap, n, sizeof(**ids));

	for (size_t i = 0; rc == 0 && i < n; i++)
		(*ids)[i] = strtoll(PQgetvalue(res, (int)i, COL_ID), NULL, 10);
	return rc;
}

/* The ids read, ascending, and how far the gap read got if its limit or the
 * size bound cut it short. */
static int note_ids(struct pg_read *r, const struct gaps *g, int limit)
{
	size_t n = (size_t)PQntuples(r->rows), below = 0;
	bool cut = n > 0 && strcmp(PQgetvalue(r->rows, (int)n - 1, COL_MORE), "t") == 0;
	int rc = pg_read_ids(r->rows, &r->ids, &r->cap);

	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++)
		below += r->ids[i] <= g->cursor;
	r->seen.ids = r->ids;
	r->seen.n = n;
	if (below > 0 && (below >= (size_t)limit || (cut && below == n)))
		r->seen.retire_below = r->ids[below - 1];
	return 0;
}

int pg_read_finish(struct pg_read *r, const struct gaps *g, int limit)
{
	int rc;

	if (!r->rows || r->seen.bound == 0 || r->bad_snapshot)
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
	snapshot_free(&r->snap);
}
