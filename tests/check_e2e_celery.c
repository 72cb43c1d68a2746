/* End to end: a real Celery 5.2 worker (Debian's python3-celery, Redis broker) runs what the relay pushed,
 * and what the relay writes matches Celery's own send_task key for key. */
#include "fmacros.h"

#include <check.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suites.h"
#include "support/celery_body.h"

#define PYTHON "/usr/bin/python3"
#define TASKS 200
#define ETAS 3

/* What the worker and the send_task script need: the broker and the module. */
struct celery_env {
	char broker[256];
	char path[PATH_MAX];
};

static void set_celery_env(void *arg)
{
	const struct celery_env *e = arg;

	setenv("CELERY_BROKER_URL", e->broker, 1);
	setenv("PYTHONPATH", e->path, 1);
}

static void env_init(struct celery_env *e)
{
	snprintf(e->broker, sizeof(e->broker), "%s", h_env("TEST_REDIS_URL"));
	ck_assert_ptr_nonnull(realpath("tests/e2e", e->path));
}

/* `celery -A celery_tasks worker` on queues, in the test directory. */
static void start_worker(struct relay_proc *p, struct celery_env *e, const char *queues)
{
	const char *argv[] = { PYTHON,
			       "-m",
			       "celery",
			       "-A",
			       "celery_tasks",
			       "worker",
			       "--pool",
			       "solo",
			       "-c",
			       "1",
			       "-Q",
			       queues,
			       "--without-heartbeat",
			       "--without-gossip",
			       "--without-mingle",
			       "--loglevel",
			       "INFO",
			       NULL };
	struct proc_opts o = { .argv = argv, .cwd = h_env("TEST_DIR"), .child_setup = set_celery_env, .child_arg = e };

	h_proc_start(p, "celery-worker", &o);
}

/* SIGTERM is Celery's warm shutdown: the task at hand finishes, then exit 0. */
static void stop_worker(struct relay_proc *p)
{
	h_relay_kill(p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(p, 20000), 0);
}

static void relay_once(void)
{
	static const char *const args[] = { "--format", "celery", "--once", NULL };

	ck_assert_int_eq(h_relay_run("relay", args), 0);
}

/* Each recorded run (task id, args, kwargs, queue, when) into table `ran`. */
static void load_ran(PGconn *c, redisContext *r)
{
	h_load_list(c, r, "e2e:celery:ran", "ran_json");
	h_sql(c, "DROP TABLE IF EXISTS ran");
	h_sql(c, "CREATE TABLE ran AS SELECT j->>'id' AS id, j->'args' AS args, j->'kwargs' AS kwargs,"
		 " j->>'queue' AS queue, to_timestamp((j->>'ran_at')::float8) AS ran_at FROM ran_json");
}

/*
 * TASKS tasks on two queues, some with kwargs, a priority or both, and ETAS
 * of them due 3 s from now: the worker runs each once, with its args and
 * kwargs, from its queue, and no eta task before its time.
 */
