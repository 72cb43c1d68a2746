/*
 * End to end for --format bullmq against real Postgres and Redis: the keys a
 * relayed job leaves are those BullMQ 6.7's Queue.add leaves (job hash, wait
 * list, delayed and prioritized sets with their scores and counter, events,
 * marker, a paused queue), an existing id is not added again, keys of the
 * wrong type hold only their own jobs, and a crash between push and commit
 * adds nothing twice. A real bullmq Worker runs relayed jobs in clients/node's
 * own end-to-end tests.
 */
#include "fmacros.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suites.h"

#define Q "bull:emails:"
#define TS "1700000000000"

static const char *const once[] = { "--once", "--format", "bullmq", NULL };

/* One row of queue emails: name, args, options. */
static void stage(PGconn *c, const char *name, const char *args, const char *options)
{
	const char *const p[] = { name, args, options };
	PGresult *res = PQexecParams(c,
				     "INSERT INTO staged_jobs (queue, job_class, args, options, created_at)"
				     " VALUES ('emails', $1, $2, coalesce($3::json, '{}'), '2023-11-14 22:13:20+00')",
				     3, NULL, p, NULL, NULL, 0);

	ck_assert_msg(PQresultStatus(res) == PGRES_COMMAND_OK, "%s", PQerrorMessage(c));
	PQclear(res);
}

static void assert_field(redisContext *r, const char *key, const char *field, const char *want)
{
	redisReply *rep = h_cmd(r, "HGET %s %s", key, field);

	ck_assert_msg(rep->type == REDIS_REPLY_STRING, "%s has no %s", key, field);
	ck_assert_str_eq(rep->str, want);
	freeReplyObject(rep);
}

/* Runs text, split at its spaces, as a command (its words hold none). */
static redisReply *words(redisContext *r, const char *text)
{
	char copy[256], *argv[16], *save = NULL;
	int argc = 0;
	redisReply *rep;

	ck_assert_uint_lt(strlen(text), sizeof(copy));
	strcpy(copy, text);
	for (char *w = strtok_r(copy, " ", &save); w && argc < 16; w = strtok_r(NULL, " ", &save))
		argv[argc++] = w;
	rep = redisCommandArgv(r, argc, (const char **)argv, NULL);
	ck_assert_msg(rep && rep->type != REDIS_REPLY_ERROR, "%s: %s", text, rep ? rep->str : r->errstr);
	return rep;
}

/* The reply to cmd: its string elements joined by spaces. */
static void assert_reply(redisContext *r, const char *want, const char *cmd)
{
	redisReply *rep = words(r, cmd);
	char got[1024] = "";
	size_t used = 0;

	ck_assert_int_eq(rep->type, REDIS_REPLY_ARRAY);
	for (size_t i = 0; i < rep->elements; i++)
		used += (size_t)snprintf(got + used, sizeof(got) - used, "%s%s", i ? " " : "", rep->element[i]->str);
	freeReplyObject(rep);
	ck_assert_str_eq(got, want);
}

/* How many events of kind the stream holds for job id. */
static long long events(redisContext *r, const char *kind, const char *id)
{
	redisReply *rep = h_cmd(r, "XRANGE " Q "events - +");
	long long n = 0;

	for (size_t i = 0; i < rep->elements; i++) {
		const redisReply *f = rep->element[i]->element[1];
		n += f->elements >= 4 && strcmp(f->element[1]->str, kind) == 0 && strcmp(f->element[3]->str, id) == 0;
	}
	freeReplyObject(rep);
	return n;
}

