/* A set-up that would lose jobs quietly says so: jobs staged for a prefix no worker reads, wider privileges. */
#include "fmacros.h"

#include <check.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suites.h"
#include "support/timing.h"

#define UUID "7b2a3c4d-0000-4000-8000-00000000a001"
/* What clients/php stages for a job: Laravel's payload text, one JSON string. */
#define BUILT                                                                                                          \
	"{\"uuid\":\"" UUID "\",\"displayName\":\"App\\\\Jobs\\\\Ship\","                                              \
	"\"job\":\"Illuminate\\\\Queue\\\\CallQueuedHandler@call\",\"data\":{\"command\":\"x\"},\"id\":\"i1\","        \
	"\"attempts\":0}"

/* The test servers' Postgres URL with another user and database. */
static void url_for(char *out, size_t len, const char *user, const char *db)
{
	const char *base = h_env("TEST_PG_URL"), *at = strchr(base, '@'), *slash = at ? strchr(at, '/') : NULL;

	ck_assert_ptr_nonnull(slash);
	snprintf(out, len, "postgresql://%s%.*s/%s", user, (int)(slash - at), at, db);
}

/* The relay's stagedrain_misdirected_jobs now (NAN: none yet). */
static double misdirected(int port)
{
	int status;
	char *page = h_http_get(port, "/metrics", &status);
	double v = h_metric_sample(page, "stagedrain_misdirected_jobs");

	free(page);
	return v;
}

/* Stages BUILT as the Laravel client does, for an app whose workers read prefix. */
static void stage_built(PGconn *c, const char *prefix)
{
	h_sql(c,
	      "INSERT INTO staged_jobs (queue, job_class, args, options, uuid) VALUES ('default', 'App\\Jobs\\Ship',"
	      " jsonb_build_array(%s::text), jsonb_build_object('serialized', true, 'laravel_prefix', '%s'::text), '" UUID
	      "')",
	      "$p$" BUILT "$p$", prefix);
}

/*
 * The relay run with Laravel's default prefix for an app named Shop: the
 * row says where that app's workers read, so it is dead-lettered, not pushed
 * where none reads; the relay warns, /metrics counts it, status needs a
 * person. Replayed once the relay has the app's prefix, it arrives once.
 */