START_TEST(celery_runs_every_relayed_task_exactly_once)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct celery_env e;
	struct relay_proc w;
	long long t0;

	env_init(&e);
	h_sql(c,
	      "INSERT INTO staged_jobs (queue, job_class, args, options, run_at)"
	      " SELECT CASE WHEN i %% 2 = 1 THEN 'celery' ELSE 'e2e_b' END, 'e2e.record',"
	      "  jsonb_build_array(i, 'it''s ' || i, jsonb_build_object('k', i), 0.5),"
	      "  CASE WHEN i %% 3 = 0 THEN '{}'::jsonb ELSE jsonb_build_object('kwargs',"
	      "   jsonb_build_object('n', i, 'label', 'x' || i, 'nested', jsonb_build_array(true, null))) END"
	      "  || CASE WHEN i %% 5 = 0 THEN jsonb_build_object('priority', i %% 10) ELSE '{}' END,"
	      "  CASE WHEN i >= %d THEN now() + interval '3 seconds' END"
	      " FROM generate_series(0, %d) i ORDER BY i",
	      TASKS - ETAS, TASKS - 1);
	h_sql(c, "DROP TABLE IF EXISTS cexp");
	h_sql(c,
	      "CREATE TABLE cexp AS SELECT uuid::text AS id, queue, args, coalesce(options->'kwargs', '{}') AS kwargs,"
	      " run_at FROM staged_jobs");
	relay_once();
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 0);
	/* Priority 5 and 0 share nothing: kombu's step lists exist. */
	ck_assert_int_gt(h_cmd_int(r, "LLEN celery\x06\x16"
				      "3"),
			 0);

	/* The relay writes no _kombu.binding.* set: a worker's own -Q queues need none. */
	ck_assert_int_eq(h_cmd_int(r, "EXISTS _kombu.binding.celery _kombu.binding.e2e_b"), 0);

	start_worker(&w, &e, "celery,e2e_b");
	t0 = mono_ms();
	while (h_cmd_int(r, "HLEN e2e:celery:runs") < TASKS && mono_ms() - t0 < 30000)
		sleep_ms(100);
	sleep_ms(1000); /* time for a duplicate run to show up, if there were one */
	stop_worker(&w);

	load_ran(c, r);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM ran"), TASKS);
	ck_assert_int_eq(h_sql(c, "SELECT count(DISTINCT id) FROM ran"), TASKS);
	ck_assert_int_eq(
		h_sql(c,
		      "SELECT count(*) FROM cexp JOIN ran USING (id)"
		      " WHERE ran.args = cexp.args::jsonb AND ran.kwargs = cexp.kwargs::jsonb AND ran.queue = cexp.queue"),
		TASKS);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM cexp JOIN ran USING (id) WHERE cexp.run_at IS NOT NULL"
				  " AND ran.ran_at >= cexp.run_at"),
			 ETAS);
	/* Everything was acked: nothing left in the queues or kombu's unacked hash. */
	ck_assert_int_eq(h_cmd_int(r, "LLEN celery"), 0);
	ck_assert_int_eq(h_cmd_int(r, "LLEN e2e_b"), 0);
	ck_assert_int_eq(h_cmd_int(r, "HLEN unacked"), 0);
	redisFree(r);
	PQfinish(c);
}
END_TEST

static json_t *list_json(redisContext *r, const char *key, size_t i)
{
	redisReply *rep = h_cmd(r, "LINDEX %b %d", key, strlen(key), (int)i);
	json_t *v;

	ck_assert_msg(rep->type == REDIS_REPLY_STRING, "no element %zu in %s", i, key);
	v = json_loads(rep->str, 0, NULL);
	ck_assert_ptr_nonnull(v);
	freeReplyObject(rep);
	return v;
}

static bool skipped(const char *key, const char *const *skip)
{
	for (; *skip; skip++)
		if (strcmp(key, *skip) == 0)
			return true;
	return false;
}

/* The same keys, and the same value under every key not in skip. */
static void same_object(const char *what, const json_t *ours, const json_t *theirs, const char *const *skip)
{
	const char *key;
	json_t *v;

	ck_assert_msg(json_is_object(ours) && json_is_object(theirs), "%s: not objects", what);
	json_object_foreach((json_t *)theirs, key, v)
	{
		ck_assert_msg(json_object_get(ours, key), "%s: send_task writes %s, we do not", what, key);
		if (!skipped(key, skip)) {
			char *a = json_dumps(json_object_get(ours, key), JSON_ENCODE_ANY | JSON_COMPACT);
			char *b = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
			ck_assert_msg(json_equal(json_object_get(ours, key), v), "%s.%s: ours %s, send_task's %s", what,
				      key, a, b);
			free(a);
			free(b);
		}
	}
	ck_assert_msg(json_object_size(ours) == json_object_size(theirs), "%s: we write a key send_task does not",
		      what);
}

/* Ours against send_task's, skipping ids, times, the origin and the queue name. */
static void compare_envelopes(const json_t *ours, const json_t *theirs, const char *our_q, const char *their_q)
{
	static const char *const top_skip[] = { "body", "headers", "properties", NULL };
	static const char *const header_skip[] = { "id", "root_id", "eta", "expires", "origin", NULL };
	static const char *const prop_skip[] = { "correlation_id", "reply_to",   "delivery_tag",
						 "delivery_info",  "expiration", NULL };
	static const char *const info_skip[] = { "routing_key", NULL };
	const json_t *oh = json_object_get(ours, "headers"), *th = json_object_get(theirs, "headers");
	const json_t *op = json_object_get(ours, "properties"), *tp = json_object_get(theirs, "properties");
	json_t *ob = celery_body(ours, 0), *tb = celery_body(theirs, 0);

	ck_assert_msg(ob && tb, "a body is not base64 json");
	same_object("envelope", ours, theirs, top_skip);
	same_object("headers", oh, th, header_skip);
	same_object("properties", op, tp, prop_skip);
	same_object("delivery_info", json_object_get(op, "delivery_info"), json_object_get(tp, "delivery_info"),
		    info_skip);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(op, "delivery_info"), "routing_key")),
			 our_q);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(tp, "delivery_info"), "routing_key")),
			 their_q);
	ck_assert_msg(json_equal(ob, tb), "the bodies differ");
	/* Both ids are the task's; eta and expires both set or both null. */
	ck_assert_str_eq(json_string_value(json_object_get(oh, "root_id")),
			 json_string_value(json_object_get(oh, "id")));
	ck_assert_str_eq(json_string_value(json_object_get(op, "correlation_id")),
			 json_string_value(json_object_get(oh, "id")));
	ck_assert_int_eq(json_is_null(json_object_get(oh, "eta")), json_is_null(json_object_get(th, "eta")));
	ck_assert_int_eq(json_is_null(json_object_get(oh, "expires")), json_is_null(json_object_get(th, "expires")));
	json_decref(ob);
	json_decref(tb);
}

