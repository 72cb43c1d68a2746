/* libFuzzer target for job_build: any row becomes a valid job of every format, or is rejected with a reason. */
#include "fmacros.h"

#include <stdbool.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "buf.h"
#include "job.h"
#include "job_build.h"
#include "payload.h"

/*
 * Input encoding; the committed corpus (make_corpus.sh) depends on it.
 *
 *   offset  size  meaning
 *   0       1     flags: bit 0 resque (format byte 0); bits 1-2 sidekiq_version 7, 8, 6, 9;
 *                 bit 3 has_run_at; bit 4 options NULL; bits 5-6 max_job_bytes
 *                 0 (none), the u16 below, 1 MiB, -1 (none); bit 7 empty
 *                 class/queue/jid/args passed as NULL
 *   1       2     max_job_bytes for bits 5-6 = 1 (u16, little-endian)
 *   3       8     created_at_us (i64, little-endian)
 *   11      8     run_at_us
 *   19      8     now_us
 *   27      1     bytes already in the batch buffer before the job
 *   28      1     'H' makes args huge: [args,args,...] up to byte 29 x 16 KiB
 *                 (at most 2 MiB); a magic value so that mutations rarely pay
 *                 for megabyte inputs, while the seeds that use it keep it
 *   29      1     size for 'H'
 *   30      1     format: bits 0-2 0 sidekiq or resque (by bit 0 above),
 *                 1 activejob, 2 celery, 3 laravel, 4 bullmq, 5-7 as 0; bit 3 Rails 6.1
 *                 (else 7.1); bit 4 no uuid (a NULL column)
 *   31      1     separator
 *   32      ...   class SEP queue SEP jid SEP options SEP args
 *
 * A short header reads as zeros; missing fields are empty; args is the rest.
 * The separator is part of the input so that every column can hold any byte.
 * Each column gets its own exactly-sized allocation so ASan catches overreads.
 */
#define HDR_SIZE 32
#define HUGE (2u << 20)
#define HUGE_ON 0x48

enum { F_CLASS, F_QUEUE, F_JID, F_OPTIONS, F_ARGS, F_COUNT };

#define UUID "0b8e4f1c-2a3d-4e5f-8a9b-0c1d2e3f4a5b"

