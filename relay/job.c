/* Turning a staged row into a Sidekiq or Resque job payload: pure, no I/O. */
#include "fmacros.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "buf.h"
#include "job.h"

/* A column's bytes; never NULL, so memchr and json_loadb get a real pointer. */
struct span {
	const char *p;
	size_t n;
};

/* Keys the relay writes itself; letting options set them would forge the job. */
static const char *const reserved_keys[] = {
	"class", "args", "queue", "jid", "created_at", "enqueued_at", "at",
};

static void set_reason(char *reason, size_t len, const char *fmt, ...) SD_PRINTF(3, 4);

static void set_reason(char *reason, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!reason || len == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(reason, len, fmt, ap);
	va_end(ap);
	/*
	 * jansson quotes the offending input ("near '...'"), which may be any
	 * byte; the reason goes to logs and a text column, so keep it ASCII.
	 */
	for (char *p = reason; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
}

static struct span span_of(const char *p, size_t n)
{
	struct span s = { p ? p : "", p ? n : 0 };

	return s;
}

static bool json_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The verbatim copy of args needs no surrounding whitespace. */
static struct span trim(struct span s)
{
	while (s.n && json_space(s.p[0])) {
		s.p++;
		s.n--;
	}
	while (s.n && json_space(s.p[s.n - 1]))
		s.n--;
	return s;
}

static bool over_limit(size_t n, const struct job_opts *opts)
{
	/* A limit of 0 or less would reject every row; read it as "no limit". */
	return opts->max_job_bytes > 0 && n > (size_t)opts->max_job_bytes;
}

/* Length of the UTF-8 sequence that starts with c, or 0 if c cannot start one. */
static size_t utf8_seq_len(unsigned char c, unsigned long *cp)
{
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		*cp = c & 0x1f;
		return 2;
	}
	if (c >= 0xe0 && c <= 0xef) {
		*cp = c & 0x0f;
		return 3;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		*cp = c & 0x07;
		return 4;
	}
	return 0;
}

/*
 * Strict UTF-8, the same rules jansson applies (no overlongs, surrogates or
 * code points past U+10FFFF); checked here so that a NULL from jansson can
 * only mean out of memory.
 */
static bool utf8_valid(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, len, k;
	unsigned long cp;

	while (i < n) {
		len = utf8_seq_len(s[i], &cp);
		if (len == 0 || n - i < len)
			return false;
		for (k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += len;
	}
	return true;
}

/* Class and queue become JSON strings and Redis key parts: non-empty UTF-8 text. */
static int check_text(const char *what, struct span s, char *reason, size_t rlen)
{
	if (s.n == 0)
		set_reason(reason, rlen, "%s is empty", what);
	else if (memchr(s.p, '\0', s.n))
		set_reason(reason, rlen, "%s contains a nul byte", what);
	else if (!utf8_valid(s.p, s.n))
		set_reason(reason, rlen, "%s is not valid utf-8", what);
	else
		return 0;
	return JOB_REJECT;
}

/* Sidekiq's own client makes jids with SecureRandom.hex(12). */
static int check_jid(struct span s, char *reason, size_t rlen)
{
	size_t i;

	for (i = 0; i < s.n; i++)
		if (!((s.p[i] >= '0' && s.p[i] <= '9') || (s.p[i] >= 'a' && s.p[i] <= 'f')))
			break;
	if (s.n == 24 && i == s.n)
		return 0;
	set_reason(reason, rlen, "jid is not 24 lowercase hex digits");
	return JOB_REJECT;
}

static const char *type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "object";
	case JSON_ARRAY:
		return "array";
	case JSON_STRING:
		return "string";
	case JSON_INTEGER:
	case JSON_REAL:
		return "number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "boolean";
	case JSON_NULL:
		return "null";
	}
	return "unknown";
}