START_TEST(keys_are_bullmqs)
{
	PGconn *c = (h_reset(), h_pg());
	redisContext *r = h_redis();

	stage(c, "welcome", "[{\"z\":1,\"a\":\"x\\u0000y\",\"d\":\"2023-11-14T22:13:20.000Z\"}]",
	      "{\"jobId\":\"a\",\"attempts\":3,\"backoff\":{\"type\":\"fixed\",\"delay\":10}}");
	stage(c, "plain", "[]", "{\"jobId\":\"b\",\"attempts\":0}");
	stage(c, "urgent", "[1]", "{\"jobId\":\"c\",\"attempts\":0,\"lifo\":true}");
	stage(c, "later", "[2]", "{\"jobId\":\"d\",\"attempts\":0,\"delay\":60000}");
	stage(c, "later-too", "[3]", "{\"jobId\":\"e\",\"attempts\":0,\"delay\":60000}");
	stage(c, "low", "[4]", "{\"jobId\":\"f\",\"attempts\":0,\"priority\":3}");
	stage(c, "high", "[5]", "{\"jobId\":\"g\",\"attempts\":0,\"priority\":1}");
	/* Rows BullMQ would refuse: dead-lettered with the reason, the drain goes on. */
	h_sql(c, "INSERT INTO staged_jobs (queue, job_class) VALUES ('a:b', 'colon')");
	stage(c, "two-values", "[1, 2]", NULL);
	stage(c, "bad-delay", "[]", "{\"delay\":\"soon\"}");
	ck_assert_int_eq(h_relay_run("relay-bullmq", once), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE"
				  " (job_class = 'colon' AND reason LIKE '%%contains '':'', which BullMQ refuses%%')"
				  " OR (job_class = 'two-values' AND reason LIKE 'args is not [data]%%')"
				  " OR (job_class = 'bad-delay' AND reason LIKE '%%\"delay\" is a string%%')"),
			 3);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 3);

	/* storeJob's hash: data and opts as the app wrote them. */
	assert_reply(r,
		     "name welcome data {\"z\":1,\"a\":\"x\\u0000y\",\"d\":\"2023-11-14T22:13:20.000Z\"} opts "
		     "{\"jobId\":\"a\",\"attempts\":3,\"backoff\":{\"type\":\"fixed\",\"delay\":10}} timestamp " TS
		     " delay 0 priority 0",
		     "HGETALL " Q "a");
	assert_field(r, Q "b", "data", "{}");
	assert_field(r, Q "d", "delay", "60000");
	assert_field(r, Q "f", "priority", "3");
	/* LPUSH, but a lifo job RPUSHed: workers take from the right. */
	assert_reply(r, "b a c", "LRANGE " Q "wait 0 -1");
	/* (timestamp + delay) * 4096, then one more for each job due in that ms. */
	assert_reply(r, "d 6963200245760000 e 6963200245760001", "ZRANGE " Q "delayed 0 -1 WITHSCORES");
	/* priority * 2^32 + the counter. */
	assert_reply(r, "g 4294967298 f 12884901889", "ZRANGE " Q "prioritized 0 -1 WITHSCORES");
	assert_reply(r, "2", "MGET " Q "pc");
	/* The marker wakes an idle worker at once ("0") and at the first delayed job ("1"). */
	assert_reply(r, "0 0 1 1700000060000", "ZRANGE " Q "marker 0 -1 WITHSCORES");
	assert_field(r, Q "meta", "opts.maxLenEvents", "10000");
	ck_assert_int_eq(events(r, "added", "a"), 1);
	ck_assert_int_eq(events(r, "waiting", "a"), 1);
	ck_assert_int_eq(events(r, "delayed", "d"), 1);
	ck_assert_int_eq(events(r, "waiting", "d"), 0);
	ck_assert_int_eq(events(r, "waiting", "g"), 1);
	/* BullMQ's own counter of ids is not taken. */
	ck_assert_int_eq(h_cmd_int(r, "EXISTS " Q "id"), 0);
	redisFree(r);
	PQfinish(c);
}
END_TEST

/* A paused queue (6.7): the job waits in wait, with no marker, until resume();
 * a real Worker's resume() is in clients/node's tests. */
