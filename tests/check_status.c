/* `stagedrain status` run as an operator runs it, against the harness's servers: what it says, and its exit status. */
#include "fmacros.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "keys.h"
#include "suites.h"
#include "support/fake_sentinel.h"

/* A port nothing listens on: a connect there is refused at once. */
#define CLOSED_URL_REDIS "redis://127.0.0.1:1"
#define CLOSED_URL_PG "postgresql://postgres@127.0.0.1:1/postgres"
/* Far beyond any status run; only a hang reaches it (nothing here times a run). */
#define HANG_MS 30000

/* The output of the last run. */
static char out_path[512];

/* Runs `stagedrain status` with the given URLs (NULL: the test servers') and args; its exit status. */
static int status_with(const char *name, const char *pg_url, const char *redis_url, const char *const *args)
{
	const char *argv[32] = { "status", "--pg-url", pg_url ? pg_url : h_env("TEST_PG_URL"), "--redis-url",
				 redis_url ? redis_url : h_env("TEST_REDIS_URL") };
	struct relay_proc p;
	int n = 5, st;

	for (; args && *args && n < 31; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	h_relay_start_bare(&p, name, argv);
	snprintf(out_path, sizeof(out_path), "%s", p.log);
	st = h_relay_wait(&p, HANG_MS);
	if (st < 0) {
		(void)proc_reap(&p.proc, 0);
		ck_abort_msg("status %s did not exit within %d ms; see %s", name, HANG_MS, p.log);
	}
	return st;
}

static int status_run(const char *name, const char *const *args)
{
	return status_with(name, NULL, NULL, args);
}

static bool said(const char *text)
{
	return h_log_contains(out_path, text);
}

#define ASSERT_SAID(text) ck_assert_msg(said(text), "status did not say \"%s\"; see %s", (text), out_path)

/* The last run's output as JSON (--json writes it alone to stdout, and nothing to stderr). */
static json_t *output_json(void)
{
	json_error_t e;
	json_t *o = json_load_file(out_path, 0, &e);

	ck_assert_msg(o && json_is_object(o), "%s is not one JSON object: %s (line %d)", out_path, e.text, e.line);
	return o;
}

/* The value at a path of object keys ("leader", "epoch"). */
static json_t *at(json_t *o, const char *k1, const char *k2)
{
	json_t *v = json_object_get(o, k1);

	ck_assert_msg(v != NULL, "no key %s", k1);
	if (k2) {
		v = json_object_get(v, k2);
		ck_assert_msg(v != NULL, "no key %s.%s", k1, k2);
	}
	return v;
}

START_TEST(no_relay_says_so)
{
	ck_assert_int_eq(status_run("status-none", NULL), 1);
	ASSERT_SAID("no relay holds the leader lock");
	ASSERT_SAID("backlog   0 staged");
	ASSERT_SAID("needs attention: no relay holds the leader lock\n");
}
END_TEST

START_TEST(running_relay_is_healthy)
{
	static const char *const json[] = { "--json", NULL };
	struct relay_proc p;
	redisContext *r = h_redis();
	long long epoch;
	json_t *o;
	char pid[32];

	h_relay_start(&p, "relay", (const char *const[]){ "--poll-interval", "50ms", NULL });
	RELAY_CHECK(&p, h_log_wait(&p, "became leader", 10000), "the relay did not lead; see %s", p.log);
	{
		redisReply *e = h_cmd(r, "GET %s", h_epoch_key());
		ck_assert_int_eq(e->type, REDIS_REPLY_STRING);
		epoch = atoll(e->str);
		freeReplyObject(e);
	}
	ck_assert_int_ge(epoch, 1);

	RELAY_CHECK(&p, status_run("status-led", NULL) == 0, "status is not healthy; see %s", out_path);
	ASSERT_SAID("leader    relay at ");
	ASSERT_SAID("application_name \"stagedrain\"");
	ASSERT_SAID("backlog   0 staged\n");
	ASSERT_SAID("healthy\n");
	ck_assert(!said("needs attention"));

	RELAY_CHECK(&p, status_run("status-led-json", json) == 0, "status --json is not healthy; see %s", out_path);
	o = output_json();
	ck_assert(json_is_true(at(o, "healthy", NULL)));
	ck_assert_uint_eq(json_array_size(at(o, "problems", NULL)), 0);
	ck_assert_str_eq(json_string_value(at(o, "leader", "holder")), "relay");
	ck_assert_int_eq(json_integer_value(at(o, "leader", "epoch")), epoch);
	ck_assert(json_integer_value(at(o, "leader", "backend_pid")) > 0);
	ck_assert(json_is_string(at(o, "leader", "since")));
	ck_assert(json_is_string(at(o, "leader", "host")));
	ck_assert(json_real_value(at(o, "leader", "age_seconds")) >= 0);
	ck_assert_int_eq(json_integer_value(at(o, "backlog", "staged")), 0);
	ck_assert(json_is_null(at(o, "backlog", "oldest_age_seconds")));
	ck_assert(json_is_true(at(o, "postgres", "ok")));
	ck_assert(json_is_true(at(o, "redis", "ok")));
	ck_assert(json_is_false(at(o, "redis", "tls")));
	ck_assert(json_is_null(at(o, "redis", "master_name")));
	ck_assert(json_is_object(at(o, "gaps", NULL)) && json_is_object(at(o, "dead", NULL)));
	ck_assert(json_is_array(at(o, "queues", NULL)) && json_is_object(at(o, "horizon", NULL)));
	ck_assert(json_is_object(at(o, "thresholds", NULL)));
	snprintf(pid, sizeof(pid), "%lld", (long long)json_integer_value(at(o, "leader", "backend_pid")));
	json_decref(o);
	/* The pid shown is the session that holds the lock. */
	{
		PGconn *c = h_pg();
		ck_assert_int_eq(h_sql(c,
				       "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
				       " AND objsubid = 1 AND pid = %s",
				       pid),
				 1);
		PQfinish(c);
	}
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 10000), 0);
	redisFree(r);
}
END_TEST

