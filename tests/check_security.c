/* Security against the real servers: the roles script's grants, passwords kept
 * out of logs, TLS to Postgres, and hostile rows' columns. */
#include "fmacros.h"

#include <check.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "suites.h"

/* The statement must fail for lack of privilege (SQLSTATE 42501). */
static void denied(PGconn *c, const char *sql)
{
	PGresult *res = PQexec(c, sql);
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

	ck_assert_msg(PQresultStatus(res) == PGRES_FATAL_ERROR && state && strcmp(state, "42501") == 0,
		      "%s was not refused for lack of privilege: %s", sql,
		      PQresultStatus(res) == PGRES_FATAL_ERROR ? PQerrorMessage(c) : "it succeeded");
	PQclear(res);
}

static const char *pg_port(void)
{
	static char port[16];
	PGconn *c = h_pg();

	snprintf(port, sizeof(port), "%s", PQport(c));
	PQfinish(c);
	return port;
}

/* A conninfo for the test server as user, plus extra keywords. */
static const char *url_as(char *out, size_t len, const char *user, const char *extra)
{
	snprintf(out, len, "host=127.0.0.1 port=%s dbname=postgres user=%s %s", pg_port(), user, extra);
	return out;
}

static PGconn *pg_as(const char *user)
{
	char url[256];
	PGconn *c = PQconnectdb(url_as(url, sizeof(url), user, ""));

	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "connect as %s: %s", user, PQerrorMessage(c));
	return c;
}

/* Runs sql/roles.sql with psql as conninfo's user; its exit status, its output in TEST_DIR/roles.out. */
static int run_roles(const char *conninfo, const char *psql_opts)
{
	char services[512], cmd[1600];

	snprintf(services, sizeof(services), "%s", h_env("TEST_SERVICES"));
	snprintf(cmd, sizeof(cmd),
		 "psql -X -q -v ON_ERROR_STOP=1 %s -d '%s' -f '%s/../sql/roles.sql' >'%s/roles.out' 2>&1", psql_opts,
		 conninfo, dirname(services), h_env("TEST_DIR"));
	return system(cmd);
}

/* Runs sql/roles.sql with psql, as an admin would. */
static void apply_roles(const char *psql_opts)
{
	ck_assert_msg(run_roles(h_env("TEST_PG_URL"), psql_opts) == 0, "roles.sql %s failed", psql_opts);
}

/* A login role in a stagedrain group, made afresh. */
static void login_role(PGconn *c, const char *name, const char *group, const char *password)
{
	h_sql(c, "DROP ROLE IF EXISTS %s", name);
	h_sql(c, "CREATE ROLE %s LOGIN %s%s%s IN ROLE %s", name, password ? "PASSWORD '" : "", password ? password : "",
	      password ? "'" : "", group);
}

/* Every privilege the roles matched by who hold on any relation or column, sorted. */
#define GRANTS_OF(who)                                                                                                 \
	"SELECT coalesce(string_agg(g, ' ' ORDER BY g COLLATE \"C\"), '') FROM ("                                      \
	" SELECT c.relname || ':' || r.rolname || ':' || a.privilege_type AS g"                                        \
	" FROM pg_class c, aclexplode(c.relacl) a, pg_roles r"                                                         \
	" WHERE r.oid = a.grantee AND " who " UNION ALL"                                                               \
	" SELECT c.relname || '.' || t.attname || ':' || r.rolname || ':' || a.privilege_type"                         \
	" FROM pg_attribute t JOIN pg_class c ON c.oid = t.attrelid, aclexplode(t.attacl) a,"                          \
	" pg_roles r WHERE r.oid = a.grantee AND " who ") x"
/* The relay's and the app's (the admin's are checked apart: ADMIN_GRANTS). */
#define GRANTS_SQL GRANTS_OF("r.rolname LIKE 'stagedrain\\_%%' AND r.rolname <> 'stagedrain_admin'")
#define ADMIN_GRANTS_SQL GRANTS_OF("r.rolname = 'stagedrain_admin'")
/* `stagedrain dead` and `held`: read and delete dead rows, stage rows as the
 * app does (never choosing the id) and read their new id back, read and
 * delete held rows and add dead ones, nothing else. */
#define ADMIN_GRANTS                                                                                                   \
	"staged_jobs.args:stagedrain_admin:INSERT staged_jobs.created_at:stagedrain_admin:INSERT"                      \
	" staged_jobs.id:stagedrain_admin:SELECT staged_jobs.jid:stagedrain_admin:INSERT"                              \
	" staged_jobs.job_class:stagedrain_admin:INSERT staged_jobs.options:stagedrain_admin:INSERT"                   \
	" staged_jobs.queue:stagedrain_admin:INSERT staged_jobs.route:stagedrain_admin:INSERT"                         \
	" staged_jobs.run_at:stagedrain_admin:INSERT"                                                                  \
	" staged_jobs.tenant:stagedrain_admin:INSERT staged_jobs.uuid:stagedrain_admin:INSERT"                         \
	" staged_jobs_dead:stagedrain_admin:DELETE staged_jobs_dead:stagedrain_admin:INSERT"                           \
	" staged_jobs_dead:stagedrain_admin:SELECT"                                                                    \
	" staged_jobs_held:stagedrain_admin:DELETE staged_jobs_held:stagedrain_admin:SELECT"                           \
	" staged_jobs_id_seq:stagedrain_admin:USAGE"

