/* End to end: a real Sidekiq server (Debian's ruby-sidekiq) runs what the relay pushed. */
#include "fmacros.h"

#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "suites.h"

#define JOBS 500
#define SCHEDULED 50

static void sidekiq_env(void *redis_url)
{
	setenv("REDIS_URL", redis_url, 1);
}

/* Starts `sidekiq -r tests/e2e/worker.rb` in the test directory, logging there. */
static void start_sidekiq(struct relay_proc *p)
{
	char worker[PATH_MAX];
	const char *argv[] = { "sidekiq", "-r", worker, "-q", "critical", "-q",   "default",
			       "-c",      "5",  "-t",   "5",  "-e",       "test", NULL };
	/* Sidekiq reads ./config/sidekiq.yml if there is one: run it where there is not. */
	struct proc_opts o = { .argv = argv,
			       .cwd = h_env("TEST_DIR"),
			       .child_setup = sidekiq_env,
			       .child_arg = (void *)h_env("TEST_REDIS_URL") };

	ck_assert_ptr_nonnull(realpath("tests/e2e/worker.rb", worker));
	h_proc_start(p, "sidekiq", &o);
}

static void stop_sidekiq(struct relay_proc *p)
{
	h_relay_kill(p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(p, 15000), 0);
}

/* Loads each recorded execution (jid, queue, args) into table `ran`. */
static void load_ran(PGconn *c, redisContext *r)
{
	redisReply *rep = h_cmd(r, "LRANGE e2e:ran 0 -1");

	h_sql(c, "CREATE TABLE ran (jid text, queue text, args jsonb)");
	for (size_t i = 0; i < rep->elements; i++) {
		const char *params[1] = { rep->element[i]->str };
		PGresult *res = PQexecParams(c,
					     "INSERT INTO ran SELECT j->>'jid', j->>'queue', j->'args'"
					     " FROM (SELECT $1::jsonb AS j) x",
					     1, NULL, params, NULL, NULL, 0);
		ck_assert_msg(PQresultStatus(res) == PGRES_COMMAND_OK, "%s", PQerrorMessage(c));
		PQclear(res);
	}
	freeReplyObject(rep);
}

START_TEST(sidekiq_runs_every_relayed_job_exactly_once)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc sk;
	long long t0;

	h_sql(c,
	      "INSERT INTO staged_jobs (queue, job_class, args, run_at)"
	      " SELECT CASE WHEN i %% 2 = 1 THEN 'critical' ELSE 'default' END, 'StagedrainE2eJob',"
	      "  jsonb_build_array(i, 'text-' || i, jsonb_build_object('k', i)),"
	      "  CASE WHEN i >= %d THEN now() + interval '2 seconds' END"
	      " FROM generate_series(0, %d) i ORDER BY i",
	      JOBS - SCHEDULED, JOBS - 1);
	h_snapshot_expected(c);
	ck_assert_int_eq(h_relay_run("relay", (const char *const[]){ "--once", NULL }), 0);
	ck_assert_int_eq(h_cmd_int(r, "ZCARD schedule"), SCHEDULED);

	start_sidekiq(&sk);
	/* Sidekiq 6.4's scheduler starts polling after up to 5 s; give it room. */
	t0 = mono_ms();
	while (h_cmd_int(r, "HLEN e2e:runs") < JOBS && mono_ms() - t0 < 30000)
		sleep_ms(100);
	sleep_ms(1500); /* time for a duplicate run to show up, if there were one */
	stop_sidekiq(&sk);

	load_ran(c, r);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM ran"), JOBS);
	ck_assert_int_eq(h_sql(c, "SELECT count(DISTINCT jid) FROM ran"), JOBS);
	/* Each ran once, with its own args, from its own queue. */
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM expected e JOIN ran USING (jid)"
				  " WHERE ran.args = e.args AND ran.queue = e.queue"),
			 JOBS);
	ck_assert_int_eq(h_cmd_int(r, "ZCARD schedule"), 0);
	ck_assert_int_eq(h_cmd_int(r, "ZCARD retry"), 0);
	ck_assert_int_eq(h_cmd_int(r, "ZCARD dead"), 0);
	PQfinish(c);
	redisFree(r);
}
END_TEST

Suite *e2e_suite(void)
{
	Suite *s = suite_create("e2e");
	TCase *tc = tcase_create("sidekiq");

	tcase_add_checked_fixture(tc, h_reset, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, sidekiq_runs_every_relayed_job_exactly_once);
	suite_add_tcase(s, tc);
	return s;
}