/* A session that is not a relay holds the lock: every relay waits, and status says who. */
START_TEST(foreign_lock_holder_is_named)
{
	PGconn *x = h_pg();
	char want[96];
	long long pid;

	h_sql(x, "SET application_name = 'someone-else'");
	h_sql(x, "SELECT pg_advisory_lock(%lld)", KEYS_LOCK_DEFAULT);
	pid = h_sql(x, "SELECT pg_backend_pid()");
	ck_assert_int_eq(status_run("status-foreign", NULL), 1);
	snprintf(want, sizeof(want), "a session that is not a relay at 127.0.0.1 (backend pid %lld,", pid);
	ASSERT_SAID(want);
	ASSERT_SAID("application_name \"someone-else\"");
	snprintf(want, sizeof(want), "needs attention: a session that is not a relay holds the leader lock (pid %lld)",
		 pid);
	ASSERT_SAID(want);
	PQfinish(x);
}
END_TEST

/* An old staged job, no relay to take it: named, with --max-age, and exit 1. */
START_TEST(old_staged_job_needs_a_person)
{
	PGconn *c = h_pg();
	json_t *o;

	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, created_at) VALUES ('default', 'Old', now() - interval '"
		 "10 minutes'), ('default', 'New', now())");
	ck_assert_int_eq(status_run("status-old", (const char *const[]){ "--max-age", "5min", NULL }), 1);
	ASSERT_SAID("backlog   2 staged, oldest 10m0");
	ASSERT_SAID("the oldest staged job is 10m0");
	ASSERT_SAID("(--max-age 5m00s)");
	/* Within the threshold it is not a problem (the missing leader still is). */
	ck_assert_int_eq(status_run("status-old-ok", (const char *const[]){ "--max-age", "1h", "--json", NULL }), 1);
	ck_assert(!said("the oldest staged job"));
	o = output_json();
	ck_assert_int_eq(json_integer_value(at(o, "backlog", "staged")), 2);
	ck_assert(json_real_value(at(o, "backlog", "oldest_age_seconds")) >= 600);
	ck_assert_uint_eq(json_array_size(at(o, "problems", NULL)), 1);
	json_decref(o);
	PQfinish(c);
}
END_TEST

