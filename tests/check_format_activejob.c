/* The activejob format: Rails' SidekiqAdapter hash, ActiveJob's serialized job, its arguments and rejects. */
#include "fmacros.h"

#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "job.h"
#include "job_build.h"
#include "suites.h"
#include "support/job_rows.h"

#define JID "0123456789abcdef01234567"
#define UUID "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"
#define WRAPPER "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper"
#define CREATED_US 1700000000123456LL
#define NOW_US 1700000001500000LL /* 2023-11-14T22:13:21.5Z */

static struct job_row aj_row(const char *args, const char *options)
{
	struct job_row r = job_row_of("mailers", "WelcomeMailJob", args, options);

	r.jid = JID;
	r.jid_len = strlen(JID);
	r.uuid = UUID;
	r.uuid_len = strlen(UUID);
	r.created_at_us = CREATED_US;
	return r;
}

static struct job_opts aj_opts(enum job_format f, enum rails_version rails, int sidekiq)
{
	struct job_opts o = { .format = f,
			      .sidekiq_version = sidekiq,
			      .max_job_bytes = 1048576,
			      .now_us = NOW_US,
			      .rails_version = rails };

	return o;
}

/* One payload that must build: its text in b (caller frees), parsed. */
static json_t *build_flags(const struct job_row *r, const struct job_opts *o, struct buf *b, struct job_out *out,
			   size_t flags)
{
	char reason[JOB_REASON_SIZE];
	json_error_t err;
	json_t *v;
	int rc;

	buf_init(b);
	rc = job_build(r, o, b, out, reason, sizeof(reason));
	ck_assert_msg(rc == 0, "job_build returned %d: %s", rc, reason);
	v = json_loadb(b->data + out->off, out->len, JSON_REJECT_DUPLICATES | flags, &err);
	ck_assert_msg(v != NULL, "payload is not json: %s: %s", err.text, b->data);
	return v;
}

static json_t *build(const struct job_row *r, const struct job_opts *o, struct buf *b, struct job_out *out)
{
	return build_flags(r, o, b, out, 0);
}

/* The reason a row is rejected with (the buffer must be left empty). */
static void assert_reject(const struct job_row *r, const struct job_opts *o, const char *want)
{
	char reason[JOB_REASON_SIZE];
	struct job_out out;
	struct buf b;

	buf_init(&b);
	ck_assert_int_eq(job_build(r, o, &b, &out, reason, sizeof(reason)), JOB_REJECT);
	ck_assert_msg(strstr(reason, want) != NULL, "reason \"%s\" lacks \"%s\"", reason, want);
	ck_assert_uint_eq(b.len, 0);
	buf_free(&b);
}

static void assert_keys(const json_t *v, const char *const *keys)
{
	size_t n = 0;

	for (; keys[n]; n++)
		ck_assert_msg(json_object_get(v, keys[n]) != NULL, "missing key %s", keys[n]);
	ck_assert_uint_eq(json_object_size(v), n);
}

static void assert_str(const json_t *v, const char *key, const char *want)
{
	const json_t *s = json_object_get(v, key);

	ck_assert_msg(json_is_string(s), "%s is not a string", key);
	ck_assert_str_eq(json_string_value(s), want);
}

static void assert_null(const json_t *v, const char *key)
{
	ck_assert_msg(json_is_null(json_object_get(v, key)), "%s is not null", key);
}

/* The serialized job: the one element of the outer args. */
static const json_t *job_of(const json_t *item)
{
	const json_t *args = json_object_get(item, "args");

	ck_assert(json_is_array(args));
	ck_assert_uint_eq(json_array_size(args), 1);
	ck_assert(json_is_object(json_array_get(args, 0)));
	return json_array_get(args, 0);
}

/* The exact text the payload holds for "arguments". */
static void assert_arguments(const char *args, const char *want)
{
	struct job_row r = aj_row(args, NULL);
	struct job_opts o = aj_opts(FORMAT_ACTIVEJOB, RAILS_7_1, 7);
	char needle[4096];
	struct job_out out;
	struct buf b;
	/* Integers past 64 bits are valid JSON; jansson reads them only as reals. */
	json_t *v = build_flags(&r, &o, &b, &out, JSON_DECODE_INT_AS_REAL);

	snprintf(needle, sizeof(needle), "\"arguments\":%s,\"executions\":0,", want);
	ck_assert_msg(strstr(b.data, needle) != NULL, "arguments of %s: want %s in %s", args, want, b.data);
	json_decref(v);
	buf_free(&b);
}

