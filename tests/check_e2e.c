/* End to end: a real Sidekiq server (Debian's ruby-sidekiq) runs what the relay pushed. */
#include "fmacros.h"

#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "suites.h"

#define JOBS 500
#define SCHEDULED 50

/* Where the test's Redis is: the plain test server, or the TLS-only one of
 * services.sh tls-start (reached through redis-cli: hiredis here has no TLS). */
struct target {
	bool tls;
	redisContext *r; /* plain only */
	char url[256];
	char ca_file[600]; /* TLS only */
};

static void target_open(struct target *t, bool tls)
{
	memset(t, 0, sizeof(*t));
	t->tls = tls;
	if (!tls) {
		t->r = h_redis();
		snprintf(t->url, sizeof(t->url), "%s", h_env("TEST_REDIS_URL"));
		return;
	}
	snprintf(t->url, sizeof(t->url), "rediss://127.0.0.1:%d/0", h_port("tls"));
	snprintf(t->ca_file, sizeof(t->ca_file), "%s/tls/ca.crt", h_env("TEST_DIR"));
}

static void target_close(struct target *t)
{
	if (t->r)
		redisFree(t->r);
}

/* VERB KEY, answering an integer. */
static long long t_int(struct target *t, const char *verb, const char *key)
{
	char cmd[128];

	if (!t->tls)
		return h_cmd_int(t->r, "%s %s", verb, key);
	snprintf(cmd, sizeof(cmd), "%s %s", verb, key);
	return h_tls_cli_int("tls", cmd);
}

static void sidekiq_env(void *arg)
{
	const struct target *t = arg;

	setenv("REDIS_URL", t->url, 1);
	if (t->tls)
		setenv("REDIS_CA_FILE", t->ca_file, 1);
}

/* Starts `sidekiq -r tests/e2e/worker.rb` (over TLS: its wrapper
 * tests/support/sidekiq_tls.rb) in the test directory, logging there. */
static void start_sidekiq(struct relay_proc *p, struct target *t)
{
	char worker[PATH_MAX];
	const char *argv[] = { "sidekiq", "-r", worker, "-q", "critical", "-q",   "default",
			       "-c",      "5",  "-t",   "5",  "-e",       "test", NULL };
	/* Sidekiq reads ./config/sidekiq.yml if there is one: run it where there is not. */
	struct proc_opts o = { .argv = argv, .cwd = h_env("TEST_DIR"), .child_setup = sidekiq_env, .child_arg = t };

	ck_assert_ptr_nonnull(realpath(t->tls ? "tests/support/sidekiq_tls.rb" : "tests/e2e/worker.rb", worker));
	h_proc_start(p, t->tls ? "sidekiq-tls" : "sidekiq", &o);
}

static void stop_sidekiq(struct relay_proc *p)
{
	h_relay_kill(p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(p, 15000), 0);
}

/* Loads each recorded execution (jid, queue, args) into table `ran`. */
static void load_ran(PGconn *c, struct target *t)
{
	if (t->tls) {
		/* redis-cli's raw output: one element per line (the JSON is compact). */
		char *out = h_tls_cli("tls", "LRANGE e2e:ran 0 -1"), *save = NULL;
		const char **lines = calloc(strlen(out) + 1, sizeof(*lines));
		size_t n = 0;

		ck_assert_ptr_nonnull(lines);
		for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			lines[n++] = line;
		h_json_table(c, "ran_json", lines, n);
		free(lines);
		free(out);
	} else {
		h_load_list(c, t->r, "e2e:ran", "ran_json");
	}
	h_sql(c, "DROP TABLE IF EXISTS ran"); /* the other case's */
	h_sql(c, "CREATE TABLE ran AS SELECT j->>'jid' AS jid, j->>'queue' AS queue, j->'args' AS args FROM ran_json");
}

/* The relay pushes everything once (--once) to the target. */
static void relay_once(struct target *t)
{
	struct relay_proc p;
	const char *args[] = { "--pg-url",    h_env("TEST_PG_URL"),
			       "--redis-url", t->url,
			       "--once",      t->tls ? "--redis-tls-ca-file" : NULL,
			       t->ca_file,    NULL };

	h_relay_start_bare(&p, t->tls ? "relay-tls" : "relay", args);
	ck_assert_int_eq(h_relay_wait(&p, 60000), 0);
}

/* Stages JOBS jobs (the last SCHEDULED of them for 2 s from now), relays them
 * to the target and lets a real Sidekiq run them: each runs exactly once. */
static void sidekiq_runs_every_job(bool tls)
{
	PGconn *c = h_pg();
	struct target t;
	struct relay_proc sk;
	long long t0;

	target_open(&t, tls);
	h_sql(c,
	      "INSERT INTO staged_jobs (queue, job_class, args, run_at)"
	      " SELECT CASE WHEN i %% 2 = 1 THEN 'critical' ELSE 'default' END, 'StagedrainE2eJob',"
	      "  jsonb_build_array(i, 'text-' || i, jsonb_build_object('k', i)),"
	      "  CASE WHEN i >= %d THEN now() + interval '2 seconds' END"
	      " FROM generate_series(0, %d) i ORDER BY i",
	      JOBS - SCHEDULED, JOBS - 1);
	h_snapshot_expected(c);
	relay_once(&t);
	ck_assert_int_eq(t_int(&t, "ZCARD", "schedule"), SCHEDULED);

	start_sidekiq(&sk, &t);
	/* Sidekiq 6.4's scheduler starts polling after up to 5 s; give it room. */
	t0 = mono_ms();
	while (t_int(&t, "HLEN", "e2e:runs") < JOBS && mono_ms() - t0 < 30000)
		sleep_ms(t.tls ? 300 : 100);
	sleep_ms(1500); /* time for a duplicate run to show up, if there were one */
	stop_sidekiq(&sk);

	load_ran(c, &t);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM ran"), JOBS);
	ck_assert_int_eq(h_sql(c, "SELECT count(DISTINCT jid) FROM ran"), JOBS);
	/* Each ran once, with its own args, from its own queue. */
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM expected e JOIN ran USING (jid)"
				  " WHERE ran.args = e.args::jsonb AND ran.queue = e.queue"),
			 JOBS);
	ck_assert_int_eq(t_int(&t, "ZCARD", "schedule"), 0);
	ck_assert_int_eq(t_int(&t, "ZCARD", "retry"), 0);
	ck_assert_int_eq(t_int(&t, "ZCARD", "dead"), 0);
	target_close(&t);
	PQfinish(c);
}

START_TEST(sidekiq_runs_every_relayed_job_exactly_once)
{
	sidekiq_runs_every_job(false);
}
END_TEST

/* The same with the relay and Sidekiq both on TLS, verifying the server. */
START_TEST(sidekiq_over_tls_runs_every_relayed_job_exactly_once)
{
	sidekiq_runs_every_job(true);
}
END_TEST

static void tls_up(void)
{
	h_reset();
	h_services("tls-start");
}

static void tls_down(void)
{
	h_services("tls-stop");
}

Suite *e2e_suite(void)
{
	Suite *s = suite_create("e2e");
	TCase *tc = tcase_create("sidekiq");

	tcase_add_checked_fixture(tc, h_reset, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, sidekiq_runs_every_relayed_job_exactly_once);
	suite_add_tcase(s, tc);
	tc = tcase_create("sidekiq-tls");
	tcase_add_checked_fixture(tc, tls_up, tls_down);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, sidekiq_over_tls_runs_every_relayed_job_exactly_once);
	suite_add_tcase(s, tc);
	return s;
}
