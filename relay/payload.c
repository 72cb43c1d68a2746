/* JSON written straight into the batch buffer, shared by every format. */
#include "fmacros.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "payload.h"

struct span span_of(const char *p, size_t n)
{
	struct span s = { p ? p : "", p ? n : 0 };

	return s;
}

void payload_reason(char *reason, size_t len, const char *fmt, ...)
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

void payload_rewind(struct buf *b, size_t len)
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
 * Inputs are validated before we get here, so the only ways left for
 * jansson to fail are our buffer or its own allocations: out of memory.
 */
static int payload_json(struct buf *b, const json_t *v, size_t flags)
{
	return json_dump_callback(v, dump_cb, b, flags) == 0 ? 0 : -ENOMEM;
}

/* Whether jansson would write s as it is, between quotes: no quote,
 * backslash, control character, or what the flags escape. */
static bool plain_string(struct span s, size_t flags)
{
	for (size_t i = 0; i < s.n; i++) {
		unsigned char c = (unsigned char)s.p[i];
		if (c < 0x20 || c == '"' || c == '\\' || c == 0x7f || (c == '/' && (flags & JSON_ESCAPE_SLASH)) ||
		    (c >= 0x80 && (flags & JSON_ENSURE_ASCII)))
			return false;
	}
	return true;
}

/* s is already checked UTF-8 (a NUL in it is written \u0000), so jansson's second check is
 * skipped; a string it would copy as it is (a class or queue name, mostly)
 * is copied here, without building a jansson string for it. */
int payload_string(struct buf *b, struct span s, size_t flags)
{
	json_t *v;
	int rc;

	if (plain_string(s, flags)) {
		if ((rc = buf_append(b, "\"", 1)) < 0 || (rc = buf_append(b, s.p, s.n)) < 0)
			return rc;
		return buf_append(b, "\"", 1);
	}
	if (!(v = json_stringn_nocheck(s.p, s.n)))
		return -ENOMEM;
	rc = payload_json(b, v, flags | JSON_ENCODE_ANY);
	json_decref(v);
	return rc;
}

int payload_key(struct buf *b, const char *key)
{
	int rc;

	if ((rc = buf_puts(b, ",\"")) < 0 || (rc = buf_puts(b, key)) < 0)
		return rc;
	return buf_puts(b, "\":");
}

/* Whether key (its text, with quotes) is one of skip. 0 or -ENOMEM. */
static int skipped(struct span key, const char *const *skip, bool *hit)
{
	int rc = 0;

	*hit = false;
	for (; rc == 0 && !*hit && skip && *skip; skip++)
		rc = payload_key_is(key, *skip, hit);
	return rc;
}

int payload_merge(struct buf *b, struct span obj, const char *const *skip)
{
	struct span key, v;
	size_t i = 0;
	bool hit;
	int rc;

	while (payload_next(obj, &i, &key, &v)) {
		if ((rc = skipped(key, skip, &hit)) < 0)
			return rc;
		if (hit)
			continue;
		if ((rc = buf_puts(b, ",")) < 0 || (rc = payload_compact(b, key, false)) < 0 ||
		    (rc = buf_puts(b, ":")) < 0 || (rc = payload_compact(b, v, false)) < 0)
			return rc;
	}
	return 0;
}

/* One string, from its opening quote: escapes kept as written, "/" as "\/"
 * when asked. Returns the index past its closing quote. */
static size_t copy_string(struct buf *b, struct span s, size_t i, bool escape_slash, int *rc)
{
	size_t from = i++;

	while (i < s.n && s.p[i] != '"') {
		if (s.p[i] == '\\') {
			i += 2;
			continue;
		}
		if (s.p[i] == '/' && escape_slash) {
			if ((*rc = buf_append(b, s.p + from, i - from)) < 0 || (*rc = buf_puts(b, "\\/")) < 0)
				return s.n;
			from = ++i;
			continue;
		}
		i++;
	}
	i = i < s.n ? i + 1 : s.n;
	*rc = buf_append(b, s.p + from, i - from);
	return i;
}

int payload_compact(struct buf *b, struct span s, bool escape_slash)
{
	size_t i = 0, from;
	int rc = 0;

	while (rc == 0 && i < s.n) {
		char c = s.p[i];
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			i++;
			continue;
		}
		if (c == '"') {
			i = copy_string(b, s, i, escape_slash, &rc);
			continue;
		}
		for (from = i; i < s.n && !strchr(" \t\n\r\"", s.p[i]); i++)
			;
		rc = buf_append(b, s.p + from, i - from);
	}
	return rc;
}