/* Parses one column's JSON text: 0 with *out owned by the caller, JOB_REJECT or -ENOMEM. */
static int load_json(const char *what, struct span s, size_t flags, json_t **out, char *reason, size_t rlen)
{
	json_error_t err;

	*out = NULL;
	/* jansson stops at a raw NUL in some states; never let one reach the payload. */
	if (memchr(s.p, '\0', s.n)) {
		set_reason(reason, rlen, "%s contains a nul byte", what);
		return JOB_REJECT;
	}
	*out = json_loadb(s.p, s.n, flags, &err);
	if (*out)
		return 0;
	if (json_error_code(&err) == json_error_out_of_memory)
		return -ENOMEM;
	if (err.line > 1)
		set_reason(reason, rlen, "%s is not valid json: %s at line %d column %d", what, err.text, err.line,
			   err.column);
	else
		set_reason(reason, rlen, "%s is not valid json: %s at column %d", what, err.text, err.column);
	return JOB_REJECT;
}

/* Whether v nests more than limit levels ([] is one level, a scalar none). */
static bool deeper_than(json_t *v, size_t limit)
{
	const char *key;
	json_t *e;
	size_t i;

	if (!json_is_array(v) && !json_is_object(v))
		return false;
	if (limit == 0)
		return true;
	json_array_foreach(v, i, e)
	{
		if (deeper_than(e, limit - 1))
			return true;
	}
	json_object_foreach(v, key, e)
	{
		if (deeper_than(e, limit - 1))
			return true;
	}
	return false;
}

/*
 * Validates args and returns in *out the exact text to copy: re-serialising
 * would change numbers (0.1, big integers) that jsonb kept exactly. Copying
 * only text jansson accepted keeps the payload valid JSON.
 */
static int check_args(struct span raw, const struct job_opts *opts, struct span *out, char *reason, size_t rlen)
{
	struct span s = trim(raw);
	json_t *v;
	int rc;

	/* Cheap bound before parsing: args alone already make the job too big. */
	if (over_limit(s.n, opts)) {
		set_reason(reason, rlen, "args is %zu bytes, over --max-job-bytes %ld", s.n, opts->max_job_bytes);
		return JOB_REJECT;
	}
	/* INT_AS_REAL: big integers are valid JSON and pass through verbatim anyway. */
	rc = load_json("args", s, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, &v, reason, rlen);
	if (rc != 0)
		return rc;
	if (!json_is_array(v)) {
		set_reason(reason, rlen, "args is not a json array (got %s)", type_name(v));
		rc = JOB_REJECT;
	} else if (deeper_than(v, JOB_MAX_DEPTH - 1)) {
		/* The job object adds a level around args. */
		set_reason(reason, rlen, "args nest deeper than %d levels", JOB_MAX_DEPTH - 1);
		rc = JOB_REJECT;
	}
	json_decref(v);
	*out = s;
	return rc;
}

/*
 * Options NULL means {} and leaves *out NULL. Integers are kept as integers
 * (Sidekiq reads "retry": 5 only if it is an Integer), so an option holding
 * an integer past 64 bits is rejected. Duplicate keys are rejected rather
 * than silently merged.
 */
static int load_options(const char *text, size_t len, json_t **out, char *reason, size_t rlen)
{
	size_t i;
	int rc;

	*out = NULL;
	if (!text)
		return 0;
	rc = load_json("options", span_of(text, len), JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, out, reason, rlen);
	if (rc != 0)
		return rc;
	if (!json_is_object(*out)) {
		set_reason(reason, rlen, "options is not a json object (got %s)", type_name(*out));
		goto reject;
	}
	/* Options are merged into the job object: their levels are the job's. */
	if (deeper_than(*out, JOB_MAX_DEPTH)) {
		set_reason(reason, rlen, "options nest deeper than %d levels", JOB_MAX_DEPTH);
		goto reject;
	}
	for (i = 0; i < sizeof(reserved_keys) / sizeof(reserved_keys[0]); i++) {
		if (json_object_get(*out, reserved_keys[i])) {
			set_reason(reason, rlen, "options key \"%s\" is reserved", reserved_keys[i]);
			goto reject;
		}
	}
	return 0;
reject:
	json_decref(*out);
	*out = NULL;
	return JOB_REJECT;
}

