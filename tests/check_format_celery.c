/* The celery format: kombu's envelope key for key, the body, eta, saferepr, priority lists, rejects. */
#include "fmacros.h"

#include <check.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch.h"
#include "formats.h"
#include "job.h"
#include "job_build.h"
#include "pyrepr.h"
#include "redis_cmds.h"
#include "suites.h"
#include "support/job_rows.h"
#include "support/celery_body.h"

#define UUID "0b7e3c7e-8a52-4d1c-9f0e-3c2f6a1b9d44"
#define CREATED_US 1700000000123456LL
#define NOW_US 1700000001500000LL

static struct job_row celery_row(const char *args, const char *options)
{
	struct job_row r = job_row_of("celery", "shop.tasks.send_receipt", args, options);

	r.created_at_us = CREATED_US;
	r.uuid = UUID;
	r.uuid_len = strlen(UUID);
	return r;
}

static struct job_opts celery_opts(void)
{
	struct job_opts o = { .format = FORMAT_CELERY, .max_job_bytes = 1048576, .now_us = NOW_US };

	return o;
}

/* Builds one job that must succeed and parses the envelope. */
static json_t *build(const struct job_row *r, const struct job_opts *o)
{
	char reason[JOB_REASON_SIZE];
	struct job_out out;
	struct buf b;
	json_t *v;

	buf_init(&b);
	ck_assert_int_eq(job_build(r, o, &b, &out, reason, sizeof(reason)), 0);
	v = json_loadb(b.data + out.off, out.len, 0, NULL);
	ck_assert_ptr_nonnull(v);
	buf_free(&b);
	return v;
}

static void expect_reject(const struct job_row *r, const char *reason_part)
{
	struct job_opts o = celery_opts();
	char reason[JOB_REASON_SIZE];
	struct job_out out;
	struct buf b;

	buf_init(&b);
	ck_assert_int_eq(job_build(r, &o, &b, &out, reason, sizeof(reason)), JOB_REJECT);
	ck_assert_msg(strstr(reason, reason_part), "reason \"%s\" lacks \"%s\"", reason, reason_part);
	ck_assert_uint_eq(b.len, 0);
	buf_free(&b);
}

static const char *str_at(const json_t *obj, const char *path1, const char *key)
{
	const json_t *o = path1 ? json_object_get(obj, path1) : obj;

	ck_assert_ptr_nonnull(json_object_get(o, key));
	return json_string_value(json_object_get(o, key));
}

/* Whether needle occurs in the n bytes at p (memmem is not POSIX). */
static bool contains(const void *p, size_t n, const char *needle)
{
	size_t k = strlen(needle);

	for (size_t i = 0; i + k <= n; i++)
		if (memcmp((const char *)p + i, needle, k) == 0)
			return true;
	return false;
}

/* json_equal against a value made for the comparison, which it frees. */
static bool equal_new(const json_t *v, json_t *want)
{
	bool eq = json_equal(v, want);

	json_decref(want);
	return eq;
}

static void assert_keys(const json_t *obj, const char *const *keys)
{
	size_t n = 0;

	for (; keys[n]; n++)
		ck_assert_msg(json_object_get(obj, keys[n]), "missing key %s", keys[n]);
	ck_assert_uint_eq(json_object_size(obj), n);
}

