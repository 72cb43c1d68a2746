/* Row to job JSON: every field and type, verbatim args, each rejection, hostile bytes. */
#include "fmacros.h"

#include <check.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "format.h"
#include "job.h"
#include "job_build.h"
#include "payload.h"
#include "suites.h"
#include "support/job_rows.h"

#define JID "0123456789abcdef01234567"
#define CREATED_US 1700000000123456LL
#define NOW_US 1700000001500000LL

static void set_text(const char **p, size_t *n, const char *s, size_t len)
{
	*p = s;
	*n = len;
}

#define SET(r, field, lenf, s) set_text(&(r).field, &(r).lenf, (s), strlen(s))

static struct job_row good_row(void)
{
	struct job_row r;

	memset(&r, 0, sizeof(r));
	r.id = 1;
	SET(r, queue, queue_len, "default");
	SET(r, job_class, class_len, "HardWorker");
	SET(r, args, args_len, "[1, \"two\"]");
	SET(r, jid, jid_len, JID);
	r.created_at_us = CREATED_US;
	return r;
}

static struct job_opts sidekiq_opts(int version)
{
	struct job_opts o = {
		.format = FORMAT_SIDEKIQ, .sidekiq_version = version, .max_job_bytes = 1048576, .now_us = NOW_US
	};

	return o;
}

static struct job_opts resque_opts(void)
{
	struct job_opts o = { .format = FORMAT_RESQUE, .max_job_bytes = 1048576, .now_us = NOW_US };

	return o;
}

/* Builds one job that must succeed and parses it back as an object. */
static json_t *build_ok(const struct job_row *r, const struct job_opts *o, struct buf *b, struct job_out *out,
			size_t flags)
{
	char reason[JOB_REASON_SIZE];
	json_error_t err;
	json_t *v;
	int rc;

	rc = job_build(r, o, b, out, reason, sizeof(reason));
	ck_assert_msg(rc == 0, "job_build returned %d: %s", rc, reason);
	ck_assert_uint_eq(out->off + out->len, b->len);
	ck_assert_int_eq(b->data[b->len], '\0');
	v = json_loadb(b->data + out->off, out->len, flags | JSON_REJECT_DUPLICATES, &err);
	ck_assert_msg(v != NULL, "payload is not json: %s: %.*s", err.text, (int)out->len, b->data + out->off);
	ck_assert(json_is_object(v));
	return v;
}

static json_t *build_one(const struct job_row *r, const struct job_opts *o, struct job_out *out, struct buf *b)
{
	buf_init(b);
	return build_ok(r, o, b, out, 0);
}

/* The payload has exactly these keys, in any order. */
static void assert_keys(const json_t *v, const char *const *keys, size_t n)
{
	ck_assert_uint_eq(json_object_size(v), n);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(json_object_get(v, keys[i]) != NULL, "missing key %s", keys[i]);
}

static void assert_str(const json_t *v, const char *key, const char *want)
{
	const json_t *s = json_object_get(v, key);

	ck_assert_msg(json_is_string(s), "%s is not a string", key);
	ck_assert_str_eq(json_string_value(s), want);
}

static void assert_real(const json_t *v, const char *key, double want)
{
	const json_t *x = json_object_get(v, key);

	ck_assert_msg(json_is_real(x), "%s is not a real", key);
	ck_assert_double_eq(json_real_value(x), want);
}

static void assert_int(const json_t *v, const char *key, json_int_t want)
{
	const json_t *x = json_object_get(v, key);

	ck_assert_msg(json_is_integer(x), "%s is not an integer", key);
	ck_assert_int_eq(json_integer_value(x), want);
}

static size_t count_substr(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

static bool printable_ascii(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			return false;
	return true;
}

/*
 * The row must be rejected with a reason starting with want, leaving a
 * buffer that already holds another job exactly as it was.
 */
static void expect_reject(const struct job_row *r, const struct job_opts *o, const char *want)
{
	static const char before[] = "{\"earlier\":\"job\"}";
	char reason[JOB_REASON_SIZE];
	struct job_out out = { true, 42, 7, 9 };
	struct buf b;
	int rc;

	buf_init(&b);
	ck_assert_int_eq(buf_puts(&b, before), 0);
	rc = job_build(r, o, &b, &out, reason, sizeof(reason));
	ck_assert_msg(rc == JOB_REJECT, "want reject \"%s\", got %d", want, rc);
	ck_assert_msg(strncmp(reason, want, strlen(want)) == 0, "reason \"%s\", want \"%s\"", reason, want);
	ck_assert(printable_ascii(reason));
	ck_assert_uint_eq(b.len, strlen(before));
	ck_assert_mem_eq(b.data, before, b.len);
	ck_assert_int_eq(b.data[b.len], '\0');
	/* out is only written on success */
	ck_assert_uint_eq(out.off, 7);
	ck_assert_uint_eq(out.len, 9);
	buf_free(&b);
}

START_TEST(sidekiq_v7_immediate)
{
	static const char *const keys[] = { "class", "args", "queue", "jid", "retry", "created_at", "enqueued_at" };
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);
	struct job_out out;
	struct buf b;
	json_t *v = build_one(&r, &o, &out, &b);
	const json_t *args;

	ck_assert(!out.scheduled);
	ck_assert_uint_eq(out.off, 0);
	ck_assert_uint_eq(out.len, strlen(b.data));
	assert_keys(v, keys, 7);
	assert_str(v, "class", "HardWorker");
	assert_str(v, "queue", "default");
	assert_str(v, "jid", JID);
	ck_assert(json_is_true(json_object_get(v, "retry")));
	args = json_object_get(v, "args");
	ck_assert(json_is_array(args));
	ck_assert_uint_eq(json_array_size(args), 2);
	ck_assert_int_eq(json_integer_value(json_array_get(args, 0)), 1);
	ck_assert_str_eq(json_string_value(json_array_get(args, 1)), "two");
	assert_real(v, "created_at", 1700000000.123456);
	assert_real(v, "enqueued_at", 1700000001.5);
	ck_assert_ptr_nonnull(strstr(b.data, "\"created_at\":1700000000.123456,"));
	ck_assert_ptr_nonnull(strstr(b.data, "\"enqueued_at\":1700000001.5}"));
	ck_assert_ptr_nonnull(strstr(b.data, "\"args\":[1, \"two\"],"));
	json_decref(v);
	buf_free(&b);
}
END_TEST