/* A count that outlasts the statement timeout (here: a lock held on the
 * table) gives way to the statistics' estimate; the oldest job's reading,
 * held up too, is named. */
START_TEST(count_past_the_timeout_gives_an_estimate)
{
	PGconn *c = h_pg(), *x = h_pg();
	json_t *o, *problems;

	h_stage(c, "default", 1, 3);
	h_sql(x, "BEGIN");
	h_sql(x, "LOCK TABLE staged_jobs IN ACCESS EXCLUSIVE MODE");
	ck_assert_int_eq(status_run("status-estimate", (const char *const[]){ "--json", NULL }), 1);
	h_sql(x, "ROLLBACK");
	o = output_json();
	ck_assert(json_is_true(at(o, "backlog", "estimated")));
	ck_assert(json_integer_value(at(o, "backlog", "staged")) >= 0);
	ck_assert(json_is_null(at(o, "backlog", "oldest_age_seconds")));
	problems = at(o, "problems", NULL);
	ck_assert_uint_eq(json_array_size(problems), 2);
	ck_assert_str_eq(json_string_value(json_array_get(problems, 0)),
			 "postgres: could not read the oldest staged job: ERROR: canceling statement due to statement "
			 "timeout");
	json_decref(o);
	/* Without the lock the count is exact again. */
	ck_assert_int_eq(status_run("status-exact", NULL), 1);
	ASSERT_SAID("backlog   3 staged, oldest ");
	PQfinish(x);
	PQfinish(c);
}
END_TEST

/* Held jobs of a capped queue with the length of its list; the dead rows counted. */
START_TEST(held_jobs_queue_lengths_and_dead_rows)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	json_t *o, *q;

	h_sql(c, "INSERT INTO staged_jobs_held (id, queue, job_class, args, options, created_at, jid, uuid, round,"
		 " held_at) SELECT i, 'mail', 'Mailer', '[]', '{}', now(), lpad(i::text, 24, '0'), gen_random_uuid(),"
		 " i, now() - interval '90 seconds' FROM generate_series(1, 3) i");
	freeReplyObject(h_cmd(r, "LPUSH queue:mail a b"));
	h_sql(c, "INSERT INTO staged_jobs_dead (id, reason, failed_at) VALUES (7, 'bad', now() - interval '2 hours'),"
		 " (8, 'bad', now())");

	ck_assert_int_eq(status_run("status-held", (const char *const[]){ "--max-queue-length", "2", NULL }), 1);
	ASSERT_SAID("queue     mail: list 2 of cap 2, 3 held, oldest 1m3");
	ASSERT_SAID("dead      2 rows, oldest 2h00m");

	/* --queue-limit names a queue with nothing held: its list is shown too. */
	ck_assert_int_eq(status_run("status-held-json",
				    (const char *const[]){ "--queue-limit", "mail=5,other=9", "--json", NULL }),
			 1);
	o = output_json();
	q = at(o, "queues", NULL);
	ck_assert_uint_eq(json_array_size(q), 2);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(q, 0), "name")), "mail");
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(q, 0), "cap")), 5);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(q, 0), "held")), 3);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(q, 0), "length")), 2);
	ck_assert(json_real_value(json_object_get(json_array_get(q, 0), "oldest_held_age_seconds")) >= 90);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(q, 1), "name")), "other");
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(q, 1), "held")), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(q, 1), "length")), 0);
	ck_assert_int_eq(json_integer_value(at(o, "dead", "rows")), 2);
	ck_assert(json_real_value(at(o, "dead", "oldest_age_seconds")) >= 7200);
	json_decref(o);

	/* A list of the wrong type: its length is unknown, the rest still read. */
	freeReplyObject(h_cmd(r, "DEL queue:mail"));
	freeReplyObject(h_cmd(r, "SET queue:mail x"));
	ck_assert_int_eq(status_run("status-wrongtype", (const char *const[]){ "--max-queue-length", "2", NULL }), 1);
	ASSERT_SAID("queue     mail: list unknown of cap 2");
	ck_assert(!said("redis:"));
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* A queue's length is read from the lists its workers pop, in the --format's key layout. */
START_TEST(queue_lengths_follow_the_format)
{
	redisContext *r = h_redis();
	json_t *o;

	freeReplyObject(h_cmd(r, "RPUSH laravel_database_queues:mail a b c"));
	freeReplyObject(h_cmd(r, "RPUSH mail a"));
	freeReplyObject(h_cmd(r, "RPUSH %b a b",
			      "mail\x06\x16"
			      "6",
			      (size_t)7));
	ck_assert_int_eq(status_run("status-laravel", (const char *const[]){ "--format", "laravel", "--queue-limit",
									     "mail=10", "--json", NULL }),
			 1);
	o = output_json();
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(at(o, "queues", NULL), 0), "length")), 3);
	json_decref(o);
	/* Celery: the queue's list and its priority steps' lists, summed. */
	ck_assert_int_eq(status_run("status-celery", (const char *const[]){ "--format", "celery", "--queue-limit",
									    "mail=10", "--json", NULL }),
			 1);
	o = output_json();
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(at(o, "queues", NULL), 0), "length")), 3);
	json_decref(o);
	redisFree(r);
}
END_TEST