/* In byte order (COLLATE "C" in GRANTS_SQL): "." sorts before ":". The app may
 * insert every column but id; unless app_returning_id=off it may also read id,
 * which sorts between created_at and jid, jid, queue, and uuid, last of its
 * columns. */
#define APP_INSERTS_BEFORE_ID "staged_jobs.args:stagedrain_app:INSERT staged_jobs.created_at:stagedrain_app:INSERT "
#define APP_INSERTS_TO_QUEUE                                                                                           \
	" staged_jobs.job_class:stagedrain_app:INSERT"                                                                 \
	" staged_jobs.options:stagedrain_app:INSERT staged_jobs.queue:stagedrain_app:INSERT"
#define APP_INSERTS_AFTER_QUEUE                                                                                        \
	" staged_jobs.route:stagedrain_app:INSERT"                                                                     \
	" staged_jobs.run_at:stagedrain_app:INSERT staged_jobs.tenant:stagedrain_app:INSERT"                           \
	" staged_jobs.uuid:stagedrain_app:INSERT"
#define OTHER_GRANTS                                                                                                   \
	" staged_jobs:stagedrain_relay:DELETE staged_jobs:stagedrain_relay:SELECT"                                     \
	" staged_jobs_dead.dead_id:stagedrain_relay:SELECT staged_jobs_dead.failed_at:stagedrain_relay:SELECT"         \
	" staged_jobs_dead.id:stagedrain_relay:SELECT"                                                                 \
	" staged_jobs_dead.job_class:stagedrain_relay:SELECT staged_jobs_dead.queue:stagedrain_relay:SELECT"           \
	" staged_jobs_dead.reason:stagedrain_relay:SELECT"                                                             \
	" staged_jobs_dead:stagedrain_relay:INSERT staged_jobs_held:stagedrain_relay:DELETE"                           \
	" staged_jobs_held:stagedrain_relay:INSERT staged_jobs_held:stagedrain_relay:SELECT"                           \
	" staged_jobs_held_hold_id_seq:stagedrain_relay:SELECT staged_jobs_id_seq:stagedrain_app:USAGE"                \
	" staged_jobs_id_seq:stagedrain_relay:SELECT staged_jobs_leader:stagedrain_relay:INSERT"                       \
	" staged_jobs_leader:stagedrain_relay:SELECT staged_jobs_leader:stagedrain_relay:UPDATE"
#define EXPECTED_GRANTS                                                                                                \
	APP_INSERTS_BEFORE_ID                                                                                          \
	"staged_jobs.jid:stagedrain_app:INSERT" APP_INSERTS_TO_QUEUE APP_INSERTS_AFTER_QUEUE OTHER_GRANTS
#define EXPECTED_GRANTS_RETURNING                                                                                      \
	APP_INSERTS_BEFORE_ID "staged_jobs.id:stagedrain_app:SELECT staged_jobs.jid:stagedrain_app:INSERT"             \
			      " staged_jobs.jid:stagedrain_app:SELECT" APP_INSERTS_TO_QUEUE                            \
			      " staged_jobs.queue:stagedrain_app:SELECT" APP_INSERTS_AFTER_QUEUE                       \
			      " staged_jobs.uuid:stagedrain_app:SELECT" OTHER_GRANTS

