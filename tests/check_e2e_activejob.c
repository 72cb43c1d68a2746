/* End to end: a real Sidekiq server (Debian's ruby-sidekiq) with real ActiveJob (ruby-activejob) runs what the relay pushed. */
#include "fmacros.h"

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "harness.h"
#include "suites.h"

#define PER_RELAY 30 /* immediate ActiveJob rows staged for each relay run */
#define GID_ARGS                                                                                                       \
	"[{\"_aj_globalid\": \"gid://stagedrain/StagedUser/42\"}, {\"owner\": {\"_aj_globalid\": \"gid://stagedrain/StagedUser/7\"}}]"
#define GID_RAN                                                                                                        \
	"[{\"located\": \"gid://stagedrain/StagedUser/42\"}, {\"owner\": {\"located\": \"gid://stagedrain/StagedUser/7\"}}]"

static void worker_env(void *arg)
{
	setenv("REDIS_URL", arg, 1);
}

/* `sidekiq -r tests/e2e/activejob_worker.rb` in the test directory (no
 * config/sidekiq.yml there), on the queues the rows use. */
static void start_worker(struct relay_proc *p)
{
	static char url[256];
	char worker[PATH_MAX];
	const char *argv[] = { "sidekiq", "-r", worker, "-q", "default", "-q",   "mailers",
			       "-c",      "5",  "-t",   "5",  "-e",      "test", NULL };
	struct proc_opts o = { .argv = argv, .cwd = h_env("TEST_DIR"), .child_setup = worker_env, .child_arg = url };

	snprintf(url, sizeof(url), "%s", h_env("TEST_REDIS_URL"));
	ck_assert_ptr_nonnull(realpath("tests/e2e/activejob_worker.rb", worker));
	h_proc_start(p, "sidekiq-activejob", &o);
}

/* Runs the worker until n jobs ran (or 30 s), then a moment more so a
 * duplicate run would show, and stops it. */
static void run_worker(redisContext *r, long long n)
{
	struct relay_proc sk;
	long long t0 = mono_ms();

	start_worker(&sk);
	while (h_cmd_int(r, "HLEN aj:runs") < n && mono_ms() - t0 < 30000)
		sleep_ms(100);
	sleep_ms(1000);
	h_relay_kill(&sk, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&sk, 15000), 0);
}

static void relay_once(const char *name, const char *format, const char *rails)
{
	const char *args[] = { "--once", "--format", format, "--rails-version", rails, NULL };

	ck_assert_int_eq(h_relay_run(name, args), 0);
}

/* PER_RELAY ActiveJob rows with nested, empty and numeric arguments (every
 * fifth in another time zone), the GlobalID row and one for 3 s from now. */
static void stage_activejob(PGconn *c, const char *options)
{
	h_sql(c,
	      "INSERT INTO staged_jobs (queue, job_class, args, options)"
	      " SELECT CASE WHEN i %% 2 = 0 THEN 'default' ELSE 'mailers' END, 'StagedAjJob',"
	      "  jsonb_build_array(i, 'text-' || i, jsonb_build_object('k', i, 'nested',"
	      "   jsonb_build_object('deep', jsonb_build_array(i, 0.1, '{}'::jsonb)), 'empty', '{}'::jsonb),"
	      "   '{}'::jsonb, 12345678901234567890, null, true),"
	      "  '%s'::jsonb || CASE WHEN i %% 5 = 0 THEN '{\"timezone\": \"Europe/Berlin\", \"priority\": 5}'"
	      "   ELSE '{}' END::jsonb"
	      " FROM generate_series(1, %d) i ORDER BY i",
	      options, PER_RELAY);
	h_sql(c, "INSERT INTO staged_jobs (job_class, args, options) VALUES ('StagedAjJob', '%s', '%s')", GID_ARGS,
	      options);
	h_sql(c,
	      "INSERT INTO staged_jobs (job_class, args, options, run_at)"
	      " VALUES ('StagedAjJob', '[\"later\"]', '%s', now() + interval '3 seconds')",
	      options);
}