START_TEST(envelope_keys_and_values)
{
	static const char *const top[] = { "body", "content-encoding", "content-type", "headers", "properties", NULL };
	static const char *const headers[] = { "lang",          "task",      "id",          "shadow",     "eta",
					       "expires",       "group",     "group_index", "retries",    "timelimit",
					       "root_id",       "parent_id", "argsrepr",    "kwargsrepr", "origin",
					       "ignore_result", NULL };
	static const char *const props[] = { "correlation_id", "reply_to",      "delivery_mode", "delivery_info",
					     "priority",       "body_encoding", "delivery_tag",  NULL };
	struct job_row r = celery_row("[1, \"two\"]", "{\"kwargs\": {\"x\": 1}}");
	struct job_opts o = celery_opts();
	json_t *env = build(&r, &o), *h = json_object_get(env, "headers"), *p = json_object_get(env, "properties");

	assert_keys(env, top);
	assert_keys(h, headers);
	assert_keys(p, props);
	ck_assert_str_eq(str_at(env, NULL, "content-type"), "application/json");
	ck_assert_str_eq(str_at(env, NULL, "content-encoding"), "utf-8");
	ck_assert_str_eq(str_at(h, NULL, "lang"), "py");
	ck_assert_str_eq(str_at(h, NULL, "task"), "shop.tasks.send_receipt");
	ck_assert_str_eq(str_at(h, NULL, "id"), UUID);
	ck_assert_str_eq(str_at(h, NULL, "root_id"), UUID);
	ck_assert_str_eq(str_at(h, NULL, "origin"), "stagedrain");
	ck_assert(json_is_null(json_object_get(h, "eta")) && json_is_null(json_object_get(h, "expires")));
	ck_assert(json_is_null(json_object_get(h, "shadow")) && json_is_null(json_object_get(h, "group")));
	ck_assert(json_is_null(json_object_get(h, "group_index")) && json_is_null(json_object_get(h, "parent_id")));
	ck_assert(json_is_false(json_object_get(h, "ignore_result")));
	ck_assert_int_eq(json_integer_value(json_object_get(h, "retries")), 0);
	ck_assert(equal_new(json_object_get(h, "timelimit"), json_pack("[nn]")));
	ck_assert_str_eq(str_at(h, NULL, "argsrepr"), "[1, 'two']");
	ck_assert_str_eq(str_at(h, NULL, "kwargsrepr"), "{'x': 1}");
	ck_assert_str_eq(str_at(p, NULL, "correlation_id"), UUID);
	ck_assert_str_eq(str_at(p, NULL, "delivery_tag"), UUID);
	ck_assert_str_eq(str_at(p, NULL, "reply_to"), "");
	ck_assert_str_eq(str_at(p, NULL, "body_encoding"), "base64");
	ck_assert_int_eq(json_integer_value(json_object_get(p, "delivery_mode")), 2);
	ck_assert_int_eq(json_integer_value(json_object_get(p, "priority")), 0);
	ck_assert(equal_new(json_object_get(p, "delivery_info"),
			    json_pack("{s:s,s:s}", "exchange", "", "routing_key", "celery")));
	json_decref(env);
}
END_TEST

START_TEST(body_is_args_kwargs_embed)
{
	struct job_row r = celery_row("[0.1, 123456789012345678901234567890, {\"a\": [true, null]}]",
				      "{\"kwargs\": {\"n\": 0.30000000000000004, \"s\": \"\\u00e9/\"}}");
	struct job_opts o = celery_opts();
	json_t *env = build(&r, &o), *body = celery_body(env, JSON_DECODE_INT_AS_REAL);
	const char *b64 = str_at(env, NULL, "body");
	unsigned char raw[512];
	int n = EVP_DecodeBlock(raw, (const unsigned char *)b64, (int)strlen(b64));

	ck_assert(json_is_array(body) && json_array_size(body) == 3);
	ck_assert(equal_new(json_array_get(body, 2),
			    json_pack("{s:n,s:n,s:n,s:n}", "callbacks", "errbacks", "chain", "chord")));
	/* Numbers as the row wrote them, never re-encoded. */
	ck_assert(contains(raw, (size_t)n, "[0.1,123456789012345678901234567890,{\"a\":[true,null]}]"));
	ck_assert(contains(raw, (size_t)n, "{\"n\":0.30000000000000004,\"s\":\"\\u00e9/\"}"));
	json_decref(body);
	json_decref(env);
}
END_TEST

START_TEST(body_base64_every_length)
{
	static const char *const args[] = { "[]", "[1]", "[12]", "[123]", "[\"\\u00ff\\u00fe\"]" };

	for (size_t i = 0; i < sizeof(args) / sizeof(args[0]); i++) {
		struct job_row r = celery_row(args[i], NULL);
		struct job_opts o = celery_opts();
		json_t *env = build(&r, &o), *body = celery_body(env, JSON_DECODE_INT_AS_REAL),
		       *want = json_loads(args[i], JSON_DECODE_INT_AS_REAL, NULL);

		ck_assert(json_equal(json_array_get(body, 0), want));
		ck_assert(equal_new(json_array_get(body, 1), json_object()));
		json_decref(want);
		json_decref(body);
		json_decref(env);
	}
}
END_TEST

START_TEST(eta_iso_with_offset)
{
	struct job_row r = celery_row("[]", NULL);
	struct job_opts o = celery_opts();
	json_t *env;

	r.has_run_at = true;
	r.run_at_us = NOW_US + 3000007; /* 2023-11-14T22:13:24.500007Z */
	env = build(&r, &o);
	ck_assert_str_eq(str_at(env, "headers", "eta"), "2023-11-14T22:13:24.500007+00:00");
	json_decref(env);
	r.run_at_us = 1700000100000000LL; /* whole second: still six digits */
	env = build(&r, &o);
	ck_assert_str_eq(str_at(env, "headers", "eta"), "2023-11-14T22:15:00.000000+00:00");
	json_decref(env);
	r.run_at_us = NOW_US - 1; /* due: immediate */
	env = build(&r, &o);
	ck_assert(json_is_null(json_object_get(json_object_get(env, "headers"), "eta")));
	json_decref(env);
}
END_TEST

