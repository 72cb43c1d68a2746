/* The guarantees hold for every format, against the real servers: each job
 * once, FIFO per queue in the order its worker pops, the crash fence, and
 * dead-lettering with a reason while the drain goes on. */
#include "fmacros.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suites.h"
#include "support/celery_body.h"

/* A format, where its queue lives, and how its worker takes the oldest job. */
struct layout {
	const char *format;
	const char *prefix; /* before the queue's name */
	const char *pop;    /* the worker's pop: RPOP after LPUSH, LPOP after RPUSH */
};

static const struct layout layouts[] = {
	{ "sidekiq", "queue:", "RPOP" },
	{ "resque", "resque:queue:", "LPOP" },
	{ "activejob", "queue:", "RPOP" },
	{ "celery", "", "RPOP" },
	{ "laravel", "laravel_database_queues:", "LPOP" },
};

#define NLAYOUTS (int)(sizeof(layouts) / sizeof(layouts[0]))

static void setup(void)
{
	h_reset();
}

/* The job's positional arguments, wherever its format keeps them. */
static json_t *job_args(const char *format, const json_t *job)
{
	json_t *args, *body;

	if (strcmp(format, "activejob") == 0)
		return json_incref(json_object_get(json_array_get(json_object_get(job, "args"), 0), "arguments"));
	if (strcmp(format, "laravel") == 0)
		return json_incref(json_object_get(job, "data"));
	if (strcmp(format, "celery") != 0)
		return json_incref(json_object_get(job, "args"));
	body = celery_body(job, 0);
	ck_assert_ptr_nonnull(body);
	args = json_incref(json_array_get(body, 0));
	json_decref(body);
	return args;
}

/* Pops queue q as its worker does: args[0] must rise, n jobs in all. */
static void assert_fifo(redisContext *r, const struct layout *l, const char *q, int n)
{
	char key[128];
	redisReply *rep;
	long long prev = -1;
	int got = 0;

	snprintf(key, sizeof(key), "%s%s", l->prefix, q);
	while ((rep = h_cmd(r, "%s %s", l->pop, key))->type == REDIS_REPLY_STRING) {
		json_t *job = json_loads(rep->str, 0, NULL), *args;
		ck_assert_msg(job != NULL, "%s: not json: %s", l->format, rep->str);
		args = job_args(l->format, job);
		ck_assert_msg(json_array_size(args) == 1, "%s: args not [i]: %s", l->format, rep->str);
		ck_assert_int_gt(json_integer_value(json_array_get(args, 0)), prev);
		prev = json_integer_value(json_array_get(args, 0));
		got++;
		json_decref(args);
		json_decref(job);
		freeReplyObject(rep);
	}
	freeReplyObject(rep);
	ck_assert_int_eq(got, n);
}

START_TEST(each_job_once_fifo_per_queue)
{
	const struct layout *l = &layouts[_i];
	PGconn *c = h_pg();
	redisContext *r = h_redis();

	for (int t = 0; t < 3; t++)
		h_sql(c,
		      "INSERT INTO staged_jobs (queue, job_class, args)"
		      " SELECT CASE WHEN i %% 3 = 0 THEN 'a' ELSE 'b' END, 'App\\Jobs\\W@handle',"
		      " jsonb_build_array(i) FROM generate_series(%d, %d) i ORDER BY i",
		      t * 100, t * 100 + 99);
	ck_assert_int_eq(h_relay_run("relay", (const char *const[]){ "--once", "--format", l->format, "--batch-size",
								     "70", NULL }),
			 0);
	assert_fifo(r, l, "a", 100);
	assert_fifo(r, l, "b", 200);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	PQfinish(c);
	redisFree(r);
}
END_TEST

static long long queue_len(redisContext *r, const struct layout *l, const char *q)
{
	char key[128];

	snprintf(key, sizeof(key), "%s%s", l->prefix, q);
	return h_cmd_int(r, "LLEN %s", key);
}

/* A relay killed between its push and its delete (blocked in the delete by a
 * row lock, then its session ended as a dead host's would): the next leader
 * reads the fence and deletes the batch instead of pushing it again. */
