/* The bullmq format: the values a row becomes (id, name, data, opts,
 * timestamp, delay, priority, lifo), BullMQ's option and id rules, its
 * rejects, and a batch's commands for the push script's bullmq.add. */
#include "fmacros.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "buf.h"
#include "format_bullmq.h"
#include "formats.h"
#include "job.h"
#include "job_build.h"
#include "redis_cmds.h"
#include "suites.h"
#include "support/job_rows.h"

#define UUID "0f8fad5b-d9cb-469f-a165-70867728950e"
#define NOW_US 1700000000000000LL
#define CREATED_US 1699999999123456LL /* created_at: the add() call, in ms 1699999999123 */

static struct job_opts bullmq_opts(void)
{
	struct job_opts o = { .format = FORMAT_BULLMQ, .max_job_bytes = 1 << 20, .now_us = NOW_US };

	return o;
}

static struct job_row bullmq_row(const char *name, const char *args, const char *options)
{
	struct job_row r = job_row_of("emails", name, args, options);

	r.uuid = UUID;
	r.uuid_len = strlen(UUID);
	r.created_at_us = CREATED_US;
	return r;
}

/* The payload with its nuls shown as "|". */
static void assert_values(const struct job_row *r, const char *want)
{
	struct job_opts o = bullmq_opts();
	char reason[JOB_REASON_SIZE], got[1024];
	struct job_out out;
	struct buf b;
	int rc;

	buf_init(&b);
	rc = job_build(r, &o, &b, &out, reason, sizeof(reason));
	ck_assert_msg(rc == 0, "job_build returned %d: %s", rc, reason);
	ck_assert_uint_lt(out.len, sizeof(got));
	for (size_t i = 0; i < out.len; i++)
		got[i] = b.data[out.off + i] ? b.data[out.off + i] : '|';
	got[out.len] = '\0';
	ck_assert_str_eq(got, want);
	buf_free(&b);
}

static void assert_reject(const struct job_row *r, const char *want)
{
	struct job_opts o = bullmq_opts();
	char reason[JOB_REASON_SIZE];
	struct job_out out;
	struct buf b;

	buf_init(&b);
	ck_assert_int_eq(job_build(r, &o, &b, &out, reason, sizeof(reason)), JOB_REJECT);
	ck_assert_msg(strstr(reason, want) != NULL, "reason \"%s\" does not say \"%s\"", reason, want);
	ck_assert_uint_eq(b.len, 0);
	buf_free(&b);
}

/* The uuid is the id without a jobId; created_at's ms the timestamp; data and
 * opts are copied as written (key order, spelling, escapes). */
START_TEST(values_of_a_plain_row)
{
	struct job_row r = bullmq_row("welcome", "[{\"z\": 1, \"a\": \"x\\u0000y\", \"n\": -0.0, \"f\": 1.0e+16}]",
				      "{\"attempts\": 3, \"backoff\": {\"type\": \"fixed\", \"delay\": 10}}");

	assert_values(&r,
		      UUID "|welcome|{\"z\": 1, \"a\": \"x\\u0000y\", \"n\": -0.0, \"f\": 1.0e+16}|"
			   "{\"attempts\": 3, \"backoff\": {\"type\": \"fixed\", \"delay\": 10}}|1699999999123|0|0|0");
	r = bullmq_row("cleanup", "[]", NULL);
	assert_values(&r, UUID "|cleanup|{}|{}|1699999999123|0|0|0");
	r = bullmq_row("n", "[null]", NULL);
	assert_values(&r, UUID "|n|null|{}|1699999999123|0|0|0");
	r = bullmq_row("s", "[\"text\"]", NULL);
	assert_values(&r, UUID "|s|\"text\"|{}|1699999999123|0|0|0");
}
END_TEST

START_TEST(options_bullmq_reads)
{
	struct job_row r = bullmq_row("n", "[1]",
				      "{\"jobId\": \"order-\\u00e9\", \"delay\": 1500, \"priority\": 7,"
				      " \"lifo\": true, \"timestamp\": 1.7e12}");

	assert_values(&r, "order-\xc3\xa9|n|1|{\"jobId\": \"order-\\u00e9\", \"delay\": 1500, \"priority\": 7,"
			  " \"lifo\": true, \"timestamp\": 1.7e12}|1.7e12|1500|7|1");
	/* An empty jobId is no custom id, in BullMQ too. */
	r = bullmq_row("n", "[1]", "{\"jobId\": \"\", \"lifo\": false}");
	assert_values(&r, UUID "|n|1|{\"jobId\": \"\", \"lifo\": false}|1699999999123|0|0|0");
	/* A three-part id (BullMQ's repeatable jobs' shape) is allowed. */
	r = bullmq_row("n", "[1]", "{\"jobId\": \"a:b:c\"}");
	assert_values(&r, "a:b:c|n|1|{\"jobId\": \"a:b:c\"}|1699999999123|0|0|0");
	/* A timestamp of 0 is "now" to BullMQ: the add() call's, created_at. */
	r = bullmq_row("n", "[1]", "{\"timestamp\": 0}");
	assert_values(&r, UUID "|n|1|{\"timestamp\": 0}|1699999999123|0|0|0");
	/* Options BullMQ does not know are kept, as BullMQ keeps them. */
	r = bullmq_row("n", "[1]", "{\"mine\": [1, 2]}");
	assert_values(&r, UUID "|n|1|{\"mine\": [1, 2]}|1699999999123|0|0|0");
}
END_TEST