START_TEST(sidekiq_v6_float_seconds)
{
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(6);
	struct job_out out;
	struct buf b;
	json_t *v;

	r.created_at_us = 1700000000000000LL;
	v = build_one(&r, &o, &out, &b);
	assert_real(v, "created_at", 1700000000.0);
	ck_assert_ptr_nonnull(strstr(b.data, "\"created_at\":1700000000.0,"));
	assert_real(v, "enqueued_at", 1700000001.5);
	json_decref(v);
	buf_free(&b);
}
END_TEST

START_TEST(sidekiq_v8_integer_millis)
{
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(8);
	struct job_out out;
	struct buf b;
	json_t *v = build_one(&r, &o, &out, &b);

	assert_int(v, "created_at", 1700000000123LL);
	assert_int(v, "enqueued_at", 1700000001500LL);
	ck_assert_ptr_nonnull(strstr(b.data, "\"created_at\":1700000000123,"));
	json_decref(v);
	buf_free(&b);
}
END_TEST

START_TEST(sidekiq_v8_negative_floors)
{
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(8);
	struct job_out out;
	struct buf b;
	json_t *v;

	r.created_at_us = -1;
	o.now_us = -1500000;
	v = build_one(&r, &o, &out, &b);
	assert_int(v, "created_at", -1);
	assert_int(v, "enqueued_at", -1500);
	json_decref(v);
	buf_free(&b);
}
END_TEST

START_TEST(sidekiq_scheduled)
{
	static const char *const keys[] = { "class", "args", "queue", "jid", "retry", "created_at" };
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);
	struct job_out out;
	struct buf b;
	json_t *v;

	r.has_run_at = true;
	r.run_at_us = NOW_US + 1;
	v = build_one(&r, &o, &out, &b);
	ck_assert(out.scheduled);
	ck_assert_int_eq(out.run_at_us, NOW_US + 1);
	assert_keys(v, keys, 6);
	ck_assert_ptr_null(json_object_get(v, "enqueued_at"));
	ck_assert_ptr_null(json_object_get(v, "at"));
	assert_real(v, "created_at", 1700000000.123456);
	json_decref(v);
	buf_free(&b);
}
END_TEST

START_TEST(sidekiq_past_or_now_run_at_is_immediate)
{
	long long when[] = { NOW_US - 1000000, NOW_US };
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);

	for (size_t i = 0; i < 2; i++) {
		struct job_out out;
		struct buf b;
		json_t *v;

		r.has_run_at = true;
		r.run_at_us = when[i];
		v = build_one(&r, &o, &out, &b);
		ck_assert(!out.scheduled);
		assert_real(v, "enqueued_at", 1700000001.5);
		json_decref(v);
		buf_free(&b);
	}
}
END_TEST

START_TEST(args_copied_verbatim)
{
	static const char args[] = "[0.1, 123456789012345678901234567890, \"\xc3\xa9\", {\"a\": [1e5, -0.0, 1E-7]}]";
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);
	struct job_out out;
	struct buf b;
	json_t *v;
	char *want;

	SET(r, args, args_len, args);
	buf_init(&b);
	/* big integers parse only as reals; the payload itself is unchanged text */
	v = build_ok(&r, &o, &b, &out, JSON_DECODE_INT_AS_REAL);
	want = malloc(strlen(args) + 16);
	ck_assert_ptr_nonnull(want);
	strcpy(want, "\"args\":");
	strcat(want, args);
	strcat(want, ",");
	ck_assert_ptr_nonnull(strstr(b.data, want));
	ck_assert_str_eq(json_string_value(json_array_get(json_object_get(v, "args"), 2)), "\xc3\xa9");
	free(want);
	json_decref(v);
	buf_free(&b);
}
END_TEST

/* Builds one job that must succeed; its text in b (the caller frees), unparsed:
 * jansson cannot read every number a payload may carry. */
static const char *build_text(const struct job_row *r, const struct job_opts *o, struct buf *b)
{
	char reason[JOB_REASON_SIZE];
	struct job_out out;
	int rc;

	buf_init(b);
	rc = job_build(r, o, b, &out, reason, sizeof(reason));
	ck_assert_msg(rc == 0, "job_build returned %d: %s", rc, reason);
	return b->data + out.off;
}

static void assert_has(const char *payload, const char *want)
{
	ck_assert_msg(strstr(payload, want) != NULL, "payload lacks %s:\n%s", want, payload);
}

/* A json column keeps numbers of any size: in args and options each arrives
 * as written, never re-encoded (0.1, 1.0E+2 and -0 too). */
START_TEST(numbers_past_64_bits_copied_as_written)
{
	const char *big = job_rows_big_numbers();
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);
	char args[1200], options[1200], want[2600];
	struct buf b;
	const char *p;

	snprintf(args, sizeof(args), "[%s]", big);
	snprintf(options, sizeof(options),
		 "{\"retry\": 18446744073709551616, \"n\": -18446744073709551616, \"all\": [%s], "
		 "\"f\": 0.1, \"e\": 1.0E+2, \"z\": -0}",
		 big);
	SET(r, args, args_len, args);
	SET(r, options, options_len, options);
	p = build_text(&r, &o, &b);
	snprintf(want, sizeof(want),
		 "{\"class\":\"HardWorker\",\"args\":[%s],\"queue\":\"default\",\"jid\":\"" JID
		 "\",\"retry\":18446744073709551616,\"n\":-18446744073709551616,\"all\":[%s],\"f\":0.1,"
		 "\"e\":1.0E+2,\"z\":-0,\"created_at\":",
		 big, big);
	assert_has(p, want);
	buf_free(&b);
	/* Resque writes no options but checks them: none of these is refused. */
	o = resque_opts();
	p = build_text(&r, &o, &b);
	snprintf(want, sizeof(want), "{\"class\":\"HardWorker\",\"args\":[%s]}", big);
	ck_assert_str_eq(p, want);
	buf_free(&b);
}
END_TEST