START_TEST(roles_grant_exactly_what_each_needs)
{
	PGconn *c = h_pg(), *app, *relay, *admin;
	char grants[2048];

	/* Idempotent, and a rerun takes back a grant made in between. */
	apply_roles("-v app_returning_id=off");
	apply_roles("");
	h_sql(c, "CREATE TABLE IF NOT EXISTS unrelated (x int)");
	login_role(c, "sd_app", "stagedrain_app", NULL);
	login_role(c, "sd_relay", "stagedrain_relay", NULL);
	app = pg_as("sd_app");
	/* An ORM's create! by default: the id comes back; choosing one is still refused. */
	ck_assert_int_gt(h_sql(app, "INSERT INTO staged_jobs (queue, job_class, args, run_at, options,"
				    " created_at) VALUES ('default', 'R', '[]', NULL, '{}', now())"
				    " RETURNING id, uuid, jid"),
			 0);
	denied(app, "INSERT INTO staged_jobs (id, job_class) VALUES (1, 'A') RETURNING id");
	h_sql(c, "DELETE FROM staged_jobs");
	h_sql_text(c, GRANTS_SQL, grants, sizeof(grants));
	ck_assert_str_eq(grants, EXPECTED_GRANTS_RETURNING);
	h_sql_text(c, ADMIN_GRANTS_SQL, grants, sizeof(grants));
	ck_assert_str_eq(grants, ADMIN_GRANTS);

	/* Table-wide INSERT (what this script granted before) and UPDATE are taken back. */
	h_sql(c, "GRANT UPDATE, INSERT ON staged_jobs TO stagedrain_app");
	apply_roles("-v app_returning_id=off");
	h_sql(app, "INSERT INTO staged_jobs (job_class, args) VALUES ('A', '[1]')");
	/* An explicit id can fall below the relay's cursor, and that job would never
	 * be delivered: Postgres refuses it, whatever the value. */
	denied(app, "INSERT INTO staged_jobs (id, job_class) VALUES (1000000, 'A')");
	denied(app, "INSERT INTO staged_jobs VALUES (1000001, 'default', 'A')");
	h_sql_text(c, GRANTS_SQL, grants, sizeof(grants));
	ck_assert_str_eq(grants, EXPECTED_GRANTS);
	denied(app, "SELECT count(*) FROM staged_jobs");
	denied(app, "UPDATE staged_jobs SET queue = 'x'");
	denied(app, "DELETE FROM staged_jobs");
	denied(app, "TRUNCATE staged_jobs");
	denied(app, "INSERT INTO staged_jobs (job_class) VALUES ('A') RETURNING id");
	denied(app, "INSERT INTO staged_jobs_dead (id, reason) VALUES (1, 'x')");
	denied(app, "SELECT * FROM unrelated");

	relay = pg_as("sd_relay");
	ck_assert_int_eq(h_sql(relay, "SELECT count(*) FROM staged_jobs"), 1);
	denied(relay, "INSERT INTO staged_jobs (job_class) VALUES ('A')");
	denied(relay, "UPDATE staged_jobs SET queue = 'x'");
	denied(relay, "TRUNCATE staged_jobs");
	denied(relay, "SELECT nextval('staged_jobs_id_seq')");
	denied(relay, "SELECT * FROM staged_jobs_dead");
	denied(relay, "DELETE FROM staged_jobs_dead");
	denied(relay, "SELECT * FROM stagedrain_migrations");
	denied(relay, "SELECT * FROM unrelated");
	denied(relay, "INSERT INTO unrelated VALUES (1)");

	/* The admin replays dead rows and moves the held rows of a target gone
	 * (`stagedrain held`): it cannot read, change or take staged jobs, nor
	 * choose an id, nor change dead or held rows. */
	login_role(c, "sd_admin", "stagedrain_admin", NULL);
	admin = pg_as("sd_admin");
	h_sql(admin, "SELECT count(*) FROM staged_jobs_dead");
	h_sql(admin, "INSERT INTO staged_jobs (queue, job_class, args) VALUES ('q', 'A', '[]') RETURNING id");
	denied(admin, "SELECT jid FROM staged_jobs");
	denied(admin, "DELETE FROM staged_jobs");
	denied(admin, "UPDATE staged_jobs SET queue = 'x'");
	denied(admin, "INSERT INTO staged_jobs (id, job_class) VALUES (1000002, 'A')");
	denied(admin, "UPDATE staged_jobs_dead SET reason = 'x'");
	h_sql(admin, "SELECT count(*) FROM staged_jobs_held");
	denied(admin, "UPDATE staged_jobs_held SET target = 'x'");
	denied(admin, "INSERT INTO staged_jobs_held (id) VALUES (1)");
	denied(admin, "SELECT * FROM unrelated");
	PQfinish(admin);
	PQfinish(app);
	PQfinish(relay);
	PQfinish(c);
}
END_TEST

/* The tables' owner without CREATEROLE: told what to ask for before anything
 * changes; once the group roles exist, it grants exactly the same. */
START_TEST(roles_script_runs_as_an_owner_without_createrole)
{
	PGconn *c = h_pg();
	char owner[256], grants[2048], out[600];

	h_sql(c, "DROP ROLE IF EXISTS sd_app");
	h_sql(c, "DROP ROLE IF EXISTS sd_relay");
	h_sql(c, "DROP ROLE IF EXISTS sd_admin");
	h_sql(c, "DROP OWNED BY stagedrain_app, stagedrain_relay, stagedrain_admin");
	h_sql(c, "DROP ROLE stagedrain_app");
	h_sql(c, "DROP ROLE stagedrain_relay");
	h_sql(c, "DROP ROLE stagedrain_admin");
	h_sql(c, "DROP ROLE IF EXISTS sd_owner");
	h_sql(c, "CREATE ROLE sd_owner LOGIN NOCREATEROLE");
	h_sql(c, "ALTER TABLE staged_jobs OWNER TO sd_owner");
	h_sql(c, "ALTER TABLE staged_jobs_dead OWNER TO sd_owner");
	h_sql(c, "ALTER TABLE staged_jobs_held OWNER TO sd_owner");
	h_sql(c, "ALTER TABLE staged_jobs_leader OWNER TO sd_owner");
	url_as(owner, sizeof(owner), "sd_owner", "");

	ck_assert_int_ne(run_roles(owner, ""), 0);
	snprintf(out, sizeof(out), "%s/roles.out", h_env("TEST_DIR"));
	ck_assert(h_log_contains(out, "needs a superuser or CREATEROLE, and sd_owner has neither"));
	ck_assert(h_log_contains(out, "CREATE ROLE stagedrain_relay NOLOGIN; CREATE ROLE stagedrain_app NOLOGIN;"));
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM pg_roles WHERE rolname LIKE 'stagedrain\\_%%'"), 0);

	h_sql(c, "CREATE ROLE stagedrain_relay NOLOGIN");
	h_sql(c, "CREATE ROLE stagedrain_app NOLOGIN");
	h_sql(c, "CREATE ROLE stagedrain_admin NOLOGIN");
	ck_assert_int_eq(run_roles(owner, ""), 0);
	h_sql_text(c, GRANTS_SQL, grants, sizeof(grants));
	ck_assert_str_eq(grants, EXPECTED_GRANTS_RETURNING);
	h_sql_text(c, ADMIN_GRANTS_SQL, grants, sizeof(grants));
	ck_assert_str_eq(grants, ADMIN_GRANTS);

	h_sql(c, "ALTER TABLE staged_jobs OWNER TO postgres");
	h_sql(c, "ALTER TABLE staged_jobs_dead OWNER TO postgres");
	h_sql(c, "ALTER TABLE staged_jobs_held OWNER TO postgres");
	h_sql(c, "ALTER TABLE staged_jobs_leader OWNER TO postgres");
	h_sql(c, "DROP OWNED BY sd_owner");
	h_sql(c, "DROP ROLE sd_owner");
	PQfinish(c);
}
END_TEST

