/* Small value parsers and the error formatter shared by config loading and the redis url parser. */
#include "fmacros.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "values.h"

const struct numkind value_count = { "not a whole number", { { "", 1 } } };

int value_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* The first needle in [p, end), or NULL. */
static const char *find(const char *p, const char *end, const char *needle)
{
	size_t n = strlen(needle);

	for (; p + n <= end; p++)
		if (memcmp(p, needle, n) == 0)
			return p;
	return NULL;
}

static size_t put(char *out, size_t k, const char *p, size_t n)
{
	memcpy(out + k, p, n);
	return k + n;
}

/* One word with what comes before its last '@' (after any "://": a URL's
 * user and password, or user:password@host) and the value of any
 * "password=" (up to '&') written as "...". */
static size_t mask_word(const char *w, const char *end, char *out, size_t k)
{
	const char *scheme = find(w, end, "://"), *from = scheme ? scheme + 3 : w, *at = NULL, *pw;

	for (const char *p = from; p < end; p++)
		if (*p == '@')
			at = p;
	if (at) {
		k = put(out, k, w, (size_t)(from - w));
		k = put(out, k, "...", 3);
		w = at;
	}
	while ((pw = find(w, end, "password="))) {
		k = put(out, k, w, (size_t)(pw + 9 - w));
		k = put(out, k, "...", 3);
		for (w = pw + 9; w < end && *w != '&';)
			w++;
	}
	return put(out, k, w, (size_t)(end - w));
}

/* A message may end up in a log anyone reads, so any word that may hold a
 * password is masked (mask_word) before the text is bounded: a cut never
 * leaves half a password. A stray newline must not split or forge log lines,
 * so anything unprintable becomes '?' and a long text ends in "...". */
const char *value_printable_n(const char *s, size_t n, char *out, size_t len)
{
	/* Each "..." stands for at least one byte before an '@', or follows
	 * "password=": four times the text is room. */
	char *masked = malloc(4 * n + 4);
	size_t i, k = 0;

	if (!len)
		return out;
	if (!masked) {
		snprintf(out, len, "...");
		return out;
	}
	for (const char *p = s, *e = s + n, *end; p < e; p = end) {
		for (end = p; end < e && !isspace((unsigned char)*end) == !isspace((unsigned char)*p);)
			end++;
		k = isspace((unsigned char)*p) ? put(masked, k, p, (size_t)(end - p)) : mask_word(p, end, masked, k);
	}
	for (i = 0; i < k && i + 1 < len; i++)
		out[i] = isprint((unsigned char)masked[i]) ? masked[i] : '?';
	out[i] = '\0';
	if (i < k && len > 4)
		memcpy(out + len - 4, "...", 4);
	free(masked);
	return out;
}

const char *value_printable(const char *s, char *out, size_t len)
{
	return value_printable_n(s, strlen(s), out, len);
}

int value_set_str(char **dst, const char *src)
{
	free(*dst);
	*dst = strdup(src);
	return *dst ? 0 : -ENOMEM;
}

void value_join_choices(const struct choice *c, const char *sep, char *out, size_t len)
{
	size_t n = 0;

	out[0] = '\0';
	for (; c->name && n < len; c++)
		n += (size_t)snprintf(out + n, len - n, "%s%s", n ? sep : "", c->name);
}

/* Choices are matched without case: operators write INFO as often as info. */
const struct choice *value_find_choice(const struct choice *c, const char *name)
{
	for (; c->name; c++)
		if (strcasecmp(c->name, name) == 0)
			return c;
	return NULL;
}

/* Saturates rather than overflowing, so a huge number reaches the caller's
 * range check and is reported as out of range. */
int value_parse_scaled(const char *s, const struct unit *units, long long *out)
{
	bool neg = *s == '-';
	const char *p = s + neg;
	long long n = 0;

	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	for (; isdigit((unsigned char)*p); p++)
		n = n > (LLONG_MAX - 9) / 10 ? LLONG_MAX : n * 10 + (*p - '0');
	for (; units->suffix; units++) {
		if (strcmp(p, units->suffix) == 0) {
			n = n > LLONG_MAX / units->mult ? LLONG_MAX : n * units->mult;
			*out = neg ? -n : n;
			return 0;
		}
	}
	return -EINVAL;
}

/* 60000 ms as 60s, 536870912 as 512M. */
void value_format_amount(const struct numkind *k, long long v, char *out, size_t len)
{
	const struct unit *best = &k->units[0];

	if (v == 0) {
		snprintf(out, len, "0");
		return;
	}
	for (const struct unit *u = k->units; u->suffix; u++)
		if (u->mult > best->mult && v % u->mult == 0)
			best = u;
	snprintf(out, len, "%lld%s", v / best->mult, best->suffix);
}

/* A leading 0 does not mean octal. */
int value_parse_i64(const char *s, long long *out)
{
	const char *p = s + (*s == '-' || *s == '+');
	bool hex = p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
	char *end;

	if (!(hex ? isxdigit((unsigned char)p[2]) : isdigit((unsigned char)p[0])))
		return -EINVAL;
	errno = 0;
	*out = strtoll(s, &end, hex ? 16 : 10);
	return *end || errno == ERANGE ? -EINVAL : 0;
}
