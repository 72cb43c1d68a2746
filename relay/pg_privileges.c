/* Who may change staged rows besides the owner and the relay, and whether an app logs in as the owner. */
#include "fmacros.h"

#include <errno.h>
#include <stdio.h>

#include "pg_conn.h"
#include "pg_privileges.h"

/*
 * The roles that may change staged rows: a LOGIN role's privileges include
 * its groups' (has_table_privilege follows membership), so a role inside the
 * owner's group shows here too. The relay deletes what it pushed (and held
 * rows it released); stagedrain_admin deletes held rows (`stagedrain held`).
 */
#define ROLES_SQL                                                                                                      \
	"WITH t AS (SELECT c.oid, c.relname, c.relowner FROM pg_class c"                                               \
	"  WHERE c.oid IN (to_regclass('staged_jobs'), to_regclass('staged_jobs_held'))),"                             \
	" g AS (SELECT (SELECT oid FROM pg_roles WHERE rolname = 'stagedrain_relay') AS relay,"                        \
	"  (SELECT oid FROM pg_roles WHERE rolname = 'stagedrain_admin') AS admin),"                                   \
	" p AS (SELECT r.rolname, t.relname, string_agg(v.priv, ', ' ORDER BY v.priv) AS privs"                        \
	"  FROM t, g, pg_roles r, (VALUES ('DELETE'), ('TRUNCATE'), ('UPDATE')) v(priv)"                               \
	"  WHERE r.rolcanlogin AND NOT r.rolsuper AND r.oid <> t.relowner AND r.rolname <> current_user"               \
	"  AND has_table_privilege(r.oid, t.oid, v.priv)"                                                              \
	"  AND NOT (v.priv = 'DELETE' AND g.relay IS NOT NULL AND pg_has_role(r.oid, g.relay, 'USAGE'))"               \
	"  AND NOT (v.priv = 'DELETE' AND t.relname = 'staged_jobs_held' AND g.admin IS NOT NULL"                      \
	"   AND pg_has_role(r.oid, g.admin, 'USAGE'))"                                                                 \
	"  GROUP BY 1, 2)"                                                                                             \
	" SELECT format('role %I may %s %s, which only the tables'' owner and the relay should: it can lose or"        \
	" reorder staged jobs (REVOKE it; an app needs only stagedrain_app, docs/security.md)', rolname, privs,"       \
	" relname) FROM p"

/* The owner's sessions: an app logging in as the owner may do anything to
 * staged rows. psql's and the relays' own are an operator's, not an app's. */
#define OWNER_SQL                                                                                                      \
	" UNION ALL SELECT format('the owner of staged_jobs, role %I, has %s session%s open (application_name %s):"    \
	" an app that logs in as the owner may UPDATE and DELETE staged jobs; log it in as a role in stagedrain_app"   \
	" (docs/security.md)', rolname, n, CASE WHEN n = 1 THEN '' ELSE 's' END, apps)"                                \
	" FROM (SELECT o.rolname, count(*) AS n,"                                                                      \
	"  string_agg(DISTINCT coalesce(nullif(a.application_name, ''), '\"\"'), ', ') AS apps"                        \
	"  FROM pg_class c JOIN pg_roles o ON o.oid = c.relowner JOIN pg_stat_activity a ON a.usesysid = o.oid"        \
	"  WHERE c.oid = to_regclass('staged_jobs') AND NOT o.rolsuper AND a.datname = current_database()"             \
	"  AND a.pid <> pg_backend_pid() AND coalesce(a.application_name, '') NOT LIKE 'stagedrain%'"                  \
	"  AND coalesce(a.application_name, '') NOT IN ('psql', 'pg_dump', 'pg_restore')"                              \
	"  GROUP BY o.rolname) s"

int pg_privileges_read(PGconn *conn, struct pg_privileges *p, char *err, size_t errlen)
{
	PGresult *res = PQexec(conn, ROLES_SQL OWNER_SQL);

	p->n = 0;
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		snprintf(err, errlen, "%s", PQerrorMessage(conn));
		pg_conn_one_line(err);
		PQclear(res);
		return -EIO;
	}
	for (int i = 0; i < PQntuples(res) && p->n < PG_PRIVILEGES_MAX; i++)
		snprintf(p->text[p->n++], PG_PRIVILEGE_LEN, "%s", PQgetvalue(res, i, 0));
	PQclear(res);
	return 0;
}
