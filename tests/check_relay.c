/* The drain against real servers: what arrives, in what order, in which format. */
#include "fmacros.h"

#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suites.h"

#define ONCE(...) ((const char *const[]){ "--once", __VA_ARGS__, NULL })

static json_t *only_job(redisContext *r, const char *key)
{
	json_t *jobs = h_list_jobs(r, key);
	json_t *j;

	ck_assert_int_eq(json_array_size(jobs), 1);
	j = json_incref(json_array_get(jobs, 0));
	json_decref(jobs);
	return j;
}

START_TEST(committed_jobs_arrive_as_sidekiq_writes_them)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	json_t *j;
	char *args;
	double created;

	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args, options, jid, created_at) VALUES"
		 " ('default', 'HardWorker', '[1, \"two\", {\"three\": 3.0}]', '{\"tags\": [\"a\"]}',"
		 "  '0123456789abcdef01234567', '2026-01-02 03:04:05.25+00'),"
		 " ('mailers', 'Mailer', '[]', '{\"retry\": 5}', 'aaaaaaaaaaaaaaaaaaaaaaaa', now())");
	ck_assert_int_eq(h_relay_run("relay", ONCE("--log-level", "debug")), 0);

	j = only_job(r, "queue:default");
	ck_assert_str_eq(json_string_value(json_object_get(j, "class")), "HardWorker");
	ck_assert_str_eq(json_string_value(json_object_get(j, "queue")), "default");
	ck_assert_str_eq(json_string_value(json_object_get(j, "jid")), "0123456789abcdef01234567");
	ck_assert(json_is_true(json_object_get(j, "retry")));
	ck_assert_str_eq(json_string_value(json_array_get(json_object_get(j, "tags"), 0)), "a");
	args = json_dumps(json_object_get(j, "args"), JSON_COMPACT);
	ck_assert_str_eq(args, "[1,\"two\",{\"three\":3.0}]");
	free(args);
	created = json_real_value(json_object_get(j, "created_at"));
	ck_assert(json_is_real(json_object_get(j, "created_at")));
	ck_assert_double_eq_tol(created, 1767323045.25, 1e-6);
	ck_assert(json_is_real(json_object_get(j, "enqueued_at")));
	ck_assert_double_gt(json_real_value(json_object_get(j, "enqueued_at")), created);
	json_decref(j);

	j = only_job(r, "queue:mailers");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "retry")), 5);
	json_decref(j);
	ck_assert_int_eq(h_cmd_int(r, "SISMEMBER queues default"), 1);
	ck_assert_int_eq(h_cmd_int(r, "SISMEMBER queues mailers"), 1);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	PQfinish(c);
	redisFree(r);
}
END_TEST

START_TEST(rolled_back_and_uncommitted_jobs_never_arrive)
{
	PGconn *c = h_pg(), *open_tx = h_pg();
	redisContext *r = h_redis();
	json_t *jobs;

	h_sql(c, "BEGIN");
	h_stage(c, "default", 100, 5);
	h_sql(c, "ROLLBACK");
	h_sql(open_tx, "BEGIN");
	h_stage(open_tx, "default", 200, 1);
	h_stage(c, "default", 1, 1);

	ck_assert_int_eq(h_relay_run("relay1", ONCE("--batch-size", "10")), 0);
	jobs = h_list_jobs(r, "queue:default");
	ck_assert_int_eq(json_array_size(jobs), 1);
	ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(json_array_get(jobs, 0), "args"), 0)), 1);
	json_decref(jobs);

	/* The open transaction's row arrives once it commits; the rolled-back ones never. */
	h_sql(open_tx, "COMMIT");
	ck_assert_int_eq(h_relay_run("relay2", ONCE("--batch-size", "10")), 0);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 2);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	PQfinish(c);
	PQfinish(open_tx);
	redisFree(r);
}
END_TEST

/* Popping each queue from the end its workers pop (Sidekiq BRPOPs, Resque
 * LPOPs) must give ids in order. */