static const char *const outer_now[] = { "class", "wrapped",    "args",        "queue", "jid",
					 "retry", "created_at", "enqueued_at", NULL };

START_TEST(rails_7_1_layout_key_for_key)
{
	static const char *const job_keys[] = { "job_class", "job_id",    "provider_job_id", "queue_name",
						"priority",  "arguments", "executions",      "exception_executions",
						"locale",    "timezone",  "enqueued_at",     "scheduled_at",
						NULL };
	struct job_row r = aj_row("[1, \"two\"]", NULL);
	struct job_opts o = aj_opts(FORMAT_ACTIVEJOB, RAILS_7_1, 7);
	struct job_out out;
	struct buf b;
	json_t *v = build(&r, &o, &b, &out);
	const json_t *job = job_of(v);

	assert_keys(v, outer_now);
	assert_str(v, "class", WRAPPER);
	assert_str(v, "wrapped", "WelcomeMailJob");
	assert_str(v, "queue", "mailers");
	assert_str(v, "jid", JID);
	ck_assert(json_is_true(json_object_get(v, "retry")));
	ck_assert_double_eq(json_real_value(json_object_get(v, "created_at")), 1700000000.123456);
	ck_assert_double_eq(json_real_value(json_object_get(v, "enqueued_at")), 1700000001.5);
	assert_keys(job, job_keys);
	assert_str(job, "job_class", "WelcomeMailJob");
	assert_str(job, "job_id", UUID);
	assert_null(job, "provider_job_id");
	assert_str(job, "queue_name", "mailers");
	assert_null(job, "priority");
	ck_assert_int_eq(json_integer_value(json_object_get(job, "executions")), 0);
	ck_assert(json_is_integer(json_object_get(job, "executions")));
	ck_assert(json_is_object(json_object_get(job, "exception_executions")));
	ck_assert_uint_eq(json_object_size(json_object_get(job, "exception_executions")), 0);
	assert_str(job, "locale", "en");
	assert_str(job, "timezone", "UTC");
	assert_str(job, "enqueued_at", "2023-11-14T22:13:21.500000000Z");
	assert_null(job, "scheduled_at");
	ck_assert(!out.scheduled);
	ck_assert_ptr_nonnull(strstr(b.data, "\"arguments\":[1,\"two\"],"));
	json_decref(v);
	buf_free(&b);
}
END_TEST

START_TEST(rails_6_1_layout_whole_seconds_no_scheduled_at)
{
	static const char *const job_keys[] = { "job_class", "job_id",    "provider_job_id", "queue_name",
						"priority",  "arguments", "executions",      "exception_executions",
						"locale",    "timezone",  "enqueued_at",     NULL };
	struct job_row r = aj_row("[]", NULL);
	struct job_opts o = aj_opts(FORMAT_ACTIVEJOB, RAILS_6_1, 6);
	struct job_out out;
	struct buf b;
	json_t *v = build(&r, &o, &b, &out);
	const json_t *job = job_of(v);

	assert_keys(v, outer_now);
	assert_keys(job, job_keys);
	assert_str(job, "enqueued_at", "2023-11-14T22:13:21Z");
	ck_assert_ptr_nonnull(strstr(b.data, "\"arguments\":[],"));
	json_decref(v);
	buf_free(&b);
}
END_TEST

/* rails_version 0 (unset) is 7.1, the default. */
START_TEST(unset_rails_version_writes_7_1)
{
	struct job_row r = aj_row("[]", NULL);
	struct job_opts o = aj_opts(FORMAT_ACTIVEJOB, 0, 7);
	struct job_out out;
	struct buf b;
	json_t *v = build(&r, &o, &b, &out);

	assert_null(job_of(v), "scheduled_at");
	assert_str(job_of(v), "enqueued_at", "2023-11-14T22:13:21.500000000Z");
	json_decref(v);
	buf_free(&b);
}
END_TEST

