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

/* The role, the schema tables go to, whether the role may create there, the
 * schema's owner (the database's owner when that is pg_database_owner, as
 * public's is from PostgreSQL 15) and the GRANT that would let it. */
static const char *const who_sql =
	"SELECT current_user, n.nspname, has_schema_privilege(n.oid, 'CREATE'),"
	" pg_get_userbyid(CASE pg_get_userbyid(n.nspowner) WHEN 'pg_database_owner' THEN d.datdba"
	" ELSE n.nspowner END),"
	" format('GRANT CREATE ON SCHEMA %I TO %I', n.nspname, current_user)"
	" FROM (SELECT 1) one"
	" LEFT JOIN pg_namespace n ON n.nspname = current_schema()"
	" LEFT JOIN pg_database d ON d.datname = current_database()";

#define SQLSTATE_INSUFFICIENT_PRIVILEGE "42501"

/* One `migrate` run: its session, the first error and its SQLSTATE. */
struct migrate_run {
	PGconn *conn;
	char *err;
	size_t errlen;
	char state[6];
	char primary[256];
};

/*
 * Runs sql, with name as $1 when given. Returns the number of rows it
 * returned (0 for a command), or -EIO with the server's message in err.
 */
static int run(struct migrate_run *m, const char *sql, const char *name)
{
	const char *params[1] = { name };
	PGresult *res = name ? PQexecParams(m->conn, sql, 1, NULL, params, NULL, NULL, 0) : PQexec(m->conn, sql);
	ExecStatusType st = PQresultStatus(res);
	int rc = st == PGRES_TUPLES_OK ? PQntuples(res) : 0;
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		snprintf(m->err, m->errlen, "%s", PQerrorMessage(m->conn));
		pg_conn_one_line(m->err);
		snprintf(m->state, sizeof(m->state), "%s", state ? state : "");
		snprintf(m->primary, sizeof(m->primary), "%s", primary ? primary : m->err);
		rc = -EIO;
	}
	PQclear(res);
	return rc;
}

static int apply_one(struct migrate_run *m, const struct migration *mg)
{
	int rc = run(m, "SELECT 1 FROM stagedrain_migrations WHERE name = $1", mg->name);

	if (rc < 0)
		return rc;
	if (rc > 0) {
		log_info("migration already applied", LOGF(F_STR("migration", mg->name)));
		return 0;
	}
	if ((rc = run(m, mg->sql, NULL)) < 0 ||
	    (rc = run(m, "INSERT INTO stagedrain_migrations (name) VALUES ($1)", mg->name)) < 0)
		return rc;
	log_info("migration applied", LOGF(F_STR("migration", mg->name)));
	return 0;
}

/*
 * After a refusal for lack of privilege (the transaction rolled back), err
 * says which role ran and what it needs, instead of the server's bare
 * "permission denied for schema public". Left as it is if that lookup fails.
 */
static void explain_denied(struct migrate_run *m)
{
	PGresult *res = PQexec(m->conn, who_sql);
	const char *role, *schema;

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		PQclear(res);
		return;
	}
	role = PQgetvalue(res, 0, 0);
	schema = PQgetvalue(res, 0, 1);
	if (!PQgetisnull(res, 0, 1) && strcmp(PQgetvalue(res, 0, 2), "f") == 0)
		snprintf(m->err, m->errlen,
			 "%s: role \"%s\" may not create tables in schema \"%s\" (owner \"%s\"): run stagedrain "
			 "migrate as the schema's owner, or %s",
			 m->primary, role, schema, PQgetvalue(res, 0, 3), PQgetvalue(res, 0, 4));
	else
		snprintf(m->err, m->errlen,
			 "%s: role \"%s\" lacks a privilege the migrations need: run stagedrain migrate as the "
			 "owner of the stagedrain tables",
			 m->primary, role);
	PQclear(res);
}

int migrate_apply(PGconn *conn, char *err, size_t errlen)
{
	struct migrate_run m = { .conn = conn, .err = err, .errlen = errlen };
	int rc = run(&m, migrate_setup, NULL);

	for (int i = 0; rc == 0 && i < migrations_count; i++)
		rc = apply_one(&m, &migrations[i]);
	if (rc == 0)
		return run(&m, "COMMIT", NULL) < 0 ? -EIO : 0;
	PQclear(PQexec(conn, "ROLLBACK"));
	if (strcmp(m.state, SQLSTATE_INSUFFICIENT_PRIVILEGE) == 0)
		explain_denied(&m);
	return rc;
}