/* `migrate` as a role that may not create tables, on a database where they do
 * not exist yet: refused, naming the role, the schema, its owner and the two
 * ways out, and nothing is created. A fresh database keeps the others' tables
 * out of it; public's CREATE is revoked as PostgreSQL 15 does by default. */
START_TEST(migrate_without_create_names_the_role_and_what_it_needs)
{
	PGconn *c = h_pg(), *d;
	char url[256], log[600], dsn[256];

	h_sql(c, "DROP DATABASE IF EXISTS sd_migrate_denied");
	h_sql(c, "DROP ROLE IF EXISTS sd_nocreate");
	h_sql(c, "CREATE ROLE sd_nocreate LOGIN");
	h_sql(c, "CREATE DATABASE sd_migrate_denied");
	snprintf(dsn, sizeof(dsn), "host=127.0.0.1 port=%s dbname=sd_migrate_denied user=%s", pg_port(), PQuser(c));
	d = PQconnectdb(dsn);
	ck_assert_msg(PQstatus(d) == CONNECTION_OK, "connect to sd_migrate_denied: %s", PQerrorMessage(d));
	h_sql(d, "REVOKE CREATE ON SCHEMA public FROM PUBLIC");

	snprintf(url, sizeof(url), "host=127.0.0.1 port=%s dbname=sd_migrate_denied user=sd_nocreate", pg_port());
	ck_assert_int_eq(h_relay_run("migrate-denied", (const char *const[]){ "migrate", "--pg-url", url, NULL }), 1);
	snprintf(log, sizeof(log), "%s/migrate-denied.log", h_env("TEST_DIR"));
	ck_assert_msg(h_log_contains(log, "permission denied for schema public: role \\\"sd_nocreate\\\" may not "
					  "create tables in schema \\\"public\\\" (owner \\\"postgres\\\"): run "
					  "stagedrain migrate as the schema's owner, or GRANT CREATE ON SCHEMA "
					  "public TO sd_nocreate"),
		      "the refusal does not name the role and what it needs; see %s", log);
	ck_assert_int_eq(h_sql(d, "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
				  " WHERE n.nspname = 'public'"),
			 0);

	/* With CREATE but not the tables (the owner migrated): told to run as their owner. */
	h_sql(d, "GRANT CREATE ON SCHEMA public TO sd_nocreate");
	snprintf(dsn, sizeof(dsn), "host=127.0.0.1 port=%s dbname=sd_migrate_denied user=%s", pg_port(), PQuser(c));
	ck_assert_int_eq(h_relay_run("migrate-owner", (const char *const[]){ "migrate", "--pg-url", dsn, NULL }), 0);
	ck_assert_int_eq(h_relay_run("migrate-denied-2", (const char *const[]){ "migrate", "--pg-url", url, NULL }), 1);
	snprintf(log, sizeof(log), "%s/migrate-denied-2.log", h_env("TEST_DIR"));
	ck_assert_msg(h_log_contains(log, "permission denied for table stagedrain_migrations: role \\\"sd_nocreate\\\" "
					  "lacks a privilege the migrations need: run stagedrain migrate as the "
					  "owner of the stagedrain tables"),
		      "the refusal does not name the role and what it needs; see %s", log);

	PQfinish(d);
	h_sql(c, "DROP DATABASE sd_migrate_denied");
	h_sql(c, "DROP ROLE sd_nocreate");
	PQfinish(c);
}
END_TEST

/* The relay needs nothing more: it drains, dead-letters, and a second leader
 * deletes what the fence names, all as stagedrain_relay. */