/* args and options as the app wrote them: keys in their order, -0.0 with its
 * sign, and a string holding \u0000, which a worker's JSON reader takes. */
START_TEST(payload_copied_as_written)
{
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);
	struct buf b;
	const char *p;

	SET(r, args, args_len, "[{\"zeta\": 1, \"alpha\": -0.0}, \"nul\\u0000byte\"]");
	SET(r, options, options_len, "{\"zz\": \"\\u0000\", \"aa\": -0.0}");
	p = build_text(&r, &o, &b);
	assert_has(p, "\"args\":[{\"zeta\": 1, \"alpha\": -0.0}, \"nul\\u0000byte\"]");
	assert_has(p, "\"zz\":\"\\u0000\",\"aa\":-0.0,");
	buf_free(&b);
}
END_TEST

START_TEST(args_whitespace_trimmed)
{
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);
	struct job_out out;
	struct buf b;
	json_t *v;

	SET(r, args, args_len, " \t\r\n[ 1 ,2 ]\n ");
	v = build_one(&r, &o, &out, &b);
	ck_assert_ptr_nonnull(strstr(b.data, "\"args\":[ 1 ,2 ],\"queue\""));
	json_decref(v);
	buf_free(&b);
}
END_TEST

START_TEST(options_merged_compactly)
{
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);
	struct job_out out;
	struct buf b;
	json_t *v;
	const json_t *tags;

	SET(r, args, args_len, "[]");
	SET(r, options, options_len,
	    "{\"tags\": [\"a\", \"b\"], \"backtrace\": 5, \"x\": {\"y\": null}, \"s\": \"\\u00e9\\n\"}");
	v = build_one(&r, &o, &out, &b);
	ck_assert_uint_eq(json_object_size(v), 11);
	ck_assert(json_is_true(json_object_get(v, "retry")));
	tags = json_object_get(v, "tags");
	ck_assert(json_is_array(tags));
	ck_assert_str_eq(json_string_value(json_array_get(tags, 1)), "b");
	assert_int(v, "backtrace", 5);
	ck_assert(json_is_null(json_object_get(json_object_get(v, "x"), "y")));
	assert_str(v, "s", "\xc3\xa9\n");
	/* args are spaceless here, so the whole payload must be */
	ck_assert_ptr_null(strchr(b.data, ' '));
	ck_assert_ptr_nonnull(strstr(b.data, "\"retry\":true,\"tags\":[\"a\",\"b\"],\"backtrace\":5,"));
	json_decref(v);
	buf_free(&b);
}
END_TEST

START_TEST(options_retry_overrides_default)
{
	static const char *const opts[] = { "{\"retry\": false}", "{\"retry\": 3}",
					    "{\"queue_x\": 1, \"retry\": \"x\"}" };
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);

	for (size_t i = 0; i < 3; i++) {
		struct job_out out;
		struct buf b;
		json_t *v, *retry;

		SET(r, options, options_len, opts[i]);
		v = build_one(&r, &o, &out, &b);
		ck_assert_uint_eq(count_substr(b.data, "\"retry\""), 1);
		retry = json_object_get(v, "retry");
		if (i == 0)
			ck_assert(json_is_false(retry));
		else if (i == 1)
			assert_int(v, "retry", 3);
		else
			assert_str(v, "retry", "x");
		json_decref(v);
		buf_free(&b);
	}
}
END_TEST

START_TEST(options_empty_object_is_like_null)
{
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);
	struct job_out out1, out2;
	struct buf b1, b2;
	json_t *v1, *v2;

	v1 = build_one(&r, &o, &out1, &b1);
	SET(r, options, options_len, " { } ");
	v2 = build_one(&r, &o, &out2, &b2);
	ck_assert_str_eq(b1.data, b2.data);
	json_decref(v1);
	json_decref(v2);
	buf_free(&b1);
	buf_free(&b2);
}
END_TEST

START_TEST(strings_escaped)
{
	static const char cls[] = "Foo\"Bar\\Baz\n\x01\xc3\xa9/\xe2\x80\xa8";
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);
	struct job_out out;
	struct buf b;
	json_t *v;

	SET(r, job_class, class_len, cls);
	SET(r, queue, queue_len, "q\t\"1\"");
	v = build_one(&r, &o, &out, &b);
	assert_str(v, "class", cls);
	assert_str(v, "queue", "q\t\"1\"");
	json_decref(v);
	buf_free(&b);
}
END_TEST

START_TEST(strings_need_not_be_terminated)
{
	static const char raw[] = "Klassqueue[7]xx" JID "zz";
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);
	struct job_out out;
	struct buf b;
	json_t *v;

	set_text(&r.job_class, &r.class_len, raw, 5);
	set_text(&r.queue, &r.queue_len, raw + 5, 5);
	set_text(&r.args, &r.args_len, raw + 10, 3);
	set_text(&r.jid, &r.jid_len, raw + 15, 24);
	v = build_one(&r, &o, &out, &b);
	assert_str(v, "class", "Klass");
	assert_str(v, "queue", "queue");
	assert_str(v, "jid", JID);
	ck_assert_ptr_nonnull(strstr(b.data, "\"args\":[7],"));
	json_decref(v);
	buf_free(&b);
}
END_TEST

