/* The Redis side against a real Redis: the epoch guard that keeps a deposed
 * leader from pushing, and batches too long for one script command. */
#include "fmacros.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "batch.h"
#include "config.h"
#include "harness.h"
#include "job_build.h"
#include "redis_sink.h"
#include "suites.h"

static struct config cfg;

static void load_config(void)
{
	char err[CONFIG_ERR_SIZE];
	const char *argv[] = { "stagedrain", "--redis-url", h_env("TEST_REDIS_URL"), NULL };

	ck_assert_int_eq(config_load(&cfg, 3, (char **)argv, err, sizeof(err)), 0);
}

static void setup(void)
{
	redisContext *r = h_redis();

	/* What a failed test may have left: a policy or a refused CONFIG. */
	freeReplyObject(h_cmd(r, "ACL SETUSER default +@all"));
	freeReplyObject(h_cmd(r, "CONFIG SET maxmemory-policy noeviction"));
	redisFree(r);
	h_reset();
	load_config();
}

static void teardown(void)
{
	config_free(&cfg);
}

/* n jobs on queue "default" with ids from first; every scheduled-th one runs in an hour. */
static void make_batch(struct batch *b, char (*jids)[25], long long first, int n, int scheduled)
{
	struct job_opts opts = {
		.format = FORMAT_SIDEKIQ, .sidekiq_version = 7, .max_job_bytes = 1 << 20, .now_us = mono_ms() * 1000
	};

	ck_assert_int_eq(batch_reset(b, (size_t)n), 0);
	for (int i = 0; i < n; i++) {
		char args[32];
		struct job_row row = { .id = first + i,
				       .queue = "default",
				       .queue_len = 7,
				       .job_class = "C",
				       .class_len = 1,
				       .args = args,
				       .jid = jids[i],
				       .jid_len = 24,
				       .created_at_us = opts.now_us };
		snprintf(jids[i], 25, "%024llx", first + i);
		row.args_len = (size_t)snprintf(args, sizeof(args), "[%lld]", first + i);
		row.has_run_at = scheduled && i % scheduled == 0;
		row.run_at_us = opts.now_us + 3600LL * 1000000;
		ck_assert_int_eq(job_build_add(b, &row, &opts, 0), 0);
	}
}

START_TEST(a_deposed_leader_cannot_push)
{
	struct redis_sink old, cur;
	struct batch b;
	char jids[10][25];
	redisContext *r = h_redis();
	redisReply *fence;

	redis_sink_init(&old, &cfg);
	redis_sink_init(&cur, &cfg);
	batch_init(&b);
	ck_assert_int_eq(redis_sink_connect(&old), 0);
	ck_assert_int_eq(redis_sink_connect(&cur), 0);
	ck_assert_int_eq(redis_sink_new_epoch(&old), 0);
	make_batch(&b, jids, 1, 10, 0);
	ck_assert_int_eq(redis_sink_push(&old, &b), 0);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 10);

	/* A new leader takes the next epoch: the old one's pushes are refused whole. */
	ck_assert_int_eq(redis_sink_new_epoch(&cur), 0);
	ck_assert_int_eq(cur.epoch, old.epoch + 1);
	make_batch(&b, jids, 11, 10, 0);
	ck_assert_int_eq(redis_sink_push(&old, &b), -ESTALE);
	ck_assert_msg(strstr(old.errstr, "STALE") != NULL, "%s", old.errstr);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 10);
	fence = h_cmd(r, "GET %s", h_fence_key());
	ck_assert_msg(strncmp(fence->str, "epoch=1 jobs=1:", 15) == 0, "%s", fence->str);
	freeReplyObject(fence);

	ck_assert_int_eq(redis_sink_push(&cur, &b), 0);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 20);
	fence = h_cmd(r, "GET %s", h_fence_key());
	ck_assert_msg(strncmp(fence->str, "epoch=2 jobs=11:", 16) == 0, "%s", fence->str);
	freeReplyObject(fence);

	/* An epoch key lost with Redis's data refuses the push too. */
	freeReplyObject(h_cmd(r, "DEL %s", h_epoch_key()));
	make_batch(&b, jids, 21, 10, 0);
	ck_assert_int_eq(redis_sink_push(&cur, &b), -ESTALE);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 20);

	batch_free(&b);
	redis_sink_free(&old);
	redis_sink_free(&cur);
	redisFree(r);
}
END_TEST