static void expect_repr(const char *args, const char *want)
{
	struct job_row r = celery_row(args, NULL);
	struct job_opts o = celery_opts();
	json_t *env = build(&r, &o);

	ck_assert_str_eq(str_at(env, "headers", "argsrepr"), want);
	json_decref(env);
}

/* Expected strings printed by celery.utils.saferepr.saferepr(json.loads(args) or (), 1024). */
START_TEST(argsrepr_like_saferepr)
{
	expect_repr("[]", "()");
	expect_repr("[1, \"two\"]", "[1, 'two']");
	expect_repr("[true, false, null]", "[True, False, None]");
	expect_repr("[[[[1]]], {\"a\": {\"b\": {\"c\": {}}}}]", "[[[[...]]], {'a': {'b': {...}}}]");
	expect_repr("[{\"k\": \"v\", \"n\": [1, {\"deep\": [1]}]}]", "[{'k': 'v', 'n': [1, {...}]}]");
	/* Only ' is escaped; newlines and backslashes stay raw. */
	expect_repr("[\"it's\", \"a\\nb\", \"back\\\\slash\", \"\\u00e9\\ud83d\\ude00\"]",
		    "['it\\'s', 'a\nb', 'back\\slash', '\xc3\xa9\xf0\x9f\x98\x80']");
	expect_repr("[0.1, 1.0, 1e16, 1e15, 1.5e-7, 0.0001, 0.00001, -0, -0.0, "
		    "123456789012345678901234567890, 2.5E+3, 100.0, 1e22, 5e-324]",
		    "[0.1, 1.0, 1e+16, 1000000000000000.0, 1.5e-07, 0.0001, 1e-05, 0, -0.0, "
		    "123456789012345678901234567890, 2500.0, 100.0, 1e+22, 5e-324]");
}
END_TEST

/* Python's repr of each double (its bits), one line each, from /usr/bin/python3
 * (tests/deps.sh installs it): the reference, not a copy of its algorithm. */
static char **python_reprs(const uint64_t *bits, size_t n)
{
	static const char script[] = "import struct, sys; print(\"\\n\".join(repr(struct.unpack(\"<d\", "
				     "struct.pack(\"<Q\", int(l, 16)))[0]) for l in sys.stdin))";
	char path[] = "/tmp/stagedrain-reprs-XXXXXX", cmd[512], *line = NULL, **out = calloc(n, sizeof(char *));
	const char *py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
	int fd = mkstemp(path);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL, *p;
	size_t cap = 0, i = 0;
	ssize_t len;

	ck_assert_ptr_nonnull(out);
	ck_assert_ptr_nonnull(f);
	for (size_t k = 0; k < n; k++)
		fprintf(f, "%016llx\n", (unsigned long long)bits[k]);
	ck_assert_int_eq(fclose(f), 0);
	snprintf(cmd, sizeof(cmd), "%s -c '%s' < %s", py, script, path);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	while (i < n && (len = getline(&line, &cap, p)) > 0) {
		line[len - 1] = '\0';
		out[i++] = strdup(line);
	}
	free(line);
	ck_assert_msg(pclose(p) == 0 && i == n, "python3 gave %zu of %zu reprs (tests/deps.sh installs python3)", i, n);
	unlink(path);
	return out;
}

/* argsrepr of [x], x written with 17 digits (exact), against Python's repr;
 * frees the reprs. Reports the first few that differ. */
static void expect_python_floats(const uint64_t *bits, size_t n)
{
	char **want = python_reprs(bits, n), first[512] = "";
	size_t bad = 0;
	struct buf b;

	buf_init(&b);
	for (size_t i = 0; i < n; i++) {
		double d;
		char text[40];
		memcpy(&d, &bits[i], sizeof(d));
		snprintf(text, sizeof(text), "[%.16e]", d);
		payload_rewind(&b, 0);
		ck_assert_int_eq(pyrepr_saferepr(&b, span_of(text, strlen(text))), 0);
		if (b.len != strlen(want[i]) + 2 || memcmp(b.data + 1, want[i], b.len - 2) != 0) {
			if (bad++ < 3)
				snprintf(first + strlen(first), sizeof(first) - strlen(first), " %s gave %s;", want[i],
					 b.data);
		}
		free(want[i]);
	}
	free(want);
	buf_free(&b);
	ck_assert_msg(bad == 0, "%zu of %zu floats differ from python's repr:%s", bad, n, first);
}