size_t payload_skip_ws(struct span s, size_t i)
{
	while (i < s.n && (s.p[i] == ' ' || s.p[i] == '\t' || s.p[i] == '\n' || s.p[i] == '\r'))
		i++;
	return i;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static size_t digits_end(const char *p, size_t n, size_t i)
{
	while (i < n && is_digit(p[i]))
		i++;
	return i;
}

/* The length of the JSON number at p (n bytes on), or 0 when none starts there. */
static size_t number_len(const char *p, size_t n)
{
	size_t i = p[0] == '-', d;

	if (i >= n || !is_digit(p[i]))
		return 0;
	i = p[i] == '0' ? i + 1 : digits_end(p, n, i);
	if (i < n && p[i] == '.') {
		if ((d = digits_end(p, n, i + 1)) == i + 1)
			return 0;
		i = d;
	}
	if (i < n && (p[i] == 'e' || p[i] == 'E')) {
		i += i + 1 < n && (p[i + 1] == '+' || p[i + 1] == '-') ? 2 : 1;
		if ((d = digits_end(p, n, i)) == i)
			return 0;
		i = d;
	}
	return i;
}

static bool numberish(char c)
{
	return is_digit(c) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

/* Every well-formed number outside strings becomes "0" and spaces, in place;
 * a malformed one (01, 1., 1e) is left for jansson to refuse. */
static void zero_numbers(char *p, size_t n)
{
	size_t i = 0, k, end;

	while (i < n) {
		if (p[i] == '"') {
			i = payload_string_end(span_of(p, n), i);
			continue;
		}
		if (!numberish(p[i]) || (i > 0 && numberish(p[i - 1]))) {
			i++;
			continue;
		}
		k = number_len(p + i, n - i);
		for (end = i + k; end < n && numberish(p[end]); end++)
			;
		if (k > 0 && end == i + k) {
			p[i] = '0';
			memset(p + i + 1, ' ', k - 1);
		}
		i = end;
	}
}

/* A number as JSON writes one, from i: its end, or 0 if it is not one. */
static size_t plain_number(struct span s, size_t i)
{
	size_t d;

	i += i < s.n && s.p[i] == '-';
	if (i < s.n && s.p[i] == '0')
		i++;
	else if (i < s.n && s.p[i] >= '1' && s.p[i] <= '9')
		while (i < s.n && s.p[i] >= '0' && s.p[i] <= '9')
			i++;
	else
		return 0;
	if (i < s.n && s.p[i] == '.') {
		for (d = ++i; i < s.n && s.p[i] >= '0' && s.p[i] <= '9'; i++)
			;
		if (i == d)
			return 0;
	}
	if (i < s.n && (s.p[i] == 'e' || s.p[i] == 'E')) {
		if (++i < s.n && (s.p[i] == '+' || s.p[i] == '-'))
			i++;
		for (d = i; i < s.n && s.p[i] >= '0' && s.p[i] <= '9'; i++)
			;
		if (i == d)
			return 0;
	}
	return i;
}

/* A scalar from i (a string of printable ASCII without escapes, a number,
 * true, false, null): its end, or 0. */
static size_t plain_scalar(struct span s, size_t i)
{
	static const char *const words[] = { "true", "false", "null" };

	if (s.p[i] == '"') {
		while (++i < s.n && s.p[i] != '"')
			if ((unsigned char)s.p[i] < 0x20 || (unsigned char)s.p[i] >= 0x7f || s.p[i] == '\\')
				return 0;
		return i < s.n ? i + 1 : 0;
	}
	for (size_t w = 0; w < 3; w++) {
		size_t n = strlen(words[w]);
		if (s.n - i >= n && memcmp(s.p + i, words[w], n) == 0)
			return i + n;
	}
	return plain_number(s, i);
}

bool payload_plain_array(struct span s, size_t max_depth)
{
	size_t depth = 0, i = payload_skip_ws(s, 0);
	bool want_value = true; /* after [ or , : a value (or ], right after [) */

	if (i >= s.n || s.p[i] != '[')
		return false;
	while (i < s.n) {
		char c = s.p[i];
		if (want_value && c == '[') {
			if (++depth > max_depth)
				return false;
			i = payload_skip_ws(s, i + 1);
			if (i < s.n && s.p[i] == ']')
				want_value = false;
			continue;
		}
		if (want_value) {
			if (!(i = plain_scalar(s, i)))
				return false;
			want_value = false;
		} else if (c == ',') {
			want_value = true;
			i++;
		} else if (c == ']') {
			i++;
			if (--depth == 0)
				return payload_skip_ws(s, i) == s.n;
		} else {
			return false;
		}
		i = payload_skip_ws(s, i);
	}
	return false;
}

/*
 * jansson holds no integer past 64 bits and no double past 1.8e308, both of
 * which a json column keeps; it checks a copy whose numbers are 0s of the same
 * length (its error columns still point into s).
 */
int payload_load(struct span s, size_t flags, json_t **out, json_error_t *err)
{
	char *copy = malloc(s.n + 1);

	*out = NULL;
	if (!copy)
		return -ENOMEM;
	memcpy(copy, s.p, s.n);
	copy[s.n] = '\0';
	zero_numbers(copy, s.n);
	*out = json_loadb(copy, s.n, flags, err);
	free(copy);
	return 0;
}

enum payload_kind payload_kind(struct span v)
{
	switch (v.n ? v.p[0] : '\0') {
	case '\0':
		return PAYLOAD_NONE;
	case '{':
		return PAYLOAD_OBJECT;
	case '[':
		return PAYLOAD_ARRAY;
	case '"':
		return PAYLOAD_STRING;
	case 't':
	case 'f':
		return PAYLOAD_BOOLEAN;
	case 'n':
		return PAYLOAD_NULL;
	}
	return PAYLOAD_NUMBER;
}

const char *payload_kind_name(enum payload_kind k)
{
	static const char *const names[] = { "nothing", "object", "array", "string", "number", "boolean", "null" };

	return names[k];
}

bool payload_next(struct span c, size_t *i, struct span *key, struct span *value)
{
	size_t at = payload_skip_ws(c, *i ? *i : 1), end;

	*key = span_of(NULL, 0);
	if (at >= c.n || c.p[at] == '}' || c.p[at] == ']')
		return false;
	if (c.p[0] == '{') {
		end = payload_string_end(c, at);
		*key = span_of(c.p + at, end - at);
		at = payload_skip_ws(c, payload_skip_ws(c, end) + 1); /* past ':' */
	}
	end = payload_value_end(c, at);
	*value = span_of(c.p + at, end - at);
	at = payload_skip_ws(c, end);
	*i = at < c.n && c.p[at] == ',' ? at + 1 : at;
	return true;
}

int payload_string_is(struct span s, struct span want, bool *eq)
{
	json_error_t err;
	json_t *v;

	*eq = false;
	if (!memchr(s.p, '\\', s.n)) {
		*eq = s.n == want.n + 2 && memcmp(s.p + 1, want.p, want.n) == 0;
		return 0;
	}
	v = json_loadb(s.p, s.n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
	if (!v)
		return json_error_code(&err) == json_error_out_of_memory ? -ENOMEM : 0;
	*eq = json_string_length(v) == want.n && memcmp(json_string_value(v), want.p, want.n) == 0;
	json_decref(v);
	return 0;
}

int payload_key_is(struct span key, const char *name, bool *eq)
{
	return payload_string_is(key, span_of(name, strlen(name)), eq);
}

int payload_member(struct span obj, const char *name, struct span *value)
{
	struct span key, v;
	size_t i = 0;
	bool eq;
	int rc;

	*value = span_of(NULL, 0);
	while (payload_next(obj, &i, &key, &v)) {
		if ((rc = payload_key_is(key, name, &eq)) < 0)
			return rc;
		if (eq) {
			*value = v;
			return 0;
		}
	}
	return 0;
}

int payload_int(struct span v, long long *out)
{
	bool neg = v.n > 0 && v.p[0] == '-';
	unsigned long long mag = 0, limit = neg ? 0ULL - (unsigned long long)LLONG_MIN : LLONG_MAX;

	if (payload_kind(v) != PAYLOAD_NUMBER || memchr(v.p, '.', v.n) || memchr(v.p, 'e', v.n) ||
	    memchr(v.p, 'E', v.n))
		return -EINVAL;
	for (size_t i = neg; i < v.n; i++) {
		unsigned d = (unsigned)(v.p[i] - '0');
		if (mag > (limit - d) / 10)
			return -ERANGE;
		mag = mag * 10 + d;
	}
	*out = neg ? (long long)(0ULL - mag) : (long long)mag;
	return 0;
}

int payload_double(struct span v, double *out)
{
	char small[64], *text = v.n < sizeof(small) ? small : malloc(v.n + 1);

	if (!text)
		return -ENOMEM;
	memcpy(text, v.p, v.n);
	text[v.n] = '\0';
	*out = strtod(text, NULL);
	if (text != small)
		free(text);
	return 0;
}

/* i at an opening quote; returns the index past the closing one. */
size_t payload_string_end(struct span s, size_t i)
{
	for (i++; i < s.n && s.p[i] != '"'; i++)
		if (s.p[i] == '\\')
			i++;
	return i < s.n ? i + 1 : s.n;
}

/* i at a value; returns the index past it. */
size_t payload_value_end(struct span s, size_t i)
{
	int depth = 0;

	do {
		if (s.p[i] == '"') {
			i = payload_string_end(s, i);
			continue;
		}
		if (s.p[i] == '[' || s.p[i] == '{')
			depth++;
		else if (s.p[i] == ']' || s.p[i] == '}')
			depth--;
		else if (depth == 0)
			while (i + 1 < s.n && !strchr(" \t\n\r,]}:", s.p[i + 1]))
				i++;
		i++;
	} while (depth > 0 && i < s.n);
	return i;
}

long long payload_floor_div(long long a, long long d)
{
	long long q = a / d;

	return (a % d != 0 && a < 0) ? q - 1 : q;
}