START_TEST(resque_immediate_exact)
{
	struct job_row r = good_row();
	struct job_opts o = resque_opts();
	struct job_out out;
	struct buf b;
	char reason[JOB_REASON_SIZE];

	SET(r, job_class, class_len, "Archive");
	SET(r, queue, queue_len, "low");
	SET(r, args, args_len, "[1, \"x\"]");
	/* Resque has no per-job options and no jid */
	SET(r, options, options_len, "{\"retry\": 3}");
	set_text(&r.jid, &r.jid_len, NULL, 0);
	buf_init(&b);
	ck_assert_int_eq(job_build(&r, &o, &b, &out, reason, sizeof(reason)), 0);
	ck_assert(!out.scheduled);
	ck_assert_uint_eq(out.off, 0);
	ck_assert_uint_eq(out.len, b.len);
	ck_assert_str_eq(b.data, "{\"class\":\"Archive\",\"args\":[1, \"x\"]}");
	buf_free(&b);
}
END_TEST

START_TEST(resque_scheduled_exact)
{
	struct job_row r = good_row();
	struct job_opts o = resque_opts();
	struct job_out out;
	struct buf b;
	char reason[JOB_REASON_SIZE];

	SET(r, job_class, class_len, "Archive");
	SET(r, queue, queue_len, "low");
	SET(r, args, args_len, "[1, \"x\"]");
	r.has_run_at = true;
	r.run_at_us = NOW_US + 60000000;
	buf_init(&b);
	ck_assert_int_eq(job_build(&r, &o, &b, &out, reason, sizeof(reason)), 0);
	ck_assert(out.scheduled);
	ck_assert_int_eq(out.run_at_us, NOW_US + 60000000);
	ck_assert_str_eq(b.data, "{\"class\":\"Archive\",\"args\":[1, \"x\"],\"queue\":\"low\"}");
	buf_free(&b);
}
END_TEST

START_TEST(resque_validates_options)
{
	struct job_row r = good_row();
	struct job_opts o = resque_opts();

	SET(r, options, options_len, "[1]");
	expect_reject(&r, &o, "options is not a json object (got array)");
	SET(r, options, options_len, "{\"queue\": \"x\"}");
	expect_reject(&r, &o, "options key \"queue\" is reserved");
}
END_TEST

START_TEST(rejects_args_shape)
{
	static const struct {
		const char *args;
		const char *want;
	} cases[] = {
		{ "{\"a\": 1}", "args is not a json array (got object)" },
		{ "5", "args is not a json array (got number)" },
		{ "123456789012345678901234567890", "args is not a json array (got number)" },
		{ "\"s\"", "args is not a json array (got string)" },
		{ "null", "args is not a json array (got null)" },
		{ "true", "args is not a json array (got boolean)" },
		{ "", "args is not valid json: " },
		{ "   ", "args is not valid json: " },
		{ "[1,", "args is not valid json: " },
		{ "[1] x", "args is not valid json: " },
		{ "[1][2]", "args is not valid json: " },
		{ "[1]\n]", "args is not valid json: end of file expected near ']' at line 2" },
		{ "[01]", "args is not valid json: " },
		{ "[NaN]", "args is not valid json: " },
		{ "['a']", "args is not valid json: " },
		{ "[1.]", "args is not valid json: " },
		{ "[.5]", "args is not valid json: " },
		{ "[-]", "args is not valid json: " },
		{ "[1e]", "args is not valid json: " },
		{ "[+1]", "args is not valid json: " },
		{ "[1 2]", "args is not valid json: " },
		{ "[1-2]", "args is not valid json: " },
		{ "[-Infinity]", "args is not valid json: " },
		{ "[1e400, 1.5e-400,\n 1x]", "args is not valid json: ']' expected near 'x' at line 2 column 3" },
		{ "[\"\\ud800\"]", "args is not valid json: " },
		{ "[\"a\x01\"]", "args is not valid json: " },
		{ "[\"\xff\"]", "args is not valid json: " },
		{ "[\"\xc0\xaf\"]", "args is not valid json: " },
		{ "[\"\xed\xa0\x80\"]", "args is not valid json: " },
		{ "\xef\xbb\xbf[1]", "args is not valid json: " },
		/* json keeps one; copied as written it would make the payload ambiguous. */
		{ "[{\"a\": 1, \"a\": 2}]", "args is not valid json: duplicate object key" },
		{ "[[{\"job_id\": 1, \"b\": {}, \"job_id\": 1}]]", "args is not valid json: duplicate object key" },
	};
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		SET(r, args, args_len, cases[i].args);
		expect_reject(&r, &o, cases[i].want);
	}
	set_text(&r.args, &r.args_len, NULL, 0);
	expect_reject(&r, &o, "args is not valid json: ");
}
END_TEST

START_TEST(rejects_nul_in_args)
{
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);

	set_text(&r.args, &r.args_len, "[1]\0", 4);
	expect_reject(&r, &o, "args contains a nul byte");
	set_text(&r.args, &r.args_len, "[\"a\0b\"]", 7);
	expect_reject(&r, &o, "args contains a nul byte");
}
END_TEST

START_TEST(rejects_bad_class_and_queue)
{
	static const struct {
		const char *s;
		size_t n;
		const char *what;
	} cases[] = {
		{ "", 0, "is empty" },
		{ "A\0B", 3, "contains a nul byte" },
		{ "\0", 1, "contains a nul byte" },
		{ "\xc3\x28", 2, "is not valid utf-8" },
		{ "\xc0\xaf", 2, "is not valid utf-8" },
		{ "\xe0\x80\xaf", 3, "is not valid utf-8" },
		{ "\xed\xa0\x80", 3, "is not valid utf-8" },
		{ "\xf4\x90\x80\x80", 4, "is not valid utf-8" },
		{ "\xe2\x82", 2, "is not valid utf-8" },
		{ "ok\xff", 3, "is not valid utf-8" },
		{ "\x80", 1, "is not valid utf-8" },
	};
	struct job_opts o = sidekiq_opts(7);
	char want[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct job_row r = good_row();

		set_text(&r.job_class, &r.class_len, cases[i].s, cases[i].n);
		snprintf(want, sizeof(want), "job class %s", cases[i].what);
		expect_reject(&r, &o, want);
		r = good_row();
		set_text(&r.queue, &r.queue_len, cases[i].s, cases[i].n);
		snprintf(want, sizeof(want), "queue %s", cases[i].what);
		expect_reject(&r, &o, want);
	}
}
END_TEST