/* A staging transaction left open holds both a gap (its id) and the horizon. */
START_TEST(long_transaction_holds_the_horizon)
{
	PGconn *c = h_pg(), *x = h_pg();
	char pid[64];
	json_t *o;

	h_sql(x, "SET application_name = 'report-job'");
	h_sql(x, "BEGIN");
	h_sql(x, "INSERT INTO staged_jobs (queue, job_class) VALUES ('default', 'Late')");
	snprintf(pid, sizeof(pid), "pid %lld", h_sql(x, "SELECT pg_backend_pid()"));
	sleep_ms(1200);

	ck_assert_int_eq(status_run("status-horizon", (const char *const[]){ "--warn-xact-age", "1s", NULL }), 1);
	ASSERT_SAID("has held the xmin horizon for");
	ASSERT_SAID(pid);
	ASSERT_SAID("application_name \"report-job\"");
	ASSERT_SAID("gaps      1 staging transaction running, oldest 1.");
	/* Under the threshold: the horizon is shown, and not a problem. */
	ck_assert_int_eq(status_run("status-horizon-ok",
				    (const char *const[]){ "--warn-xact-age", "1h", "--json", NULL }),
			 1);
	o = output_json();
	ck_assert(json_is_true(at(o, "horizon", "held")));
	ck_assert_str_eq(json_string_value(at(o, "horizon", "kind")), "backend");
	ck_assert_int_eq(json_integer_value(at(o, "horizon", "pid")), atoll(pid + 4));
	ck_assert(json_real_value(at(o, "horizon", "age_seconds")) >= 1);
	ck_assert_int_eq(json_integer_value(at(o, "gaps", "staging_transactions")), 1);
	ck_assert_int_eq(json_integer_value(at(o, "gaps", "oldest_pid")), atoll(pid + 4));
	ck_assert_uint_eq(json_array_size(at(o, "problems", NULL)), 1); /* the missing leader alone */
	json_decref(o);

	h_sql(x, "ROLLBACK");
	ck_assert_int_eq(status_run("status-horizon-gone", (const char *const[]){ "--warn-xact-age", "1s", NULL }), 1);
	ASSERT_SAID("horizon   not held by any transaction");
	ASSERT_SAID("gaps      none open");
	PQfinish(x);
	PQfinish(c);
}
END_TEST