START_TEST(crash_between_push_and_delete_is_not_pushed_again)
{
	const struct layout *l = &layouts[_i];
	PGconn *c = h_pg(), *locker = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;
	char log[600];
	long long t0;

	h_stage(c, "default", 1, 10);
	h_sql(locker, "BEGIN");
	h_sql(locker, "SELECT 1 FROM staged_jobs WHERE id = 5 FOR UPDATE");
	h_relay_start(&p, "relay", (const char *const[]){ "--format", l->format, "--poll-interval", "20ms", NULL });
	for (t0 = mono_ms(); queue_len(r, l, "default") < 10; sleep_ms(5))
		RELAY_CHECK(&p, mono_ms() - t0 < 10000, "%s: jobs not pushed within 10 s", l->format);
	sleep_ms(200); /* the relay is now blocked in its delete */
	h_relay_crash(&p, c);
	h_sql(locker, "ROLLBACK");
	PQfinish(locker);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 10);
	/* The next leader deletes the batch the fence names instead of pushing
	 * it, and counts those rows as relayed: they were. */
	ck_assert_int_eq(h_relay_run("next", (const char *const[]){ "--once", "--format", l->format, NULL }), 0);
	ck_assert_int_eq(queue_len(r, l, "default"), 10);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	snprintf(log, sizeof(log), "%s/next.log", h_env("TEST_DIR"));
	ck_assert(h_log_contains(log, "jobs_relayed=10 "));
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* Rows no format can carry, and one each format refuses, go to the dead
 * table with a reason; the good rows around them arrive. */
START_TEST(bad_rows_are_dead_lettered_and_the_drain_goes_on)
{
	const struct layout *l = &layouts[_i];
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	char reason[256];

	h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('App\\Jobs\\W@handle', '[1]')");
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('App\\Jobs\\W@handle', '{\"a\": 1}')");
	h_sql(c, "INSERT INTO staged_jobs (job_class, args, options) VALUES ('App\\Jobs\\W@handle', '[2]',"
		 " '{\"activejob\": 1}')");
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('App\\Jobs\\W@handle', '[3]')");
	ck_assert_int_eq(h_relay_run("relay", (const char *const[]){ "--once", "--format", l->format, "--max-job-bytes",
								     "4k", NULL }),
			 0);
	ck_assert_int_eq(queue_len(r, l, "default"), 2);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	h_sql_text(c, "SELECT reason FROM staged_jobs_dead WHERE id = 2", reason, sizeof(reason));
	ck_assert_str_eq(reason, "args is not a json array (got object)");
	h_sql_text(c, "SELECT reason FROM staged_jobs_dead WHERE id = 3", reason, sizeof(reason));
	ck_assert_msg(strstr(reason, "\"activejob\"") != NULL, "%s: %s", l->format, reason);
	/* The dead row keeps its uuid, so a re-staged job keeps its id. */
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE uuid IS NOT NULL"), 2);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* What each format copies from a row's options as written: the option staged
 * (Resque and Laravel write none of theirs) and the text it must make. */
static const struct {
	const char *options, *copied;
} big_options[] = {
	{ "{\"big\": 18446744073709551616}", "\"big\":18446744073709551616," },
	{ "{\"big\": 18446744073709551616}", NULL },
	{ "{\"big\": 18446744073709551616}", "\"big\":18446744073709551616," },
	{ "{\"kwargs\": {\"n\": 18446744073709551616}}", "{\"n\":18446744073709551616}" },
	{ "{}", NULL },
};

/* A number of any size is pushed as the app wrote it, not dead-lettered: a
 * row with 2^64, -2^64 and 1e400 in args and 2^64 in options. */
START_TEST(numbers_past_64_bits_arrive_as_written)
{
	const struct layout *l = &layouts[_i];
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	char key[128];
	redisReply *rep;
	json_t *env = NULL;
	char *text;
	size_t len;

	/* Laravel's pop script re-encodes the job with Redis' cjson, which
	 * cannot write a number past a double: such a row is dead-lettered. */
	bool doubles = strcmp(l->format, "laravel") == 0;
	const char *huge = doubles ? "1e300" : "1e400";

	h_sql(c,
	      "INSERT INTO staged_jobs (job_class, args, options) VALUES ('App\\Jobs\\W@handle',"
	      " '[18446744073709551616, -18446744073709551616, %s]', '%s')",
	      huge, big_options[_i].options);
	if (doubles)
		h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('App\\Jobs\\W@handle', '[1e400]')");
	ck_assert_int_eq(h_relay_run("relay", (const char *const[]){ "--once", "--format", l->format, NULL }), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), doubles);
	if (doubles)
		ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE reason LIKE"
					  " '%%is past a double''s range%%'"),
				 1);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	snprintf(key, sizeof(key), "%sdefault", l->prefix);
	rep = h_cmd(r, "%s %s", l->pop, key);
	ck_assert_msg(rep->type == REDIS_REPLY_STRING, "%s: no job in %s", l->format, key);
	text = strdup(rep->str);
	if (strcmp(l->format, "celery") == 0) {
		env = json_loads(rep->str, 0, NULL);
		ck_assert_ptr_nonnull(env);
		free(text);
		text = celery_body_text(env, &len);
		ck_assert_ptr_nonnull(text);
		ck_assert_ptr_nonnull(
			strstr(json_string_value(json_object_get(json_object_get(env, "headers"), "kwargsrepr")),
			       "{'n': 18446744073709551616}"));
	}
	ck_assert_msg(strstr(text, "[18446744073709551616,") && strstr(text, "-18446744073709551616,") &&
			      strstr(text, huge),
		      "%s: args changed: %s", l->format, text);
	if (big_options[_i].copied)
		ck_assert_msg(strstr(text, big_options[_i].copied), "%s: option changed: %s", l->format, text);
	free(text);
	json_decref(env);
	freeReplyObject(rep);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* The pushed job as its worker reads it: Celery's body decoded. */