START_TEST(scheduled_job_has_scheduled_at_and_no_outer_enqueued_at)
{
	static const char *const outer[] = { "class", "wrapped", "args", "queue", "jid", "retry", "created_at", NULL };
	struct job_row r = aj_row("[]", NULL);
	struct job_opts o = aj_opts(FORMAT_ACTIVEJOB, RAILS_7_1, 7);
	struct job_out out;
	struct buf b;
	json_t *v;

	r.has_run_at = true;
	r.run_at_us = NOW_US + 86400000000LL * 400 + 5000250; /* 2024-12-18T22:13:26.50025Z */
	v = build(&r, &o, &b, &out);
	assert_keys(v, outer);
	ck_assert(out.scheduled);
	ck_assert_int_eq(out.run_at_us, r.run_at_us);
	assert_str(job_of(v), "scheduled_at", "2024-12-18T22:13:26.500250000Z");
	/* The job's own enqueued_at is when it was written, as Rails' serialize does. */
	assert_str(job_of(v), "enqueued_at", "2023-11-14T22:13:21.500000000Z");
	json_decref(v);
	buf_free(&b);

	o.rails_version = RAILS_6_1;
	v = build(&r, &o, &b, &out);
	assert_keys(v, outer);
	ck_assert(out.scheduled);
	ck_assert_ptr_null(json_object_get(job_of(v), "scheduled_at"));
	json_decref(v);
	buf_free(&b);
}
END_TEST

/* A leap day and a year with more than four digits keep Ruby's strftime("%FT%T"). */
START_TEST(iso8601_dates_far_and_leap)
{
	struct job_row r = aj_row("[]", NULL);
	struct job_opts o = aj_opts(FORMAT_ACTIVEJOB, RAILS_6_1, 7);
	struct job_out out;
	struct buf b;
	json_t *v;

	o.now_us = 951782400000000LL + 3723000000LL; /* 2000-02-29T01:02:03Z */
	v = build(&r, &o, &b, &out);
	assert_str(job_of(v), "enqueued_at", "2000-02-29T01:02:03Z");
	json_decref(v);
	buf_free(&b);

	o.now_us = 253402300800000000LL + 999999LL; /* 10000-01-01T00:00:00.999999Z */
	o.rails_version = RAILS_7_1;
	v = build(&r, &o, &b, &out);
	assert_str(job_of(v), "enqueued_at", "10000-01-01T00:00:00.999999000Z");
	json_decref(v);
	buf_free(&b);
}
END_TEST

START_TEST(every_object_gets_empty_symbol_keys)
{
	assert_arguments("[{\"a\": 1}]", "[{\"a\":1,\"_aj_symbol_keys\":[]}]");
	assert_arguments("[{}]", "[{\"_aj_symbol_keys\":[]}]");
	assert_arguments("[1, {\"a\": {\"b\": {}}, \"c\": [{}, []]}, [], \"s\", null, true, false]",
			 "[1,{\"a\":{\"b\":{\"_aj_symbol_keys\":[]},\"_aj_symbol_keys\":[]},"
			 "\"c\":[{\"_aj_symbol_keys\":[]},[]],\"_aj_symbol_keys\":[]},[],\"s\",null,true,false]");
	/* Strings that look like JSON stay strings. */
	assert_arguments("[\"{\\\"a\\\": [1]}\", {\"}\": \"{\"}]",
			 "[\"{\\\"a\\\": [1]}\",{\"}\":\"{\",\"_aj_symbol_keys\":[]}]");
}
END_TEST

START_TEST(globalid_passes_through)
{
	assert_arguments("[{\"_aj_globalid\": \"gid://shop/User/42\"}]", "[{\"_aj_globalid\":\"gid://shop/User/42\"}]");
	assert_arguments("[{\"user\": {\"_aj_globalid\": \"gid://shop/User/7?x=\\u00e9\"}}, [{\"_aj_globalid\": "
			 "\"gid://shop/Post/1\"}]]",
			 "[{\"user\":{\"_aj_globalid\":\"gid://shop/User/7?x=\\u00e9\"},\"_aj_symbol_keys\":[]},"
			 "[{\"_aj_globalid\":\"gid://shop/Post/1\"}]]");
}
END_TEST

