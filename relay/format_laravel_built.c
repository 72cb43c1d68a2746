/* Laravel: the payload the app's framework built (clients/php), checked and pushed as it was written. */
#include "fmacros.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "format.h"

/* The worker's json_decode($payload, true) reads fewer levels than its
 * default depth of 512 (511 arrays or objects): it would make null of a
 * deeper payload. */
#define PHP_JSON_LEVELS 511

/* Number text n past a double's range: Laravel's pop script
 * (Redis' cjson) reads it as inf and cannot encode the job again. */
static int check_number(struct span n, char *reason, size_t rlen)
{
	double d;
	int rc;

	if ((rc = payload_double(n, &d)) < 0)
		return rc;
	if (isfinite(d))
		return 0;
	payload_reason(reason, rlen,
		       "number %.*s%s is past a double's range (Laravel's pop script cannot re-encode it after its "
		       "LPOP, and would lose the job)",
		       FORMAT_SHOW(n));
	return JOB_REJECT;
}

int laravel_check_json(struct span json, int max_depth, char *reason, size_t rlen)
{
	int depth = 0, rc;

	for (size_t i = 0; i < json.n;) {
		char c = json.p[i];
		if (c == '"') {
			i = payload_string_end(json, i);
		} else if (c == '[' || c == '{') {
			if (++depth > max_depth) {
				payload_reason(reason, rlen,
					       "payload nests deeper than %d levels, which PHP's json_decode refuses",
					       max_depth);
				return JOB_REJECT;
			}
			i++;
		} else if (c == ']' || c == '}') {
			depth--;
			i++;
		} else if (c == '-' || (c >= '0' && c <= '9')) {
			size_t end = payload_value_end(json, i);
			if ((rc = check_number(span_of(json.p + i, end - i), reason, rlen)) != 0)
				return rc;
			i = end;
		} else {
			i++;
		}
	}
	return 0;
}

/* args is [payload]: the payload text, one JSON string. */
static int payload_text(struct span args, json_t **text, char *reason, size_t rlen)
{
	struct span key, v, more;
	size_t i = 0;
	json_error_t err;

	*text = NULL;
	if (!payload_next(args, &i, &key, &v) || payload_kind(v) != PAYLOAD_STRING ||
	    payload_next(args, &i, &key, &more)) {
		payload_reason(reason, rlen, "serialized laravel args is not [payload], one string");
		return JOB_REJECT;
	}
	/* jansson checked this string already: only memory can fail. A NUL
	 * it holds makes the payload's own text fail its check. */
	*text = json_loadb(v.p, v.n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
	return *text ? 0 : -ENOMEM;
}

/* The parsed payload's member key is a string holding exactly want. */
static bool same_string(json_t *payload, const char *key, struct span want)
{
	json_t *s = json_object_get(payload, key);

	return json_is_string(s) && json_string_length(s) == want.n &&
	       memcmp(json_string_value(s), want.p, want.n) == 0;
}

/*
 * The keys the row and the worker need: displayName and uuid naming the row,
 * and what the worker reads as it pops: job (the handler), attempts (the pop
 * script adds one to it, after its LPOP) and id. Strings from the parsed
 * payload; attempts from its text p (the parse zeroes numbers).
 */
static int check_keys(const struct job_row *row, json_t *payload, struct span p, char *reason, size_t rlen)
{
	json_t *job = json_object_get(payload, "job");
	struct span attempts;
	long long n;
	int rc;

	if ((rc = payload_member(p, "attempts", &attempts)) < 0)
		return rc;
	if (!same_string(payload, "displayName", span_of(row->job_class, row->class_len)))
		payload_reason(reason, rlen, "payload's \"displayName\" is not the row's job_class");
	else if (!same_string(payload, "uuid", span_of(row->uuid ? row->uuid : "", row->uuid_len)))
		payload_reason(reason, rlen, "payload's \"uuid\" is not the row's uuid");
	else if (!json_is_string(job) || json_string_length(job) == 0)
		payload_reason(reason, rlen, "payload's \"job\" is not a non-empty string");
	else if (payload_int(attempts, &n) != 0 || n < 0)
		payload_reason(reason, rlen, "payload's \"attempts\" is not a non-negative integer");
	else if (!json_is_string(json_object_get(payload, "id")))
		payload_reason(reason, rlen, "payload's \"id\" is not a string");
	else
		return 0;
	return JOB_REJECT;
}

/* The payload written at b's end is strict JSON, an object, with the keys the
 * row and the worker need. */
static int check_payload(const struct job_row *row, struct span p, char *reason, size_t rlen)
{
	json_error_t err;
	json_t *v;
	int rc;

	/* \u0000 is how json_encode writes the NULs of a protected property's name. */
	if ((rc = payload_load(p, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &v, &err)) < 0)
		return rc;
	if (!v && json_error_code(&err) == json_error_out_of_memory)
		return -ENOMEM;
	if (!v) {
		payload_reason(reason, rlen, "payload is not json: %s", err.text);
		return JOB_REJECT;
	}
	if (!json_is_object(v)) {
		payload_reason(reason, rlen, "payload is not a json object");
		rc = JOB_REJECT;
	} else if ((rc = laravel_check_json(p, PHP_JSON_LEVELS, reason, rlen)) == 0) {
		rc = check_keys(row, v, p, reason, rlen);
	}
	json_decref(v);
	return rc;
}

static int check_options(struct span options, char *reason, size_t rlen)
{
	struct span key, v;
	size_t i = 0;
	bool eq;
	int rc;

	while (payload_next(options, &i, &key, &v)) {
		if ((rc = payload_key_is(key, "serialized", &eq)) < 0 ||
		    (!eq && (rc = payload_key_is(key, LARAVEL_PREFIX_KEY, &eq)) < 0))
			return rc;
		if (!eq) {
			payload_reason(
				reason, rlen,
				"options key \"%.*s\" is not read with \"serialized\": true (the payload carries "
				"the job's properties)",
				(int)key.n - 2, key.p + 1);
			return JOB_REJECT;
		}
	}
	return 0;
}

int laravel_built_payload(const struct job_in *in, struct buf *out, char *reason, size_t rlen)
{
	size_t off = out->len;
	json_t *text;
	int rc;

	if ((rc = check_options(in->options, reason, rlen)) != 0 ||
	    (rc = payload_text(in->args, &text, reason, rlen)) != 0)
		return rc;
	rc = buf_append(out, json_string_value(text), json_string_length(text));
	json_decref(text);
	if (rc < 0)
		return rc;
	return check_payload(in->row, span_of(out->data + off, out->len - off), reason, rlen);
}
