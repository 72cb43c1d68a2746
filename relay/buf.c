/* A growing byte buffer, reused from batch to batch so memory stays flat. */
#include "fmacros.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

void buf_init(struct buf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

void buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

/* Keeps one spare byte so data is always NUL-terminated for debugging. */
static int buf_grow(struct buf *b, size_t extra)
{
	size_t need, cap;
	char *p;

	if (extra > ((size_t)-1) / 2 - b->len)
		return -ENOMEM;
	need = b->len + extra + 1;
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int buf_append(struct buf *b, const void *p, size_t n)
{
	if (buf_grow(b, n) < 0)
		return -ENOMEM;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int buf_puts(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

/* Formats straight into the free space; only when it does not fit, grows
 * and formats again. */
int buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
	size_t room = b->cap > b->len ? b->cap - b->len : 0;
	va_list ap2;
	int n;

	va_copy(ap2, ap);
	n = vsnprintf(room ? b->data + b->len : NULL, room, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= room) {
		if (buf_grow(b, (size_t)n) < 0) {
			if (b->data)
				b->data[b->len] = '\0';
			return -ENOMEM;
		}
		vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	}
	b->len += (size_t)n;
	return 0;
}

/* Decimal digits of v ending just before end; returns where they start. */
char *buf_digits(char *end, unsigned long long v)
{
	do
		*--end = (char)('0' + v % 10);
	while (v /= 10);
	return end;
}

int buf_put_int(struct buf *b, long long v)
{
	char tmp[24], *end = tmp + sizeof(tmp);
	char *p = buf_digits(end, v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v);

	if (v < 0)
		*--p = '-';
	return buf_append(b, p, (size_t)(end - p));
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = buf_vprintf(b, fmt, ap);
	va_end(ap);
	return rc;
}

void buf_free(struct buf *b)
{
	if (!b)
		return;
	free(b->data);
	buf_init(b);
}

int buf_grow_array(void **p, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	if (n > SIZE_MAX / size || !(q = realloc(*p, n * size)))
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}