/* A row written by hand with run_at: the delay to it from the timestamp, in
 * opts as BullMQ's add would have it; a delay of its own wins. */
START_TEST(run_at_becomes_a_delay)
{
	struct job_row r = bullmq_row("later", "[]", "{\"attempts\": 2}");

	r.has_run_at = true;
	r.run_at_us = CREATED_US + 5000000; /* 5000.456 ms after the timestamp: never run before run_at */
	assert_values(&r, UUID "|later|{}|{\"delay\":5001,\"attempts\":2}|1699999999123|5001|0|0");
	r = bullmq_row("later", "[]", NULL);
	r.has_run_at = true;
	r.run_at_us = CREATED_US + 5000000;
	assert_values(&r, UUID "|later|{}|{\"delay\":5001}|1699999999123|5001|0|0");
	r = bullmq_row("later", "[]", "{\"delay\": 10}");
	r.has_run_at = true;
	r.run_at_us = CREATED_US + 5000000;
	assert_values(&r, UUID "|later|{}|{\"delay\": 10}|1699999999123|10|0|0");
	/* A run_at in the past is no delay. */
	r = bullmq_row("now", "[]", NULL);
	r.has_run_at = true;
	r.run_at_us = CREATED_US - 1000;
	assert_values(&r, UUID "|now|{}|{}|1699999999123|0|0|0");
}
END_TEST