/*
 * Every check that needs no output. The same rules hold for both formats
 * (so whether a row is dead-lettered does not depend on --format), except
 * the jid, which only Sidekiq payloads carry.
 */
static int check_row(const struct job_row *row, const struct job_opts *opts, struct span *args, json_t **options,
		     char *reason, size_t rlen)
{
	int rc;

	if (row->unfit) {
		set_reason(reason, rlen, "%s", row->unfit);
		return JOB_REJECT;
	}
	rc = check_text("job class", span_of(row->job_class, row->class_len), reason, rlen);
	if (rc == 0)
		rc = check_text("queue", span_of(row->queue, row->queue_len), reason, rlen);
	if (rc == 0 && opts->format != FORMAT_RESQUE)
		rc = check_jid(span_of(row->jid, row->jid_len), reason, rlen);
	if (rc == 0)
		rc = check_args(span_of(row->args, row->args_len), opts, args, reason, rlen);
	if (rc == 0)
		rc = load_options(row->options, row->options_len, options, reason, rlen);
	return rc;
}

static void rewind_to(struct buf *b, size_t len)
{
	b->len = len;
	if (b->data)
		b->data[len] = '\0';
}

static int dump_cb(const char *p, size_t n, void *data)
{
	return buf_append(data, p, n) < 0 ? -1 : 0;
}

/*
 * Streams jansson's encoding straight into the buffer. Inputs are validated
 * before we get here, so the only ways left for jansson to fail are our
 * buffer or its own allocations: both are out of memory.
 */
static int put_json(struct buf *b, const json_t *v, size_t flags)
{
	return json_dump_callback(v, dump_cb, b, flags) == 0 ? 0 : -ENOMEM;
}

/* s is already checked UTF-8 without NULs, so jansson's second check is skipped. */
static int put_string(struct buf *b, struct span s)
{
	json_t *v = json_stringn_nocheck(s.p, s.n);
	int rc;

	if (!v)
		return -ENOMEM;
	rc = put_json(b, v, JSON_ENCODE_ANY);
	json_decref(v);
	return rc;
}

/* Merges options into the object being written: {"a":1,"b":2} becomes ,"a":1,"b":2 */
static int put_options(struct buf *b, const json_t *options)
{
	size_t at = b->len;

	if (!options || json_object_size(options) == 0)
		return 0;
	if (put_json(b, options, JSON_COMPACT) < 0)
		return -ENOMEM;
	b->data[at] = ',';
	rewind_to(b, b->len - 1);
	return 0;
}

static long long floor_div(long long a, long long d)
{
	long long q = a / d;

	return (a % d != 0 && a < 0) ? q - 1 : q;
}

/* Sidekiq 6 and 7 write Time#to_f; 8 writes integer milliseconds. */
static int put_stamp(struct buf *b, const struct job_opts *opts, const char *key, long long us)
{
	char num[32];
	int rc;

	if ((rc = buf_puts(b, ",\"")) < 0 || (rc = buf_puts(b, key)) < 0 || (rc = buf_puts(b, "\":")) < 0)
		return rc;
	if (opts->sidekiq_version >= 8)
		return buf_put_int(b, floor_div(us, 1000));
	job_format_epoch(num, sizeof(num), us);
	return buf_puts(b, num);
}

/*
 * The job hash Sidekiq's client writes. A scheduled job is the schedule-zset
 * member, from which the client strips enqueued_at and at.
 */
