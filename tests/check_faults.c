/* Faults while running and at start-up: nothing lost, one clear line. */
#include "fmacros.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "suites.h"

#define BACKLOG 30000

static const char *const queues[] = { "queue:default", NULL };
static const char *const relay_args[] = { "--batch-size", "200", "--poll-interval", "20ms", NULL };

/* Stages a backlog in several transactions and records its jids. */
static void stage_backlog(PGconn *c)
{
	for (int i = 0; i < 10; i++)
		h_stage(c, "default", i * (BACKLOG / 10), BACKLOG / 10);
	h_snapshot_expected(c);
}

static void wait_first_push(redisContext *r)
{
	long long t0 = mono_ms();

	while (h_cmd_int(r, "LLEN queue:default") == 0) {
		ck_assert_msg(mono_ms() - t0 < 10000, "relay pushed nothing within 10 s");
		sleep_ms(5);
	}
}

static void wait_drained(PGconn *c, int timeout_ms)
{
	ck_assert_msg(h_wait_staged_empty(c, timeout_ms), "backlog not drained in time");
}

/* Every staged jid is in Redis at least once: at-least-once, nothing lost. */
static void assert_nothing_lost(PGconn *c, redisContext *r)
{
	h_load_seen(c, r, queues);
	ck_assert_int_eq(h_missing(c), 0);
}

START_TEST(redis_restart_mid_run_loses_nothing)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;

	stage_backlog(c);
	h_relay_start(&p, "relay", relay_args);
	wait_first_push(r);
	redisFree(r);
	h_services("redis-stop");
	sleep_ms(500);
	h_services("redis-start");
	r = h_redis();
	wait_drained(c, 60000);
	assert_nothing_lost(c, r);
	ck_assert(h_log_contains(p.log, "reconnected to redis"));
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 5000), 0);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/*
 * Ends the relay's session while it leads: the one holding the leader lock,
 * and only if it holds it. Returns how many sessions were ended.
 */
static long long kill_leader_session(PGconn *c)
{
	return h_sql(c, "SELECT count(pg_terminate_backend(a.pid)) FROM pg_stat_activity a"
			" JOIN pg_locks l ON l.pid = a.pid AND l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
			" WHERE a.application_name = 'stagedrain'");
}

/*
 * Three kills, each landing on a leader: before each, the relay has taken the
 * lock again and settled its epoch (its n-th "leading" line), so no kill hits
 * a relay that is still reconnecting from the one before.
 */
START_TEST(postgres_session_killed_mid_run_loses_nothing)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;

	stage_backlog(c);
	h_relay_start(&p, "pg-kills", relay_args);
	wait_first_push(r);
	for (int kill = 0; kill < 3; kill++) {
		ck_assert_msg(h_log_wait_count(&p, "msg=leading", kill + 1, 20000),
			      "the relay did not lead again before kill %d; see %s", kill + 1, p.log);
		ck_assert_msg(kill_leader_session(c) == 1, "kill %d landed on no leader; see %s", kill + 1, p.log);
	}
	ck_assert_msg(h_log_wait_count(&p, "msg=leading", 4, 20000), "no leader after the last kill; see %s", p.log);
	wait_drained(c, 60000);
	assert_nothing_lost(c, r);
	ck_assert_int_ge(h_log_count(p.log, "reconnected to postgres"), 3);
	ck_assert_int_ge(h_log_count(p.log, "became leader"), 4);
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 5000), 0);
	PQfinish(c);
	redisFree(r);
}
END_TEST