static enum job_format pick_format(const uint8_t *hdr)
{
	switch (hdr[30] & 7) {
	case 1:
		return FORMAT_ACTIVEJOB;
	case 2:
		return FORMAT_CELERY;
	case 3:
		return FORMAT_LARAVEL;
	case 4:
		return FORMAT_BULLMQ;
	default:
		return hdr[0] & 0x01 ? FORMAT_RESQUE : FORMAT_SIDEKIQ;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_job: invariant violated: %s (%s)\n", what, detail);
	abort();
}

#define CHECK(cond, detail)                                                                                            \
	do {                                                                                                           \
		if (!(cond))                                                                                           \
			fail(#cond, (detail));                                                                         \
	} while (0)

static uint64_t get_le(const uint8_t *hdr, size_t off, size_t n)
{
	uint64_t v = 0;

	while (n--)
		v = (v << 8) | hdr[off + n];
	return v;
}

/* Two's complement without relying on implementation-defined conversion. */
static long long get_i64(const uint8_t *hdr, size_t off)
{
	uint64_t u = get_le(hdr, off, 8);

	return u <= INT64_MAX ? (long long)u : -(long long)(~u) - 1;
}

static char *xmalloc(size_t n)
{
	char *p = malloc(n ? n : 1);

	if (!p)
		abort();
	return p;
}

/* One column on the heap; an empty one is NULL when asked (a NULL column). */
static char *dup_field(const uint8_t *p, size_t n, bool null_if_empty)
{
	char *s;

	if (n == 0 && null_if_empty)
		return NULL;
	s = xmalloc(n);
	memcpy(s, p, n);
	return s;
}

/* [a,a,...,a]: as many copies of a as fit in size bytes, at least one. */
static char *repeat_args(const uint8_t *a, size_t n, size_t size, size_t *len)
{
	size_t unit = n + 1, rep = size / unit ? size / unit : 1, done;
	char *s;

	*len = rep * unit + 1;
	s = xmalloc(*len);
	s[0] = ',';
	memcpy(s + 1, a, n);
	/* Doubling: a few copies, not one per element, keeps megabyte inputs cheap. */
	for (done = 1; done < rep; done *= 2)
		memcpy(s + done * unit, s, (done < rep - done ? done : rep - done) * unit);
	s[0] = '[';
	s[*len - 1] = ']';
	return s;
}

/* A non-empty line of printable ASCII, terminated within the buffer. */
static bool one_line(const char *s, size_t max)
{
	size_t i;

	for (i = 0; i < max && s[i]; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return false;
	return i > 0 && i < max;
}

static bool string_is(const json_t *v, const char *p, size_t n)
{
	return json_is_string(v) && json_string_length(v) == n && (n == 0 || memcmp(json_string_value(v), p, n) == 0);
}

static size_t depth(json_t *v)
{
	size_t max = 0, d, i;
	const char *key;
	json_t *e;

	json_array_foreach(v, i, e)
	{
		if ((d = depth(e)) > max)
			max = d;
	}
	json_object_foreach(v, key, e)
	{
		if ((d = depth(e)) > max)
			max = d;
	}
	return json_is_array(v) || json_is_object(v) ? max + 1 : 0;
}

/*
 * The shape of JSON text, every number 0: jansson refuses numbers past 64
 * bits or past the doubles, which rows and payloads may hold, so this is
 * the relay's own number-blind check (numbers_kept compares their text).
 * Without JSON_DISABLE_EOF_CHECK trailing bytes fail the parse.
 */
static json_t *parse(const char *p, size_t n, size_t flags)
{
	json_error_t err;
	json_t *v;

	/* \u0000 is JSON: args and options are copied as the app wrote them. */
	if (payload_load(span_of(p, n), flags | JSON_ALLOW_NUL, &v, &err) < 0)
		abort();
	return v;
}

static bool numberish(char c)
{
	return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

/* The next number of JSON text s from *i (strings skipped), as a span. */
static bool next_number(struct span s, size_t *i, struct span *num)
{
	while (*i < s.n) {
		size_t at = *i;
		if (s.p[at] == '"') {
			*i = payload_string_end(s, at);
			continue;
		}
		if (s.p[at] != '-' && !(s.p[at] >= '0' && s.p[at] <= '9')) {
			(*i)++;
			continue;
		}
		while (*i < s.n && numberish(s.p[*i]))
			(*i)++;
		*num = span_of(s.p + at, *i - at);
		return true;
	}
	return false;
}

/* Every number of the row's text appears in the payload's text, in order
 * and as written: numbers are copied, never re-encoded. */
static bool numbers_kept(struct span col, struct span payload)
{
	struct span a, b;
	size_t i = 0, j = 0;

	while (next_number(col, &i, &a)) {
		do {
			if (!next_number(payload, &j, &b))
				return false;
		} while (b.n != a.n || memcmp(a.p, b.p, a.n) != 0);
	}
	return true;
}

/* The row's options, parsed ({} when the column is NULL). */
static json_t *row_options(const struct job_row *row)
{
	json_t *col = row->options ? parse(row->options, row->options_len, 0) : json_object();

	CHECK(json_is_object(col), "accepted options are not an object");
	return col;
}

/* The row's args, parsed: an accepted row's are an array. */
static json_t *row_args(const struct job_row *row)
{
	json_t *col = parse(row->args, row->args_len, JSON_DECODE_ANY);

	CHECK(json_is_array(col), "accepted args are not an array");
	return col;
}

static void check_resque(const struct job_row *row, const struct job_out *out, json_t *job)
{
	json_t *args = row_args(row);

	CHECK(string_is(json_object_get(job, "class"), row->job_class, row->class_len), "class differs");
	CHECK(json_equal(args, json_object_get(job, "args")), "args differ");
	if (out->scheduled)
		CHECK(string_is(json_object_get(job, "queue"), row->queue, row->queue_len), "queue differs");
	CHECK(json_object_size(job) == (out->scheduled ? 3u : 2u), "resque payload has other keys");
	json_decref(args);
}

static bool is_one_of(const char *key, const char *const *set)
{
	for (; set && *set; set++)
		if (strcmp(key, *set) == 0)
			return true;
	return false;
}

/* Sidekiq's job hash, around class (the row's, or ActiveJob's wrapper):
 * the row's queue, jid and options (but those consumed), stamps. */
static void check_sidekiq_hash(const struct job_row *row, const struct job_out *out, json_t *job, size_t extra,
			       const char *const *inner)
{
	json_t *col = row_options(row), *val;
	const char *key;
	/* class args queue jid created_at retry [enqueued_at], then each option but retry */
	size_t keys = out->scheduled ? 6 : 7;

	CHECK(string_is(json_object_get(job, "queue"), row->queue, row->queue_len), "queue differs");
	CHECK(string_is(json_object_get(job, "jid"), row->jid, row->jid_len), "jid differs");
	CHECK(json_is_number(json_object_get(job, "created_at")), "created_at is not a number");
	CHECK(out->scheduled ? !json_object_get(job, "enqueued_at")
			     : json_is_number(json_object_get(job, "enqueued_at")),
	      "enqueued_at wrong for the schedule");
	json_object_foreach(col, key, val)
	{
		if (strcmp(key, "activejob") == 0)
			continue;
		if (is_one_of(key, inner)) {
			CHECK(!json_object_get(job, key), "an option of the inner job is in the outer hash");
			continue;
		}
		CHECK(json_equal(val, json_object_get(job, key)), "an option differs");
		keys += strcmp(key, "retry") != 0;
	}
	if (!json_object_get(col, "retry"))
		CHECK(json_is_true(json_object_get(job, "retry")), "default retry missing");
	CHECK(json_object_size(job) == keys + extra, "sidekiq payload has other keys");
	json_decref(col);
}

static void check_sidekiq(const struct job_row *row, const struct job_out *out, json_t *job)
{
	json_t *args = row_args(row);

	CHECK(string_is(json_object_get(job, "class"), row->job_class, row->class_len), "class differs");
	CHECK(json_equal(args, json_object_get(job, "args")), "args differ");
	check_sidekiq_hash(row, out, job, 0, NULL);
	json_decref(args);
}

/* Whether the row's options say "serialized": true (its framework built the payload). */
static bool row_serialized(const struct job_row *row)
{
	json_t *col = row_options(row);
	bool on = json_is_true(json_object_get(col, "serialized"));

	json_decref(col);
	return on;
}

/* JobWrapper's hash: wrapped is the class; its one argument is the
 * serialized job, whose arguments are the row's args, one for one (or, staged
 * by ActiveJob itself, the row's args are [job] as they are). */
static void check_activejob(const struct job_row *row, const struct job_out *out, json_t *job)
{
	static const char *const serialized_options[] = { "serialized", NULL };
	json_t *args = row_args(row), *inner = json_array_get(json_object_get(job, "args"), 0);

	CHECK(string_is(json_object_get(job, "class"), "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper", 52),
	      "not the JobWrapper");
	CHECK(string_is(json_object_get(job, "wrapped"), row->job_class, row->class_len), "wrapped differs");
	CHECK(json_array_size(json_object_get(job, "args")) == 1 && json_is_object(inner), "args is not [job]");
	if (row_serialized(row)) {
		CHECK(json_equal(args, json_object_get(job, "args")), "serialized job_data differs");
		check_sidekiq_hash(row, out, job, 1, serialized_options);
		json_decref(args);
		return;
	}
	CHECK(string_is(json_object_get(inner, "job_class"), row->job_class, row->class_len), "job_class differs");
	CHECK(string_is(json_object_get(inner, "job_id"), row->uuid, row->uuid_len), "job_id differs");
	CHECK(json_array_size(json_object_get(inner, "arguments")) == json_array_size(args), "arguments differ");
	/* the wrapped key adds one; the consumed options are not merged */
	static const char *const inner_options[] = { "priority", "locale", "timezone", "serialized", NULL };

	check_sidekiq_hash(row, out, job, 1, inner_options);
	json_decref(args);
}

static int b64_value(char c)
{
	const char *set = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *at = c ? strchr(set, c) : NULL;

	return at ? (int)(at - set) : -1;
}

/* Decodes standard padded base64; NULL if it is not. */
static char *b64_decode(const char *s, size_t n, size_t *len)
{
	char *out = xmalloc(n);
	size_t o = 0;
	unsigned acc = 0;
	int bits = 0, v;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == '=')
			break;
		if ((v = b64_value(s[i])) < 0) {
			free(out);
			return NULL;
		}
		acc = (acc << 6) | (unsigned)v;
		if ((bits += 6) >= 8) {
			bits -= 8;
			out[o++] = (char)((acc >> bits) & 0xff);
		}
	}
	*len = o;
	return out;
}

/* kombu's envelope: headers name the task and the row's uuid; the body
 * decodes to [args, kwargs, embed]. */
static void check_celery(const struct job_row *row, json_t *job)
{
	json_t *args = row_args(row), *col = row_options(row), *headers = json_object_get(job, "headers"), *body;
	const char *text = json_string_value(json_object_get(job, "body"));
	json_t *kwargs = json_object_get(col, "kwargs");
	size_t len;
	char *raw;

	CHECK(json_is_object(headers), "no headers");
	CHECK(string_is(json_object_get(headers, "task"), row->job_class, row->class_len), "task differs");
	CHECK(string_is(json_object_get(headers, "id"), row->uuid, row->uuid_len), "id differs");
	CHECK(text != NULL, "body is not a string");
	raw = b64_decode(text, strlen(text), &len);
	CHECK(raw != NULL, "body is not base64");
	body = parse(raw, len, JSON_DECODE_ANY);
	CHECK(json_is_array(body) && json_array_size(body) == 3, "body is not [args, kwargs, embed]");
	CHECK(numbers_kept(span_of(row->args, row->args_len), span_of(raw, len)), "a number of args changed");
	if (json_is_true(json_object_get(col, "serialized"))) {
		/* Celery built it: the body is the row's args, the headers the option's. */
		CHECK(json_equal(args, body), "serialized body differs");
		CHECK(json_equal(json_object_get(col, "headers"), headers), "serialized headers differ");
	} else {
		CHECK(json_equal(args, json_array_get(body, 0)), "args differ");
		CHECK(json_is_object(json_array_get(body, 1)), "kwargs is not an object");
		if (kwargs)
			CHECK(json_equal(kwargs, json_array_get(body, 1)), "kwargs differ");
		else
			CHECK(json_object_size(json_array_get(body, 1)) == 0, "kwargs from nowhere");
	}
	json_decref(body);
	free(raw);
	json_decref(col);
	json_decref(args);
}

/* A payload the app's framework built (clients/php): the staged string, byte
 * for byte, naming the row's class and uuid, with what the worker pops. */
static void check_laravel_built(const struct job_row *row, json_t *job, struct span payload)
{
	json_t *args = row_args(row), *text = json_array_get(args, 0);

	CHECK(json_array_size(args) == 1 && json_is_string(text), "serialized args is not [string]");
	CHECK(json_string_length(text) == payload.n && memcmp(json_string_value(text), payload.p, payload.n) == 0,
	      "payload is not the staged one");
	CHECK(string_is(json_object_get(job, "displayName"), row->job_class, row->class_len), "displayName differs");
	CHECK(string_is(json_object_get(job, "uuid"), row->uuid, row->uuid_len), "uuid differs");
	CHECK(json_string_length(json_object_get(job, "job")) > 0, "job is not a non-empty string");
	CHECK(json_is_string(json_object_get(job, "id")), "id is not a string");
	CHECK(json_is_integer(json_object_get(job, "attempts")), "attempts is not an integer");
	json_decref(args);
}

/* Laravel's payload: the job string, the row's uuid, data = args. */
static void check_laravel(const struct job_row *row, json_t *job, struct span payload)
{
	json_t *args;

	if (row_serialized(row)) {
		check_laravel_built(row, job, payload);
		return;
	}
	args = row_args(row);
	CHECK(string_is(json_object_get(job, "job"), row->job_class, row->class_len), "job differs");
	CHECK(string_is(json_object_get(job, "uuid"), row->uuid, row->uuid_len), "uuid differs");
	CHECK(json_equal(args, json_object_get(job, "data")), "data differs");
	CHECK(json_number_value(json_object_get(job, "attempts")) == 0.0 &&
		      json_is_number(json_object_get(job, "attempts")),
	      "attempts is not 0");
	json_decref(args);
}

/* A number BullMQ's script reads with tonumber: all of the value, finite. */
static bool lua_number(const char *p, size_t n)
{
	char text[64], *end;
	double v;

	if (n == 0 || n >= sizeof(text))
		return false;
	memcpy(text, p, n);
	text[n] = '\0';
	v = strtod(text, &end);
	return *end == '\0' && isfinite(v);
}

/*
 * BullMQ's values, each ended by a nul: id (not empty, no nul), name (the
 * class), data (the one value of args, or {}), opts (the options object),
 * timestamp, delay and priority (numbers), lifo (0 or 1).
 */
static void check_bullmq(const struct job_row *row, struct span payload)
{
	struct span v[8];
	const char *p = payload.p, *end = payload.p + payload.n;
	json_t *args = row_args(row), *data, *opts;

	for (int i = 0; i < 8; i++) {
		const char *nul = i < 7 ? memchr(p, '\0', (size_t)(end - p)) : end;
		CHECK(nul != NULL, "fewer than eight values");
		v[i] = span_of(p, (size_t)(nul - p));
		p = nul + (i < 7);
	}
	CHECK(memchr(v[7].p, '\0', v[7].n) == NULL, "more than eight values");
	CHECK(v[0].n > 0, "empty id");
	CHECK(v[1].n == row->class_len && memcmp(v[1].p, row->job_class, v[1].n) == 0, "name differs");
	data = parse(v[2].p, v[2].n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES);
	CHECK(data != NULL, "data is not strict json");
	CHECK(json_array_size(args) == 1
		      ? json_equal(data, json_array_get(args, 0))
		      : json_array_size(args) == 0 && json_is_object(data) && json_object_size(data) == 0,
	      "data is not args' one value");
	opts = parse(v[3].p, v[3].n, JSON_REJECT_DUPLICATES);
	CHECK(opts != NULL && json_is_object(opts), "opts is not a strict json object");
	for (int i = 4; i < 7; i++)
		CHECK(lua_number(v[i].p, v[i].n), "timestamp, delay or priority is not a finite number");
	CHECK(v[7].n == 1 && (v[7].p[0] == '0' || v[7].p[0] == '1'), "lifo is not 0 or 1");
	json_decref(opts);
	json_decref(data);
	json_decref(args);
}

/* Whether the row's own options make it an ActiveJob job in a Sidekiq relay. */
static bool row_is_activejob(const struct job_row *row, enum job_format f)
{
	json_t *col = row_options(row);
	json_t *aj = json_object_get(col, "activejob");
	bool yes = aj ? json_is_true(aj) : f == FORMAT_ACTIVEJOB;

	json_decref(col);
	return yes;
}

/*
 * An accepted row: the payload is one strict JSON object with exactly the
 * format's keys, nesting no deeper than consumers read, carrying the row's
 * class, queue, ids, args and options unchanged.
 */
static void check_payload(const struct job_row *row, const struct job_opts *opts, const struct job_out *out,
			  const char *payload)
{
	/* A Laravel payload the framework built may nest as deep as PHP reads. */
	bool built = opts->format == FORMAT_LARAVEL && row_serialized(row);
	json_t *job;

	if (opts->format == FORMAT_BULLMQ) {
		check_bullmq(row, span_of(payload, out->len));
		return;
	}
	job = parse(payload, out->len, JSON_REJECT_DUPLICATES);

	if (!job)
		fprintf(stderr, "fuzz_job: payload: %.*s\n", (int)out->len, payload);
	CHECK(job != NULL, "payload is not strict json");
	CHECK(json_is_object(job), "payload is not an object");
	CHECK(depth(job) <= (built ? 511 : JOB_MAX_DEPTH), "payload nests too deep");
	CHECK(opts->format == FORMAT_CELERY ||
		      numbers_kept(span_of(row->args, row->args_len), span_of(payload, out->len)),
	      "a number of args changed");
	switch (opts->format) {
	case FORMAT_RESQUE:
		check_resque(row, out, job);
		break;
	case FORMAT_CELERY:
		check_celery(row, job);
		break;
	case FORMAT_LARAVEL:
		check_laravel(row, job, span_of(payload, out->len));
		break;
	case FORMAT_BULLMQ:
		break;
	case FORMAT_SIDEKIQ:
	case FORMAT_ACTIVEJOB:
		if (row_is_activejob(row, opts->format))
			check_activejob(row, out, job);
		else
			check_sidekiq(row, out, job);
		break;
	}
	json_decref(job);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t hdr[HDR_SIZE] = { 0 };
	const uint8_t *p = data + (size < HDR_SIZE ? size : HDR_SIZE), *end = data + size, *sep;
	char *col[F_COUNT], prefix[256], reason[JOB_REASON_SIZE];
	size_t len[F_COUNT], prefix_len, i;
	struct job_row row = { 0 };
	struct job_opts opts = { 0 };
	struct job_out out;
	struct buf b;
	bool nulls;
	int rc;

	memcpy(hdr, data, (size_t)(p - data));
	nulls = hdr[0] & 0x80;
	for (i = 0; i < F_COUNT; i++) {
		sep = i < F_ARGS ? memchr(p, hdr[31], (size_t)(end - p)) : NULL;
		len[i] = (size_t)((sep ? sep : end) - p);
		if (i == F_ARGS && hdr[28] == HUGE_ON)
			col[i] = repeat_args(p, len[i], hdr[29] < HUGE >> 14 ? (size_t)hdr[29] << 14 : HUGE, &len[i]);
		else if (i == F_OPTIONS)
			col[i] = hdr[0] & 0x10 ? NULL : dup_field(p, len[i], false); /* "" is not {} */
		else
			col[i] = dup_field(p, len[i], nulls);
		p = sep ? sep + 1 : end;
	}
	row.id = 1;
	row.job_class = col[F_CLASS];
	row.class_len = len[F_CLASS];
	row.queue = col[F_QUEUE];
	row.queue_len = len[F_QUEUE];
	row.jid = col[F_JID];
	row.jid_len = len[F_JID];
	row.options = col[F_OPTIONS];
	row.options_len = col[F_OPTIONS] ? len[F_OPTIONS] : 0;
	row.args = col[F_ARGS];
	row.args_len = len[F_ARGS];
	row.created_at_us = get_i64(hdr, 3);
	row.has_run_at = hdr[0] & 0x08;
	row.run_at_us = get_i64(hdr, 11);
	opts.format = pick_format(hdr);
	opts.rails_version = hdr[30] & 0x08 ? RAILS_6_1 : RAILS_7_1;
	row.uuid = hdr[30] & 0x10 ? NULL : UUID;
	row.uuid_len = row.uuid ? strlen(UUID) : 0;
	opts.sidekiq_version = (int[]){ 7, 8, 6, 9 }[(hdr[0] >> 1) & 3];
	opts.max_job_bytes = (long[]){ 0, (long)get_le(hdr, 1, 2), 1L << 20, -1 }[(hdr[0] >> 5) & 3];
	opts.now_us = get_i64(hdr, 19);

	/* Earlier jobs of the batch, which must survive; 0 leaves the buffer unallocated. */
	prefix_len = hdr[27];
	for (i = 0; i < prefix_len; i++)
		prefix[i] = (char)('a' + i % 26);
	buf_init(&b);
	if (prefix_len && buf_append(&b, prefix, prefix_len) < 0)
		abort();
	memset(&out, 0x5a, sizeof(out));
	memset(reason, 0x5a, sizeof(reason));

	rc = job_build(&row, &opts, &b, &out, reason, sizeof(reason));

	/* -ENOMEM cannot happen at these sizes: it would mean jansson refused what job.c let through. */
	CHECK(rc == 0 || rc == JOB_REJECT, "return code");
	CHECK(b.len >= prefix_len && (prefix_len == 0 || memcmp(b.data, prefix, prefix_len) == 0),
	      "earlier jobs changed");
	CHECK(b.data == NULL || b.data[b.len] == '\0', "buffer not nul-terminated");
	if (rc == JOB_REJECT) {
		CHECK(b.len == prefix_len, "rejected row left bytes in the buffer");
		CHECK(one_line(reason, sizeof(reason)), "reason empty, unterminated or not one printable line");
	} else {
		CHECK(out.off == prefix_len && out.len > 0 && b.len == out.off + out.len, "out is wrong");
		CHECK(opts.max_job_bytes <= 0 || out.len <= (size_t)opts.max_job_bytes, "over max_job_bytes");
		CHECK(out.scheduled == (row.has_run_at && row.run_at_us > opts.now_us), "scheduled is wrong");
		CHECK(out.run_at_us == (out.scheduled ? row.run_at_us : 0), "run_at_us is wrong");
		CHECK(opts.format == FORMAT_BULLMQ || memchr(b.data + out.off, '\0', out.len) == NULL,
		      "raw nul byte in payload");
		check_payload(&row, &opts, &out, b.data + out.off);
	}
	buf_free(&b);
	for (i = 0; i < F_COUNT; i++)
		free(col[i]);
	return 0;
}