static void send_task(struct celery_env *e, const char *const *extra)
{
	char script[PATH_MAX + 32], log[600];
	const char *argv[12] = { PYTHON, script, "send", "theirs" };
	size_t n = 4;
	struct relay_proc p;
	struct proc_opts o = { .argv = argv, .cwd = h_env("TEST_DIR"), .child_setup = set_celery_env, .child_arg = e };

	snprintf(script, sizeof(script), "%s/celery_tasks.py", e->path);
	for (; *extra; extra++)
		argv[n++] = *extra;
	h_proc_start(&p, "send_task", &o);
	snprintf(log, sizeof(log), "%s", p.log);
	ck_assert_msg(h_relay_wait(&p, 30000) == 0, "send_task failed; see %s", log);
}

/*
 * One immediate task and one with eta, priority 5 and expires, staged and
 * relayed, then the same sent with Celery's own send_task: every key the
 * same, every value too but ids, times and the origin.
 */
START_TEST(envelope_matches_send_task_key_for_key)
{
	static const char args[] = "[1, \"it's\", 2.5, true, null, {\"k\": [1, 2]}, \"\\u00e9\\n\"]";
	static const char kwargs[] = "{\"x\": 1, \"y\": \"z\", \"long\": [0.1]}";
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct celery_env e;
	char args_text[256], kw_text[256];
	const char *plain[] = { args_text, kw_text, NULL };
	const char *full[] = { args_text, kw_text, "5", "60", "120", NULL };
	json_t *ours, *theirs;

	env_init(&e);
	/* Dollar quotes: the args hold a quote of their own. */
	h_sql(c,
	      "INSERT INTO staged_jobs (queue, job_class, args, options, run_at) VALUES"
	      " ('ours', 'e2e.record', $a$%s$a$, jsonb_build_object('kwargs', $k$%s$k$::jsonb), NULL),"
	      " ('ours', 'e2e.record', $a$%s$a$,"
	      "  jsonb_build_object('kwargs', $k$%s$k$::jsonb, 'priority', 5, 'expires', 120),"
	      "  now() + interval '60 seconds')",
	      args, kwargs, args, kwargs);
	/* send_task gets args and kwargs as jsonb keeps them (its key order is our body's). */
	h_sql_text(c, "SELECT args::text FROM staged_jobs LIMIT 1", args_text, sizeof(args_text));
	h_sql_text(c, "SELECT (options->'kwargs')::text FROM staged_jobs LIMIT 1", kw_text, sizeof(kw_text));
	relay_once();
	send_task(&e, plain);
	send_task(&e, full);

	ours = list_json(r, "ours", 0);
	theirs = list_json(r, "theirs", 0);
	compare_envelopes(ours, theirs, "ours", "theirs");
	json_decref(ours);
	json_decref(theirs);
	ours = list_json(r,
			 "ours\x06\x16"
			 "3",
			 0);
	theirs = list_json(r,
			   "theirs\x06\x16"
			   "3",
			   0);
	compare_envelopes(ours, theirs, "ours", "theirs");
	json_decref(ours);
	json_decref(theirs);
	redisFree(r);
	PQfinish(c);
}
END_TEST

Suite *celery_e2e_suite(void)
{
	Suite *s = suite_create("celery_e2e");
	TCase *tc = tcase_create("celery");

	tcase_add_checked_fixture(tc, h_reset, NULL);
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, celery_runs_every_relayed_task_exactly_once);
	tcase_add_test(tc, envelope_matches_send_task_key_for_key);
	suite_add_tcase(s, tc);
	return s;
}
