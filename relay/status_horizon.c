/* The oldest holder of the xmin horizon, from pg_stat_activity's backends (status_horizon.h). */
#include "fmacros.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_conn.h"
#include "status_horizon.h"

/*
 * The backend of this database whose xmin (or xid) is the oldest: vacuum
 * cannot remove any row deleted after it began. Its age is its transaction's
 * (a snapshot is taken at the transaction's start, or at each statement of a
 * READ COMMITTED one: then the age overstates how long it held the horizon,
 * on the safe side). Only backends: standbys' feedback, replication slots
 * and prepared transactions hold it too, and are not read here yet.
 */
#define HORIZON_SQL                                                                                                    \
	"SELECT pid, coalesce(usename::text, ''), coalesce(application_name, ''), coalesce(state, ''),"                \
	" greatest(0, extract(epoch FROM clock_timestamp() - coalesce(xact_start, backend_start)))::float8"            \
	" FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"                        \
	" AND (backend_xid IS NOT NULL OR backend_xmin IS NOT NULL)"                                                   \
	" ORDER BY greatest(age(backend_xmin), age(backend_xid)) DESC, xact_start LIMIT 1"

int status_horizon_read(PGconn *conn, struct status_horizon *out, char *err, size_t errlen)
{
	PGresult *res = PQexecParams(conn, HORIZON_SQL, 0, NULL, NULL, NULL, NULL, 0);
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		pg_conn_error(err, errlen, conn, res, "could not read the xmin horizon's holder");
		rc = -EIO;
	} else if (PQntuples(res) == 1) {
		out->held = true;
		snprintf(out->kind, sizeof(out->kind), "backend");
		out->pid = atoi(PQgetvalue(res, 0, 0));
		snprintf(out->name, sizeof(out->name), "pid %d, user %s, application_name \"%s\", %s", out->pid,
			 PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 3));
		out->age_s = strtod(PQgetvalue(res, 0, 4), NULL);
	}
	PQclear(res);
	return rc;
}