/* Every power of two, 2^-1074 (the least subnormal) to 2^1023. */
START_TEST(float_repr_powers_of_two)
{
	uint64_t bits[2098];
	size_t n = 0;

	for (int k = -1074; k <= 1023; k++)
		bits[n++] = k < -1022 ? 1ULL << (k + 1074) : (uint64_t)(k + 1023) << 52;
	expect_python_floats(bits, n);
}
END_TEST

/* 100,000 finite doubles from random bit patterns (a fixed seed: a failure repeats). */
START_TEST(float_repr_random_doubles)
{
	enum { N = 100000 };
	uint64_t *bits = malloc(N * sizeof(*bits)), x = 0x9e3779b97f4a7c15ULL;
	size_t n = 0;

	ck_assert_ptr_nonnull(bits);
	while (n < N) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
		if ((x >> 52 & 0x7ff) != 0x7ff)
			bits[n++] = x;
	}
	expect_python_floats(bits, n);
	free(bits);
}
END_TEST

/* head, n copies of item joined by sep, tail (the caller frees it). */
static char *repeat(const char *head, const char *item, int n, const char *sep, const char *tail)
{
	struct buf b;

	buf_init(&b);
	ck_assert_int_eq(buf_puts(&b, head), 0);
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(buf_printf(&b, "%s%s", i ? sep : "", item), 0);
	ck_assert_int_eq(buf_puts(&b, tail), 0);
	return b.data;
}

/* saferepr's 1024-character cut, with its quirks: the token at the cut is
 * dropped (a closing bracket too), then only open containers close. */
static void expect_cut(char *args, size_t len, const char *tail)
{
	struct job_row r = celery_row(args, NULL);
	struct job_opts o = celery_opts();
	json_t *env = build(&r, &o);
	const char *s = str_at(env, "headers", "argsrepr");

	ck_assert_uint_eq(strlen(s), len);
	ck_assert_str_eq(s + len - strlen(tail), tail);
	json_decref(env);
	free(args);
}

START_TEST(argsrepr_cut_at_1024)
{
	char *x = malloc(1200), *a98;

	memset(x, 'x', 1100);
	x[1100] = '\0';
	expect_cut(repeat("[\"", x, 1, "", "\"]"), 1034, "xxx...', ...");
	expect_cut(repeat("[\"", "word ", 300, "", "\"]"), 1030, "d word word word word word word...', ...");
	expect_cut(repeat("[", "1234567", 200, ", ", "]"), 1033, "34567, 1234567, 1234567, 123456..., ...]");
	expect_cut(repeat("[", "[1, 2]", 150, ", ", "]"), 1032, " [1, 2], [1, 2], [1, 2], [1, 2], , ...]]");
	memset(x, 'a', 98);
	x[98] = '\0';
	a98 = repeat("\"", x, 1, "", "\"");
	expect_cut(repeat("[", a98, 10, ", ", ", [1, 2], 3]"), 1032, "aaaaaa', [1, , ...]]");
	free(a98);
	memset(x, 'b', 1019);
	x[1019] = '\0';
	expect_cut(repeat("[[\"", x, 1, "", "\"], 1]"), 1030, "bbbbb'], ...]");
	memset(x, 'c', 1020);
	x[1020] = '\0';
	expect_cut(repeat("[\"", x, 1, "", "\", [5, 6]]"), 1032, "ccccc', , ...]]");
	memset(x, 'k', 1019);
	x[1019] = '\0';
	expect_cut(repeat("[{\"", x, 1, "", "\": 1}]"), 1032, "kkkkk': , ...}]");
	free(x);
}
END_TEST

START_TEST(kwargsrepr_and_origin)
{
	struct job_row r = celery_row("[1]", "{\"kwargs\": {\"x\": 1, \"y\": \"z\", \"it's\": [1, [2, [3]]]}}");
	struct job_opts o = celery_opts();
	json_t *env;

	o.origin = "stagedrain@web1";
	env = build(&r, &o);
	ck_assert_str_eq(str_at(env, "headers", "kwargsrepr"), "{'x': 1, 'y': 'z', 'it\\'s': [1, [2, [...]]]}");
	ck_assert_str_eq(str_at(env, "headers", "origin"), "stagedrain@web1");
	json_decref(env);
	r = celery_row("[1]", "{\"kwargs\": {}}");
	env = build(&r, &o);
	ck_assert_str_eq(str_at(env, "headers", "kwargsrepr"), "{}");
	json_decref(env);
}
END_TEST

