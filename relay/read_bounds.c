/* The SQL round a read of job rows: bounds, budget, what follows (read_bounds.h). */
#include "fmacros.h"

#include <stdio.h>

#include "job.h"
#include "read_bounds.h"

const char read_bounds_columns[] =
	"s.id, s.queue, s.job_class, s.args, s.options, s.jid, s.created_at, s.run_at, s.uuid, s.tenant, s.route";

/* Microseconds as text, or the time itself when it is infinite: no value a
 * timestamptz column holds can make the read fail (pg_read_row decides). */
#define TIME_US(col)                                                                                                   \
	"CASE WHEN isfinite(" col ") THEN floor(extract(epoch FROM " col ") * 1000000)::text ELSE " col "::text END"
/* The times, whether a row follows, and the uuid: converted by Postgres for
 * a text result, or as stored for a binary one (pg_read_row decodes them:
 * no numeric arithmetic, no uuid_out, in the reads that carry a backlog). */
#define TEXT_MIDDLE TIME_US("created_at") ", " TIME_US("run_at") ", more, uuid::text"
#define BINARY_MIDDLE "created_at, run_at, more, uuid"

/* One column, and the reason's part for it. */
struct bounded {
	const char *col, *what;
	const char *noun; /* bound by JOB_MAX_NAME_BYTES, named so; NULL: by --max-job-bytes (json) */
};

static const struct bounded columns[] = {
	{ "queue", "queue is ", "queue name" },
	{ "job_class", "job_class is ", "class name" },
	{ "tenant", "tenant is ", "tenant" },
	{ "route", "route is ", "route name" },
	{ "args", "args are larger than --max-job-bytes: ", NULL },
	{ "options", "options are larger than --max-job-bytes: ", NULL },
};
enum { C_QUEUE, C_CLASS, C_TENANT, C_ROUTE, C_ARGS, C_OPTIONS, C_N };

/*
 * A column's bytes, at least, cheaply: a text column's length is known
 * without reading it (compressed or not); a json column's stored size is
 * its text's and a header's unless it is compressed, when only its text
 * can tell. No copy and no decompression for the rows that are neither.
 */
static int put_size(struct buf *sql, const struct bounded *c)
{
	if (c->noun)
		return buf_printf(sql, "coalesce(octet_length(t.%s), 0)", c->col);
	return buf_printf(sql,
			  "coalesce(CASE WHEN pg_column_compression(t.%s) IS NULL THEN pg_column_size(t.%s)"
			  " ELSE octet_length(t.%s::text) END, 0)",
			  c->col, c->col, c->col);
}

/* A column's bytes exactly: its stored size is trusted only where it is
 * within the bound (then its text is too). */
static int put_len(struct buf *sql, const struct bounded *c, long bound)
{
	if (c->noun)
		return buf_printf(sql, "octet_length(%s)", c->col);
	return buf_printf(sql,
			  "(CASE WHEN pg_column_compression(%s) IS NULL AND pg_column_size(%s) <= %ld"
			  " THEN pg_column_size(%s) ELSE octet_length(%s::text) END)",
			  c->col, c->col, bound, c->col, c->col);
}

static long bound_of(const struct bounded *c, long name, long job)
{
	return c->noun ? name : job;
}

/*
 * Per row: all_bytes, every column's size, which decides whether a row is
 * small enough that no column can be over its bound; row_bytes, what the
 * budget counts, the columns that stay behind left out (a hostile row
 * costs the batch nothing, so a batch takes all of them at once).
 */
static int put_sizes(struct buf *sql, long name, long job)
{
	int rc = buf_puts(sql, "SELECT t.*, coalesce(octet_length(t.jid), 0)");

	for (int i = 0; rc == 0 && i < C_N; i++)
		if ((rc = buf_puts(sql, " + ")) == 0)
			rc = put_size(sql, &columns[i]);
	if (rc == 0)
		rc = buf_puts(sql, " AS all_bytes, coalesce(octet_length(t.jid), 0)");
	for (int i = 0; rc == 0 && i < C_N; i++) {
		long bound = bound_of(&columns[i], name, job);
		if ((rc = buf_puts(sql, " + (CASE WHEN ")) == 0 && (rc = put_size(sql, &columns[i])) == 0 &&
		    (rc = buf_printf(sql, " > %ld THEN 0 ELSE ", bound)) == 0 && (rc = put_size(sql, &columns[i])) == 0)
			rc = buf_puts(sql, " END)");
	}
	return rc ? rc : buf_puts(sql, " AS row_bytes FROM (");
}