/*
 * Sidekiq's and Resque's lists are queue:<q> and nothing else they keep
 * starts so (schedule, retry, dead, processes, queues, stat:*, delayed:*):
 * no queue name clobbers a key of theirs, so none is refused, nor are the
 * names other formats refuse.
 */
START_TEST(sidekiq_and_resque_take_any_queue_name)
{
	static const char *const names[] = {
		"schedule",
		"retry",
		"dead",
		"processes",
		"queues",
		"stat:processed",
		"delayed:1700000000",
		"delayed_queue_schedule",
		"queue:x",
		"unacked",
		"_kombu.binding.celery",
		"default:reserved",
		"x\x06\x16"
		"3",
	};
	static const enum job_format formats[] = { FORMAT_SIDEKIQ, FORMAT_RESQUE, FORMAT_ACTIVEJOB };
	struct job_opts o = sidekiq_opts(7);
	char reason[JOB_REASON_SIZE];
	struct job_out out;
	struct buf b;

	buf_init(&b);
	for (size_t f = 0; f < sizeof(formats) / sizeof(formats[0]); f++) {
		o.format = formats[f];
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			struct job_row r = good_row();
			SET(r, queue, queue_len, names[i]);
			SET(r, uuid, uuid_len, "0b7e3c7e-8a52-4d1c-9f0e-3c2f6a1b9d44");
			ck_assert_msg(job_build(&r, &o, &b, &out, reason, sizeof(reason)) == 0,
				      "format %d, queue %s: %s", (int)formats[f], names[i], reason);
		}
	}
	buf_free(&b);
}
END_TEST

START_TEST(rejects_null_class_and_queue)
{
	struct job_row r = good_row();
	struct job_opts o = resque_opts();

	set_text(&r.job_class, &r.class_len, NULL, 0);
	expect_reject(&r, &o, "job class is empty");
	r = good_row();
	set_text(&r.queue, &r.queue_len, NULL, 0);
	expect_reject(&r, &o, "queue is empty");
}
END_TEST

START_TEST(rejects_bad_options)
{
	static const struct {
		const char *opts;
		const char *want;
	} cases[] = {
		{ "[1]", "options is not a json object (got array)" },
		{ "\"x\"", "options is not a json object (got string)" },
		{ "null", "options is not a json object (got null)" },
		{ "", "options is not valid json: " },
		{ "{\"a\": }", "options is not valid json: " },
		{ "{} {}", "options is not valid json: " },
		{ "{\"a\": 1, \"a\": 2}", "options is not valid json: duplicate" },
		{ "{\"\\u0000k\": 1}", "options is not valid json: " },
		/* Numbers of any size are valid; a number jsonb would not write is not. */
		{ "{\"n\": 01}", "options is not valid json: " },
		{ "{\"n\": 1.}", "options is not valid json: " },
		{ "{\"n\": -}", "options is not valid json: " },
		{ "{\"n\": 1e}", "options is not valid json: " },
		{ "{\"n\": +1}", "options is not valid json: " },
		{ "{\"n\": 1e400 \"m\": 1}", "options is not valid json: " },
		{ "{\"n\": 1e400, \"n\": 1}", "options is not valid json: duplicate" },
		{ "{\"\xff\": 1}", "options is not valid json: " },
	};
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		SET(r, options, options_len, cases[i].opts);
		expect_reject(&r, &o, cases[i].want);
	}
	set_text(&r.options, &r.options_len, "{}\0", 3);
	expect_reject(&r, &o, "options contains a nul byte");
}
END_TEST

START_TEST(rejects_reserved_option_keys)
{
	static const char *const keys[] = { "class", "args", "queue", "jid", "created_at", "enqueued_at", "at" };
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);
	char opts[64], want[64];

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		snprintf(opts, sizeof(opts), "{\"tags\": [], \"%s\": 1}", keys[i]);
		snprintf(want, sizeof(want), "options key \"%s\" is reserved", keys[i]);
		SET(r, options, options_len, opts);
		expect_reject(&r, &o, want);
	}
	/* an escaped spelling is the same key */
	SET(r, options, options_len, "{\"j\\u0069d\": 1}");
	expect_reject(&r, &o, "options key \"jid\" is reserved");
}
END_TEST

/* A column the reader could not turn into a value (an infinite time, args
 * over the size bound) rejects the row with the reader's reason, in every format. */
START_TEST(rejects_unfit_columns)
{
	struct job_row r = good_row();
	struct job_opts s = sidekiq_opts(7), q = resque_opts();

	r.unfit = "run_at is infinity: no job time can hold it";
	expect_reject(&r, &s, "run_at is infinity: no job time can hold it");
	expect_reject(&r, &q, "run_at is infinity: no job time can hold it");
}
END_TEST

START_TEST(rejects_bad_jid)
{
	static const char *const jids[] = {
		"",
		"0123456789abcdef0123456",
		"0123456789abcdef012345678",
		"0123456789ABCDEF01234567",
		"0123456789abcdef0123456g",
		"0123456789abcdef 1234567",
	};
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);

	for (size_t i = 0; i < sizeof(jids) / sizeof(jids[0]); i++) {
		SET(r, jid, jid_len, jids[i]);
		expect_reject(&r, &o, "jid is not 24 lowercase hex digits");
	}
	set_text(&r.jid, &r.jid_len, NULL, 0);
	expect_reject(&r, &o, "jid is not 24 lowercase hex digits");
	set_text(&r.jid, &r.jid_len,
		 "0123456789abcdef\0"
		 "1234567",
		 24);
	expect_reject(&r, &o, "jid is not 24 lowercase hex digits");
}
END_TEST

