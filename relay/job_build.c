/* The checks every format shares, then the row's format writes its payload
 * into the batch: pure, no I/O. */
#include "fmacros.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <jansson.h>

#include "buf.h"
#include "formats.h"
#include "job_build.h"
#include "payload.h"

/* Keys the relay writes itself; letting options set them would forge the job. */
static const char *const reserved_keys[] = {
	"class", "args", "queue", "jid", "created_at", "enqueued_at", "at",
};

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
		payload_reason(reason, rlen, "%s is empty", what);
	else if (memchr(s.p, '\0', s.n))
		payload_reason(reason, rlen, "%s contains a nul byte", what);
	else if (!utf8_valid(s.p, s.n))
		payload_reason(reason, rlen, "%s is not valid utf-8", what);
	else
		return 0;
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

/* Checks one column's JSON text: 0 with *out (its shape, every number 0)
 * owned by the caller, JOB_REJECT or -ENOMEM. */
static int load_json(const char *what, struct span s, size_t flags, json_t **out, char *reason, size_t rlen)
{
	json_error_t err;

	*out = NULL;
	/* jansson stops at a raw NUL in some states; never let one reach the payload. */
	if (memchr(s.p, '\0', s.n)) {
		payload_reason(reason, rlen, "%s contains a nul byte", what);
		return JOB_REJECT;
	}
	if (payload_load(s, flags, out, &err) < 0)
		return -ENOMEM;
	if (*out)
		return 0;
	if (json_error_code(&err) == json_error_out_of_memory)
		return -ENOMEM;
	if (err.line > 1)
		payload_reason(reason, rlen, "%s is not valid json: %s at line %d column %d", what, err.text, err.line,
			       err.column);
	else
		payload_reason(reason, rlen, "%s is not valid json: %s at column %d", what, err.text, err.column);
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
 * Validates args and returns in *out the exact text to copy: the json column
 * holds what the app wrote (key order, number spelling, \u0000), and
 * re-serialising would change it. Copying only text jansson accepted keeps
 * the payload valid JSON.
 */
static int check_args(struct span raw, const struct job_opts *opts, struct span *out, char *reason, size_t rlen)
{
	struct span s = trim(raw);
	json_t *v;
	int rc;

	/* Cheap bound before parsing: args alone already make the job too big. */
	if (over_limit(s.n, opts)) {
		payload_reason(reason, rlen, "args is %zu bytes, over --max-job-bytes %ld", s.n, opts->max_job_bytes);
		return JOB_REJECT;
	}
	*out = s;
	/* Most args need no parser (and no allocation) to be known good. */
	if (payload_plain_array(s, JOB_MAX_DEPTH - 1))
		return 0;
	/* Duplicate keys too: json keeps them, and a payload that copies them
	 * would mean whichever value its reader keeps. */
	rc = load_json("args", s, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &v, reason, rlen);
	if (rc != 0)
		return rc;
	if (!json_is_array(v)) {
		payload_reason(reason, rlen, "args is not a json array (got %s)", type_name(v));
		rc = JOB_REJECT;
	} else if (deeper_than(v, JOB_MAX_DEPTH - 1)) {
		/* The job object adds a level around args. */
		payload_reason(reason, rlen, "args nest deeper than %d levels", JOB_MAX_DEPTH - 1);
		rc = JOB_REJECT;
	}
	json_decref(v);
	*out = s;
	return rc;
}

/*
 * Checks options and returns in *out their text, {} for NULL: the formats
 * read values from it and copy them as written, so a number of any size
 * reaches the payload as the app wrote it. Duplicate keys are rejected
 * rather than silently merged.
 */
static int check_options(const char *text, size_t len, struct span *out, char *reason, size_t rlen)
{
	json_t *v;
	size_t i;
	int rc;

	*out = span_of("{}", 2);
	if (!text)
		return 0;
	*out = trim(span_of(text, len));
	if (out->n == 2 && memcmp(out->p, "{}", 2) == 0)
		return 0; /* what staged_jobs holds unless the app said more */
	rc = load_json("options", *out, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &v, reason, rlen);
	if (rc != 0)
		return rc;
	if (!json_is_object(v)) {
		payload_reason(reason, rlen, "options is not a json object (got %s)", type_name(v));
		rc = JOB_REJECT;
	} else if (deeper_than(v, JOB_MAX_DEPTH)) {
		/* Options are merged into the job object: their levels are the job's. */
		payload_reason(reason, rlen, "options nest deeper than %d levels", JOB_MAX_DEPTH);
		rc = JOB_REJECT;
	}
	for (i = 0; rc == 0 && i < sizeof(reserved_keys) / sizeof(reserved_keys[0]); i++) {
		if (json_object_get(v, reserved_keys[i])) {
			payload_reason(reason, rlen, "options key \"%s\" is reserved", reserved_keys[i]);
			rc = JOB_REJECT;
		}
	}
	json_decref(v);
	return rc;
}

/*
 * Every check that needs no output and holds for every format; a format
 * adds its own (Sidekiq's jid, Celery's kwargs) as it writes the payload.
 */
static int check_row(const struct job_row *row, const struct job_opts *opts, struct job_in *in, char *reason,
		     size_t rlen)
{
	int rc;

	if (row->unfit) {
		payload_reason(reason, rlen, "%s", row->unfit);
		return JOB_REJECT;
	}
	rc = check_text("job class", span_of(row->job_class, row->class_len), reason, rlen);
	if (rc == 0)
		rc = check_text("queue", span_of(row->queue, row->queue_len), reason, rlen);
	if (rc == 0)
		rc = check_args(span_of(row->args, row->args_len), opts, &in->args, reason, rlen);
	if (rc == 0)
		rc = check_options(row->options, row->options_len, &in->options, reason, rlen);
	return rc;
}

int job_build(const struct job_row *row, const struct job_opts *opts, struct buf *out_buf, struct job_out *out,
	      char *reason, size_t reasonlen)
{
	size_t start = out_buf->len, len;
	const struct format *f = NULL;
	struct job_in in = { .row = row };
	int rc;

	payload_reason(reason, reasonlen, "%s", "");
	rc = check_row(row, opts, &in, reason, reasonlen);
	/* The relay's layout names the keys, whichever payload the row takes. */
	if (rc == 0 && format_of(opts->format)->check_queue)
		rc = format_of(opts->format)->check_queue(span_of(row->queue, row->queue_len), reason, reasonlen);
	if (rc == 0 && opts->cluster)
		rc = format_check_cluster_queue(format_of(opts->format), opts->key_prefix ? opts->key_prefix : "",
						span_of(row->queue, row->queue_len), reason, reasonlen);
	if (rc == 0)
		rc = format_of_row(opts->format, in.options, &f, reason, reasonlen);
	if (rc == 0) {
		in.scheduled = row->has_run_at && row->run_at_us > opts->now_us;
		rc = f->payload(&in, opts, out_buf, reason, reasonlen);
	}
	len = out_buf->len - start;
	if (rc == 0 && over_limit(len, opts)) {
		payload_reason(reason, reasonlen, "job is %zu bytes, over --max-job-bytes %ld", len,
			       opts->max_job_bytes);
		rc = JOB_REJECT;
	}
	if (rc != 0) {
		payload_rewind(out_buf, start);
		return rc;
	}
	out->scheduled = in.scheduled;
	out->run_at_us = in.scheduled ? row->run_at_us : 0;
	out->off = start;
	out->len = len;
	return 0;
}

int job_build_add(struct batch *b, const struct job_row *row, const struct job_opts *opts, long long hold_id)
{
	struct batch_job *j = &b->jobs[b->njobs];
	struct batch_dead *d = &b->dead[b->ndead];
	int rc;

	if (b->njobs + b->ndead >= b->cap)
		return -ENOMEM;
	rc = job_build(row, opts, &b->payloads, &j->out, d->reason, sizeof(d->reason));
	if (rc < 0)
		return rc;
	if (rc == JOB_REJECT) {
		d->id = row->id;
		d->hold_id = hold_id;
		b->ndead++;
		return 0;
	}
	j->id = row->id;
	j->hold_id = hold_id;
	j->tenant = row->tenant;
	j->tenant_len = row->tenant_len;
	j->queue = row->queue;
	j->queue_len = row->queue_len;
	j->jid = row->jid;
	j->target = opts->target;
	b->njobs++;
	return 0;
}