START_TEST(a_job_for_another_laravel_prefix_is_dead_lettered_and_replayed)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	const char *const args[] = { "--format",         "laravel", "--http-addr", "127.0.0.1:0",
				     "--watch-interval", "100",     NULL };
	const char *const status[] = { "status",
				       "--pg-url",
				       h_env("TEST_PG_URL"),
				       "--redis-url",
				       h_env("TEST_REDIS_URL"),
				       "--format",
				       "laravel",
				       "--json",
				       NULL };
	const char *const stale[] = {
		"dead",    "replay",   "--reason",           "misdirected", "--format",
		"laravel", "--pg-url", h_env("TEST_PG_URL"), "--redis-url", h_env("TEST_REDIS_URL"),
		NULL
	};
	const char *const replay[] = { "dead",
				       "replay",
				       "--reason",
				       "misdirected",
				       "--format",
				       "laravel",
				       "--pg-url",
				       h_env("TEST_PG_URL"),
				       "--redis-url",
				       h_env("TEST_REDIS_URL"),
				       "--laravel-prefix",
				       "shop_database_",
				       NULL };
	const char *const fixed[] = { "--format", "laravel", "--laravel-prefix", "shop_database_", "--once", NULL };
	struct relay_proc p, s;
	json_error_t e;
	json_t *o;
	int port;

	h_reset();
	stage_built(c, "shop_database_");
	h_relay_start(&p, "misdirected", args);
	port = h_http_port(&p);
	RELAY_CHECK(&p, h_log_wait(&p, "moved a row that cannot be a job to staged_jobs_dead", 20000),
		    "no dead-letter warning in %s", p.log);
	RELAY_CHECK(&p, h_log_wait(&p, "misdirected: the app's Laravel reads prefix \\\"shop_database_\\\"", 1000),
		    "the warning does not name the app's prefix; see %s", p.log);
	for (int i = 0; i < 200 && misdirected(port) != 1; i++)
		sleep_ms(50);
	RELAY_CHECK(&p, misdirected(port) == 1, "stagedrain_misdirected_jobs is not 1; see %s", p.log);
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 20000), 0);
	ck_assert_int_eq(h_cmd_int(r, "EXISTS laravel_database_queues:default"), 0);

	h_relay_start_bare(&s, "misdirected-status", status);
	ck_assert_int_eq(h_relay_wait(&s, 30000), 1);
	o = json_load_file(s.log, 0, &e);
	ck_assert_msg(o != NULL, "%s: %s", s.log, e.text);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(o, "dead"), "misdirected")), 1);
	ck_assert(h_log_contains(s.log, "1 dead-lettered job staged for a key prefix this relay does not push under"));
	json_decref(o);

	/* Replayed with the prefix still wrong, the row would only fail again: refused. */
	h_relay_start_bare(&s, "misdirected-stale", stale);
	ck_assert_int_ne(h_relay_wait(&s, 30000), 0);
	ck_assert_msg(h_log_contains(s.log, "misdirected"), "see %s", s.log);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 1);
	h_relay_start_bare(&s, "misdirected-replay", replay);
	ck_assert_msg(h_relay_wait(&s, 30000) == 0, "see %s", s.log);
	ck_assert_int_eq(h_relay_run("misdirected-fixed", fixed), 0);
	ck_assert_int_eq(h_cmd_int(r, "LLEN shop_database_queues:default"), 1);
	ck_assert_int_eq(h_cmd_int(r, "EXISTS laravel_database_queues:default"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 0);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/*
 * A framework app's usual set-up: its own role owns the tables (it ran the
 * migration) and the app logs in as it; another role was granted DELETE.
 * The relay warns at start and status needs a person, naming both.
 */
START_TEST(wider_privileges_and_an_app_logged_in_as_the_owner_are_named)
{
	PGconn *c = h_pg(), *app;
	char owner_url[512], db_url[512];
	const char *const relay[] = { "--pg-url", db_url, "--once", NULL };
	const char *const migrate[] = { "migrate", "--pg-url", owner_url, NULL };
	struct relay_proc p;

	h_sql(c, "DROP DATABASE IF EXISTS sd_shop WITH (FORCE)");
	h_sql(c, "DROP ROLE IF EXISTS sd_shop");
	h_sql(c, "DROP ROLE IF EXISTS sd_helper");
	h_sql(c, "CREATE ROLE sd_shop LOGIN");
	h_sql(c, "CREATE ROLE sd_helper LOGIN");
	h_sql(c, "CREATE DATABASE sd_shop OWNER sd_shop");
	url_for(owner_url, sizeof(owner_url), "sd_shop", "sd_shop");
	url_for(db_url, sizeof(db_url), "postgres", "sd_shop");
	ck_assert_int_eq(h_relay_run("owned-migrate", migrate), 0);
	app = PQconnectdb(owner_url);
	h_sql(app, "GRANT DELETE ON staged_jobs TO sd_helper");

	/* app stays connected as the owner, as a Rails or Django app would. */
	h_relay_start(&p, "owned-relay", relay);
	ck_assert_msg(h_relay_wait(&p, 30000) == 0, "the relay failed; see %s", p.log);
	ck_assert(h_log_contains(p.log, "level=warn msg=\"staged jobs are not kept to least privilege\""));
	ck_assert(h_log_contains(p.log, "role sd_helper may DELETE staged_jobs"));
	ck_assert(h_log_contains(p.log, "the owner of staged_jobs, role sd_shop, has 1 session open"));

	{
		const char *const status[] = { "status", "--pg-url", db_url, "--redis-url", h_env("TEST_REDIS_URL"),
					       NULL };
		h_relay_start_bare(&p, "owned-status", status);
		ck_assert_int_eq(h_relay_wait(&p, 30000), 1);
		ck_assert(h_log_contains(p.log, "roles     others may change staged rows (below)"));
		ck_assert(h_log_contains(p.log, "role sd_helper may DELETE staged_jobs, which only"));
		ck_assert(h_log_contains(p.log, "role sd_shop, has 1 session open"));
	}
	PQfinish(app);
	/* Least privilege restored: nothing to say. */
	app = PQconnectdb(owner_url);
	h_sql(app, "REVOKE DELETE ON staged_jobs FROM sd_helper");
	PQfinish(app);
	h_relay_start(&p, "owned-relay-kept", relay);
	ck_assert_msg(h_relay_wait(&p, 30000) == 0, "the relay failed; see %s", p.log);
	ck_assert(!h_log_contains(p.log, "least privilege"));
	h_sql(c, "DROP DATABASE sd_shop WITH (FORCE)");
	h_sql(c, "DROP ROLE sd_shop");
	h_sql(c, "DROP ROLE sd_helper");
	PQfinish(c);
}
END_TEST

/* The test Redis's URL on database db. */
static void redis_db_url(char *out, size_t len, int db)
{
	const char *base = h_env("TEST_REDIS_URL");
	const char *slash = strrchr(base, '/');

	snprintf(out, len, "%.*s/%d", (int)(slash - base), base, db);
}

/* The integer reply of a command on database db of the test Redis. */
static long long int_on(int db, const char *cmd)
{
	redisContext *r = h_redis();
	long long v;

	freeReplyObject(h_cmd(r, "SELECT %d", db));
	v = h_cmd_int(r, cmd);
	redisFree(r);
	return v;
}

static void sidekiq_env(void *arg)
{
	setenv("REDIS_URL", arg, 1);
}

/*
 * REDIS_URL's database off by one: Sidekiq runs on database 1, the relay
 * pushes to 0. The relay's watcher finds Sidekiq's processes there (a warning
 * and stagedrain_target_workers_elsewhere), status needs a person, and
 * `stagedrain move --from-db 0`, run with the fixed URL, hands the stranded
 * jobs to the workers: each runs once.
 */
START_TEST(sidekiq_on_another_database_is_found_and_its_jobs_moved)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	char db1[256], worker[4096], sample[128];
	const char *const sk_argv[] = { "sidekiq", "-r", worker, "-q", "default", "-c",
					"2",       "-t", "5",    "-e", "test",    NULL };
	struct proc_opts o = {
		.argv = sk_argv, .cwd = h_env("TEST_DIR"), .child_setup = sidekiq_env, .child_arg = db1
	};
	const char *const args[] = { "--http-addr", "127.0.0.1:0", "--watch-interval", "100", NULL };
	const char *const status[] = {
		"status", "--pg-url", h_env("TEST_PG_URL"), "--redis-url", h_env("TEST_REDIS_URL"), NULL
	};
	const char *const move[] = { "move", "--pg-url", h_env("TEST_PG_URL"), "--redis-url", db1, "--from-db",
				     "0",    NULL };
	struct relay_proc sk, p, s;
	int port, st;

	h_reset();
	redis_db_url(db1, sizeof(db1), 1);
	freeReplyObject(h_cmd(r, "FLUSHALL"));
	ck_assert_ptr_nonnull(realpath("tests/e2e/worker.rb", worker));
	h_proc_start(&sk, "sidekiq-db1", &o);
	for (int i = 0; i < 300 && int_on(1, "SCARD processes") == 0; i++)
		sleep_ms(50);
	RELAY_CHECK(&sk, int_on(1, "SCARD processes") > 0, "sidekiq did not register; see %s", sk.log);

	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args) SELECT 'default', 'StagedrainE2eJob',"
		 " jsonb_build_array(i) FROM generate_series(1, 3) i");
	h_relay_start(&p, "readers-db0", args);
	port = h_http_port(&p);
	RELAY_CHECK(&p, h_log_wait(&p, "no worker reads where a target pushes", 20000), "no warning in %s", p.log);
	RELAY_CHECK(&p, h_log_contains(p.log, "Sidekiq processes run under database 1, none where this relay pushes"),
		    "the warning does not name database 1; see %s", p.log);
	snprintf(sample, sizeof(sample), "stagedrain_target_workers_elsewhere{target=\"default\"}");
	{
		int hs;
		char *page = h_http_get(port, "/metrics", &hs);
		RELAY_CHECK(&p, h_metric_sample(page, sample) == 1, "%s is not 1", sample);
		free(page);
	}
	RELAY_CHECK(&p, h_wait_len(r, "queue:default", 3, 20000), "the jobs did not reach database 0");
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 20000), 0);

	h_relay_start_bare(&s, "readers-status", status);
	ck_assert_int_eq(h_relay_wait(&s, 30000), 1);
	ck_assert_msg(h_log_contains(s.log, "target default: Sidekiq processes run under database 1"), "see %s", s.log);

	h_relay_start_bare(&s, "readers-move", move);
	st = h_relay_wait(&s, 30000);
	RELAY_CHECK(&sk, st == 0, "move failed; see %s", s.log);
	ck_assert_msg(h_log_contains(s.log, "moved queue default: 3 jobs listed, 0 scheduled"), "see %s", s.log);
	ck_assert_int_eq(int_on(0, "EXISTS queue:default"), 0);
	for (int i = 0; i < 300 && int_on(1, "HLEN e2e:runs") < 3; i++)
		sleep_ms(50);
	RELAY_CHECK(&sk, int_on(1, "HLEN e2e:runs") == 3, "sidekiq ran %lld of 3; see %s", int_on(1, "HLEN e2e:runs"),
		    sk.log);
	RELAY_CHECK(&sk, int_on(1, "LLEN e2e:ran") == 3, "a job ran twice; see %s", sk.log);
	h_relay_kill(&sk, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&sk, 15000), 0);
	freeReplyObject(h_cmd(r, "FLUSHALL"));
	redisFree(r);
	PQfinish(c);
}
END_TEST