/* jsonb holds numbers of any size: in args and kwargs each arrives as
 * written; argsrepr and kwargsrepr are what json.loads makes of them
 * (ints, inf, 0.0). Options the relay reads refuse them by name. */
START_TEST(numbers_past_64_bits_copied_as_written)
{
	const char *big = job_rows_big_numbers(), *repr = job_rows_big_numbers_repr();
	char args[1200], options[1200], want[2600];
	struct job_row r;
	struct job_opts o = celery_opts();
	json_t *env;
	char *body;
	size_t len;

	snprintf(args, sizeof(args), "[%s]", big);
	snprintf(options, sizeof(options), "{\"kwargs\": {\"n\": 18446744073709551616, \"all\": [%s]}}", big);
	r = celery_row(args, options);
	env = build(&r, &o);
	body = celery_body_text(env, &len);
	ck_assert_ptr_nonnull(body);
	snprintf(want, sizeof(want), "[[%s],{\"n\":18446744073709551616,\"all\":[%s]},{\"callbacks\"", big, big);
	ck_assert_msg(strncmp(body, want, strlen(want)) == 0, "body %s", body);
	ck_assert_str_eq(str_at(env, "headers", "argsrepr"), repr);
	snprintf(want, sizeof(want), "{'n': 18446744073709551616, 'all': %s}", repr);
	ck_assert_str_eq(str_at(env, "headers", "kwargsrepr"), want);
	free(body);
	json_decref(env);
	r = celery_row("[]", "{\"priority\": 18446744073709551616}");
	expect_reject(&r, "options key \"priority\" is not an integer from 0 to 9");
	r = celery_row("[]", "{\"priority\": -18446744073709551625}");
	expect_reject(&r, "options key \"priority\" is not an integer from 0 to 9");
	r = celery_row("[]", "{\"expires\": 1e400}");
	expect_reject(&r, "options key \"expires\" is not seconds");
	r = celery_row("[]", "{\"expires\": 18446744073709551616}");
	expect_reject(&r, "options key \"expires\" is not seconds");
}
END_TEST

/* Numbers as json.loads reads them: an exponent or fraction makes a float. */
START_TEST(argsrepr_number_spellings)
{
	expect_repr("[1E400, -1e400, 1.5e-400, -1.5e-400, 1.0e2, -0, 0.5E-3, 1e0]",
		    "[inf, -inf, 0.0, -0.0, 100.0, 0, 0.0005, 1.0]");
}
END_TEST

START_TEST(expires_options)
{
	struct job_row r = celery_row("[]", "{\"expires\": 60}");
	struct job_opts o = celery_opts();
	json_t *env = build(&r, &o);

	/* Seconds count from staging (created_at), the TTL from now. */
	ck_assert_str_eq(str_at(env, "headers", "expires"), "2023-11-14T22:14:20.123456+00:00");
	ck_assert_str_eq(str_at(env, "properties", "expiration"), "58623");
	json_decref(env);
	r = celery_row("[]", "{\"expires\": \"2023-11-14T23:00:00+01:00\"}");
	env = build(&r, &o);
	ck_assert_str_eq(str_at(env, "headers", "expires"), "2023-11-14T22:00:00.000000+00:00");
	ck_assert_str_eq(str_at(env, "properties", "expiration"), "0"); /* 22:00Z is past */
	json_decref(env);
	r = celery_row("[]", "{\"expires\": \"2023-11-15T00:00:00.5Z\"}");
	env = build(&r, &o);
	ck_assert_str_eq(str_at(env, "properties", "expiration"), "6399000");
	/* Written back with six digits: Celery would read ".5" as 5 microseconds. */
	ck_assert_str_eq(str_at(env, "headers", "expires"), "2023-11-15T00:00:00.500000+00:00");
	json_decref(env);
}
END_TEST

