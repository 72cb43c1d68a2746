/* A growing byte buffer, reused from batch to batch so memory stays flat. */
#ifndef STAGEDRAIN_BUF_H
#define STAGEDRAIN_BUF_H

#include <stdarg.h>
#include <stddef.h>

#include "fmacros.h"

struct buf {
	char *data;
	size_t len;
	size_t cap;
};

void buf_init(struct buf *b);
/* Empties the buffer and keeps its memory for the next use. */
void buf_reset(struct buf *b);
/* Returns 0, or -ENOMEM leaving the buffer unchanged. */
int buf_append(struct buf *b, const void *p, size_t n) SD_MUSTCHECK;
int buf_puts(struct buf *b, const char *s) SD_MUSTCHECK;
int buf_printf(struct buf *b, const char *fmt, ...) SD_PRINTF(2, 3) SD_MUSTCHECK;
/* Appends v in decimal: the hot paths' numbers, without printf's cost. */
int buf_put_int(struct buf *b, long long v) SD_MUSTCHECK;
/* Writes v's decimal digits ending just before end; returns where they start. */
char *buf_digits(char *end, unsigned long long v);
int buf_vprintf(struct buf *b, const char *fmt, va_list ap) SD_PRINTF(2, 0) SD_MUSTCHECK;
void buf_free(struct buf *b);
/* Grows the array *p, of *cap elements of size bytes, to hold need (doubling
 * from 16): the one growth rule of the relay's arrays. 0 or -ENOMEM. */
int buf_grow_array(void **p, size_t *cap, size_t need, size_t size) SD_MUSTCHECK;

#endif
