/* --sidekiq-version auto against a real Redis: the process registry Sidekiq
 * keeps (processes set, each process's info hash field, expiring with its
 * heartbeat) decides between float seconds and integer milliseconds. */
#include "fmacros.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "harness.h"
#include "redis_conn.h"
#include "sidekiq_probe.h"
#include "suites.h"

static struct config cfg;

static void load(const char *const *extra)
{
	const char *argv[16] = { "stagedrain", "--redis-url", h_env("TEST_REDIS_URL") };
	char err[CONFIG_ERR_SIZE];
	int argc = 3;

	while (extra && *extra)
		argv[argc++] = *extra++;
	ck_assert_int_eq(config_load(&cfg, argc, (char **)argv, err, sizeof(err)), 0);
}

static void setup(void)
{
	h_reset();
}

/* A Sidekiq process as its heartbeat registers it; version NULL: 6.x's info. */
static void register_process(redisContext *r, const char *prefix, const char *identity, const char *version)
{
	char info[256];

	if (version)
		snprintf(info, sizeof(info), "{\"hostname\":\"h\",\"pid\":1,\"identity\":\"%s\",\"version\":\"%s\"}",
			 identity, version);
	else
		snprintf(info, sizeof(info), "{\"hostname\":\"h\",\"pid\":1,\"identity\":\"%s\"}", identity);
	h_cmd_int(r, "SADD %sprocesses %s", prefix, identity);
	h_cmd_int(r, "HSET %s%s info %s busy 0 beat 1700000000.5", prefix, identity, info);
	h_cmd_int(r, "EXPIRE %s%s 60", prefix, identity);
}

/* What the probe says it writes, read and from where. */
static void seen_is(const struct sidekiq_probe *p, const char *timestamps, const char *version, const char *source)
{
	ck_assert_str_eq(p->seen.timestamps, timestamps);
	ck_assert_str_eq(p->seen.version, version);
	ck_assert_str_eq(p->seen.source, source);
}

/* One reading each call: the clock moves past the interval every time. */
static int probe(struct sidekiq_probe *p, struct redis_conn *c)
{
	static long long t = 1;

	t += 1000000;
	return sidekiq_probe_version(p, c, t);
}

START_TEST(auto_writes_milliseconds_only_while_every_live_process_is_8)
{
	redisContext *r = h_redis();
	struct sidekiq_probe p;
	struct redis_conn c;

	load(NULL);
	ck_assert_int_eq(cfg.sidekiq_version, SIDEKIQ_VERSION_AUTO);
	redis_conn_init(&c, &cfg);
	ck_assert_int_eq(redis_conn_connect(&c), 0);
	sidekiq_probe_init(&p, &cfg);
	seen_is(&p, "float_seconds", "", "read"); /* nothing read yet */
	ck_assert_int_eq(probe(&p, &c), 7);       /* nobody runs: floats, which every version reads */
	seen_is(&p, "float_seconds", "", "read");
	register_process(r, "", "w1:1:aaa", "8.0.3");
	ck_assert_int_eq(probe(&p, &c), 8);
	ck_assert_uint_eq(p.live, 1);
	seen_is(&p, "integer_milliseconds", "8.0.3", "read");
	register_process(r, "", "w2:2:bbb", "7.3.9");
	ck_assert_int_eq(probe(&p, &c), 7);
	seen_is(&p, "float_seconds", "7.3.9", "read"); /* a mixed fleet: its lowest */
	/* w2 died: its key expired, its member stays until Sidekiq cleans up. */
	h_cmd_int(r, "DEL w2:2:bbb");
	ck_assert_int_eq(probe(&p, &c), 8);
	register_process(r, "", "w3:3:ccc", NULL); /* 6.x writes no version */
	ck_assert_int_eq(probe(&p, &c), 7);
	seen_is(&p, "float_seconds", "6", "read");
	h_cmd_int(r, "DEL w3:3:ccc");
	ck_assert_int_eq(probe(&p, &c), 8);
	/* Not due yet: no reading, the last answer stands. */
	register_process(r, "", "w4:4:ddd", "7.0.0");
	ck_assert_int_eq(sidekiq_probe_version(&p, &c, 1), 8);
	seen_is(&p, "integer_milliseconds", "8.0.3", "read");
	/* Versions compare by number, not as text; a minor of 10 is above 9. */
	h_cmd_int(r, "DEL w1:1:aaa");
	register_process(r, "", "w5:5:eee", "7.10.0");
	register_process(r, "", "w6:6:fff", "7.9.1");
	ck_assert_int_eq(probe(&p, &c), 7);
	seen_is(&p, "float_seconds", "7.0.0", "read");
	h_cmd_int(r, "DEL w4:4:ddd");
	ck_assert_int_eq(probe(&p, &c), 7);
	seen_is(&p, "float_seconds", "7.9.1", "read");
	redis_conn_free(&c);
	redisFree(r);
	config_free(&cfg);
}
END_TEST