START_TEST(rejects_with_reasons)
{
	struct job_row r = celery_row("[]", "{\"kwargs\": [1]}");

	expect_reject(&r, "kwargs is not a json object (got array)");
	r = celery_row("[]", "{\"kwargs\": \"x\"}");
	expect_reject(&r, "kwargs is not a json object (got string)");
	r = celery_row("[]", "{\"kwarg\": {}}");
	expect_reject(&r, "options key \"kwarg\" is not one of kwargs, priority, expires");
	r = celery_row("[]", "{\"priority\": 10}");
	expect_reject(&r, "\"priority\" is not an integer from 0 to 9");
	r = celery_row("[]", "{\"priority\": 1.0}");
	expect_reject(&r, "\"priority\" is not an integer from 0 to 9");
	r = celery_row("[]", "{\"expires\": \"2023-11-14T23:00:00\"}");
	expect_reject(&r, "\"expires\" is not seconds (0 or more) or an iso 8601 time with an offset");
	r = celery_row("[]", "{\"expires\": \"2023-02-31T23:00:00Z\"}");
	expect_reject(&r, "iso 8601");
	r = celery_row("[]", "{\"expires\": -1}");
	expect_reject(&r, "iso 8601");
	r = celery_row("[]", "{\"activejob\": true}");
	expect_reject(&r, "activejob");
	r = celery_row("[]", NULL);
	r.uuid = NULL;
	r.uuid_len = 0;
	expect_reject(&r, "uuid is not a uuid");
	r = celery_row("[]", NULL);
	r.uuid = "0B7E3C7E-8A52-4D1C-9F0E-3C2F6A1B9D4";
	r.uuid_len = 35;
	expect_reject(&r, "uuid is not a uuid");
	r = celery_row("[]", NULL);
	r.has_run_at = true;
	r.run_at_us = 253402300800000000LL; /* year 10000 */
	expect_reject(&r, "year 9999");
}
END_TEST

static bool arg_has(const struct redis_cmds *c, size_t k, size_t a, const char *needle)
{
	size_t len;
	const char *p = cmds_arg(c, k, a, &len);

	return contains(p, len, needle);
}

/* A row of queue q. */
static struct job_row queue_row(const char *q)
{
	struct job_row r = celery_row("[]", NULL);

	r.queue = q;
	r.queue_len = strlen(q);
	return r;
}

/*
 * kombu's Redis transport (kombu/transport/redis.py) keeps a hash
 * "unacked", a zset "unacked_index", a lock "unacked_mutex" and a set
 * "_kombu.binding.<exchange>" per exchange, and names queue q's priority
 * lists q\x06\x16<n>: a queue named so would clobber them.
 */
START_TEST(rejects_queues_that_are_kombus_keys)
{
	static const char *const bad[][2] = {
		{ "unacked",
		  "queue \"unacked\" would clobber celery's key \"unacked\" (kombu's hash of unacked tasks)" },
		{ "unacked_index", "celery's key \"unacked_index\" (kombu's index of unacked tasks)" },
		{ "unacked_mutex", "celery's key \"unacked_mutex\" (kombu's lock on unacked tasks)" },
		{ "_kombu.binding.celery",
		  "queue \"_kombu.binding.celery\" would clobber celery's key \"_kombu.binding.celery\" (kombu's "
		  "bindings of exchange \"celery\")" },
		{ "_kombu.binding.celery.pidbox", "(kombu's bindings of exchange \"celery.pidbox\")" },
		{ "_kombu.binding.celeryev", "(kombu's bindings of exchange \"celeryev\")" },
		{ "_kombu.binding.", "(kombu's bindings of exchange \"\")" },
		{ "celery\x06\x16"
		  "3",
		  "queue \"celery??3\" would clobber celery's keys \"celery\\x06\\x16<n>\" (kombu's priority lists "
		  "of queue \"celery\")" },
		{ "a\x06\x16", "celery's keys \"a\\x06\\x16<n>\" (kombu's priority lists of queue \"a\")" },
		{ "\x06\x16x\x06\x16", "celery's keys \"\\x06\\x16<n>\" (kombu's priority lists of queue \"\")" },
	};
	/* Names near those, which kombu keeps nothing at. */
	static const char *const good[] = {
		"unacked2",        "Unacked",        "my_unacked",        "unacked_",
		"unacked_indexes", "_kombu.binding", "_kombu.bindings.x", "kombu.binding.celery",
		"celery.pidbox",   "x\x06",          "x\x16\x06",         "x\x06x\x16",
	};
	struct job_opts o = celery_opts();

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct job_row r = queue_row(bad[i][0]);
		expect_reject(&r, bad[i][1]);
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct job_row r = queue_row(good[i]);
		json_decref(build(&r, &o));
	}
}
END_TEST

/* A long name is shown by its first 40 bytes: the whole reason fits its
 * column, the key it would clobber included. */
