/* What the dead commands print of a row's text: control characters made
 * visible, long text cut, ages short. Pure, no I/O. */
#ifndef STAGEDRAIN_DEAD_TEXT_H
#define STAGEDRAIN_DEAD_TEXT_H

#include <stddef.h>

#include "buf.h"
#include "fmacros.h"

/*
 * Appends s (n bytes) to out as a terminal may show it: control characters
 * (C0, DEL, C1) as \n, \t, \r or \u00XX, bytes that are not UTF-8 as \xXX;
 * at most max_chars characters of s, then "..." if it was longer (0: no
 * limit). *width gets the characters appended. 0 or -ENOMEM.
 */
int dead_text_visible(struct buf *out, const char *s, size_t n, size_t max_chars, size_t *width) SD_MUSTCHECK;
/* Writes seconds as one short age: 45s, 3m, 2h, 5d (negative: 0s). */
void dead_text_age(long long seconds, char *out, size_t len);

#endif
