/* What the dead commands print of a row's text: control characters made
 * visible, long text cut, ages short. */
#include "fmacros.h"

#include <stdbool.h>
#include <stdio.h>

#include "dead_text.h"

/* The length of the UTF-8 sequence at s (at most n bytes) and its code point;
 * 0 when it is not one (overlong, surrogate, past U+10FFFF, cut short). */
static size_t utf8_at(const unsigned char *s, size_t n, unsigned long *cp)
{
	size_t len = s[0] < 0x80                    ? 1
		     : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
		     : s[0] >= 0xe0 && s[0] <= 0xef ? 3
		     : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
						    : 0;
	unsigned long c = len == 1 ? s[0] : len == 2 ? s[0] & 0x1fUL : len == 3 ? s[0] & 0x0fUL : s[0] & 0x07UL;

	if (len == 0 || len > n)
		return 0;
	for (size_t k = 1; k < len; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[k] & 0x3f);
	}
	if ((len == 3 && c < 0x800) || (len == 4 && c < 0x10000) || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

/* A character a terminal would act on rather than show. */
static bool control(unsigned long cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
}

static int put_char(struct buf *out, const unsigned char *s, size_t len, unsigned long cp)
{
	if (len == 0)
		return buf_printf(out, "\\x%02x", s[0]);
	if (cp == '\n')
		return buf_puts(out, "\\n");
	if (cp == '\t')
		return buf_puts(out, "\\t");
	if (cp == '\r')
		return buf_puts(out, "\\r");
	if (control(cp))
		return buf_printf(out, "\\u%04lx", cp);
	return buf_append(out, s, len);
}

int dead_text_visible(struct buf *out, const char *str, size_t n, size_t max_chars, size_t *width)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, chars = 0, start = out->len;
	int rc = 0;

	while (rc == 0 && i < n && (max_chars == 0 || chars < max_chars)) {
		unsigned long cp = 0;
		size_t len = utf8_at(s + i, n - i, &cp);

		rc = put_char(out, s + i, len, cp);
		i += len ? len : 1;
		chars++;
	}
	if (rc == 0 && i < n)
		rc = buf_puts(out, "...");
	/* Each escape is ASCII: its bytes are its width. */
	*width = 0;
	for (size_t k = start; k < out->len; k++)
		*width += ((unsigned char)out->data[k] & 0xc0) != 0x80;
	return rc;
}

void dead_text_age(long long seconds, char *out, size_t len)
{
	if (seconds < 0)
		seconds = 0;
	if (seconds < 60)
		snprintf(out, len, "%llds", seconds);
	else if (seconds < 3600)
		snprintf(out, len, "%lldm", seconds / 60);
	else if (seconds < 86400)
		snprintf(out, len, "%lldh", seconds / 3600);
	else
		snprintf(out, len, "%lldd", seconds / 86400);
}