/* Run with the relay's own least-privilege role (sql/roles.sql): what it may
 * not read is shown as such, and is not a problem. */
START_TEST(relay_role_sees_what_it_may)
{
	PGconn *c = h_pg(), *x = h_pg();
	char url[256];
	json_t *o, *notes;

	h_relay_role(c, "status_relay", url, sizeof(url));
	h_sql(c, "INSERT INTO staged_jobs_dead (id, reason) VALUES (1, 'bad')");
	h_stage(c, "default", 1, 2);
	h_sql(x, "BEGIN");
	h_sql(x, "SELECT pg_current_xact_id()");
	sleep_ms(1100);
	ck_assert_int_eq(status_with("status-role", url, NULL, (const char *const[]){ "--warn-xact-age", "1s", NULL }),
			 1);
	ASSERT_SAID("backlog   2 staged, oldest ");
	/* roles.sql lets the relay count dead rows (their queue and failed_at), never read their args. */
	ASSERT_SAID("dead      1 row, oldest ");
	ASSERT_SAID("horizon   unknown: this role cannot see other roles' transactions (grant pg_read_all_stats");
	ASSERT_SAID("needs attention: no relay holds the leader lock\n");
	ck_assert_int_eq(status_with("status-role-json", url, NULL,
				     (const char *const[]){ "--warn-xact-age", "1s", "--json", NULL }),
			 1);
	o = output_json();
	ck_assert(json_is_true(at(o, "postgres", "ok")));
	ck_assert_int_eq(json_integer_value(at(o, "dead", "rows")), 1);
	ck_assert(json_is_null(at(o, "horizon", NULL)));
	notes = at(o, "notes", NULL);
	ck_assert_uint_eq(json_array_size(notes), 1);
	ck_assert_uint_eq(json_array_size(at(o, "problems", NULL)), 1);
	json_decref(o);
	h_sql(x, "ROLLBACK");
	PQfinish(x);
	h_sql(c, "DROP OWNED BY status_relay");
	h_sql(c, "DROP ROLE status_relay");
	PQfinish(c);
}
END_TEST

/* Redis down: the Postgres facts still shown, Redis named, exit 1. */
START_TEST(redis_down_still_reads_postgres)
{
	PGconn *c = h_pg();

	h_stage(c, "default", 1, 3);
	ck_assert_int_eq(status_with("status-noredis", NULL, CLOSED_URL_REDIS, NULL), 1);
	ASSERT_SAID("backlog   3 staged, oldest ");
	ASSERT_SAID("redis     127.0.0.1:1/0, tls off, not reachable");
	ASSERT_SAID("redis: could not connect to redis at 127.0.0.1:1/0");
	ASSERT_SAID("no relay holds the leader lock");
	PQfinish(c);
}
END_TEST

/* Postgres down: the Redis facts still shown, Postgres named, exit 1. */
START_TEST(postgres_down_still_reads_redis)
{
	redisContext *r = h_redis();
	json_t *o;

	freeReplyObject(h_cmd(r, "SET %s 41", h_epoch_key()));
	ck_assert_int_eq(status_with("status-nopg", CLOSED_URL_PG, NULL, (const char *const[]){ "--json", NULL }), 1);
	o = output_json();
	ck_assert(json_is_false(at(o, "postgres", "ok")));
	ck_assert(strstr(json_string_value(at(o, "postgres", "error")), "could not connect to postgres"));
	ck_assert(json_is_true(at(o, "redis", "ok")));
	ck_assert_int_eq(json_integer_value(at(o, "leader", "epoch")), 41);
	ck_assert(json_is_null(at(o, "leader", "holder")));
	ck_assert(json_is_null(at(o, "backlog", NULL)));
	ck_assert(json_is_false(at(o, "healthy", NULL)));
	json_decref(o);
	ck_assert_int_eq(status_with("status-nopg-table", CLOSED_URL_PG, NULL, NULL), 1);
	ASSERT_SAID("needs attention: postgres: could not connect to postgres");
	redisFree(r);
}
END_TEST