/* A column as read: NULL when it is over its bound and stays behind. A
 * small row has no column over any: most rows, by one comparison. */
static int put_pick(struct buf *sql, const struct bounded *c, long small, long bound)
{
	int rc = buf_printf(sql, "CASE WHEN all_bytes <= %ld THEN %s WHEN ", small, c->col);

	if (rc == 0)
		rc = put_len(sql, c, bound);
	return rc ? rc : buf_printf(sql, " > %ld THEN NULL ELSE %s END, ", bound, c->col);
}

/* The first column over its bound, as the row's dead-letter reason; NULL
 * when none is. Checked in the order the job is built. */
static int put_unfit(struct buf *sql, long small, long name, long job)
{
	int rc = buf_printf(sql, "CASE WHEN all_bytes <= %ld THEN NULL", small);

	for (int i = 0; rc == 0 && i < C_N; i++) {
		const struct bounded *c = &columns[i];
		long bound = bound_of(c, name, job);
		if ((rc = buf_puts(sql, " WHEN ")) == 0 && (rc = put_len(sql, c, bound)) == 0 &&
		    (rc = buf_printf(sql, " > %ld THEN '%s' || ", bound, c->what)) == 0 &&
		    (rc = put_len(sql, c, bound)) == 0)
			rc = c->noun ? buf_printf(sql, " || ' bytes, over the %ld-byte limit of a %s'", bound, c->noun)
				     : buf_printf(sql, " || ' bytes, over %ld'", bound);
	}
	return rc ? rc : buf_puts(sql, " END");
}

/*
 * The budget counts each row's row_bytes and 100 for the rest (the uuid's
 * 36, the times, the framing). One window over the rows as the subquery
 * gave them (a running total, and whether a row follows) sorts nothing.
 * Each column's exact length is taken only in the rows past the small
 * bound: taken in every row, the lengths cost more than the rest of the read.
 * The sizes' level is kept apart (OFFSET 0), so each is taken once a row:
 * folded into the levels above, every use took it again (0.4 ms more per
 * 1,000 rows, and a compressed value decompressed once per use), more than
 * the sort of rows already in order this costs.
 */
int read_bounds_head(struct buf *sql, long max_job, const char *extra, bool binary)
{
	const long name = JOB_MAX_NAME_BYTES, small = name < max_job ? name : max_job;
	int rc = buf_puts(sql, "SELECT id, ");

	for (int i = C_QUEUE; rc == 0 && i <= C_OPTIONS; i++)
		if (i != C_TENANT && i != C_ROUTE)
			rc = put_pick(sql, &columns[i], small, bound_of(&columns[i], name, max_job));
	if (rc == 0)
		rc = buf_printf(sql, "jid, %s, ", binary ? BINARY_MIDDLE : TEXT_MIDDLE);
	for (int i = C_TENANT; rc == 0 && i <= C_ROUTE; i++)
		rc = put_pick(sql, &columns[i], small, name);
	if (rc == 0)
		rc = put_unfit(sql, small, name, max_job);
	if (rc == 0)
		rc = buf_printf(sql,
				"%s FROM (SELECT u.*, sum(u.row_bytes + 100) OVER win AS total,"
				" lead(true, 1, false) OVER win AS more FROM (",
				extra);
	return rc ? rc : put_sizes(sql, name, max_job);
}

int read_bounds_tail(struct buf *sql, const char *max_bytes, const char *order)
{
	return buf_printf(sql,
			  ") t OFFSET 0) u WINDOW win AS (ORDER BY %s ROWS UNBOUNDED PRECEDING)) w"
			  " WHERE w.total - (w.row_bytes + 100) < %s ORDER BY %s;",
			  order, max_bytes, order);
}

int read_bounds_tail_n(struct buf *sql, long max_bytes, const char *order)
{
	char bound[24];

	snprintf(bound, sizeof(bound), "%ld", max_bytes);
	return read_bounds_tail(sql, bound, order);
}