/* What the relays are given, kept to compare with what ran. */
static void snapshot(PGconn *c)
{
	h_sql(c, "CREATE TABLE IF NOT EXISTS aj_expected (id text, jid text, queue text, job_class text,"
		 " args jsonb, options jsonb, run_at float8)");
	h_sql(c, "INSERT INTO aj_expected SELECT uuid::text, jid, queue, job_class, args, options,"
		 " extract(epoch FROM run_at) FROM staged_jobs WHERE uuid::text NOT IN (SELECT id FROM aj_expected)");
}

/* Every expected job ran exactly once, nothing else ran, nothing failed. */
static void assert_each_ran_once(PGconn *c, redisContext *r, long long n)
{
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM aj_expected"), n);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM aj_ran"), n);
	ck_assert_int_eq(h_sql(c, "SELECT count(DISTINCT j->>'id') FROM aj_ran"), n);
	ck_assert_int_eq(h_cmd_int(r, "HLEN aj:runs"), n);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 0);
	ck_assert_int_eq(h_cmd_int(r, "ZCARD schedule"), 0);
	ck_assert_int_eq(h_cmd_int(r, "ZCARD retry"), 0);
	ck_assert_int_eq(h_cmd_int(r, "ZCARD dead"), 0);
}

/* The ActiveJob rows of k stagings ran as ActiveJob restores them: job_id
 * the row's uuid, provider_job_id its jid, Hash arguments with String keys,
 * the time zone the options named, GlobalIDs located, the scheduled one
 * not before its run_at. */
static void assert_activejob_runs(PGconn *c, long long k)
{
	const char *join = "FROM aj_expected e JOIN aj_ran r ON r.j->>'id' = e.id"
			   " WHERE e.job_class = 'StagedAjJob' AND r.j->>'kind' = 'activejob'"
			   " AND r.j->>'jid' = e.jid AND r.j->>'class' = 'StagedAjJob' AND r.j->>'queue' = e.queue"
			   " AND (r.j->'executions')::int = 1 AND r.j->>'locale' = 'en'"
			   " AND r.j->>'timezone' = coalesce(e.options->>'timezone', 'UTC')";

	ck_assert_int_eq(h_sql(c, "SELECT count(*) %s", join), k * (PER_RELAY + 2));
	ck_assert_int_eq(h_sql(c,
			       "SELECT count(*) %s AND r.j->'args' = e.args AND e.args->2->'nested' IS NOT NULL"
			       " AND r.j->'key_classes' = '[\"String\"]' AND r.j->'arg_classes'->>2 = 'Hash'",
			       join),
			 k * PER_RELAY);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) %s AND r.j->'args' = '%s' AND e.args = '%s'", join, GID_RAN,
			       GID_ARGS),
			 k);
	ck_assert_int_eq(h_sql(c,
			       "SELECT count(*) %s AND e.run_at IS NOT NULL AND r.j->'args' = '[\"later\"]'"
			       " AND (r.j->>'ran_at')::float8 >= e.run_at",
			       join),
			 k);
}

/* The plain Sidekiq rows ran as Sidekiq jobs with their args as staged. */
static long long plain_runs(PGconn *c)
{
	return h_sql(c, "SELECT count(*) FROM aj_expected e JOIN aj_ran r ON r.j->>'id' = e.jid"
			" WHERE e.job_class = 'StagedPlainJob' AND r.j->>'kind' = 'sidekiq'"
			" AND r.j->>'class' = 'StagedPlainJob' AND r.j->'args' = e.args");
}

/* Counts the ActiveJob payloads in one Redis reply by layout: 6.1's
 * whole-second enqueued_at without scheduled_at, 7.1's nine digits with it. */