START_TEST(numbers_and_strings_kept_as_written)
{
	assert_arguments("[0.1, 12345678901234567890123, -0.0, 1.0E+2, 1e-7, 9007199254740993]",
			 "[0.1,12345678901234567890123,-0.0,1.0E+2,1e-7,9007199254740993]");
	assert_arguments("[{\"n\": 0.30000000000000004}, \"a\\\"b\\\\c\\/d\\u00e9\\n\"]",
			 "[{\"n\":0.30000000000000004,\"_aj_symbol_keys\":[]},\"a\\\"b\\\\c\\/d\\u00e9\\n\"]");
}
END_TEST

/* jsonb holds numbers of any size: in the arguments, in Sidekiq's options
 * and in priority (the relay copies it, Ruby reads any Integer) each arrives
 * as written; jansson cannot parse the payload back, so its text is checked. */
START_TEST(numbers_past_64_bits_copied_as_written)
{
	const char *big = job_rows_big_numbers();
	char args[1200], options[1200], want[2600], reason[JOB_REASON_SIZE];
	struct job_row r;
	struct job_opts o = aj_opts(FORMAT_ACTIVEJOB, RAILS_7_1, 7);
	struct job_out out;
	struct buf b;

	snprintf(args, sizeof(args), "[%s, {\"k\": [%s]}]", big, big);
	snprintf(options, sizeof(options),
		 "{\"retry\": 18446744073709551616, \"all\": [%s], \"priority\": -18446744073709551616}", big);
	r = aj_row(args, options);
	buf_init(&b);
	ck_assert_int_eq(job_build(&r, &o, &b, &out, reason, sizeof(reason)), 0);
	snprintf(want, sizeof(want), "\"priority\":-18446744073709551616,\"arguments\":[%s,{\"k\":[%s],", big, big);
	ck_assert_msg(strstr(b.data, want) != NULL, "payload lacks %s: %s", want, b.data);
	snprintf(want, sizeof(want), "\"retry\":18446744073709551616,\"all\":[%s],\"created_at\":", big);
	ck_assert_msg(strstr(b.data, want) != NULL, "payload lacks %s: %s", want, b.data);
	buf_free(&b);
}
END_TEST

START_TEST(reserved_keys_are_dead_lettered)
{
	static const char *const rows[] = {
		"[{\"_aj_symbol_keys\": []}]",
		"[{\"a\": 1, \"_aj_ruby2_keywords\": [\"a\"]}]",
		"[{\"_aj_hash_with_indifferent_access\": true}]",
		"[{\"_aj_serialized\": \"ActiveJob::Serializers::SymbolSerializer\", \"value\": \"x\"}]",
		"[{\"_aj_globalid\": \"gid://shop/User/1\", \"extra\": 1}]",
		"[[{\"deep\": {\"_aj_symbol_keys\": [\"deep\"]}}]]",
		"[{\"\\u005faj_symbol_keys\": []}]", /* the same key, escaped */
	};
	struct job_opts o = aj_opts(FORMAT_ACTIVEJOB, RAILS_7_1, 7);

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct job_row r = aj_row(rows[i], NULL);
		assert_reject(&r, &o, "reserved key");
	}
}
END_TEST

START_TEST(globalid_must_be_a_gid_string)
{
	static const char *const rows[] = {
		"[{\"_aj_globalid\": 42}]",
		"[{\"_aj_globalid\": \"User/42\"}]",
		"[{\"_aj_globalid\": null}]",
	};
	struct job_opts o = aj_opts(FORMAT_ACTIVEJOB, RAILS_7_1, 7);

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct job_row r = aj_row(rows[i], NULL);
		assert_reject(&r, &o, "\"_aj_globalid\" is not a \"gid://...\" string");
	}
}
END_TEST

/* n nested arrays, the innermost holding inner ("" for none). */
static char *nested(int n, const char *inner)
{
	size_t len = 2 * (size_t)n + strlen(inner) + 1;
	char *s = malloc(len);

	ck_assert_ptr_nonnull(s);
	memset(s, '[', (size_t)n);
	strcpy(s + n, inner);
	memset(s + n + strlen(inner), ']', (size_t)n);
	s[len - 1] = '\0';
	return s;
}

static void assert_parses(const char *p, size_t n)
{
	json_t *v = json_loadb(p, n, 0, NULL);

	ck_assert_ptr_nonnull(v);
	json_decref(v);
}