/* Behind Sentinel: the master the sentinel named, and the master's name. */
START_TEST(sentinel_target_is_shown)
{
	struct fake_sentinel f;
	char url[128], where[64];
	json_t *o;

	ck_assert_int_eq(fake_sentinel_start(&f, atoi(h_env("TEST_REDIS_PORT"))), 0);
	snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d/jobs/0", f.port);
	snprintf(where, sizeof(where), "127.0.0.1:%s/0", h_env("TEST_REDIS_PORT"));
	ck_assert_int_eq(status_with("status-sentinel", NULL, url, (const char *const[]){ "--json", NULL }), 1);
	fake_sentinel_stop(&f);
	o = output_json();
	ck_assert(json_is_true(at(o, "redis", "ok")));
	ck_assert_str_eq(json_string_value(at(o, "redis", "master_name")), "jobs");
	ck_assert_str_eq(json_string_value(at(o, "redis", "address")), where);
	ck_assert(json_is_false(at(o, "redis", "tls")));
	json_decref(o);
}
END_TEST

/* Usage errors: exit 2 and one line, whatever the servers would say. */
START_TEST(usage_errors_exit_2_with_one_line)
{
	static const struct {
		const char *const args[3];
		const char *says;
	} cases[] = {
		{ { "extra", NULL }, "unexpected argument \"extra\"" },
		{ { "--max-age", "5", NULL }, "--max-age \"5\" is not a span" },
		{ { "--max-age", NULL }, "--max-age needs a value" },
		{ { "--json=yes", NULL }, "--json takes no value" },
		{ { "--batch-size", "x", NULL }, "--batch-size" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(status_run("status-usage", cases[i].args), 2);
		ASSERT_SAID(cases[i].says);
		ck_assert_int_eq(h_log_count(out_path, ""), 1);
	}
}
END_TEST

/* The second Redis (services.sh redis2-start): route "b", its queue bq. */
static redisContext *second_start(char *route, size_t len)
{
	redisContext *r2;

	h_services("redis2-start");
	r2 = redisConnect("127.0.0.1", h_port("redis2"));
	ck_assert_msg(r2 && !r2->err, "redis2: %s", r2 ? r2->errstr : "no memory");
	freeReplyObject(h_cmd(r2, "FLUSHALL"));
	snprintf(route, len, "b bq --redis-url redis://127.0.0.1:%d/0", h_port("redis2"));
	return r2;
}

/* The problem in the last --json run's list that contains text, or NULL. */
static const char *problem(json_t *o, const char *text)
{
	json_t *ps = at(o, "problems", NULL);

	for (size_t i = 0; i < json_array_size(ps); i++)
		if (strstr(json_string_value(json_array_get(ps, i)), text))
			return json_string_value(json_array_get(ps, i));
	return NULL;
}

/* The --json run's target of that name. */
static json_t *target_named(json_t *o, const char *name)
{
	json_t *ts = at(o, "targets", NULL);

	for (size_t i = 0; i < json_array_size(ts); i++)
		if (strcmp(json_string_value(json_object_get(json_array_get(ts, i), "name")), name) == 0)
			return json_array_get(ts, i);
	ck_abort_msg("no target %s in %s", name, out_path);
	return NULL;
}

/* A relay whose route target's Redis is stopped holds that target's row; the
 * held row, staged more than 2 s ago, is the oldest job --max-age judges, and
 * status names the target, down, with what waits for it. */
START_TEST(a_stopped_target_s_held_row_needs_a_person)
{
	PGconn *c = h_pg();
	redisContext *r2;
	struct relay_proc p;
	char route[256];
	json_t *o, *b;

	r2 = second_start(route, sizeof(route));
	h_relay_start(&p, "relay-routed",
		      (const char *const[]){ "--route", route, "--redis-timeout", "300", "--poll-interval", "50ms",
					     NULL });
	RELAY_CHECK(&p, h_log_wait_count(&p, "msg=leading", 2, 10000), "the relay never led on both targets");
	h_services("redis2-stop");
	h_stage(c, "bq", 1, 1);
	for (long long t0 = mono_ms(); h_sql(c, "SELECT count(*) FROM staged_jobs_held WHERE target = 'b'") != 1;)
		RELAY_CHECK(&p, mono_ms() - t0 < 10000, "b's row was not held; see %s", p.log);
	RELAY_CHECK(&p, h_sql(c, "SELECT count(*) FROM staged_jobs") == 0, "a row is still staged");
	/* Until the held row was staged 2.5 s ago. */
	while (h_sql(c, "SELECT (extract(epoch FROM clock_timestamp() - created_at) * 1000)::int FROM "
			"staged_jobs_held") < 2500)
		sleep_ms(100);

	RELAY_CHECK(&p,
		    status_run("status-held-old", (const char *const[]){ "--route", route, "--max-age", "2s", NULL }) ==
			    1,
		    "status did not say it needs a person; see %s", out_path);
	ASSERT_SAID("backlog   0 staged, 1 held, oldest 2.");
	ASSERT_SAID("target    default: 127.0.0.1:");
	ASSERT_SAID("/0, not reachable, 1 held, oldest 2.");
	ASSERT_SAID("queue     bq (target b): list unknown, not capped now, 1 held");
	ASSERT_SAID("the oldest held job (target b) is 2.");
	ASSERT_SAID("(--max-age 2.0s)");
	ck_assert(!said("no relay holds the leader lock"));

	RELAY_CHECK(&p,
		    status_run("status-held-json",
			       (const char *const[]){ "--route", route, "--max-age", "2s", "--json", NULL }) == 1,
		    "status --json did not say it needs a person; see %s", out_path);
	o = output_json();
	ck_assert_ptr_nonnull(problem(o, "the oldest held job (target b) is "));
	ck_assert_ptr_nonnull(problem(o, "target b: could not connect to redis"));
	ck_assert_int_eq(json_integer_value(at(o, "backlog", "held")), 1);
	ck_assert(json_real_value(at(o, "backlog", "oldest_age_seconds")) >= 2.5);
	ck_assert(json_is_null(at(o, "backlog", "oldest_staged_age_seconds")));
	ck_assert_uint_eq(json_array_size(at(o, "targets", NULL)), 2);
	ck_assert(json_is_true(json_object_get(target_named(o, "default"), "reachable")));
	ck_assert_int_eq(json_integer_value(json_object_get(target_named(o, "default"), "held")), 0);
	b = target_named(o, "b");
	ck_assert(json_is_true(json_object_get(b, "configured")));
	ck_assert(json_is_false(json_object_get(b, "reachable")));
	ck_assert(json_is_string(json_object_get(b, "error")));
	ck_assert_int_eq(json_integer_value(json_object_get(b, "held")), 1);
	ck_assert(json_real_value(json_object_get(b, "oldest_held_age_seconds")) >= 2.5);
	json_decref(o);
	/* Under a longer --max-age the held row is no problem (the stopped target still is). */
	RELAY_CHECK(&p,
		    status_run("status-held-ok",
			       (const char *const[]){ "--route", route, "--max-age", "1h", "--json", NULL }) == 1,
		    "see %s", out_path);
	o = output_json();
	ck_assert_ptr_null(problem(o, "the oldest held job"));
	ck_assert_uint_eq(json_array_size(at(o, "problems", NULL)), 1);
	json_decref(o);
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 10000), 0);
	redisFree(r2);
	PQfinish(c);
}
END_TEST