static void assert_fifo(redisContext *r, const char *pop, const char *key, int expect)
{
	long long prev = -1;
	int n = 0;
	redisReply *rep;

	while ((rep = h_cmd(r, "%s %s", pop, key))->type == REDIS_REPLY_STRING) {
		json_t *j = json_loads(rep->str, 0, NULL);
		long long v = json_integer_value(json_array_get(json_object_get(j, "args"), 0));
		ck_assert_int_gt(v, prev);
		prev = v;
		n++;
		json_decref(j);
		freeReplyObject(rep);
	}
	freeReplyObject(rep);
	ck_assert_int_eq(n, expect);
}

START_TEST(fifo_per_queue_across_batches)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();

	for (int t = 0; t < 5; t++) {
		h_sql(c,
		      "INSERT INTO staged_jobs (queue, job_class, args)"
		      " SELECT CASE WHEN i %% 3 = 0 THEN 'a' ELSE 'b' END, 'W', jsonb_build_array(i)"
		      " FROM generate_series(%d, %d) i ORDER BY i",
		      t * 500, t * 500 + 499);
	}
	ck_assert_int_eq(h_relay_run("relay", ONCE("--batch-size", "333")), 0);
	assert_fifo(r, "RPOP", "queue:a", 834);
	assert_fifo(r, "RPOP", "queue:b", 1666);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* Resque's client RPUSHes and its workers LPOP: several jobs of one batch,
 * and batches after it, must come out of each queue oldest first. */
START_TEST(resque_fifo_per_queue_across_batches)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();

	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args)"
		 " SELECT CASE WHEN i %% 4 = 0 THEN 'a' ELSE 'b' END, 'W', jsonb_build_array(i)"
		 " FROM generate_series(1, 100) i ORDER BY i");
	ck_assert_int_eq(h_relay_run("relay", ONCE("--format", "resque", "--batch-size", "30")), 0);
	assert_fifo(r, "LPOP", "resque:queue:a", 25);
	assert_fifo(r, "LPOP", "resque:queue:b", 75);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	PQfinish(c);
	redisFree(r);
}
END_TEST

START_TEST(future_jobs_go_to_the_schedule)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	redisReply *rep;
	json_t *j;
	long long due = h_sql(c, "SELECT extract(epoch FROM now() + interval '1 hour')::int8");

	h_sql(c,
	      "INSERT INTO staged_jobs (job_class, run_at, jid) VALUES"
	      " ('Later', to_timestamp(%lld.5), 'bbbbbbbbbbbbbbbbbbbbbbbb'),"
	      " ('Past', now() - interval '1 minute', 'cccccccccccccccccccccccc')",
	      due);
	ck_assert_int_eq(h_relay_run("relay", ONCE("--sidekiq-version", "8")), 0);

	rep = h_cmd(r, "ZRANGE schedule 0 -1 WITHSCORES");
	ck_assert_int_eq(rep->elements, 2);
	ck_assert_double_eq_tol(strtod(rep->element[1]->str, NULL), (double)due + 0.5, 1e-3);
	j = json_loads(rep->element[0]->str, 0, NULL);
	ck_assert_str_eq(json_string_value(json_object_get(j, "class")), "Later");
	ck_assert_ptr_null(json_object_get(j, "enqueued_at"));
	ck_assert_ptr_null(json_object_get(j, "at"));
	ck_assert(json_is_integer(json_object_get(j, "created_at")));
	json_decref(j);
	freeReplyObject(rep);

	j = only_job(r, "queue:default");
	ck_assert_str_eq(json_string_value(json_object_get(j, "class")), "Past");
	ck_assert(json_is_integer(json_object_get(j, "enqueued_at")));
	ck_assert_int_gt(json_integer_value(json_object_get(j, "enqueued_at")), 1700000000000LL);
	json_decref(j);
	PQfinish(c);
	redisFree(r);
}
END_TEST