/* Sidekiq's hash, its args and the job hash are 3 levels over the row's args:
 * the deepest container may sit at level 100 (Ruby's JSON max_nesting). */
START_TEST(depth_counts_the_wrapper_and_symbol_keys)
{
	struct job_opts o = aj_opts(FORMAT_ACTIVEJOB, RAILS_7_1, 7);
	char reason[JOB_REASON_SIZE];
	struct job_out out;
	struct {
		int arrays;
		const char *inner;
		int want;
	} cases[] = {
		{ 97, "", 0 },
		{ 98, "", JOB_REJECT },
		{ 95, "{}", 0 },
		{ 96, "{}", JOB_REJECT },
		{ 96, "{\"_aj_globalid\":\"gid://a/B/1\"}", 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *args = nested(cases[i].arrays, cases[i].inner);
		struct job_row r = aj_row(args, NULL);
		struct buf b;
		buf_init(&b);
		ck_assert_msg(job_build(&r, &o, &b, &out, reason, sizeof(reason)) == cases[i].want, "case %zu: %s", i,
			      reason);
		if (cases[i].want)
			ck_assert_ptr_nonnull(strstr(reason, "too deep for activejob"));
		else
			assert_parses(b.data, b.len);
		buf_free(&b);
		free(args);
	}
}
END_TEST

START_TEST(options_feed_the_job_and_the_rest_go_outside)
{
	struct job_row r = aj_row("[]", "{\"priority\": 10, \"locale\": \"de\", \"timezone\": \"Europe/Berlin\","
					" \"retry\": 3, \"tags\": [\"a\"], \"activejob\": true}");
	struct job_opts o = aj_opts(FORMAT_ACTIVEJOB, RAILS_7_1, 7);
	struct job_out out;
	struct buf b;
	json_t *v = build(&r, &o, &b, &out);
	const json_t *job = job_of(v);

	ck_assert_int_eq(json_integer_value(json_object_get(v, "retry")), 3);
	ck_assert(json_is_array(json_object_get(v, "tags")));
	ck_assert_ptr_null(json_object_get(v, "priority"));
	ck_assert_ptr_null(json_object_get(v, "locale"));
	ck_assert_ptr_null(json_object_get(v, "timezone"));
	ck_assert_ptr_null(json_object_get(v, "activejob"));
	ck_assert_uint_eq(json_object_size(v), 9);
	ck_assert(json_is_integer(json_object_get(job, "priority")));
	ck_assert_int_eq(json_integer_value(json_object_get(job, "priority")), 10);
	assert_str(job, "locale", "de");
	assert_str(job, "timezone", "Europe/Berlin");
	json_decref(v);
	buf_free(&b);

	r = aj_row("[]", "{\"priority\": null}");
	v = build(&r, &o, &b, &out);
	assert_null(job_of(v), "priority");
	json_decref(v);
	buf_free(&b);
}
END_TEST

START_TEST(row_switch_in_a_sidekiq_relay)
{
	struct job_row r = aj_row("[{\"a\": 1}]", "{\"activejob\": true, \"retry\": false}");
	struct job_opts o = aj_opts(FORMAT_SIDEKIQ, RAILS_7_1, 7);
	struct job_out out;
	struct buf b;
	json_t *v = build(&r, &o, &b, &out);

	assert_str(v, "class", WRAPPER);
	assert_str(v, "wrapped", "WelcomeMailJob");
	ck_assert(json_is_false(json_object_get(v, "retry")));
	ck_assert_ptr_null(json_object_get(v, "activejob"));
	assert_str(job_of(v), "job_id", UUID);
	ck_assert_ptr_nonnull(strstr(b.data, "\"arguments\":[{\"a\":1,\"_aj_symbol_keys\":[]}]"));
	json_decref(v);
	buf_free(&b);

	/* Without the key the same row is a plain Sidekiq job. */
	r = aj_row("[{\"a\": 1}]", NULL);
	v = build(&r, &o, &b, &out);
	assert_str(v, "class", "WelcomeMailJob");
	ck_assert_ptr_null(json_object_get(v, "wrapped"));
	ck_assert_ptr_nonnull(strstr(b.data, "\"args\":[{\"a\": 1}]"));
	json_decref(v);
	buf_free(&b);
}
END_TEST

START_TEST(row_switch_off_in_an_activejob_relay)
{
	static const char *const plain[] = {
		"class", "args", "queue", "jid", "retry", "created_at", "enqueued_at", NULL
	};
	struct job_row r = aj_row("[{\"a\": 1}]", "{\"activejob\": false}");
	struct job_opts o = aj_opts(FORMAT_ACTIVEJOB, RAILS_7_1, 7);
	struct job_out out;
	struct buf b;
	json_t *v = build(&r, &o, &b, &out);

	assert_keys(v, plain);
	assert_str(v, "class", "WelcomeMailJob");
	ck_assert_ptr_nonnull(strstr(b.data, "\"args\":[{\"a\": 1}]"));
	json_decref(v);
	buf_free(&b);
}
END_TEST

START_TEST(rejects_with_reasons)
{
	struct {
		const char *options;
		const char *want;
	} cases[] = {
		{ "{\"priority\": \"high\"}", "\"priority\" is not an integer or null" },
		{ "{\"priority\": 1.5}", "\"priority\" is not an integer or null" },
		{ "{\"locale\": 5}", "\"locale\" is not a non-empty string" },
		{ "{\"locale\": \"\"}", "\"locale\" is not a non-empty string" },
		{ "{\"timezone\": [\"UTC\"]}", "\"timezone\" is not a non-empty string" },
		{ "{\"wrapped\": \"Other\"}", "\"wrapped\" is reserved" },
		{ "{\"activejob\": 1}", "\"activejob\" is not true or false" },
	};
	struct job_opts o = aj_opts(FORMAT_ACTIVEJOB, RAILS_7_1, 7);
	struct job_row r;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		r = aj_row("[]", cases[i].options);
		assert_reject(&r, &o, cases[i].want);
	}
	r = aj_row("[]", NULL);
	r.jid = "0123456789ABCDEF01234567";
	assert_reject(&r, &o, "jid is not 24 lowercase hex digits");
	r = aj_row("[]", NULL);
	r.uuid = NULL;
	r.uuid_len = 0;
	assert_reject(&r, &o, "uuid is not a uuid");
	r = aj_row("[]", NULL);
	r.uuid = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4";
	r.uuid_len = strlen(r.uuid);
	assert_reject(&r, &o, "uuid is not a uuid");
	r.uuid = "6f1c2a9e+3b4d-4e5f-8a7b-9c0d1e2f3a4b";
	assert_reject(&r, &o, "uuid is not a uuid");
	r.uuid = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4g";
	assert_reject(&r, &o, "uuid is not a uuid");
	/* In a sidekiq relay the same options make the same rejects. */
	o.format = FORMAT_SIDEKIQ;
	r = aj_row("[]", "{\"activejob\": true, \"priority\": \"high\"}");
	assert_reject(&r, &o, "\"priority\" is not an integer or null");
}
END_TEST