/* A route's queue line reads that route's Redis, in its layout, not the
 * default one; a held row whose route is gone shows under its own name. */
START_TEST(route_queue_lengths_come_from_the_route_s_redis)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis(), *r2;
	char route[256];
	json_t *o, *q;

	r2 = second_start(route, sizeof(route));
	freeReplyObject(h_cmd(r2, "RPUSH queue:bq a b c"));
	freeReplyObject(h_cmd(r, "RPUSH queue:bq a"));
	h_sql(c, "INSERT INTO staged_jobs_held (id, queue, job_class, args, options, created_at, jid, uuid, round,"
		 " target) VALUES (1, 'bq', 'W', '[]', '{}', now() - interval '30 seconds', lpad('1', 24, '0'),"
		 " gen_random_uuid(), 1, 'b'), (2, 'old', 'W', '[]', '{}', now(), lpad('2', 24, '0'),"
		 " gen_random_uuid(), 2, 'gone')");
	ck_assert_int_eq(status_run("status-route-len",
				    (const char *const[]){ "--route", route, "--max-queue-length", "5", NULL }),
			 1);
	ASSERT_SAID("queue     bq (target b): list 3 of cap 5, 1 held");
	ASSERT_SAID("target    b: 127.0.0.1:");
	ASSERT_SAID(", reachable, 1 held, oldest 3");
	ASSERT_SAID("target    gone: no route of this name now, 1 held, oldest ");
	ck_assert_int_eq(status_run("status-route-len-json",
				    (const char *const[]){ "--route", route, "--max-queue-length", "5", "--json",
							   NULL }),
			 1);
	o = output_json();
	q = at(o, "queues", NULL);
	ck_assert_uint_eq(json_array_size(q), 2);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(q, 0), "name")), "bq");
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(q, 0), "target")), "b");
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(q, 0), "length")), 3);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(q, 1), "target")), "gone");
	ck_assert(json_is_null(json_object_get(json_array_get(q, 1), "length")));
	ck_assert_uint_eq(json_array_size(at(o, "targets", NULL)), 3);
	ck_assert(json_is_true(json_object_get(target_named(o, "b"), "reachable")));
	ck_assert(json_is_false(json_object_get(target_named(o, "gone"), "configured")));
	ck_assert(json_is_null(json_object_get(target_named(o, "gone"), "reachable")));
	ck_assert_int_eq(json_integer_value(at(o, "backlog", "held")), 2);
	ck_assert(json_real_value(at(o, "backlog", "oldest_age_seconds")) >= 30);
	ck_assert_ptr_nonnull(problem(o, "no relay holds the leader lock"));
	ck_assert_uint_eq(json_array_size(at(o, "problems", NULL)), 1);
	json_decref(o);
	h_services("redis2-stop");
	redisFree(r2);
	redisFree(r);
	PQfinish(c);
}
END_TEST