START_TEST(rejects_over_max_job_bytes)
{
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);
	struct job_out out;
	struct buf b;
	json_t *v = build_one(&r, &o, &out, &b);
	char want[96];

	json_decref(v);
	o.max_job_bytes = (long)out.len;
	buf_reset(&b);
	v = build_ok(&r, &o, &b, &out, 0);
	json_decref(v);
	o.max_job_bytes = (long)out.len - 1;
	snprintf(want, sizeof(want), "job is %zu bytes, over --max-job-bytes %ld", out.len, o.max_job_bytes);
	expect_reject(&r, &o, want);
	buf_free(&b);
}
END_TEST

START_TEST(rejects_huge_args)
{
	size_t n = 2000001;
	char *args = malloc(n);
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);

	ck_assert_ptr_nonnull(args);
	args[0] = '[';
	for (size_t i = 1; i + 1 < n; i += 2) {
		args[i] = '0';
		args[i + 1] = ',';
	}
	args[n - 2] = '0';
	args[n - 1] = ']';
	set_text(&r.args, &r.args_len, args, n);
	expect_reject(&r, &o, "args is 2000001 bytes, over --max-job-bytes 1048576");
	/* without the limit the same args are a fine job */
	o.max_job_bytes = 0;
	{
		struct job_out out;
		struct buf b;
		json_t *v = build_one(&r, &o, &out, &b);

		ck_assert_uint_eq(json_array_size(json_object_get(v, "args")), 1000000);
		json_decref(v);
		buf_free(&b);
	}
	free(args);
}
END_TEST

START_TEST(rejects_deep_nesting)
{
	size_t depth = 100000;
	char *args = malloc(2 * depth);
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);

	ck_assert_ptr_nonnull(args);
	memset(args, '[', depth);
	memset(args + depth, ']', depth);
	set_text(&r.args, &r.args_len, args, 2 * depth);
	expect_reject(&r, &o, "args is not valid json: maximum parsing depth reached");
	set_text(&r.args, &r.args_len, args, depth);
	expect_reject(&r, &o, "args is not valid json: ");
	/* options nest as deep */
	r = good_row();
	args[0] = '{';
	args[1] = '"';
	args[2] = 'k';
	args[3] = '"';
	args[4] = ':';
	set_text(&r.options, &r.options_len, args, 2 * depth);
	expect_reject(&r, &o, "options is not valid json: ");
	free(args);
}
END_TEST

/* Nesting text: levels of [ around a scalar, wrapped as open...1...close. */
static char *nested(const char *open, size_t levels, const char *close)
{
	size_t n = strlen(open) + 2 * levels + 1 + strlen(close);
	char *s = malloc(n + 1);

	ck_assert_ptr_nonnull(s);
	strcpy(s, open);
	memset(s + strlen(open), '[', levels);
	s[strlen(open) + levels] = '1';
	memset(s + strlen(open) + levels + 1, ']', levels);
	strcpy(s + strlen(open) + 2 * levels + 1, close);
	return s;
}

/*
 * Found by the fuzzer: args jansson accepts (2047 levels around a number) made a payload one
 * level deeper than jansson reads back. The limit is now what Ruby's JSON
 * reads (JOB_MAX_DEPTH levels, the job object included), in both formats.
 */
START_TEST(rejects_nesting_consumers_cannot_read)
{
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);
	struct job_out out;
	struct buf b;
	json_t *v;
	char *s;

	s = nested("[0, ", JOB_MAX_DEPTH - 2, "]"); /* args 99 deep: payload 100 */
	SET(r, args, args_len, s);
	v = build_one(&r, &o, &out, &b);
	json_decref(v);
	buf_free(&b);
	free(s);
	for (int f = 0; f < 2; f++) {
		o = f ? resque_opts() : sidekiq_opts(7);
		s = nested("[0, ", JOB_MAX_DEPTH - 1, "]");
		SET(r, args, args_len, s);
		expect_reject(&r, &o, "args nest deeper than 99 levels");
		free(s);
		s = nested("", 2047, "");
		SET(r, args, args_len, s);
		expect_reject(&r, &o, "args nest deeper than 99 levels");
		free(s);
	}
	r = good_row();
	o = sidekiq_opts(7);
	s = nested("{\"retry\": 1, \"tags\": ", JOB_MAX_DEPTH - 1, "}");
	SET(r, options, options_len, s);
	v = build_one(&r, &o, &out, &b);
	json_decref(v);
	buf_free(&b);
	free(s);
	s = nested("{\"retry\": 1, \"tags\": ", JOB_MAX_DEPTH, "}");
	SET(r, options, options_len, s);
	expect_reject(&r, &o, "options nest deeper than 100 levels");
	free(s);
}
END_TEST