/* Sidekiq 8 reads integer milliseconds outside; ActiveJob's own times stay ISO 8601. */
START_TEST(sidekiq_8_stamps_are_integer_ms)
{
	struct job_row r = aj_row("[]", NULL);
	struct job_opts o = aj_opts(FORMAT_ACTIVEJOB, RAILS_7_1, 8);
	struct job_out out;
	struct buf b;
	json_t *v = build(&r, &o, &b, &out);

	ck_assert_ptr_nonnull(strstr(b.data, "\"created_at\":1700000000123,"));
	ck_assert_ptr_nonnull(strstr(b.data, "\"enqueued_at\":1700000001500}"));
	assert_str(job_of(v), "enqueued_at", "2023-11-14T22:13:21.500000000Z");
	json_decref(v);
	buf_free(&b);
}
END_TEST

/* What the client library stages: ActiveJob's own serialize, which the relay wraps and never rewrites. */
#define AJ_DATA                                                                                                           \
	"{\"job_class\": \"WelcomeMailJob\", \"job_id\": \"" UUID "\", \"provider_job_id\": \"" JID "\","                 \
	" \"queue_name\": \"mailers\", \"priority\": 3, \"arguments\": [{\"_aj_globalid\": \"gid://app/User/1\"},"        \
	" {\"a\": 1, \"_aj_symbol_keys\": [\"a\"]}, {\"_aj_serialized\": \"ActiveJob::Serializers::DurationSerializer\"," \
	" \"value\": 3, \"parts\": [[\"seconds\", 3]]}], \"executions\": 0, \"exception_executions\": {},"                \
	" \"locale\": \"de\", \"timezone\": \"UTC\", \"enqueued_at\": \"2023-11-14T22:13:20Z\"}"