START_TEST(sigterm_mid_batch_loses_nothing)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;
	const char *const big[] = { "--batch-size", "1000", NULL };

	stage_backlog(c);
	h_relay_start(&p, "relay", big);
	wait_first_push(r);
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 10000), 0);
	/* The batch in flight completed: what was deleted is in Redis, the rest is staged. */
	h_load_seen(c, r, queues);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM expected e WHERE NOT EXISTS"
				  " (SELECT 1 FROM seen s WHERE s.jid = e.jid) AND NOT EXISTS"
				  " (SELECT 1 FROM staged_jobs j WHERE j.jid = e.jid)"),
			 0);
	ck_assert_int_gt(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	ck_assert_int_eq(h_relay_run("relay-rest", (const char *const[]){ "--once", NULL }), 0);
	assert_nothing_lost(c, r);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* Holds a row lock so the relay's delete blocks after its push landed. */
static PGconn *lock_row(const char *how)
{
	PGconn *locker = h_pg();

	h_sql(locker, "BEGIN");
	h_sql(locker, "%s", how);
	return locker;
}

static void wait_llen(redisContext *r, long long n)
{
	long long t0 = mono_ms();

	while (h_cmd_int(r, "LLEN queue:default") < n) {
		ck_assert_msg(mono_ms() - t0 < 10000, "jobs not pushed within 10 s");
		sleep_ms(5);
	}
}

START_TEST(row_changed_under_a_pushed_batch_is_not_pushed_again)
{
	PGconn *c = h_pg(), *app;
	redisContext *r = h_redis();
	struct relay_proc p;

	h_stage(c, "default", 1, 10);
	/* The application touches a row the relay is about to delete: under
	 * REPEATABLE READ the delete fails with 40001 after the push landed. */
	app = lock_row("UPDATE staged_jobs SET options = '{\"tags\": [\"x\"]}' WHERE id = 5");
	h_relay_start(&p, "relay", relay_args);
	wait_llen(r, 10);
	sleep_ms(200);
	h_sql(app, "COMMIT");
	PQfinish(app);
	wait_drained(c, 10000);
	ck_assert(h_log_wait(&p, "40001", 1000));
	ck_assert(h_log_wait(&p, "not pushing them again", 5000));
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 10);
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 5000), 0);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* The log at path, into out. */
static void read_log(const char *path, char *out, size_t outlen)
{
	FILE *f = fopen(path, "r");
	size_t n;

	ck_assert_ptr_nonnull(f);
	n = fread(out, 1, outlen - 1, f);
	out[n] = '\0';
	fclose(f);
}

/* Runs the relay expecting failure; returns its log's contents in out. */
static int run_failing(const char *name, const char *const *args, char *out, size_t outlen)
{
	char path[600];
	int st = h_relay_run(name, args);

	snprintf(path, sizeof(path), "%s/%s.log", h_env("TEST_DIR"), name);
	read_log(path, out, outlen);
	return st;
}