/*
 * Laravel jobs a relay pushed under its default prefix (hand-written rows,
 * which record none): moved to the app's prefix ahead of a job pushed there
 * since, in order, the delayed one with its time, one notify entry each.
 */
START_TEST(laravel_jobs_under_a_wrong_prefix_are_moved_in_order)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	const char *const once[] = { "--format", "laravel", "--once", NULL };
	const char *const move[] = { "move",
				     "--pg-url",
				     h_env("TEST_PG_URL"),
				     "--redis-url",
				     h_env("TEST_REDIS_URL"),
				     "--format",
				     "laravel",
				     "--laravel-prefix",
				     "shop_database_",
				     "--from-prefix",
				     "laravel_database_",
				     NULL };
	struct relay_proc s;
	redisReply *rep;

	h_reset();
	h_sql(c,
	      "INSERT INTO staged_jobs (queue, job_class, args) SELECT 'mail', 'App\\Jobs\\A@handle', jsonb_build_array(i)"
	      " FROM generate_series(1, 3) i");
	h_sql(c,
	      "INSERT INTO staged_jobs (queue, job_class, args, run_at) VALUES ('mail', 'App\\Jobs\\A@handle', '[4]',"
	      " '2100-01-01T00:00:00Z')");
	ck_assert_int_eq(h_relay_run("laravel-stranded", once), 0);
	ck_assert_int_eq(h_cmd_int(r, "LLEN laravel_database_queues:mail"), 3);
	ck_assert_int_eq(h_cmd_int(r, "RPUSH shop_database_queues:mail newer"), 1);

	h_relay_start_bare(&s, "laravel-move", move);
	ck_assert_msg(h_relay_wait(&s, 30000) == 0, "see %s", s.log);
	ck_assert_msg(h_log_contains(s.log, "moved queue mail: 3 jobs listed, 1 scheduled"), "see %s", s.log);
	rep = h_cmd(r, "LRANGE shop_database_queues:mail 0 -1");
	ck_assert_uint_eq(rep->elements, 4);
	for (size_t i = 0; i < 3; i++) {
		char want[32];
		snprintf(want, sizeof(want), "\"data\":[%zu]", i + 1);
		ck_assert_msg(strstr(rep->element[i]->str, want), "job %zu is %s", i, rep->element[i]->str);
	}
	ck_assert_str_eq(rep->element[3]->str, "newer");
	freeReplyObject(rep);
	ck_assert_int_eq(h_cmd_int(r, "ZCOUNT shop_database_queues:mail:delayed 4102444800 4102444800"), 1);
	ck_assert_int_eq(h_cmd_int(r, "LLEN shop_database_queues:mail:notify"), 3);
	ck_assert_int_eq(h_cmd_int(r, "EXISTS laravel_database_queues:mail laravel_database_queues:mail:delayed"
				      " laravel_database_queues:mail:notify"),
			 0);
	PQfinish(c);
	redisFree(r);
}
END_TEST

Suite *misconfig_suite(void)
{
	Suite *s = suite_create("misconfig");
	TCase *tc = tcase_create("misconfig");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, a_job_for_another_laravel_prefix_is_dead_lettered_and_replayed);
	tcase_add_test(tc, wider_privileges_and_an_app_logged_in_as_the_owner_are_named);
	tcase_add_test(tc, sidekiq_on_another_database_is_found_and_its_jobs_moved);
	tcase_add_test(tc, laravel_jobs_under_a_wrong_prefix_are_moved_in_order);
	suite_add_tcase(s, tc);
	return s;
}