START_TEST(rejects_what_bullmq_refuses)
{
	static const struct {
		const char *args, *options, *reason;
	} cases[] = {
		{ "[1, 2]", NULL, "args is not [data]" },
		{ "[1]", "{\"jobId\": \"12\"}", "is an integer" },
		{ "[1]", "{\"jobId\": \"0\"}", "is an integer" },
		{ "[1]", "{\"jobId\": \"1234567890123456\"}", "is an integer" },
		{ "[1]", "{\"jobId\": \"0:x\"}", "starts with \"0:\"" },
		{ "[1]", "{\"jobId\": \"a:b\"}", "contains ':'" },
		{ "[1]", "{\"jobId\": \"a:b:c:d\"}", "contains ':'" },
		{ "[1]", "{\"jobId\": \"a\\u0000b\"}", "nul byte" },
		{ "[1]", "{\"jobId\": 5}", "\"jobId\" is a number" },
		{ "[1]", "{\"delay\": \"5000\"}", "\"delay\" is a string" },
		{ "[1]", "{\"delay\": 1e400}", "past what a double holds" },
		{ "[1]", "{\"priority\": 1.5}", "priority is an integer" },
		{ "[1]", "{\"priority\": 2097152}", "outside BullMQ's limit 2097151" },
		{ "[1]", "{\"lifo\": 1}", "\"lifo\" is a number" },
		{ "[1]", "{\"attempts\": \"3\"}", "\"attempts\" is a string" },
		{ "[1]", "{\"removeOnComplete\": \"yes\"}", "\"removeOnComplete\" is a string" },
		{ "[1]", "{\"repeat\": {\"every\": 1000}}", "upsertJobScheduler" },
		{ "[1]", "{\"parent\": {\"id\": \"p\", \"queue\": \"bull:q\"}}", "FlowProducer" },
		{ "[1]", "{\"deduplication\": {\"id\": \"d\"}}", "deduplication is not relayed" },
		{ "[1]", "{\"de\": {\"id\": \"d\"}}", "deduplication is not relayed" },
		{ "[1]", "{\"debounce\": {\"id\": \"d\"}}", "debounce was removed" },
		{ "[\"0123456789\"]", "{\"sizeLimit\": 5}", "over its sizeLimit" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct job_row r = bullmq_row("n", cases[i].args, cases[i].options);
		assert_reject(&r, cases[i].reason);
	}
}
END_TEST

START_TEST(rejects_queues_bullmq_refuses)
{
	struct job_row r = bullmq_row("n", "[]", NULL);

	r.queue = "a:b";
	r.queue_len = 3;
	assert_reject(&r, "contains ':', which BullMQ refuses in a queue name");
	r.queue = "stagedrain";
	r.queue_len = 10;
	assert_reject(&r, "the relay's own");
}
END_TEST

/* `${parseInt(id, 10)}` === id, as JS computes it. */
START_TEST(integer_ids_as_js_reads_them)
{
	static const struct {
		const char *id;
		bool integer;
	} cases[] = {
		{ "0", true },
		{ "7", true },
		{ "-7", true },
		{ "123456789012345", true },
		{ "1234567890123456", true },        /* exact in a double */
		{ "9007199254740993", false },       /* JS writes ...992 */
		{ "12345678901234567890", false },   /* JS writes ...567000 */
		{ "12345678901234567000", true },    /* and reads that back */
		{ "100000000000000000000", true },   /* 1e20, written in full */
		{ "1000000000000000000000", false }, /* 1e21 is written 1e+21 */
		{ "-0", false },
		{ "007", false },
		{ "7a", false },
		{ "+7", false },
		{ " 7", false },
		{ "", false },
		{ "-", false },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ck_assert_msg(bullmq_integer_id(cases[i].id, strlen(cases[i].id)) == cases[i].integer, "%s",
			      cases[i].id);
}
END_TEST

/* Command k's arguments joined by spaces, at most the first max. */
static void assert_cmd(const struct redis_cmds *c, size_t k, size_t max, const char *want)
{
	char got[1024] = "";
	size_t used = 0;

	ck_assert_uint_lt(k, c->ncmds);
	for (size_t a = 0; a < c->cmds[k].argc && a < max; a++) {
		size_t len;
		const char *p = cmds_arg(c, k, a, &len);
		used += (size_t)snprintf(got + used, sizeof(got) - used, "%s%.*s", a ? " " : "", (int)len, p);
		ck_assert_uint_lt(used, sizeof(got));
	}
	ck_assert_str_eq(got, want);
}

static void add_job(struct batch *b, long long id, const char *queue, const char *options)
{
	struct job_opts o = bullmq_opts();
	struct job_row r = bullmq_row("n", "[]", options);

	r.id = id;
	r.queue = queue;
	r.queue_len = strlen(queue);
	ck_assert_int_eq(job_build_add(b, &r, &o, 0), 0);
	ck_assert_uint_eq(b->ndead, 0);
}

#define HEAD(q)                                                                                                        \
	"bullmq.add {bull}:" q ":wait {bull}:" q ":meta {bull}:" q ":events {bull}:" q ":marker {bull}:" q             \
	":delayed {bull}:" q ":prioritized {bull}:" q ":pc {bull}:" q ":active {bull}:" q ":paused {bull}:" q ":"

/* One bullmq.add a queue, queues in order of their first job, each job's
 * eight values in id order, delayed and prioritized jobs among the rest. */
START_TEST(batch_commands)
{
	struct redis_cmds c;
	struct batch b;

	batch_init(&b);
	cmds_init(&c);
	ck_assert_int_eq(batch_reset(&b, 4), 0);
	add_job(&b, 1, "emails", "{\"jobId\": \"a\"}");
	add_job(&b, 2, "reports", "{\"jobId\": \"b\", \"delay\": 5}");
	add_job(&b, 3, "emails", "{\"jobId\": \"c\", \"priority\": 2}");
	ck_assert_int_eq(format_bullmq.commands(&c, &b, "{bull}:"), 0);
	ck_assert_uint_eq(c.ncmds, 2);
	assert_cmd(&c, 0, 100,
		   HEAD("emails") " a n {} {\"jobId\": \"a\"} 1699999999123 0 0 0"
				  " c n {} {\"jobId\": \"c\", \"priority\": 2} 1699999999123 0 2 0");
	assert_cmd(&c, 1, 100, HEAD("reports") " b n {} {\"jobId\": \"b\", \"delay\": 5} 1699999999123 5 0 0");
	cmds_free(&c);
	batch_free(&b);
}
END_TEST

/* A long queue continues in a new command with the same keys, whole jobs in each. */
START_TEST(long_batches_split_between_jobs)
{
	struct redis_cmds c;
	struct batch b;
	size_t jobs = 0;

	batch_init(&b);
	cmds_init(&c);
	ck_assert_int_eq(batch_reset(&b, 300), 0);
	for (int i = 1; i <= 300; i++)
		add_job(&b, i, "emails", NULL);
	ck_assert_int_eq(format_bullmq.commands(&c, &b, "bull:"), 0);
	ck_assert_uint_eq(c.ncmds, 3);
	for (size_t k = 0; k < c.ncmds; k++) {
		ck_assert_uint_eq((c.cmds[k].argc - 11) % 8, 0);
		ck_assert_uint_le(c.cmds[k].argc, CMDS_MAX_ARGS + 8);
		jobs += (c.cmds[k].argc - 11) / 8;
		assert_cmd(&c, k, 2, "bullmq.add bull:emails:wait");
	}
	ck_assert_uint_eq(jobs, 300);
	cmds_free(&c);
	batch_free(&b);
}
END_TEST

Suite *bullmq_format_suite(void)
{
	Suite *s = suite_create("bullmq_format");
	TCase *payload = tcase_create("payload");
	TCase *commands = tcase_create("commands");

	tcase_add_test(payload, values_of_a_plain_row);
	tcase_add_test(payload, options_bullmq_reads);
	tcase_add_test(payload, run_at_becomes_a_delay);
	tcase_add_test(payload, rejects_what_bullmq_refuses);
	tcase_add_test(payload, rejects_queues_bullmq_refuses);
	tcase_add_test(payload, integer_ids_as_js_reads_them);
	tcase_add_test(commands, batch_commands);
	tcase_add_test(commands, long_batches_split_between_jobs);
	suite_add_tcase(s, payload);
	suite_add_tcase(s, commands);
	return s;
}