START_TEST(serialized_job_data_is_wrapped_as_written)
{
	static const enum job_format relays[] = { FORMAT_ACTIVEJOB, FORMAT_SIDEKIQ };

	for (size_t i = 0; i < 2; i++) {
		struct job_row r = aj_row("[" AJ_DATA "]", "{\"activejob\": true, \"serialized\": true, \"retry\": 5}");
		struct job_opts o = aj_opts(relays[i], RAILS_6_1, 6);
		struct job_out out;
		struct buf b;
		json_t *v = build(&r, &o, &b, &out);

		assert_keys(v, outer_now);
		assert_str(v, "class", WRAPPER);
		assert_str(v, "wrapped", "WelcomeMailJob");
		ck_assert_int_eq(json_integer_value(json_object_get(v, "retry")), 5);
		ck_assert_msg(strstr(b.data, "\"args\":[" AJ_DATA "],") != NULL, "job_data rewritten: %s", b.data);
		json_decref(v);
		buf_free(&b);
	}
}
END_TEST

START_TEST(serialized_rejects_with_reasons)
{
	static const struct {
		const char *args, *options, *reason;
	} cases[] = {
		{ "[" AJ_DATA "]", "{\"serialized\": 1}", "options key \"serialized\" is not true or false" },
		{ "[]", "{\"serialized\": true}", "is not [job_data], one object" },
		{ "[1]", "{\"serialized\": true}", "is not [job_data], one object" },
		{ "[" AJ_DATA ", {}]", "{\"serialized\": true}", "is not [job_data], one object" },
		{ "[{\"arguments\": []}]", "{\"serialized\": true}", "has no \"job_class\" string" },
		{ "[{\"job_class\": \"\", \"arguments\": []}]", "{\"serialized\": true}",
		  "has no \"job_class\" string" },
		{ "[{\"job_class\": \"J\", \"arguments\": {}}]", "{\"serialized\": true}",
		  "has no \"arguments\" array" },
		{ "[" AJ_DATA "]", "{\"serialized\": true, \"wrapped\": \"Other\"}",
		  "options key \"wrapped\" is reserved" },
	};
	struct job_opts o = aj_opts(FORMAT_ACTIVEJOB, RAILS_7_1, 7);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct job_row r = aj_row(cases[i].args, cases[i].options);
		assert_reject(&r, &o, cases[i].reason);
	}
}
END_TEST

Suite *activejob_format_suite(void)
{
	Suite *s = suite_create("activejob_format");
	TCase *tc = tcase_create("payload");

	tcase_add_test(tc, rails_7_1_layout_key_for_key);
	tcase_add_test(tc, rails_6_1_layout_whole_seconds_no_scheduled_at);
	tcase_add_test(tc, unset_rails_version_writes_7_1);
	tcase_add_test(tc, scheduled_job_has_scheduled_at_and_no_outer_enqueued_at);
	tcase_add_test(tc, iso8601_dates_far_and_leap);
	tcase_add_test(tc, every_object_gets_empty_symbol_keys);
	tcase_add_test(tc, globalid_passes_through);
	tcase_add_test(tc, numbers_and_strings_kept_as_written);
	tcase_add_test(tc, numbers_past_64_bits_copied_as_written);
	tcase_add_test(tc, reserved_keys_are_dead_lettered);
	tcase_add_test(tc, globalid_must_be_a_gid_string);
	tcase_add_test(tc, depth_counts_the_wrapper_and_symbol_keys);
	tcase_add_test(tc, options_feed_the_job_and_the_rest_go_outside);
	tcase_add_test(tc, row_switch_in_a_sidekiq_relay);
	tcase_add_test(tc, row_switch_off_in_an_activejob_relay);
	tcase_add_test(tc, rejects_with_reasons);
	tcase_add_test(tc, sidekiq_8_stamps_are_integer_ms);
	tcase_add_test(tc, serialized_job_data_is_wrapped_as_written);
	tcase_add_test(tc, serialized_rejects_with_reasons);
	suite_add_tcase(s, tc);
	return s;
}