static void count_layouts(redisReply *rep, int *n61, int *n71)
{
	static const char key[] = "\"enqueued_at\":\"";

	for (size_t i = 0; i < rep->elements; i++) {
		const char *p = rep->element[i]->str, *t = strstr(p, key);
		bool scheduled_at = strstr(p, "\"scheduled_at\":") != NULL;
		if (!t || strlen(t += sizeof(key) - 1) < 31)
			continue;
		if (t[19] == 'Z' && t[20] == '"' && !scheduled_at)
			(*n61)++;
		if (t[19] == '.' && t[29] == 'Z' && t[30] == '"' && scheduled_at)
			(*n71)++;
	}
}

static void assert_layouts(redisContext *r, int want61, int want71)
{
	static const char *const cmds[] = { "LRANGE queue:default 0 -1", "LRANGE queue:mailers 0 -1",
					    "ZRANGE schedule 0 -1" };
	int n61 = 0, n71 = 0;

	for (size_t i = 0; i < 3; i++) {
		redisReply *rep = h_cmd(r, cmds[i]);
		count_layouts(rep, &n61, &n71);
		freeReplyObject(rep);
	}
	ck_assert_int_eq(n61, want61);
	ck_assert_int_eq(n71, want71);
}

/* --format activejob, once with --rails-version 6.1 and once with 7.1,
 * then one real worker (ActiveJob 6.1) runs both relays' jobs. */
START_TEST(activejob_jobs_run_once_with_their_arguments)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	long long n = 2 * (PER_RELAY + 2);

	h_sql(c, "DROP TABLE IF EXISTS aj_expected");
	stage_activejob(c, "{}");
	snapshot(c);
	relay_once("relay-aj61", "activejob", "6.1");
	stage_activejob(c, "{}");
	snapshot(c);
	relay_once("relay-aj71", "activejob", "7.1");
	assert_layouts(r, PER_RELAY + 2, PER_RELAY + 2);
	ck_assert_int_eq(h_cmd_int(r, "ZCARD schedule"), 2);

	run_worker(r, n);
	h_load_list(c, r, "aj:ran", "aj_ran");
	assert_each_ran_once(c, r, n);
	assert_activejob_runs(c, 2);
	redisFree(r);
	PQfinish(c);
}
END_TEST

/* A sidekiq relay (Rails 7.1, the default) with plain rows around
 * "activejob": true rows on the same queues: the worker runs both kinds. */
START_TEST(mixed_sidekiq_relay_runs_both_kinds)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	const int plain = PER_RELAY + 5;
	long long n = plain + PER_RELAY + 2;

	h_sql(c, "DROP TABLE IF EXISTS aj_expected");
	h_sql(c,
	      "INSERT INTO staged_jobs (queue, job_class, args)"
	      " SELECT CASE WHEN i %% 2 = 0 THEN 'default' ELSE 'mailers' END, 'StagedPlainJob',"
	      "  jsonb_build_array(i, jsonb_build_object('k', i), 0.1)"
	      " FROM generate_series(1, %d) i ORDER BY i",
	      PER_RELAY);
	stage_activejob(c, "{\"activejob\": true}");
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) SELECT 'StagedPlainJob', jsonb_build_array(i)"
		 " FROM generate_series(1, 5) i ORDER BY i");
	snapshot(c);
	relay_once("relay-mixed", "sidekiq", "7.1");
	assert_layouts(r, 0, PER_RELAY + 2);

	run_worker(r, n);
	h_load_list(c, r, "aj:ran", "aj_ran");
	assert_each_ran_once(c, r, n);
	assert_activejob_runs(c, 1);
	ck_assert_int_eq(plain_runs(c), plain);
	redisFree(r);
	PQfinish(c);
}
END_TEST

Suite *activejob_e2e_suite(void)
{
	Suite *s = suite_create("activejob_e2e");
	TCase *tc = tcase_create("sidekiq-activejob");

	tcase_add_checked_fixture(tc, h_reset, NULL);
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, activejob_jobs_run_once_with_their_arguments);
	tcase_add_test(tc, mixed_sidekiq_relay_runs_both_kinds);
	suite_add_tcase(s, tc);
	return s;
}