static char *popped_text(redisContext *r, const struct layout *l, json_t **env)
{
	char key[128], *text;
	redisReply *rep;
	size_t len;

	snprintf(key, sizeof(key), "%sdefault", l->prefix);
	rep = h_cmd(r, "%s %s", l->pop, key);
	ck_assert_msg(rep->type == REDIS_REPLY_STRING, "%s: no job in %s", l->format, key);
	*env = json_loads(rep->str, JSON_ALLOW_NUL, NULL);
	ck_assert_ptr_nonnull(*env);
	text = strcmp(l->format, "celery") == 0 ? celery_body_text(*env, &len) : strdup(rep->str);
	ck_assert_ptr_nonnull(text);
	freeReplyObject(rep);
	return text;
}

/* args as the app wrote them reach the worker: object keys in their order,
 * -0.0 with its sign, a string holding \u0000 pushed, not refused (jsonb
 * reordered the first, dropped the second and refused the third). */
START_TEST(payload_arrives_as_the_app_wrote_it)
{
	const struct layout *l = &layouts[_i];
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	json_t *env;
	char *text;

	h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('App\\Jobs\\W@handle',"
		 " '[{\"zeta\": 1, \"alpha\": -0.0}, \"nul\\u0000byte\"]')");
	ck_assert_int_eq(h_relay_run("relay", (const char *const[]){ "--once", "--format", l->format, NULL }), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	text = popped_text(r, l, &env);
	ck_assert_msg(strstr(text, "{\"zeta\":") && strstr(text, "\"alpha\":") &&
			      strstr(text, "{\"zeta\":") < strstr(text, "\"alpha\":"),
		      "%s: keys reordered: %s", l->format, text);
	ck_assert_msg(strstr(text, "-0.0"), "%s: -0.0 changed: %s", l->format, text);
	ck_assert_msg(strstr(text, "\"nul\\u0000byte\""), "%s: the NUL string changed: %s", l->format, text);
	if (strcmp(l->format, "celery") == 0) {
		/* Celery's saferepr quotes a string with only ' escaped: the NUL stays one. */
		static const char repr[] = "[{'zeta': 1, 'alpha': -0.0}, 'nul\0byte']";
		const json_t *got = json_object_get(json_object_get(env, "headers"), "argsrepr");
		ck_assert_uint_eq(json_string_length(got), sizeof(repr) - 1);
		ck_assert(memcmp(json_string_value(got), repr, sizeof(repr) - 1) == 0);
	}
	free(text);
	json_decref(env);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* Queues named like keys a format's workers keep for something else: the
 * key, as its workers hold it (w[0] NULL: not there yet), and the reason. */
static const struct clobber {
	const char *format, *queue, *key, *w[4], *type;
	long long size; /* of that key */
	const char *reason;
} clobbers[] = {
	{ "celery",
	  "unacked",
	  "unacked",
	  { "HSET", "unacked", "tag", "envelope" },
	  "hash",
	  1,
	  "queue \"unacked\" would clobber celery's key \"unacked\" (kombu's hash of unacked tasks)" },
	{ "celery",
	  "unacked_index",
	  "unacked_index",
	  { NULL },
	  "none",
	  0,
	  "queue \"unacked_index\" would clobber celery's key \"unacked_index\" (kombu's index of unacked tasks)" },
	{ "celery",
	  "_kombu.binding.celery",
	  "_kombu.binding.celery",
	  { "SADD", "_kombu.binding.celery", "celery", "celery-binding" },
	  "set",
	  2,
	  "(kombu's bindings of exchange \"celery\")" },
	{ "laravel",
	  "default:reserved",
	  "laravel_database_queues:default:reserved",
	  { "ZADD", "laravel_database_queues:default:reserved", "1", "job" },
	  "zset",
	  1,
	  "queue \"default:reserved\" would clobber laravel's key \"queues:default:reserved\" (queue \"default\"'s "
	  "reserved jobs)" },
	{ "laravel",
	  "default:delayed",
	  "laravel_database_queues:default:delayed",
	  { NULL },
	  "none",
	  0,
	  "(queue \"default\"'s delayed jobs)" },
};

static const struct layout *layout_named(const char *format)
{
	for (int i = 0; i < NLAYOUTS; i++)
		if (strcmp(layouts[i].format, format) == 0)
			return &layouts[i];
	ck_abort_msg("no layout %s", format);
	return NULL;
}

/* A job on such a queue is dead-lettered with the reason and the workers'
 * key stays as it was; the jobs before and after it arrive. */
START_TEST(queues_named_like_the_workers_keys_are_dead_lettered)
{
	const struct clobber *k = &clobbers[_i];
	const struct layout *l = layout_named(k->format);
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	redisReply *rep;
	char reason[256];

	if (k->w[0])
		freeReplyObject(h_cmd(r, "%s %s %s %s", k->w[0], k->w[1], k->w[2], k->w[3]));
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('App\\Jobs\\W@handle', '[1]')");
	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args) VALUES ('%s', 'App\\Jobs\\W@handle', '[2]')",
	      k->queue);
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('App\\Jobs\\W@handle', '[3]')");
	ck_assert_int_eq(h_relay_run("relay", (const char *const[]){ "--once", "--format", l->format, NULL }), 0);
	assert_fifo(r, l, "default", 2);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	h_sql_text(c, "SELECT reason FROM staged_jobs_dead WHERE id = 2", reason, sizeof(reason));
	ck_assert_msg(strstr(reason, k->reason) != NULL, "%s: reason \"%s\" lacks \"%s\"", k->queue, reason, k->reason);
	rep = h_cmd(r, "TYPE %s", k->key);
	ck_assert_msg(strcmp(rep->str, k->type) == 0, "%s is a %s, not a %s", k->key, rep->str, k->type);
	freeReplyObject(rep);
	if (k->w[0]) /* and holds just what the workers put there */
		ck_assert_int_eq(h_cmd_int(r, "%s %s",
					   strcmp(k->type, "hash") == 0  ? "HLEN"
					   : strcmp(k->type, "set") == 0 ? "SCARD"
									 : "ZCARD",
					   k->key),
				 k->size);
	PQfinish(c);
	redisFree(r);
}
END_TEST

Suite *formats_suite(void)
{
	Suite *s = suite_create("formats");
	TCase *tc = tcase_create("every_format");
	TCase *keys = tcase_create("workers_keys");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, each_job_once_fifo_per_queue, 0, NLAYOUTS);
	tcase_add_loop_test(tc, crash_between_push_and_delete_is_not_pushed_again, 0, NLAYOUTS);
	tcase_add_loop_test(tc, bad_rows_are_dead_lettered_and_the_drain_goes_on, 0, NLAYOUTS);
	tcase_add_loop_test(tc, numbers_past_64_bits_arrive_as_written, 0, NLAYOUTS);
	tcase_add_loop_test(tc, payload_arrives_as_the_app_wrote_it, 0, NLAYOUTS);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(keys, setup, NULL);
	tcase_set_timeout(keys, 90);
	tcase_add_loop_test(keys, queues_named_like_the_workers_keys_are_dead_lettered, 0,
			    (int)(sizeof(clobbers) / sizeof(clobbers[0])));
	suite_add_tcase(s, keys);
	return s;
}
