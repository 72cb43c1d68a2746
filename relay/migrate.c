/* Schema migrations, compiled into the binary from sql/. */
#include "fmacros.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "migrate.h"
#include "pg_conn.h"

static const char *const migrate_setup = "BEGIN;"
					 /* Two `migrate` runs at once wait for each other instead of racing. */
					 "SELECT pg_advisory_xact_lock(hashtext('stagedrain migrate'));"
					 "CREATE TABLE IF NOT EXISTS stagedrain_migrations ("
					 " name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())";

/*
 * Runs sql, with name as $1 when given. Returns the number of rows it
 * returned (0 for a command), or -EIO with the server's message in err.
 */
static int run(PGconn *conn, const char *sql, const char *name, char *err, size_t errlen)
{
	const char *params[1] = { name };
	PGresult *res = name ? PQexecParams(conn, sql, 1, NULL, params, NULL, NULL, 0) : PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(res);
	int rc = st == PGRES_TUPLES_OK ? PQntuples(res) : 0;

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		snprintf(err, errlen, "%s", PQerrorMessage(conn));
		pg_conn_one_line(err);
		rc = -EIO;
	}
	PQclear(res);
	return rc;
}

static int apply_one(PGconn *conn, const struct migration *m, char *err, size_t errlen)
{
	int rc = run(conn, "SELECT 1 FROM stagedrain_migrations WHERE name = $1", m->name, err, errlen);

	if (rc < 0)
		return rc;
	if (rc > 0) {
		log_info("migration already applied", LOGF(F_STR("migration", m->name)));
		return 0;
	}
	if ((rc = run(conn, m->sql, NULL, err, errlen)) < 0 ||
	    (rc = run(conn, "INSERT INTO stagedrain_migrations (name) VALUES ($1)", m->name, err, errlen)) < 0)
		return rc;
	log_info("migration applied", LOGF(F_STR("migration", m->name)));
	return 0;
}

int migrate_apply(PGconn *conn, char *err, size_t errlen)
{
	int rc = run(conn, migrate_setup, NULL, err, errlen);

	for (int i = 0; rc == 0 && i < migrations_count; i++)
		rc = apply_one(conn, &migrations[i], err, errlen);
	if (rc == 0)
		return run(conn, "COMMIT", NULL, err, errlen) < 0 ? -EIO : 0;
	PQclear(PQexec(conn, "ROLLBACK"));
	return rc;
}