static int put_sidekiq(struct buf *b, const struct job_row *row, struct span args, const json_t *options,
		       const struct job_opts *opts, bool scheduled)
{
	if (buf_puts(b, "{\"class\":") < 0 || put_string(b, span_of(row->job_class, row->class_len)) < 0 ||
	    buf_puts(b, ",\"args\":") < 0 || buf_append(b, args.p, args.n) < 0 || buf_puts(b, ",\"queue\":") < 0 ||
	    put_string(b, span_of(row->queue, row->queue_len)) < 0 || buf_puts(b, ",\"jid\":\"") < 0 ||
	    buf_append(b, row->jid, row->jid_len) < 0 || buf_puts(b, "\"") < 0)
		return -ENOMEM;
	/* Sidekiq's default_job_options; an explicit option wins. */
	if (!json_object_get(options, "retry") && buf_puts(b, ",\"retry\":true") < 0)
		return -ENOMEM;
	if (put_options(b, options) < 0 || put_stamp(b, opts, "created_at", row->created_at_us) < 0)
		return -ENOMEM;
	if (!scheduled && put_stamp(b, opts, "enqueued_at", opts->now_us) < 0)
		return -ENOMEM;
	return buf_puts(b, "}");
}

/*
 * Resque's queue item is {"class","args"}; resque-scheduler's delayed item
 * (job_to_hash_with_queue) adds "queue". Resque has no per-job options, so
 * options are validated but not written.
 */
static int put_resque(struct buf *b, const struct job_row *row, struct span args, bool scheduled)
{
	if (buf_puts(b, "{\"class\":") < 0 || put_string(b, span_of(row->job_class, row->class_len)) < 0 ||
	    buf_puts(b, ",\"args\":") < 0 || buf_append(b, args.p, args.n) < 0)
		return -ENOMEM;
	if (scheduled && (buf_puts(b, ",\"queue\":") < 0 || put_string(b, span_of(row->queue, row->queue_len)) < 0))
		return -ENOMEM;
	return buf_puts(b, "}");
}

int job_build(const struct job_row *row, const struct job_opts *opts, struct buf *out_buf, struct job_out *out,
	      char *reason, size_t reasonlen)
{
	size_t start = out_buf->len, len;
	json_t *options = NULL;
	struct span args;
	bool scheduled;
	int rc;

	set_reason(reason, reasonlen, "%s", "");
	rc = check_row(row, opts, &args, &options, reason, reasonlen);
	if (rc != 0)
		return rc;
	scheduled = row->has_run_at && row->run_at_us > opts->now_us;
	if (opts->format == FORMAT_RESQUE)
		rc = put_resque(out_buf, row, args, scheduled);
	else
		rc = put_sidekiq(out_buf, row, args, options, opts, scheduled);
	json_decref(options);
	len = out_buf->len - start;
	if (rc == 0 && over_limit(len, opts)) {
		set_reason(reason, reasonlen, "job is %zu bytes, over --max-job-bytes %ld", len, opts->max_job_bytes);
		rc = JOB_REJECT;
	}
	if (rc != 0) {
		rewind_to(out_buf, start);
		return rc;
	}
	out->scheduled = scheduled;
	out->run_at_us = scheduled ? row->run_at_us : 0;
	out->off = start;
	out->len = len;
	return 0;
}

/*
 * Ruby's Float#to_s of a microsecond time: shortest digits, at least one
 * after the point. Computed on the magnitude so LLONG_MIN cannot overflow.
 */
void job_format_epoch(char *dst, size_t dstlen, long long us)
{
	unsigned long long mag = us < 0 ? 0ULL - (unsigned long long)us : (unsigned long long)us;
	unsigned long long frac = mag % 1000000ULL;
	char tmp[32], *end = tmp + sizeof(tmp), *p = end;
	int n = 6;
	size_t len;

	if (!dst || dstlen == 0)
		return;
	for (; n > 1 && frac % 10 == 0; n--)
		frac /= 10;
	while (n-- > 0) {
		*--p = (char)('0' + frac % 10);
		frac /= 10;
	}
	*--p = '.';
	p = buf_digits(p, mag / 1000000ULL);
	if (us < 0)
		*--p = '-';
	len = (size_t)(end - p) < dstlen ? (size_t)(end - p) : dstlen - 1;
	memcpy(dst, p, len);
	dst[len] = '\0';
}
