/* JSON written straight into the batch buffer, shared by every format. */
#include "fmacros.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
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
int payload_json(struct buf *b, const json_t *v, size_t flags)
{
	return json_dump_callback(v, dump_cb, b, flags) == 0 ? 0 : -ENOMEM;
}

/* s is already checked UTF-8 without NULs, so jansson's second check is skipped. */
int payload_string(struct buf *b, struct span s, size_t flags)
{
	json_t *v = json_stringn_nocheck(s.p, s.n);
	int rc;

	if (!v)
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

static bool skipped(const char *key, const char *const *skip)
{
	for (; skip && *skip; skip++)
		if (strcmp(key, *skip) == 0)
			return true;
	return false;
}

int payload_merge(struct buf *b, const json_t *obj, const char *const *skip)
{
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)obj, key, v)
	{
		if (skipped(key, skip))
			continue;
		if (buf_puts(b, ",") < 0 || payload_string(b, span_of(key, strlen(key)), 0) < 0 ||
		    buf_puts(b, ":") < 0 || payload_json(b, v, JSON_COMPACT | JSON_ENCODE_ANY) < 0)
			return -ENOMEM;
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
