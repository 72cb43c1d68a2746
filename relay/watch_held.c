/* The watcher's reading of staged_jobs_held (include/watch_held.h). */
#include "fmacros.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pg_conn.h"
#include "watch_held.h"

/*
 * Held rows wait as staged ones do (a target down, a queue at its cap), and
 * the oldest job's age must count them: by created_at, which the held table
 * keeps from the staged row, not held_at. A pass over the whole held table,
 * as nothing indexes created_at: on the leader only, once per
 * --watch-interval, under the watcher's statement timeout (docs/operating.md
 * has what it costs). The held table has no dead entries to walk from a long
 * transaction beyond its own released rows.
 */
#define HELD_SQL                                                                                                       \
	"SELECT target, queue, count(*), greatest(0, extract(epoch FROM clock_timestamp() - min(created_at)))::float8" \
	" FROM staged_jobs_held GROUP BY target, queue"

/* SQLSTATE query_canceled: what the statement timeout raises. */
#define SQLSTATE_CANCELED "57014"

int watch_held_read(PGconn *pg, struct metrics_held_row **rows, size_t *n, double *oldest_s, char *err, size_t errlen)
{
	PGresult *res = PQexec(pg, HELD_SQL);
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	struct metrics_held_row *out;
	int nt;

	*rows = NULL;
	*n = 0;
	*oldest_s = 0;
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		bool canceled = state && strcmp(state, SQLSTATE_CANCELED) == 0;
		if (!canceled)
			pg_conn_error(err, errlen, pg, res, "could not read staged_jobs_held");
		PQclear(res);
		return canceled ? -ETIMEDOUT : -EIO;
	}
	nt = PQntuples(res);
	if (nt == 0) {
		PQclear(res);
		return 0;
	}
	if (!(out = calloc((size_t)nt, sizeof(*out)))) {
		PQclear(res);
		return -ENOMEM;
	}
	for (int i = 0; i < nt; i++) {
		const char *t = PQgetisnull(res, i, 0) ? "default" : PQgetvalue(res, i, 0);
		const char *q = PQgetvalue(res, i, 1);
		metrics_short_label(t, strlen(t), out[i].target);
		metrics_short_label(q, strlen(q), out[i].queue);
		out[i].rows = strtoll(PQgetvalue(res, i, 2), NULL, 10);
		out[i].oldest_s = strtod(PQgetvalue(res, i, 3), NULL);
		if (out[i].oldest_s > *oldest_s)
			*oldest_s = out[i].oldest_s;
	}
	PQclear(res);
	*rows = out;
	*n = (size_t)nt;
	return 0;
}