/* Commands longer than a script can unpack are split without reordering. */
START_TEST(a_long_batch_keeps_its_order)
{
	enum { N = 12000 };
	static char jids[N][25];
	struct redis_sink rs;
	struct batch b;
	redisContext *r = h_redis();
	json_t *jobs;

	redis_sink_init(&rs, &cfg);
	batch_init(&b);
	ck_assert_int_eq(redis_sink_connect(&rs), 0);
	ck_assert_int_eq(redis_sink_new_epoch(&rs), 0);
	make_batch(&b, jids, 1, N, 4);
	ck_assert_int_eq(redis_sink_push(&rs, &b), 0);

	ck_assert_int_eq(h_cmd_int(r, "ZCARD schedule"), N / 4);
	jobs = h_list_jobs(r, "queue:default");
	ck_assert_uint_eq(json_array_size(jobs), N - N / 4);
	/* LPUSH puts the first job at the tail, where workers BRPOP it first. */
	for (size_t i = 0, n = json_array_size(jobs); i + 1 < n; i++) {
		json_t *newer = json_array_get(json_object_get(json_array_get(jobs, i), "args"), 0);
		json_t *older = json_array_get(json_object_get(json_array_get(jobs, i + 1), "args"), 0);
		ck_assert_int_gt(json_integer_value(newer), json_integer_value(older));
	}
	json_decref(jobs);
	batch_free(&b);
	redis_sink_free(&rs);
	redisFree(r);
}
END_TEST

/* A running relay whose epoch is taken from under it settles the fence under
 * a new epoch and goes on: nothing lost, nothing pushed twice. */
START_TEST(a_relay_whose_epoch_moved_takes_a_new_one)
{
	static const char *const args[] = { "--batch-size", "50", "--poll-interval", "20ms", NULL };
	static const char *const queues[] = { "queue:default", NULL };
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;

	h_relay_start(&p, "relay", args);
	ck_assert(h_log_wait(&p, "leading", 10000));
	/* Another relay takes an epoch: one of an older release INCRs the count,
	 * which every push still checks (keys.h). */
	freeReplyObject(h_cmd(r, "INCR %s", h_epoch_key()));
	h_stage(c, "default", 1, 500);
	h_snapshot_expected(c);
	ck_assert(h_log_wait(&p, "STALE", 10000));
	ck_assert(h_log_wait(&p, "epoch=3", 10000));
	while (h_sql(c, "SELECT count(*) FROM staged_jobs") > 0)
		sleep_ms(20);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 500);
	h_load_seen(c, r, queues);
	ck_assert_int_eq(h_missing(c), 0);
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 5000), 0);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* Runs a relay with --once over one staged job; returns its log's lines naming maxmemory-policy. */
static int policy_lines(PGconn *c, const char *name)
{
	static const char *const once[] = { "--once", "--log-level", "debug", NULL };
	char log[512];

	h_stage(c, "default", 1, 1);
	ck_assert_int_eq(h_relay_run(name, once), 0);
	snprintf(log, sizeof(log), "%s/%s.log", h_env("TEST_DIR"), name);
	return h_log_count(log, "maxmemory-policy");
}

/*
 * An allkeys-* eviction policy can drop the relay's epoch and fence and the
 * workers' queues alike: one warning line at connect. volatile-* evicts only
 * keys with a TTL, which neither carries; and a Redis that refuses CONFIG GET
 * (a managed one) gets one debug line, no warning.
 */
START_TEST(an_evicting_maxmemory_policy_is_warned_about)
{
	static const struct {
		const char *policy;
		int lines;
	} cases[] = { { "noeviction", 0 }, { "volatile-lru", 0 }, { "allkeys-lru", 1 }, { "allkeys-random", 1 } };
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	char log[512];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		freeReplyObject(h_cmd(r, "CONFIG SET maxmemory-policy %s", cases[i].policy));
		ck_assert_msg(policy_lines(c, cases[i].policy) == cases[i].lines, "%s: not %d warning lines",
			      cases[i].policy, cases[i].lines);
	}
	snprintf(log, sizeof(log), "%s/allkeys-lru.log", h_env("TEST_DIR"));
	ck_assert(h_log_count(log, "level=warn") == 1);
	ck_assert(h_log_count(log, "noeviction") == 1);

	freeReplyObject(h_cmd(r, "ACL SETUSER default -config"));
	ck_assert_int_eq(policy_lines(c, "refused"), 1);
	snprintf(log, sizeof(log), "%s/refused.log", h_env("TEST_DIR"));
	ck_assert(h_log_count(log, "level=debug") >= 1 && h_log_count(log, "level=warn") == 0);
	freeReplyObject(h_cmd(r, "ACL SETUSER default +@all"));
	freeReplyObject(h_cmd(r, "CONFIG SET maxmemory-policy noeviction"));
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 5);
	PQfinish(c);
	redisFree(r);
}
END_TEST

Suite *sink_suite(void)
{
	Suite *s = suite_create("sink");
	TCase *tc = tcase_create("epoch");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, a_deposed_leader_cannot_push);
	tcase_add_test(tc, a_long_batch_keeps_its_order);
	tcase_add_test(tc, a_relay_whose_epoch_moved_takes_a_new_one);
	tcase_add_test(tc, an_evicting_maxmemory_policy_is_warned_about);
	suite_add_tcase(s, tc);
	return s;
}