START_TEST(relay_runs_as_the_relay_role)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	char url[256], log[600];

	apply_roles("");
	login_role(c, "sd_relay", "stagedrain_relay", NULL);
	url_as(url, sizeof(url), "sd_relay", "");
	h_stage(c, "default", 1, 5);
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('Bad', '{}')");
	ck_assert_int_eq(h_relay_run("roles-relay", (const char *const[]){ "--once", "--pg-url", url, NULL }), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE job_class = 'Bad'"), 1);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 5);

	h_stage(c, "default", 6, 3);
	ck_assert_int_eq(h_relay_run("roles-relay-2", (const char *const[]){ "--once", "--pg-url", url, NULL }), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 8);
	snprintf(log, sizeof(log), "%s/roles-relay.log", h_env("TEST_DIR"));
	ck_assert(h_log_contains(log, "to staged_jobs_dead\" dead_id=1 id=6 queue=default class=Bad reason="));

	/* A role granted by an older roles.sql, which may not read the dead
	 * table back: rows still move; the warning names what the batch knows. */
	h_sql(c, "REVOKE SELECT (dead_id, id, queue, job_class, reason) ON staged_jobs_dead FROM stagedrain_relay");
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('Bad2', '{}')");
	ck_assert_int_eq(h_relay_run("roles-relay-old", (const char *const[]){ "--once", "--pg-url", url, NULL }), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE job_class = 'Bad2'"), 1);
	snprintf(log, sizeof(log), "%s/roles-relay-old.log", h_env("TEST_DIR"));
	ck_assert(h_log_contains(log, "to staged_jobs_dead\" id=10 reason="));
	apply_roles("");
	redisFree(r);
	PQfinish(c);
}
END_TEST

/* True once the Redis list holds n entries, within 30 s. */
static bool wait_len(redisContext *r, const char *key, long long n)
{
	for (int i = 0; i < 600 && h_cmd_int(r, "LLEN %s", key) < n; i++)
		sleep_ms(50);
	return h_cmd_int(r, "LLEN %s", key) == n;
}

/* ---- passwords never logged ---- */

#define PG_URL_PW "pgUrlPw41"
#define PG_FILE_PW "pgFilePw42"
#define RD_URL_PW "rdUrlPw43"
#define RD_FILE_PW "rdFilePw44"

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

/* Makes user sd_pw log in with a SCRAM password, not trust as everyone else. */
static void require_password(PGconn *c)
{
	char hba[512], url[256], *old;
	long size;
	FILE *f;
	PGconn *probe = NULL;

	login_role(c, "sd_pw", "stagedrain_relay", PG_FILE_PW);
	h_sql_text(c, "SHOW hba_file", hba, sizeof(hba));
	f = fopen(hba, "r+");
	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	old = calloc(1, (size_t)size + 1);
	rewind(f);
	ck_assert_uint_eq(fread(old, 1, (size_t)size, f), (size_t)size);
	if (!strstr(old, "sd_pw")) {
		rewind(f);
		fprintf(f, "host all sd_pw 127.0.0.1/32 scram-sha-256\n%s", old);
	}
	fclose(f);
	free(old);
	h_sql(c, "SELECT pg_reload_conf()");
	/* The reload is asynchronous: wait until a login without password fails. */
	for (int i = 0; i < 200; i++) {
		probe = PQconnectdb(url_as(url, sizeof(url), "sd_pw", "password=''"));
		if (PQstatus(probe) != CONNECTION_OK)
			break;
		PQfinish(probe);
		probe = NULL;
		sleep_ms(50);
	}
	ck_assert_msg(probe != NULL, "pg_hba.conf change did not take effect");
	PQfinish(probe);
}

static void assert_no_password(const char *log)
{
	static const char *const pws[] = { PG_URL_PW, PG_FILE_PW, RD_URL_PW, RD_FILE_PW, NULL };

	for (const char *const *p = pws; *p; p++)
		ck_assert_msg(!h_log_contains(log, *p), "%s contains the password %s", log, *p);
}

START_TEST(logs_never_contain_passwords)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;
	char pg_url[256], redis_url[256], pg_file[512], redis_file[512], bad_log[3][512];

	apply_roles("");
	require_password(c);
	freeReplyObject(h_cmd(r, "ACL SETUSER sd_rd on resetpass >%s ~* &* +@all", RD_FILE_PW));
	snprintf(pg_file, sizeof(pg_file), "%s/pg.pw", h_env("TEST_DIR"));
	snprintf(redis_file, sizeof(redis_file), "%s/redis.pw", h_env("TEST_DIR"));
	write_file(pg_file, PG_FILE_PW "\n");
	write_file(redis_file, RD_FILE_PW "\n");
	/* The URLs' passwords are wrong: the files' must replace them. */
	snprintf(pg_url, sizeof(pg_url), "postgresql://sd_pw:%s@127.0.0.1:%s/postgres?application_name=sd_secrets",
		 PG_URL_PW, pg_port());
	snprintf(redis_url, sizeof(redis_url), "redis://sd_rd:%s@127.0.0.1:%s/0", RD_URL_PW, h_env("TEST_REDIS_PORT"));

	h_relay_start(&p, "secrets",
		      (const char *const[]){ "--pg-url", pg_url, "--pg-password-file", pg_file, "--redis-url",
					     redis_url, "--redis-password-file", redis_file, "--log-level", "debug",
					     NULL });
	h_stage(c, "default", 1, 5);
	RELAY_CHECK(&p, wait_len(r, "queue:default", 5), "jobs did not arrive; see %s", p.log);

	/* A lost Postgres session: warned about, then reconnected with the file's password. */
	h_sql(c, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'sd_secrets'");
	RELAY_CHECK(&p, h_log_wait(&p, "reconnected to postgres", 30000), "no postgres reconnect; see %s", p.log);

	/* Redis refusing the password for a while: errors, then a reconnect. */
	freeReplyObject(h_cmd(r, "ACL SETUSER sd_rd resetpass >someOtherPw"));
	freeReplyObject(h_cmd(r, "CLIENT KILL USER sd_rd"));
	h_stage(c, "default", 6, 1);
	RELAY_CHECK(&p, h_log_wait(&p, "could not reconnect to redis", 30000), "no redis auth error; see %s", p.log);
	freeReplyObject(h_cmd(r, "ACL SETUSER sd_rd resetpass >%s", RD_FILE_PW));
	RELAY_CHECK(&p, h_log_wait(&p, "reconnected to redis", 30000), "no redis reconnect; see %s", p.log);
	RELAY_CHECK(&p, wait_len(r, "queue:default", 6), "the last job did not arrive; see %s", p.log);
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 30000), 0);
	ck_assert(h_log_contains(p.log, "WRONGPASS"));
	assert_no_password(p.log);

	/* Start-up errors: only the URLs' wrong passwords, for each server in turn;
	 * and a URL libpq cannot parse, whose message would quote the password. */
	ck_assert_int_eq(h_relay_run("secrets-bad-pg",
				     (const char *const[]){ "--pg-url", pg_url, "--redis-url", redis_url, NULL }),
			 1);
	ck_assert_int_eq(h_relay_run("secrets-bad-redis",
				     (const char *const[]){ "--pg-url", pg_url, "--pg-password-file", pg_file,
							    "--redis-url", redis_url, NULL }),
			 1);
	snprintf(pg_url, sizeof(pg_url), "postgresql://sd_pw:%s%%zz@127.0.0.1:%s/postgres", PG_URL_PW, pg_port());
	ck_assert_int_eq(h_relay_run("secrets-bad-url", (const char *const[]){ "--pg-url", pg_url, NULL }), 2);
	for (int i = 0; i < 3; i++)
		snprintf(bad_log[i], sizeof(bad_log[i]), "%s/secrets-bad-%s.log", h_env("TEST_DIR"),
			 (const char *[]){ "pg", "redis", "url" }[i]);
	ck_assert(h_log_contains(bad_log[0], "password authentication failed"));
	ck_assert(h_log_contains(bad_log[1], "WRONGPASS"));
	ck_assert(h_log_contains(bad_log[2], "invalid --pg-url"));
	for (int i = 0; i < 3; i++)
		assert_no_password(bad_log[i]);

	freeReplyObject(h_cmd(r, "ACL DELUSER sd_rd"));
	redisFree(r);
	PQfinish(c);
}
END_TEST