START_TEST(a_paused_queue_gets_no_marker)
{
	PGconn *c = (h_reset(), h_pg());
	redisContext *r = h_redis();

	freeReplyObject(h_cmd(r, "HSET " Q "meta paused 1"));
	stage(c, "n", "[]", NULL);
	stage(c, "p", "[]", "{\"priority\":2}");
	ck_assert_int_eq(h_relay_run("relay-bullmq", once), 0);
	ck_assert_int_eq(h_cmd_int(r, "LLEN " Q "wait"), 1);
	ck_assert_int_eq(h_cmd_int(r, "ZCARD " Q "prioritized"), 1);
	ck_assert_int_eq(h_cmd_int(r, "EXISTS " Q "marker"), 0);
	ck_assert_int_eq(h_cmd_int(r, "EXISTS " Q "paused"), 0);
	/* A queue BullMQ 5.x paused keeps its waiting jobs in paused, which its
	 * resume renames over wait: the job goes there, not to wait. */
	freeReplyObject(h_cmd(r, "RENAME " Q "wait " Q "paused"));
	stage(c, "n5", "[]", NULL);
	ck_assert_int_eq(h_relay_run("relay-bullmq", once), 0);
	ck_assert_int_eq(h_cmd_int(r, "LLEN " Q "paused"), 2);
	ck_assert_int_eq(h_cmd_int(r, "EXISTS " Q "wait"), 0);
	ck_assert_int_eq(h_cmd_int(r, "EXISTS " Q "marker"), 0);
	redisFree(r);
	PQfinish(c);
}
END_TEST

/* BullMQ's rule for custom ids: one that exists is not added again, the
 * stream says "duplicated", and the row is done (not dead). */
START_TEST(an_existing_id_is_not_added_again)
{
	PGconn *c = (h_reset(), h_pg());
	redisContext *r = h_redis();

	freeReplyObject(h_cmd(r, "HSET " Q "dup name old data {}"));
	stage(c, "new", "[1]", "{\"jobId\":\"dup\"}");
	stage(c, "new", "[2]", "{\"jobId\":\"twice\"}");
	stage(c, "new", "[3]", "{\"jobId\":\"twice\"}");
	ck_assert_int_eq(h_relay_run("relay-bullmq", once), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 0);
	assert_field(r, Q "dup", "name", "old");
	assert_field(r, Q "twice", "data", "2");
	assert_reply(r, "twice", "LRANGE " Q "wait 0 -1");
	ck_assert_int_eq(events(r, "duplicated", "dup"), 1);
	ck_assert_int_eq(events(r, "duplicated", "twice"), 1);
	redisFree(r);
	PQfinish(c);
}
END_TEST

/* The events stream is trimmed as BullMQ trims it: to about the queue's
 * opts.maxLenEvents with each waiting event. */
START_TEST(events_are_trimmed_as_bullmq_trims_them)
{
	PGconn *c = (h_reset(), h_pg());
	redisContext *r = h_redis();

	freeReplyObject(h_cmd(r, "HSET " Q "meta opts.maxLenEvents 10"));
	h_sql(c, "INSERT INTO staged_jobs (queue, job_class) SELECT 'emails', 'n' FROM generate_series(1, 1000)");
	ck_assert_int_eq(h_relay_run("relay-bullmq", once), 0);
	ck_assert_int_eq(h_cmd_int(r, "LLEN " Q "wait"), 1000);
	/* MAXLEN ~ trims whole stream nodes (100 entries each by default). */
	ck_assert_int_lt(h_cmd_int(r, "XLEN " Q "events"), 250);
	redisFree(r);
	PQfinish(c);
}
END_TEST

/* A key of the wrong type, or a count BullMQ's scripts read back that is
 * none, keeps its queue's jobs staged and names the key; other queues flow;
 * once it is fixed, the jobs go. */