Suite *status_suite(void)
{
	Suite *s = suite_create("status");
	TCase *tc = tcase_create("status");
	TCase *routed = tcase_create("routed");

	tcase_add_checked_fixture(tc, h_reset, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, no_relay_says_so);
	tcase_add_test(tc, running_relay_is_healthy);
	tcase_add_test(tc, foreign_lock_holder_is_named);
	tcase_add_test(tc, old_staged_job_needs_a_person);
	tcase_add_test(tc, count_past_the_timeout_gives_an_estimate);
	tcase_add_test(tc, held_jobs_queue_lengths_and_dead_rows);
	tcase_add_test(tc, queue_lengths_follow_the_format);
	tcase_add_test(tc, long_transaction_holds_the_horizon);
	tcase_add_test(tc, relay_role_sees_what_it_may);
	tcase_add_test(tc, redis_down_still_reads_postgres);
	tcase_add_test(tc, postgres_down_still_reads_redis);
	tcase_add_test(tc, sentinel_target_is_shown);
	tcase_add_test(tc, usage_errors_exit_2_with_one_line);
	tcase_add_test(routed, a_stopped_target_s_held_row_needs_a_person);
	tcase_add_test(routed, route_queue_lengths_come_from_the_route_s_redis);
	tcase_add_checked_fixture(routed, h_reset, NULL);
	tcase_set_timeout(routed, 60);
	suite_add_tcase(s, tc);
	suite_add_tcase(s, routed);
	return s;
}