/* A password (SECRET's halves, split at its ';') in an argument where no
 * password belongs: the relay or a command exits 2 with one message, which
 * shows neither half. The message is the one the run's log must hold. */
#define SECRET "Sekr3t;Pw9x"

static void refused_unechoed(const char *name, const char *const *args, const char *msg)
{
	struct relay_proc p;

	h_relay_start_bare(&p, name, args);
	RELAY_CHECK(&p, h_relay_wait(&p, 30000) == 2, "%s did not exit 2; see %s", name, p.log);
	ck_assert_msg(!h_log_contains(p.log, "Sekr3t") && !h_log_contains(p.log, "Pw9x"), "%s echoes the password",
		      p.log);
	ck_assert_msg(h_log_contains(p.log, msg), "%s lacks \"%s\"", p.log, msg);
}

START_TEST(no_message_echoes_a_password)
{
	const char *url = "redis://u:" SECRET "@h/0";
	char path[512], route[128];

	snprintf(route, sizeof(route), "shard2 q %s", url);
	refused_unechoed("echo-route", (const char *const[]){ "--route", route, NULL },
			 "--route \"shard2 q redis://...@h/0\": unexpected \"redis://...@h/0\"");
	snprintf(path, sizeof(path), "%s/echo.routes", h_env("TEST_DIR"));
	write_file(path, "# routes\nshard2 q redis://u:" SECRET "@h/0\n");
	refused_unechoed("echo-route-file", (const char *const[]){ "--route-file", path, NULL },
			 "line 2: unexpected \"redis://...@h/0\"");
	refused_unechoed("echo-positional", (const char *const[]){ "--once", url, NULL },
			 "unexpected argument \"redis://...@h/0\"");
	refused_unechoed("echo-status", (const char *const[]){ "status", url, NULL },
			 "unexpected argument \"redis://...@h/0\"");
	refused_unechoed("echo-help", (const char *const[]){ "help", url, NULL },
			 "no command \"redis://...@h/0\" to help with");
	refused_unechoed("echo-option", (const char *const[]){ "--u:" SECRET "@h", NULL }, "unknown option ...@h");
	/* The variable's ';' separates routes, but not inside a password. */
	setenv("STAGEDRAIN_ROUTE", "shard2 q redis://u:" SECRET "@h/0", 1);
	refused_unechoed("echo-env-bare", NULL, "unexpected \"redis://...@h/0\"");
	setenv("STAGEDRAIN_ROUTE", "shard2 q --redis-url redis://u:" SECRET "@h/0 --frob 1", 1);
	refused_unechoed("echo-env", NULL,
			 "--route \"shard2 q --redis-url redis://...@h/0 --frob 1\" (from STAGEDRAIN_ROUTE): unknown "
			 "option --frob");
	setenv("STAGEDRAIN_ROUTE", "shard2 q --redis-url unix:///s?password=" SECRET " --frob 1", 1);
	refused_unechoed("echo-env-conninfo", NULL, "unix:///s?password=... --frob 1");
	unsetenv("STAGEDRAIN_ROUTE");
}
END_TEST