START_TEST(auto_reads_the_namespace_and_a_fixed_version_reads_nothing)
{
	redisContext *r = h_redis();
	struct sidekiq_probe p;
	struct redis_conn c;

	load((const char *const[]){ "--namespace", "shop", NULL });
	redis_conn_init(&c, &cfg);
	ck_assert_int_eq(redis_conn_connect(&c), 0);
	sidekiq_probe_init(&p, &cfg);
	register_process(r, "", "other:1:x", "8.0.0"); /* another app's Sidekiq, outside the namespace */
	ck_assert_int_eq(probe(&p, &c), 7);
	register_process(r, "shop:", "w:1:y", "8.1.0");
	ck_assert_int_eq(probe(&p, &c), 8);
	redis_conn_free(&c);
	config_free(&cfg);

	load((const char *const[]){ "--sidekiq-version", "6", NULL });
	redis_conn_init(&c, &cfg);
	ck_assert_int_eq(redis_conn_connect(&c), 0);
	sidekiq_probe_init(&p, &cfg);
	ck_assert_int_eq(probe(&p, &c), 6);
	seen_is(&p, "float_seconds", "6", "configured");
	redis_conn_free(&c);
	config_free(&cfg);
	load((const char *const[]){ "--sidekiq-version", "8", NULL });
	redis_conn_init(&c, &cfg);
	ck_assert_int_eq(redis_conn_connect(&c), 0);
	sidekiq_probe_init(&p, &cfg);
	ck_assert_int_eq(probe(&p, &c), 8);
	seen_is(&p, "integer_milliseconds", "8", "configured");
	redis_conn_free(&c);
	config_free(&cfg);
	/* A processes key of another type is not fatal: floats, and the drain goes on. */
	h_cmd_int(r, "DEL processes");
	freeReplyObject(h_cmd(r, "SET processes x"));
	load(NULL);
	redis_conn_init(&c, &cfg);
	ck_assert_int_eq(redis_conn_connect(&c), 0);
	sidekiq_probe_init(&p, &cfg);
	ck_assert_int_eq(probe(&p, &c), 7);
	redis_conn_free(&c);
	config_free(&cfg);
	redisFree(r);
}
END_TEST

/* created_at of the one job in queue:default, removed from the list. */
static json_t *pop_created_at(redisContext *r, struct relay_proc *p)
{
	json_t *jobs = NULL, *v;

	for (int i = 0; i < 100; i++) {
		jobs = h_list_jobs(r, "queue:default");
		if (json_array_size(jobs) == 1)
			break;
		json_decref(jobs);
		jobs = NULL;
		sleep_ms(100);
	}
	RELAY_CHECK(p, jobs, "the job did not arrive");
	v = json_incref(json_object_get(json_array_get(jobs, 0), "created_at"));
	json_decref(jobs);
	h_cmd_int(r, "DEL queue:default");
	return v;
}

START_TEST(the_relay_follows_a_rolling_upgrade_and_logs_it)
{
	redisContext *r = h_redis();
	PGconn *c = h_pg();
	struct relay_proc p;
	json_t *at;

	register_process(r, "", "w1:1:aaa", "8.0.3");
	h_relay_start(&p, "relay",
		      (const char *const[]){ "--watch-interval", "200ms", "--poll-interval", "50ms", NULL });
	RELAY_CHECK(&p, h_log_wait(&p, "became leader", 10000), "no leader");
	h_stage(c, "default", 1, 1);
	at = pop_created_at(r, &p);
	RELAY_CHECK(&p, json_is_integer(at), "a Sidekiq 8 fleet got created_at of type %d", json_typeof(at));
	json_decref(at);
	RELAY_CHECK(&p, h_log_contains(p.log, "sidekiq version read"), "the first reading was not logged");
	/* A 7.x process joins (a rollback mid-deploy): the next batch after the
	 * interval reads the registry again, and writes floats. */
	register_process(r, "", "w2:2:bbb", "7.3.9");
	sleep_ms(400);
	h_stage(c, "default", 2, 1);
	at = pop_created_at(r, &p);
	RELAY_CHECK(&p, json_is_real(at), "a mixed fleet got created_at of type %d", json_typeof(at));
	json_decref(at);
	RELAY_CHECK(&p, h_log_contains(p.log, "sidekiq version changed"), "the change was not logged");
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 10000), 0);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* The case: a Sidekiq 6.4 process runs. Jobs are written with float
 * seconds as before, and the log line and the metric say "6" was read and
 * which timestamps are written, not "7". */