START_TEST(refused_long_queue_names_are_shown_in_part)
{
	char q[400], x40[41], want[JOB_REASON_SIZE];
	struct job_row r;

	memset(q, 'x', sizeof(q));
	memcpy(q + 300,
	       "\x06\x16"
	       "3",
	       3);
	q[sizeof(q) - 1] = '\0';
	memset(x40, 'x', 40);
	x40[40] = '\0';
	snprintf(want, sizeof(want),
		 "queue \"%s...\" would clobber celery's keys \"%s...\\x06\\x16<n>\" (kombu's priority lists of "
		 "queue \"%s...\")",
		 x40, x40, x40);
	r = queue_row(q);
	expect_reject(&r, want);
}
END_TEST

/* kombu's _q_for_pri: 0-2 the queue itself, 3-5, 6-8 and 9 <queue>\x06\x16<step>. */
/* What the client library stages: the headers and body Celery built, wrapped in kombu's envelope as written. */
#define BUILT_HEADERS                                                                                                  \
	"{\"lang\": \"py\", \"task\": \"shop.tasks.send_receipt\", \"id\": \"" UUID "\", \"shadow\": null,"            \
	" \"eta\": \"2023-11-14T22:13:25.000000+00:00\", \"expires\": null, \"group\": null, \"group_index\": null,"   \
	" \"retries\": 0, \"timelimit\": [30, null], \"root_id\": \"" UUID "\", \"parent_id\": null,"                  \
	" \"argsrepr\": \"(1,)\", \"kwargsrepr\": \"{'at': datetime.datetime(2023, 1, 1, 0, 0)}\","                    \
	" \"origin\": \"gen1@app\", \"ignore_result\": false, \"stamped_headers\": null}"
#define BUILT_BODY                                                                                                     \
	"[[1], {\"at\": \"2023-01-01T00:00:00\"}, {\"callbacks\": [{\"task\": \"shop.tasks.next\", \"args\": []}],"    \
	" \"errbacks\": null, \"chain\": null, \"chord\": null}]"

START_TEST(serialized_message_is_wrapped_as_built)
{
	static const char *const top[] = { "body", "content-encoding", "content-type", "headers", "properties", NULL };
	struct job_row r = celery_row(BUILT_BODY, "{\"serialized\": true, \"headers\": " BUILT_HEADERS
						  ", \"priority\": 6, \"reply_to\": \"a8c1-reply\"}");
	struct job_opts o = celery_opts();
	json_t *env = build(&r, &o), *body = celery_body(env, 0);
	json_error_t err;
	json_t *want_headers = json_loads(BUILT_HEADERS, 0, &err), *want_body = json_loads(BUILT_BODY, 0, &err);

	assert_keys(env, top);
	ck_assert(json_equal(json_object_get(env, "headers"), want_headers));
	ck_assert(json_equal(body, want_body));
	ck_assert_str_eq(str_at(env, "properties", "reply_to"), "a8c1-reply");
	ck_assert_str_eq(str_at(env, "properties", "correlation_id"), UUID);
	ck_assert_str_eq(str_at(env, "properties", "delivery_tag"), UUID);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(env, "properties"), "priority")), 6);
	ck_assert_str_eq(str_at(json_object_get(env, "properties"), "delivery_info", "routing_key"), "celery");
	json_decref(want_headers);
	json_decref(want_body);
	json_decref(body);
	json_decref(env);
}
END_TEST