START_TEST(rows_that_cannot_be_jobs_go_to_the_dead_table)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();

	h_stage(c, "default", 1, 3);
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('NotArray', '{\"a\": 1}')");
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('', '[]')");
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('Huge', jsonb_build_array(repeat('x', 5000)))");
	h_sql(c, "INSERT INTO staged_jobs (job_class, options) VALUES ('BadOpts', '[1]')");
	h_stage(c, "default", 4, 2);

	ck_assert_int_eq(h_relay_run("relay", ONCE("--max-job-bytes", "4096")), 0);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 5);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 4);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE job_class = 'NotArray'"
				  " AND reason LIKE '%%args%%array%%' AND args::jsonb = '{\"a\": 1}'"),
			 1);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE job_class = ''"
				  " AND reason LIKE '%%class%%'"),
			 1);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE job_class = 'Huge'"
				  " AND reason LIKE '%%max-job-bytes%%'"),
			 1);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE job_class = 'BadOpts'"
				  " AND reason LIKE '%%options%%' AND failed_at IS NOT NULL"),
			 1);
	PQfinish(c);
	redisFree(r);
}
END_TEST

START_TEST(resque_format_and_namespace)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	redisReply *rep;
	long long due = h_sql(c, "SELECT extract(epoch FROM now() + interval '1 day')::int8");

	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args) VALUES ('high', 'Archive', '[7, \"x\"]')");
	h_sql(c,
	      "INSERT INTO staged_jobs (queue, job_class, args, run_at) VALUES"
	      " ('low', 'Later', '[]', to_timestamp(%lld))",
	      due);
	ck_assert_int_eq(h_relay_run("relay", ONCE("--format", "resque")), 0);

	ck_assert_int_eq(h_cmd_int(r, "SISMEMBER resque:queues high"), 1);
	rep = h_cmd(r, "LPOP resque:queue:high");
	ck_assert_str_eq(rep->str, "{\"class\":\"Archive\",\"args\":[7, \"x\"]}");
	freeReplyObject(rep);
	/* resque-scheduler's delayed layout. */
	rep = h_cmd(r, "ZSCORE resque:delayed_queue_schedule %lld", due);
	ck_assert_int_eq(strtoll(rep->str, NULL, 10), due);
	freeReplyObject(rep);
	rep = h_cmd(r, "LPOP resque:delayed:%lld", due);
	ck_assert_str_eq(rep->str, "{\"class\":\"Later\",\"args\":[],\"queue\":\"low\"}");
	ck_assert_int_eq(h_cmd_int(r, "SISMEMBER resque:timestamps:%s delayed:%lld", rep->str, due), 1);
	freeReplyObject(rep);

	h_stage(c, "default", 1, 1);
	ck_assert_int_eq(h_relay_run("relay2", ONCE("--format", "resque", "--namespace", "app")), 0);
	ck_assert_int_eq(h_cmd_int(r, "LLEN app:queue:default"), 1);
	h_stage(c, "default", 2, 1);
	ck_assert_int_eq(h_relay_run("relay3", ONCE("--namespace", "myapp")), 0);
	ck_assert_int_eq(h_cmd_int(r, "LLEN myapp:queue:default"), 1);
	ck_assert_int_eq(h_cmd_int(r, "SISMEMBER myapp:queues default"), 1);
	PQfinish(c);
	redisFree(r);
}
END_TEST

START_TEST(new_rows_are_picked_up_promptly_and_sigterm_exits_cleanly)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;
	long long t0;

	h_relay_start(&p, "relay", (const char *const[]){ "--poll-interval", "50ms", NULL });
	ck_assert(h_log_wait(&p, "became leader", 10000));
	sleep_ms(300);
	t0 = mono_ms();
	h_stage(c, "default", 1, 1);
	redisReply *rep = h_cmd(r, "BRPOP queue:default 5");
	ck_assert_int_eq(rep->type, REDIS_REPLY_ARRAY);
	freeReplyObject(rep);
	ck_assert_int_lt(mono_ms() - t0, 2000);
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 5000), 0);
	ck_assert(h_log_contains(p.log, "stopped on signal"));
	PQfinish(c);
	redisFree(r);
}
END_TEST

START_TEST(migrate_is_idempotent_and_says_what_it_did)
{
	const char *const args[] = { "migrate", NULL };
	char log[600];

	ck_assert_int_eq(h_relay_run("migrate-again", args), 0);
	snprintf(log, sizeof(log), "%s/migrate-again.log", h_env("TEST_DIR"));
	ck_assert(h_log_contains(log, "migration already applied"));
	ck_assert(h_log_contains(log, "001_staged_jobs"));
}
END_TEST