START_TEST(a_sidekiq_6_fleet_is_reported_as_6)
{
	redisContext *r = h_redis();
	PGconn *c = h_pg();
	struct relay_proc p;
	json_t *at;
	char *page;
	int status;

	register_process(r, "", "w1:1:six", NULL);
	h_relay_start(&p, "relay-six",
		      (const char *const[]){ "--watch-interval", "200ms", "--poll-interval", "50ms", "--http-addr",
					     "127.0.0.1:0", NULL });
	RELAY_CHECK(&p, h_log_wait(&p, "became leader", 10000), "no leader");
	h_stage(c, "default", 1, 1);
	at = pop_created_at(r, &p);
	RELAY_CHECK(&p, json_is_real(at), "a Sidekiq 6 fleet got created_at of type %d", json_typeof(at));
	json_decref(at);
	RELAY_CHECK(&p,
		    h_log_contains(p.log, "msg=\"sidekiq version read\" processes=1 version=6 "
					  "timestamps=float_seconds"),
		    "the reading does not say 6 and float seconds; see %s", p.log);
	page = h_http_get(h_http_port(&p), "/metrics", &status);
	ck_assert_int_eq(status, 200);
	RELAY_CHECK(&p,
		    strstr(page, "stagedrain_job_format_info{format=\"sidekiq\",timestamps=\"float_seconds\","
				 "sidekiq_version=\"6\",sidekiq_version_source=\"read\"} 1\n"),
		    "the metric does not say 6:\n%s", page);
	free(page);
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 10000), 0);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* Stages one job every 100 ms for ms milliseconds, args from *next on. */
static void trickle(PGconn *c, int *next, int ms)
{
	for (long long t0 = mono_ms(); mono_ms() - t0 < ms; sleep_ms(100))
		h_stage(c, "default", (*next)++, 1);
}

/* A processes key of another type (a string, then a list) while jobs flow:
 * each reading fails (every --watch-interval, before a batch), and must not
 * touch the drain's connection: no failed push, the first epoch throughout,
 * every job in its queue once. It used to close the connection the batch
 * then pushed on: a failed push and a new epoch per reading. */
START_TEST(a_processes_key_of_another_type_fails_no_batch)
{
	redisContext *r = h_redis();
	PGconn *c = h_pg();
	struct relay_proc p;
	long long t0;
	int next = 1;

	freeReplyObject(h_cmd(r, "SET processes oops"));
	h_relay_start(&p, "processes-wrongtype",
		      (const char *const[]){ "--watch-interval", "100ms", "--poll-interval", "20ms", NULL });
	RELAY_CHECK(&p, h_log_wait(&p, "msg=leading", 10000), "no leader; see %s", p.log);
	trickle(c, &next, 1500);
	h_cmd_int(r, "DEL processes");
	h_cmd_int(r, "RPUSH processes w1:1:aaa");
	trickle(c, &next, 1500);
	for (t0 = mono_ms(); h_cmd_int(r, "LLEN queue:default") < next - 1; sleep_ms(20))
		RELAY_CHECK(&p, mono_ms() - t0 < 15000, "%lld of %d jobs arrived; see %s",
			    h_cmd_int(r, "LLEN queue:default"), next - 1, p.log);
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 10000), 0);
	ck_assert_msg(h_log_count(p.log, "could not push") == 0, "pushes failed; see %s", p.log);
	ck_assert_msg(h_log_count(p.log, "msg=leading") == 1, "the epoch moved; see %s", p.log);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), next - 1);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	PQfinish(c);
	redisFree(r);
}
END_TEST

Suite *sidekiq_version_suite(void)
{
	Suite *s = suite_create("sidekiq_version");
	TCase *tc = tcase_create("auto");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, auto_writes_milliseconds_only_while_every_live_process_is_8);
	tcase_add_test(tc, auto_reads_the_namespace_and_a_fixed_version_reads_nothing);
	tcase_add_test(tc, the_relay_follows_a_rolling_upgrade_and_logs_it);
	tcase_add_test(tc, a_sidekiq_6_fleet_is_reported_as_6);
	tcase_add_test(tc, a_processes_key_of_another_type_fails_no_batch);
	suite_add_tcase(s, tc);
	return s;
}