START_TEST(serialized_rejects_with_reasons)
{
	static const struct {
		const char *args, *options, *reason;
	} cases[] = {
		{ BUILT_BODY, "{\"serialized\": true}", "headers\" is not Celery's headers object" },
		{ BUILT_BODY, "{\"serialized\": true, \"headers\": []}", "headers\" is not Celery's headers object" },
		{ BUILT_BODY, "{\"serialized\": true, \"headers\": {\"task\": \"shop.tasks.send_receipt\"}}",
		  "headers \"id\" is not the row's uuid" },
		{ BUILT_BODY,
		  "{\"serialized\": true, \"headers\": {\"id\": \"" UUID "\", \"task\": \"shop.tasks.other\"}}",
		  "headers \"task\" is not the row's job_class" },
		{ "[[1], {}]", "{\"serialized\": true, \"headers\": " BUILT_HEADERS "}",
		  "is not the body [args, kwargs, embed]" },
		{ "[[1], [], null]", "{\"serialized\": true, \"headers\": " BUILT_HEADERS "}",
		  "is not the body [args, kwargs, embed]" },
		{ BUILT_BODY, "{\"serialized\": true, \"headers\": " BUILT_HEADERS ", \"kwargs\": {}}",
		  "options key \"kwargs\" is not one of serialized, headers, priority, reply_to" },
		{ BUILT_BODY, "{\"serialized\": true, \"headers\": " BUILT_HEADERS ", \"reply_to\": 1}",
		  "options key \"reply_to\" is not a string" },
		{ BUILT_BODY, "{\"serialized\": \"yes\"}", "options key \"serialized\" is not true or false" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct job_row r = celery_row(cases[i].args, cases[i].options);
		expect_reject(&r, cases[i].reason);
	}
}
END_TEST

START_TEST(priority_lists)
{
	static const char *const opts[] = { "{\"priority\": 0}", "{\"priority\": 5}", NULL,
					    "{\"priority\": 3}", "{\"priority\": 9}", "{\"priority\": 8}",
					    "{\"priority\": 2}" };
	struct job_opts o = celery_opts();
	struct redis_cmds c;
	struct batch b;
	char uuids[7][37];
	size_t len;
	const char *a;

	batch_init(&b);
	cmds_init(&c);
	ck_assert_int_eq(batch_reset(&b, 7), 0);
	for (int i = 0; i < 7; i++) {
		struct job_row r = celery_row("[]", opts[i]);
		snprintf(uuids[i], sizeof(uuids[i]), "0b7e3c7e-8a52-4d1c-9f0e-3c2f6a1b9d4%c", (char)('0' + i));
		r.uuid = uuids[i];
		r.id = i + 1;
		if (i == 6)
			r.queue = "celery", r.has_run_at = true, r.run_at_us = NOW_US + 5000000;
		ck_assert_int_eq(job_build_add(&b, &r, &o, 0), 0);
	}
	ck_assert_uint_eq(b.njobs, 7);
	ck_assert_int_eq(format_celery.commands(&c, &b, "ns:"), 0);
	ck_assert_uint_eq(c.ncmds, 4);
	a = cmds_arg(&c, 0, 1, &len);
	ck_assert_int_eq(memcmp(a, "ns:celery", len), 0);
	ck_assert_uint_eq(c.cmds[0].argc, 5); /* priorities 0, none, 2 (scheduled too), in id order */
	ck_assert(arg_has(&c, 0, 2, "9d40"));
	ck_assert(arg_has(&c, 0, 3, "9d42"));
	ck_assert(arg_has(&c, 0, 4, "9d46"));
	a = cmds_arg(&c, 1, 1, &len);
	ck_assert_uint_eq(len, 12);
	ck_assert_int_eq(memcmp(a,
				"ns:celery\x06\x16"
				"3",
				len),
			 0);
	ck_assert_uint_eq(c.cmds[1].argc, 4); /* 5 then 3 */
	ck_assert(arg_has(&c, 1, 2, "\"priority\":5"));
	a = cmds_arg(&c, 2, 1, &len);
	ck_assert_int_eq(memcmp(a,
				"ns:celery\x06\x16"
				"9",
				len),
			 0);
	a = cmds_arg(&c, 3, 1, &len);
	ck_assert_int_eq(memcmp(a,
				"ns:celery\x06\x16"
				"6",
				len),
			 0);
	for (size_t k = 0; k < c.ncmds; k++)
		ck_assert_str_eq(cmds_arg(&c, k, 0, &len), "LPUSH");
	cmds_free(&c);
	batch_free(&b);
}
END_TEST

Suite *celery_format_suite(void)
{
	Suite *s = suite_create("celery_format");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, envelope_keys_and_values);
	tcase_add_test(tc, body_is_args_kwargs_embed);
	tcase_add_test(tc, body_base64_every_length);
	tcase_add_test(tc, eta_iso_with_offset);
	tcase_add_test(tc, argsrepr_like_saferepr);
	tcase_add_test(tc, argsrepr_cut_at_1024);
	tcase_add_test(tc, float_repr_powers_of_two);
	tcase_add_test(tc, float_repr_random_doubles);
	tcase_add_test(tc, kwargsrepr_and_origin);
	tcase_add_test(tc, expires_options);
	tcase_add_test(tc, numbers_past_64_bits_copied_as_written);
	tcase_add_test(tc, argsrepr_number_spellings);
	tcase_add_test(tc, rejects_with_reasons);
	tcase_add_test(tc, priority_lists);
	tcase_add_test(tc, serialized_message_is_wrapped_as_built);
	tcase_add_test(tc, serialized_rejects_with_reasons);
	/* 100,000 reprs against python3's, slower under sanitizers */
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, rejects_queues_that_are_kombus_keys);
	tcase_add_test(tc, refused_long_queue_names_are_shown_in_part);
	suite_add_tcase(s, tc);
	return s;
}