START_TEST(several_jobs_share_a_buffer)
{
	struct job_row r = good_row(), bad = good_row();
	struct job_opts o = sidekiq_opts(8);
	struct job_out outs[3];
	char reason[JOB_REASON_SIZE];
	struct job_out junk;
	struct buf b;
	json_t *v;
	size_t before;

	buf_init(&b);
	v = build_ok(&r, &o, &b, &outs[0], 0);
	json_decref(v);
	SET(bad, args, args_len, "{}");
	before = b.len;
	ck_assert_int_eq(job_build(&bad, &o, &b, &junk, reason, sizeof(reason)), JOB_REJECT);
	ck_assert_uint_eq(b.len, before);
	r.has_run_at = true;
	r.run_at_us = NOW_US + 5;
	SET(r, job_class, class_len, "Second");
	v = build_ok(&r, &o, &b, &outs[1], 0);
	json_decref(v);
	SET(r, job_class, class_len, "Third");
	r.has_run_at = false;
	v = build_ok(&r, &o, &b, &outs[2], 0);
	json_decref(v);
	ck_assert_uint_eq(outs[0].off, 0);
	ck_assert_uint_eq(outs[1].off, outs[0].len);
	ck_assert_uint_eq(outs[2].off, outs[0].len + outs[1].len);
	ck_assert_uint_eq(b.len, outs[0].len + outs[1].len + outs[2].len);
	ck_assert(!outs[0].scheduled);
	ck_assert(outs[1].scheduled);
	ck_assert(!outs[2].scheduled);
	for (size_t i = 0; i < 3; i++) {
		static const char *const names[] = { "HardWorker", "Second", "Third" };
		json_t *j = json_loadb(b.data + outs[i].off, outs[i].len, 0, NULL);

		ck_assert_ptr_nonnull(j);
		assert_str(j, "class", names[i]);
		json_decref(j);
	}
	buf_free(&b);
}
END_TEST

START_TEST(null_reason_is_allowed)
{
	struct job_row r = good_row();
	struct job_opts o = sidekiq_opts(7);
	struct job_out out;
	struct buf b;

	buf_init(&b);
	SET(r, args, args_len, "{");
	ck_assert_int_eq(job_build(&r, &o, &b, &out, NULL, 0), JOB_REJECT);
	ck_assert_uint_eq(b.len, 0);
	buf_free(&b);
}
END_TEST

START_TEST(format_epoch)
{
	static const struct {
		long long us;
		const char *want;
	} cases[] = {
		{ 1700000000123456LL, "1700000000.123456" },
		{ 1700000000500000LL, "1700000000.5" },
		{ 1700000000000000LL, "1700000000.0" },
		{ 1700000000000010LL, "1700000000.00001" },
		{ 0, "0.0" },
		{ 1, "0.000001" },
		{ 999999, "0.999999" },
		{ -1, "-0.000001" },
		{ -1500000, "-1.5" },
		{ LLONG_MAX, "9223372036854.775807" },
		{ LLONG_MIN, "-9223372036854.775808" },
	};
	char dst[32];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		job_format_epoch(dst, sizeof(dst), cases[i].us);
		ck_assert_str_eq(dst, cases[i].want);
	}
	memset(dst, 'x', sizeof(dst));
	job_format_epoch(dst, 5, 1700000000123456LL);
	ck_assert_str_eq(dst, "1700");
	ck_assert_int_eq(dst[5], 'x');
	job_format_epoch(dst, 0, 1);
	job_format_epoch(NULL, 0, 1);
}
END_TEST