START_TEST(jid_is_fixed_at_staging)
{
	PGconn *c = h_pg();

	h_stage(c, "default", 1, 50);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs WHERE jid ~ '^[0-9a-f]{24}$'"), 50);
	ck_assert_int_eq(h_sql(c, "SELECT count(DISTINCT jid) FROM staged_jobs"), 50);
	PQfinish(c);
}
END_TEST

/* Each log line on stderr is one JSON object. */
static void assert_json_lines(const char *path, const char *must_contain)
{
	char line[4096];
	bool found = false;
	FILE *f = fopen(path, "r");

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		json_error_t err;
		json_t *j = json_loads(line, 0, &err);
		ck_assert_msg(j != NULL, "not a json line: %s (%s)", line, err.text);
		ck_assert_ptr_nonnull(json_object_get(j, "ts"));
		ck_assert_ptr_nonnull(json_object_get(j, "level"));
		found = found || strstr(json_string_value(json_object_get(j, "msg")), must_contain);
		json_decref(j);
	}
	fclose(f);
	ck_assert_msg(found, "no log line says %s", must_contain);
}

START_TEST(configured_from_the_environment_over_a_unix_socket_with_acl_user)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;
	char url[600];

	freeReplyObject(h_cmd(r, "ACL SETUSER relay on >s3cr%%t ~* &* +@all"));
	snprintf(url, sizeof(url), "unix://relay:s3cr%%25t@%s/redis.sock?db=3", h_env("TEST_DIR"));
	setenv("REDIS_URL", url, 1);
	setenv("DATABASE_URL", h_env("TEST_PG_URL"), 1);
	setenv("STAGEDRAIN_ONCE", "yes", 1);
	setenv("STAGEDRAIN_LOG_FORMAT", "json", 1);
	setenv("STAGEDRAIN_BATCH_SIZE", "2", 1);
	h_stage(c, "default", 1, 5);
	h_relay_start_bare(&p, "env", NULL);
	ck_assert_int_eq(h_relay_wait(&p, 30000), 0);
	assert_json_lines(p.log, "connected");
	ck_assert(!h_log_contains(p.log, "s3cr"));
	freeReplyObject(h_cmd(r, "SELECT 3"));
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 5);
	freeReplyObject(h_cmd(r, "SELECT 0"));
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 0);

	/* The wrong password is refused at start-up, without echoing it. */
	snprintf(url, sizeof(url), "redis://relay:wrong-pw@127.0.0.1:%s/0", h_env("TEST_REDIS_PORT"));
	setenv("STAGEDRAIN_REDIS_URL", url, 1);
	h_relay_start_bare(&p, "env-bad-auth", NULL);
	ck_assert_int_eq(h_relay_wait(&p, 30000), 1);
	ck_assert(h_log_contains(p.log, "AUTH"));
	ck_assert(!h_log_contains(p.log, "wrong-pw"));
	PQfinish(c);
	redisFree(r);
}
END_TEST

Suite *relay_suite(void)
{
	Suite *s = suite_create("relay");
	TCase *tc = tcase_create("drain");

	tcase_add_checked_fixture(tc, h_reset, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, committed_jobs_arrive_as_sidekiq_writes_them);
	tcase_add_test(tc, rolled_back_and_uncommitted_jobs_never_arrive);
	tcase_add_test(tc, fifo_per_queue_across_batches);
	tcase_add_test(tc, resque_fifo_per_queue_across_batches);
	tcase_add_test(tc, future_jobs_go_to_the_schedule);
	tcase_add_test(tc, rows_that_cannot_be_jobs_go_to_the_dead_table);
	tcase_add_test(tc, resque_format_and_namespace);
	tcase_add_test(tc, new_rows_are_picked_up_promptly_and_sigterm_exits_cleanly);
	tcase_add_test(tc, migrate_is_idempotent_and_says_what_it_did);
	tcase_add_test(tc, jid_is_fixed_at_staging);
	tcase_add_test(tc, configured_from_the_environment_over_a_unix_socket_with_acl_user);
	suite_add_tcase(s, tc);
	return s;
}