/* ---- TLS to Postgres ---- */

/* A self-signed certificate for 127.0.0.1 (also its own root) in TEST_DIR. */
static void make_cert(const char *name)
{
	char cmd[1600], key[512];
	struct stat st;
	const char *dir = h_env("TEST_DIR");

	snprintf(cmd, sizeof(cmd),
		 "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2"
		 " -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1"
		 " -keyout '%s/%s.key' -out '%s/%s.crt' >/dev/null 2>&1",
		 dir, name, dir, name);
	ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
	/* The server refuses a key that others can read or it does not own. */
	snprintf(key, sizeof(key), "%s/%s.key", dir, name);
	snprintf(cmd, sizeof(cmd), "%s/pg", dir);
	ck_assert_int_eq(stat(cmd, &st), 0);
	ck_assert_int_eq(chown(key, st.st_uid, st.st_gid), 0);
	ck_assert_int_eq(chmod(key, 0600), 0);
}

static void ssl_off(void)
{
	PGconn *c = h_pg();

	h_sql(c, "ALTER SYSTEM RESET ssl");
	h_sql(c, "ALTER SYSTEM RESET ssl_cert_file");
	h_sql(c, "ALTER SYSTEM RESET ssl_key_file");
	h_sql(c, "SELECT pg_reload_conf()");
	PQfinish(c);
}

START_TEST(jobs_drain_over_verified_tls)
{
	PGconn *c = h_pg(), *probe = NULL;
	redisContext *r = h_redis();
	struct relay_proc p;
	const char *dir = h_env("TEST_DIR");
	char url[1024], extra[800], log[600];

	make_cert("server");
	make_cert("other");
	h_sql(c, "ALTER SYSTEM SET ssl_cert_file = '%s/server.crt'", dir);
	h_sql(c, "ALTER SYSTEM SET ssl_key_file = '%s/server.key'", dir);
	h_sql(c, "ALTER SYSTEM SET ssl = on");
	h_sql(c, "SELECT pg_reload_conf()");
	for (int i = 0; i < 200; i++) {
		probe = PQconnectdb(url_as(url, sizeof(url), "postgres", "sslmode=require"));
		if (PQstatus(probe) == CONNECTION_OK)
			break;
		PQfinish(probe);
		probe = NULL;
		sleep_ms(50);
	}
	ck_assert_msg(probe != NULL, "the server did not turn ssl on");
	PQfinish(probe);

	snprintf(extra, sizeof(extra), "sslmode=verify-full sslrootcert=%s/server.crt application_name=sd_tls", dir);
	url_as(url, sizeof(url), "postgres", extra);
	h_stage(c, "default", 1, 20);
	h_relay_start(&p, "tls", (const char *const[]){ "--pg-url", url, NULL });
	RELAY_CHECK(&p, wait_len(r, "queue:default", 20), "jobs did not arrive over tls; see %s", p.log);
	RELAY_CHECK(&p,
		    h_sql(c, "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)"
			     " WHERE a.application_name = 'sd_tls' AND s.ssl") == 1,
		    "the relay's session is not encrypted");
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 30000), 0);

	/* The certificate really is checked: another root, or another name, is refused. */
	snprintf(extra, sizeof(extra), "sslmode=verify-full sslrootcert=%s/other.crt", dir);
	ck_assert_int_eq(h_relay_run("tls-wrong-root",
				     (const char *const[]){ "--once", "--pg-url",
							    url_as(url, sizeof(url), "postgres", extra), NULL }),
			 1);
	snprintf(log, sizeof(log), "%s/tls-wrong-root.log", dir);
	ck_assert(h_log_contains(log, "certificate verify failed"));
	snprintf(extra, sizeof(extra), "sslmode=verify-full sslrootcert=%s/server.crt", dir);
	snprintf(url, sizeof(url), "host=localhost port=%s dbname=postgres user=postgres %s", pg_port(), extra);
	ck_assert_int_eq(h_relay_run("tls-wrong-name", (const char *const[]){ "--once", "--pg-url", url, NULL }), 1);
	snprintf(log, sizeof(log), "%s/tls-wrong-name.log", dir);
	ck_assert(h_log_contains(log, "does not match host name"));
	redisFree(r);
	PQfinish(c);
}
END_TEST

/* ---- hostile rows: columns far past any real job's ---- */

/* The relay's peak resident memory so far, in kB (VmHWM). */
static long peak_rss_kb(const struct relay_proc *p)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)p->proc.pid);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static bool wait_good_job(redisContext *r, PGconn *c, int timeout_ms)
{
	long long t0 = mono_ms();

	while (mono_ms() - t0 < timeout_ms) {
		if (h_cmd_int(r, "LLEN queue:default") == 1 && h_sql(c, "SELECT count(*) FROM staged_jobs") == 0)
			return true;
		sleep_ms(50);
	}
	return false;
}

#define HOSTILE_ROWS 300
/* 5 MB, in each of HOSTILE_ROWS rows. */
#define HOSTILE_SIZE "5000000"
#define HOSTILE_FROM " FROM generate_series(1, 300)"
#define BATCH_BYTES "2M"
#define JOB_BYTES "1M"

