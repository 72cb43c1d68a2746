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

/* A stray newline in a variable must not split or forge log lines, so
 * anything unprintable becomes '?' and a long text ends in "...". */
const char *value_printable(const char *s, char *out, size_t len)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < len; i++)
		out[i] = isprint((unsigned char)s[i]) ? s[i] : '?';
	out[i] = '\0';
	if (s[i] && len > 4)
		memcpy(out + len - 4, "...", 4);
	return out;
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
