/* Small value parsers and the error formatter shared by config loading and the redis url parser. */
#ifndef STAGEDRAIN_VALUES_H
#define STAGEDRAIN_VALUES_H

#include <stdbool.h>
#include <stddef.h>

#include "fmacros.h"

/* One accepted word for a setting, and the int (or int-sized enum) it means. */
struct choice {
	const char *name;
	int value;
	const char *help; /* commands only */
};

struct unit {
	const char *suffix;
	long long mult;
};

/* A kind of number: the suffixes it accepts and what to say when it is not one. */
struct numkind {
	const char *syntax;
	struct unit units[6]; /* ends at the first NULL suffix */
};

/* A plain whole number, no suffix. */
extern const struct numkind value_count;

/* Writes one message into err (which may be NULL) and returns rc. */
int value_fail(char *err, size_t errlen, int rc, const char *fmt, ...) SD_PRINTF(4, 5);
/* Copies s into out for quoting in a message: one bounded line, with any
 * word's URL user and password (what comes before its last '@', after any
 * "://") and any "password=" value written as "...", so that no message
 * shows a password; returns out. */
const char *value_printable(const char *s, char *out, size_t len);
/* value_printable of the n bytes at s (which need no NUL). */
const char *value_printable_n(const char *s, size_t n, char *out, size_t len);
/* Replaces *dst with a copy of src: 0 or -ENOMEM. */
int value_set_str(char **dst, const char *src) SD_MUSTCHECK;
/* Writes every choice's name, separated by sep, into out (truncated to len). */
void value_join_choices(const struct choice *c, const char *sep, char *out, size_t len);
/* The choice named name, matched without case, or NULL. */
const struct choice *value_find_choice(const struct choice *c, const char *name);
/* Parses [-]digits[suffix] with one of units: 0 or -EINVAL. */
int value_parse_scaled(const char *s, const struct unit *units, long long *out) SD_MUSTCHECK;
/* Writes v with the largest of k's units that divides it: 60000 ms as 60s. */
void value_format_amount(const struct numkind *k, long long v, char *out, size_t len);
/* Parses a signed 64-bit integer, decimal or 0x hex: 0 or -EINVAL. */
int value_parse_i64(const char *s, long long *out) SD_MUSTCHECK;

#endif