START_TEST(a_bad_key_holds_only_its_own_jobs)
{
	static const char *const bad[][2] = {
		{ "SET " Q "wait x", "DEL " Q "wait" },
		{ "HSET " Q "meta opts.maxLenEvents lots", "DEL " Q "meta" },
		{ "SET " Q "pc nine", "DEL " Q "pc" },
		{ "SET " Q "events x", "DEL " Q "events" },
	};
	static const char *const args[] = { "--format", "bullmq", "--poll-interval", "20ms", NULL };
	PGconn *c = (h_reset(), h_pg());
	redisContext *r = h_redis();
	struct relay_proc p;

	h_relay_start(&p, "relay-bullmq", args);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		freeReplyObject(words(r, bad[i][0]));
		stage(c, "held", "[]", "{\"priority\":1}");
		h_sql(c, "INSERT INTO staged_jobs (queue, job_class) VALUES ('other', 'flows')");
		RELAY_CHECK(&p, h_wait_len(r, "bull:other:wait", (long long)i + 1, 10000), "the other queue stalled");
		RELAY_CHECK(&p, h_log_wait_count(&p, "has the wrong type", (int)i + 1, 10000),
			    "the bad key was not named");
		ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs WHERE queue = 'emails'"), 1);
		ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 0);
		freeReplyObject(words(r, bad[i][1]));
		RELAY_CHECK(&p, h_wait_staged_empty(c, 10000), "the job stayed after the key was fixed");
	}
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 10000), 0);
	redisFree(r);
	PQfinish(c);
}
END_TEST

/*
 * A relay killed between push and commit: the next one reads its fence and
 * adds nothing again, even once a worker ran the jobs and removed them (as
 * removeOnComplete does), when BullMQ's own id rule would let them in again.
 */
START_TEST(a_crash_between_push_and_commit_adds_nothing_twice)
{
	static const char *const args[] = { "--format", "bullmq", "--poll-interval", "20ms", NULL };
	PGconn *c = (h_reset(), h_pg()), *lock = h_pg();
	redisContext *r = h_redis();
	struct relay_proc a;

	for (int i = 0; i < 3; i++)
		stage(c, "n", "[]", NULL);
	h_block_commits(c);
	h_sql(lock, "SELECT pg_advisory_lock(42425)");
	h_relay_start(&a, "relay-a", args);
	RELAY_CHECK(&a, h_wait_len(r, Q "wait", 3, 10000), "A did not push");
	RELAY_CHECK(&a, h_wait_blocked(c, 10000), "A's commit is not waiting");
	h_relay_crash(&a, c);
	h_sql(lock, "SELECT pg_advisory_unlock(42425)");
	h_unblock_commits(c);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 3);
	/* A worker ran them and removed them. */
	freeReplyObject(h_cmd(r, "DEL " Q "wait"));
	{
		redisReply *keys = h_cmd(r, "KEYS " Q "*-*");
		for (size_t i = 0; i < keys->elements; i++)
			freeReplyObject(h_cmd(r, "DEL %s", keys->element[i]->str));
		ck_assert_uint_eq(keys->elements, 3);
		freeReplyObject(keys);
	}
	ck_assert_int_eq(h_relay_run("relay-b", once), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	ck_assert_int_eq(h_cmd_int(r, "EXISTS " Q "wait"), 0);
	ck_assert_int_eq(h_cmd_int(r, "XLEN " Q "events"), 6);
	PQfinish(lock);
	redisFree(r);
	PQfinish(c);
}
END_TEST

Suite *bullmq_e2e_suite(void)
{
	Suite *s = suite_create("bullmq_e2e");
	TCase *t = tcase_create("redis");

	tcase_set_timeout(t, 120);
	tcase_add_test(t, keys_are_bullmqs);
	tcase_add_test(t, a_paused_queue_gets_no_marker);
	tcase_add_test(t, an_existing_id_is_not_added_again);
	tcase_add_test(t, events_are_trimmed_as_bullmq_trims_them);
	tcase_add_test(t, a_bad_key_holds_only_its_own_jobs);
	tcase_add_test(t, a_crash_between_push_and_commit_adds_nothing_twice);
	suite_add_tcase(s, t);
	return s;
}