/* xorshift64: a fixed sequence, so a failure reproduces. */
static unsigned long long rnd(unsigned long long *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Mostly JSON-ish bytes, sometimes anything, so both paths get exercised. */
static size_t random_text(unsigned long long *s, char *dst, size_t cap)
{
	static const char *const atoms[] = {
		"[",       "]",       "{",        "}",    ",",        ":",    "\"",
		"\"k\"",   "1",       "-0.5e3",   "null", "true",     " ",    "\\",
		"\\u00e9", "\\ud800", "\xc3\xa9", "\xff", "\xe2\x82", "\x01", "123456789012345678901234567890",
	};
	size_t n = 0, parts = rnd(s) % 12;

	for (size_t i = 0; i < parts; i++) {
		const char *a;
		size_t len;
		char byte;

		if (rnd(s) % 8 == 0) {
			byte = (char)(rnd(s) & 0xff);
			a = &byte;
			len = 1;
		} else {
			a = atoms[rnd(s) % (sizeof(atoms) / sizeof(atoms[0]))];
			len = strlen(a);
		}
		if (n + len > cap)
			break;
		memcpy(dst + n, a, len);
		n += len;
	}
	return n;
}

static void check_random_result(const struct job_row *r, int rc, const struct buf *b, size_t before,
				const struct job_out *out, const char *reason)
{
	json_t *v, *want;

	ck_assert_msg(rc == 0 || rc == JOB_REJECT, "rc %d", rc);
	if (rc == JOB_REJECT) {
		ck_assert_uint_eq(b->len, before);
		ck_assert(reason[0] != '\0');
		ck_assert(printable_ascii(reason));
		/* our UTF-8 check must agree with jansson's */
		if (strcmp(reason, "job class is not valid utf-8") == 0)
			ck_assert_ptr_null(json_stringn(r->job_class, r->class_len));
		return;
	}
	ck_assert_uint_eq(out->off, before);
	v = json_loadb(b->data + out->off, out->len, JSON_DECODE_INT_AS_REAL | JSON_REJECT_DUPLICATES, NULL);
	ck_assert_msg(v != NULL, "invalid payload %.*s", (int)out->len, b->data + out->off);
	want = json_stringn(r->job_class, r->class_len);
	ck_assert_ptr_nonnull(want);
	ck_assert(json_equal(json_object_get(v, "class"), want));
	json_decref(want);
	json_decref(v);
}

START_TEST(random_rows_never_break_the_payload)
{
	static char cls[64], queue[64], args[256], opts[256];
	unsigned long long seed = 0x9e3779b97f4a7c15ULL;
	struct buf b;

	buf_init(&b);
	for (int i = 0; i < 20000; i++) {
		struct job_row r = good_row();
		struct job_opts o = sidekiq_opts(6 + (int)(rnd(&seed) % 3));
		char reason[JOB_REASON_SIZE];
		struct job_out out;
		size_t before = b.len;
		int rc;

		if (rnd(&seed) % 4 == 0)
			o.format = FORMAT_RESQUE;
		if (rnd(&seed) % 2)
			set_text(&r.job_class, &r.class_len, cls, random_text(&seed, cls, sizeof(cls)));
		if (rnd(&seed) % 4 == 0)
			set_text(&r.queue, &r.queue_len, queue, random_text(&seed, queue, sizeof(queue)));
		set_text(&r.args, &r.args_len, args, random_text(&seed, args, sizeof(args)));
		if (rnd(&seed) % 2)
			set_text(&r.options, &r.options_len, opts, random_text(&seed, opts, sizeof(opts)));
		r.has_run_at = rnd(&seed) % 2;
		r.run_at_us = NOW_US - 5 + (long long)(rnd(&seed) % 10);
		rc = job_build(&r, &o, &b, &out, reason, sizeof(reason));
		check_random_result(&r, rc, &b, before, &out, reason);
		if (b.len > 65536)
			buf_reset(&b);
	}
	buf_free(&b);
}
END_TEST

/* The parser-free check of args says yes only where jansson says a valid array. */
START_TEST(plain_args_need_no_parser_and_nothing_else_passes_without_one)
{
	static const struct {
		const char *text;
		bool plain;
	} cases[] = {
		{ "[]", true },
		{ " [ 1, -2.5e+3, 0, \"a b\", true, false, null, [[]] ] ", true },
		{ "[1, [2, [3]]]", true },
		{ "[12345678901234567890123]", true },
		{ "[1,]", false },
		{ "[,1]", false },
		{ "[1 2]", false },
		{ "[01]", false },
		{ "[1.]", false },
		{ "[.5]", false },
		{ "[-]", false },
		{ "[1e]", false },
		{ "[1]]", false },
		{ "[[1]", false },
		{ "[tru]", false },
		{ "[\"a\\\"b\"]", false },   /* an escape: the parser looks */
		{ "[\"\xc3\xa9\"]", false }, /* not ASCII: the parser looks */
		{ "[{\"a\": 1}]", false },   /* an object: the parser looks */
		{ "{}", false },
		{ "1", false },
		{ "", false },
		{ "[\"a", false },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct span sp = span_of(cases[i].text, strlen(cases[i].text));
		json_error_t err;
		json_t *v = NULL;
		bool plain = payload_plain_array(sp, JOB_MAX_DEPTH - 1);
		ck_assert_msg(plain == cases[i].plain, "%s: plain is %d", cases[i].text, plain);
		if (!plain)
			continue;
		ck_assert_int_eq(payload_load(sp, JSON_DECODE_ANY, &v, &err), 0);
		ck_assert_msg(v && json_is_array(v), "%s: jansson disagrees: %s", cases[i].text, err.text);
		json_decref(v);
	}
	/* Depth: JOB_MAX_DEPTH - 1 levels pass, one more goes to the parser. */
	{
		char deep[2 * JOB_MAX_DEPTH + 1];
		size_t n = JOB_MAX_DEPTH - 1;
		memset(deep, '[', n);
		memset(deep + n, ']', n);
		ck_assert(payload_plain_array(span_of(deep, 2 * n), JOB_MAX_DEPTH - 1));
		memset(deep, '[', n + 1);
		memset(deep + n + 1, ']', n + 1);
		ck_assert(!payload_plain_array(span_of(deep, 2 * n + 2), JOB_MAX_DEPTH - 1));
	}
}
END_TEST

Suite *job_suite(void)
{
	Suite *s = suite_create("job");
	TCase *build = tcase_create("build");
	TCase *reject = tcase_create("reject");
	TCase *hostile = tcase_create("hostile");

	tcase_add_test(build, plain_args_need_no_parser_and_nothing_else_passes_without_one);
	tcase_add_test(build, sidekiq_v7_immediate);
	tcase_add_test(build, sidekiq_v6_float_seconds);
	tcase_add_test(build, sidekiq_v8_integer_millis);
	tcase_add_test(build, sidekiq_v8_negative_floors);
	tcase_add_test(build, sidekiq_scheduled);
	tcase_add_test(build, sidekiq_past_or_now_run_at_is_immediate);
	tcase_add_test(build, args_copied_verbatim);
	tcase_add_test(build, args_whitespace_trimmed);
	tcase_add_test(build, numbers_past_64_bits_copied_as_written);
	tcase_add_test(build, payload_copied_as_written);
	tcase_add_test(build, options_merged_compactly);
	tcase_add_test(build, options_retry_overrides_default);
	tcase_add_test(build, options_empty_object_is_like_null);
	tcase_add_test(build, strings_escaped);
	tcase_add_test(build, strings_need_not_be_terminated);
	tcase_add_test(build, resque_immediate_exact);
	tcase_add_test(build, resque_scheduled_exact);
	tcase_add_test(build, several_jobs_share_a_buffer);
	tcase_add_test(build, format_epoch);
	suite_add_tcase(s, build);

	tcase_add_test(reject, resque_validates_options);
	tcase_add_test(reject, rejects_args_shape);
	tcase_add_test(reject, rejects_nul_in_args);
	tcase_add_test(reject, rejects_bad_class_and_queue);
	tcase_add_test(reject, rejects_null_class_and_queue);
	tcase_add_test(reject, sidekiq_and_resque_take_any_queue_name);
	tcase_add_test(reject, rejects_bad_options);
	tcase_add_test(reject, rejects_reserved_option_keys);
	tcase_add_test(reject, rejects_bad_jid);
	tcase_add_test(reject, rejects_unfit_columns);
	tcase_add_test(reject, rejects_over_max_job_bytes);
	tcase_add_test(reject, null_reason_is_allowed);
	suite_add_tcase(s, reject);

	tcase_add_test(hostile, rejects_huge_args);
	tcase_add_test(hostile, rejects_deep_nesting);
	tcase_add_test(hostile, rejects_nesting_consumers_cannot_read);
	tcase_add_test(hostile, random_rows_never_break_the_payload);
	/* sanitizer builds are slow on the megabyte and 20000-row cases */
	tcase_set_timeout(hostile, 120);
	suite_add_tcase(s, hostile);
	return s;
}