/* The same for a relay given no URL flags, with the harness's Redis. */
static int run_failing_bare(const char *name, char *out, size_t outlen)
{
	struct relay_proc p;
	int st;

	h_relay_start_bare(&p, name, (const char *const[]){ "--redis-url", h_env("TEST_REDIS_URL"), NULL });
	st = h_relay_wait(&p, 60000);
	ck_assert_msg(st != -1, "relay %s did not exit within 60 s; see %s", name, p.log);
	read_log(p.log, out, outlen);
	return st;
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

START_TEST(start_up_errors_are_one_clear_line)
{
	char out[4096], url[256];

	/* Later flags override the harness's URLs. A server that is not there
	 * is waited for (check_startup.c); a setting that can never work is one
	 * line: a database number Redis does not have, a role Postgres does not. */
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/999", h_port("redis"));
	ck_assert_int_eq(run_failing("bad-redis", (const char *const[]){ "--redis-url", url, NULL }, out, sizeof(out)),
			 1);
	ck_assert_int_eq(count_lines(out), 1);
	ck_assert_ptr_nonnull(strstr(out, "--redis-url"));
	ck_assert_ptr_nonnull(strstr(out, "SELECT at 127.0.0.1:"));

	/* In the environment, not a flag: a password on the command line gets a
	 * warning line of its own (check_startup.c). */
	snprintf(url, sizeof(url), "postgresql://nobody:s3cret@127.0.0.1:%d/x", h_port("pg"));
	setenv("STAGEDRAIN_PG_URL", url, 1);
	ck_assert_int_eq(run_failing_bare("bad-pg", out, sizeof(out)), 1);
	unsetenv("STAGEDRAIN_PG_URL");
	ck_assert_int_eq(count_lines(out), 1);
	ck_assert_ptr_nonnull(strstr(out, "--pg-url"));
	ck_assert_ptr_nonnull(strstr(out, "does not exist"));
	ck_assert_ptr_null(strstr(out, "s3cret"));

	ck_assert_int_eq(run_failing("bad-flag", (const char *const[]){ "--batch-size", "zero", NULL }, out,
				     sizeof(out)),
			 2);
	ck_assert_int_eq(count_lines(out), 1);
	ck_assert_ptr_nonnull(strstr(out, "--batch-size"));

	ck_assert_int_eq(run_failing("tls",
				     (const char *const[]){ "--redis-url", "redis://h:6380", "--redis-tls-ca-file",
							    "/ca.pem", NULL },
				     out, sizeof(out)),
			 2);
	ck_assert_int_eq(count_lines(out), 1);
	ck_assert_ptr_nonnull(strstr(out, "--redis-tls-ca-file"));
	ck_assert_ptr_nonnull(strstr(out, "rediss://"));
}
END_TEST

START_TEST(missing_schema_says_to_migrate)
{
	PGconn *c = h_pg();
	char out[4096], url[512];

	h_sql(c, "DROP DATABASE IF EXISTS empty_db");
	h_sql(c, "CREATE DATABASE empty_db");
	snprintf(url, sizeof(url), "%.*s/empty_db", (int)(strrchr(h_env("TEST_PG_URL"), '/') - h_env("TEST_PG_URL")),
		 h_env("TEST_PG_URL"));
	ck_assert_int_eq(run_failing("no-schema", (const char *const[]){ "--pg-url", url, NULL }, out, sizeof(out)), 1);
	ck_assert_ptr_nonnull(strstr(out, "stagedrain migrate"));
	PQfinish(c);
}
END_TEST

/* Applies sql/NAME to the database at url with psql, as an admin would. */
static void apply_sql(const char *url, const char *name)
{
	char cmd[1600];

	snprintf(cmd, sizeof(cmd), "psql -X -q -v ON_ERROR_STOP=1 -d '%s' -f sql/%s >/dev/null", url, name);
	ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
}

/* A schema one migration short: the relay refuses, naming the one it lacks. */
START_TEST(each_missing_migration_is_named)
{
	static const struct {
		const char *apply, *want;
	} steps[] = {
		{ "001_staged_jobs.sql", "(migration 002): run `stagedrain migrate`" },
		{ "002_cursor.sql", "(migration 004): run `stagedrain migrate`" },
		{ "003_dead_letter_key.sql", "(migration 004): run `stagedrain migrate`" },
		{ "004_job_uuid.sql", "(migration 005): run `stagedrain migrate`" },
		{ "005_tenants_and_held.sql", "(migration 006): run `stagedrain migrate`" },
		{ "006_routes.sql", "staged_jobs.args is not json (migration 007): run `stagedrain migrate`" },
	};
	PGconn *c = h_pg();
	char out[4096], url[512];

	h_sql(c, "DROP DATABASE IF EXISTS partial_db");
	h_sql(c, "CREATE DATABASE partial_db");
	snprintf(url, sizeof(url), "%.*s/partial_db", (int)(strrchr(h_env("TEST_PG_URL"), '/') - h_env("TEST_PG_URL")),
		 h_env("TEST_PG_URL"));
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		apply_sql(url, steps[i].apply);
		ck_assert_int_eq(run_failing("partial-schema", (const char *const[]){ "--pg-url", url, NULL }, out,
					     sizeof(out)),
				 1);
		ck_assert_msg(strstr(out, steps[i].want), "after %s: %s", steps[i].apply, out);
		ck_assert_int_eq(count_lines(out), 1);
	}
	PQfinish(c);
}
END_TEST

/* The held table without the relay's DELETE on it: one line saying what to run. */
START_TEST(missing_held_privilege_says_to_run_roles_sql)
{
	PGconn *c = h_pg();
	char out[4096], url[512];
	int st;

	h_relay_role(c, "sd_unheld", url, sizeof(url));
	h_sql(c, "REVOKE DELETE ON staged_jobs_held FROM stagedrain_relay");
	st = run_failing("no-held-privilege", (const char *const[]){ "--pg-url", url, NULL }, out, sizeof(out));
	h_sql(c, "GRANT DELETE ON staged_jobs_held TO stagedrain_relay");
	ck_assert_int_eq(st, 1);
	ck_assert_msg(strstr(out, "may not SELECT, INSERT and DELETE on staged_jobs_held: run sql/roles.sql again"),
		      "%s", out);
	ck_assert_int_eq(count_lines(out), 1);
	PQfinish(c);
}
END_TEST

Suite *faults_suite(void)
{
	Suite *s = suite_create("faults");
	TCase *tc = tcase_create("faults");

	tcase_add_checked_fixture(tc, h_reset, NULL);
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, redis_restart_mid_run_loses_nothing);
	tcase_add_test(tc, postgres_session_killed_mid_run_loses_nothing);
	tcase_add_test(tc, sigterm_mid_batch_loses_nothing);
	tcase_add_test(tc, row_changed_under_a_pushed_batch_is_not_pushed_again);
	tcase_add_test(tc, start_up_errors_are_one_clear_line);
	tcase_add_test(tc, missing_schema_says_to_migrate);
	tcase_add_test(tc, each_missing_migration_is_named);
	tcase_add_test(tc, missing_held_privilege_says_to_run_roles_sql);
	suite_add_tcase(s, tc);
	return s;
}