/*
 * Rows whose one column holds 5 MB (a queue, class or tenant name, or
 * options) and one good job behind them: the good job arrives, each hostile
 * row is in staged_jobs_dead with a reason naming its column, and the relay
 * never held more than its documented bound, 2 x (--batch-max-bytes +
 * 2 x --max-job-bytes) = 8 MB here, past what it holds idle. Before, the
 * read left tenant out of its budget and never bounded the names: 300 rows
 * of 5 MB tenants took the relay to 1.5 GB.
 */
static void hostile_column(const char *column, const char *insert)
{
	static const char *const args[] = {
		"--batch-max-bytes", BATCH_BYTES, "--max-job-bytes", JOB_BYTES, "--poll-interval", "20ms", NULL
	};
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;
	long peak, bound_kb = 2 * (2048 + 2 * 1024) + 40 * 1024; /* the bound, and 40 MB for the relay itself */

#if defined(__SANITIZE_ADDRESS__)
	bound_kb += 256 * 1024; /* ASan's quarantine keeps freed memory */
#endif
	h_sql(c, "SET default_toast_compression = lz4"); /* pglz took 10-20 s for these rows */
	h_sql(c, "%s", insert);
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('Good', '[1]')");
	h_relay_start(&p, "relay", args);
	RELAY_CHECK(&p, wait_good_job(r, c, 120000), "the good job behind the %s rows did not arrive; see %s", column,
		    p.log);
	peak = peak_rss_kb(&p);
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 10000), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), HOSTILE_ROWS);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE reason LIKE '%s %%bytes, over %%'",
			       column),
			 HOSTILE_ROWS);
	ck_assert_msg(peak > 0 && peak < bound_kb, "%s: the relay's peak RSS was %ld kB, over %ld kB", column, peak,
		      bound_kb);
	ck_assert_int_eq(h_cmd_int(r, "SCARD queues"), 1);
	PQfinish(c);
	redisFree(r);
}

START_TEST(a_huge_tenant_is_dead_lettered_within_the_memory_bound)
{
	hostile_column("tenant", "INSERT INTO staged_jobs (tenant, args, job_class)"
				 " SELECT repeat('t', " HOSTILE_SIZE "), '[1]', 'Hostile'" HOSTILE_FROM);
}
END_TEST

START_TEST(a_huge_queue_is_dead_lettered_within_the_memory_bound)
{
	hostile_column("queue", "INSERT INTO staged_jobs (queue, args, job_class)"
				" SELECT repeat('q', " HOSTILE_SIZE "), '[1]', 'Hostile'" HOSTILE_FROM);
}
END_TEST

START_TEST(a_huge_class_is_dead_lettered_within_the_memory_bound)
{
	hostile_column("job_class", "INSERT INTO staged_jobs (job_class, args)"
				    " SELECT repeat('C', " HOSTILE_SIZE "), '[1]'" HOSTILE_FROM);
}
END_TEST

START_TEST(huge_options_are_dead_lettered_within_the_memory_bound)
{
	hostile_column("options are larger than --max-job-bytes:",
		       "INSERT INTO staged_jobs (options, args, job_class)"
		       " SELECT jsonb_build_object('tags', repeat('o', " HOSTILE_SIZE
		       ")), '[1]', 'Hostile'" HOSTILE_FROM);
}
END_TEST

Suite *security_suite(void)
{
	Suite *s = suite_create("security");
	TCase *roles = tcase_create("roles");
	TCase *secrets = tcase_create("secrets");
	TCase *tls = tcase_create("tls");
	TCase *hostile = tcase_create("hostile");

	tcase_add_checked_fixture(roles, h_reset, NULL);
	tcase_set_timeout(roles, 120);
	tcase_add_test(roles, roles_grant_exactly_what_each_needs);
	tcase_add_test(roles, relay_runs_as_the_relay_role);
	tcase_add_test(roles, roles_script_runs_as_an_owner_without_createrole);
	tcase_add_test(roles, migrate_without_create_names_the_role_and_what_it_needs);
	tcase_add_checked_fixture(secrets, h_reset, NULL);
	tcase_set_timeout(secrets, 180);
	tcase_add_test(secrets, logs_never_contain_passwords);
	tcase_add_test(secrets, no_message_echoes_a_password);
	/* ssl goes off again even when the test fails half-way. */
	tcase_add_checked_fixture(tls, h_reset, ssl_off);
	tcase_set_timeout(tls, 120);
	tcase_add_test(tls, jobs_drain_over_verified_tls);
	tcase_add_checked_fixture(hostile, h_reset, NULL);
	tcase_set_timeout(hostile, 300);
	tcase_add_test(hostile, a_huge_tenant_is_dead_lettered_within_the_memory_bound);
	tcase_add_test(hostile, a_huge_queue_is_dead_lettered_within_the_memory_bound);
	tcase_add_test(hostile, a_huge_class_is_dead_lettered_within_the_memory_bound);
	tcase_add_test(hostile, huge_options_are_dead_lettered_within_the_memory_bound);
	suite_add_tcase(s, roles);
	suite_add_tcase(s, secrets);
	suite_add_tcase(s, tls);
	suite_add_tcase(s, hostile);
	return s;
}
