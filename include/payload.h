/* What every format's payload writer shares: spans of column bytes, reasons,
 * and JSON written straight into the batch buffer. Pure, no I/O. */
#ifndef STAGEDRAIN_PAYLOAD_H
#define STAGEDRAIN_PAYLOAD_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "buf.h"
#include "fmacros.h"

/* A column's bytes; never NULL, so memchr and json_loadb get a real pointer. */
struct span {
	const char *p;
	size_t n;
};

struct span span_of(const char *p, size_t n);

/* Writes a one-line, printable-ASCII reason (jansson quotes input bytes). */
void payload_reason(char *reason, size_t len, const char *fmt, ...) SD_PRINTF(3, 4);

/* s as a JSON string; s must be checked UTF-8 without NULs. flags as
 * json_dumps' (JSON_ESCAPE_SLASH for PHP's "\/"). 0 or -ENOMEM. */
int payload_string(struct buf *b, struct span s, size_t flags) SD_MUSTCHECK;
/* Merges the members of object text obj but those named in skip
 * (NULL-terminated, or NULL) into the object being written, each as written
 * but whitespace: {"a": 1} becomes ,"a":1. 0 or -ENOMEM. */
int payload_merge(struct buf *b, struct span obj, const char *const *skip) SD_MUSTCHECK;
/* Copies JSON text that jansson accepted without its insignificant
 * whitespace, every number and string exactly as written; with escape_slash
 * every "/" in a string becomes "\/" (PHP's json_encode). 0 or -ENOMEM. */
int payload_compact(struct buf *b, struct span json, bool escape_slash) SD_MUSTCHECK;
/* ",\"key\":" */
int payload_key(struct buf *b, const char *key) SD_MUSTCHECK;
/* Truncates b back to len (a rejected or failed row leaves no bytes). */
void payload_rewind(struct buf *b, size_t len);

/*
 * Checks JSON text with jansson's rules and flags, numbers of any size
 * allowed: 0 with *out the parsed value, or with *out NULL and err set
 * (json_error_out_of_memory included); -ENOMEM. Every number in *out is 0:
 * read numbers from the text (payload_int, payload_double), copy them as
 * written.
 */
int payload_load(struct span s, size_t flags, json_t **out, json_error_t *err) SD_MUSTCHECK;

/* Reading JSON text that payload_load accepted, values as spans of it. */
enum payload_kind {
	PAYLOAD_NONE, /* an empty span: a member that is absent */
	PAYLOAD_OBJECT,
	PAYLOAD_ARRAY,
	PAYLOAD_STRING,
	PAYLOAD_NUMBER,
	PAYLOAD_BOOLEAN,
	PAYLOAD_NULL,
};
enum payload_kind payload_kind(struct span v);
/* "object", "number", ... for reasons. */
const char *payload_kind_name(enum payload_kind k);
/* The next member of the object or array text c (from its opening bracket):
 * *i is 0 at first; key is the member's key text with its quotes (n == 0 in
 * an array). false past the last. */
bool payload_next(struct span c, size_t *i, struct span *key, struct span *value);
/* Whether string text s (with its quotes) spells the bytes of want, escapes
 * read. 0 or -ENOMEM. */
int payload_string_is(struct span s, struct span want, bool *eq) SD_MUSTCHECK;
/* The same for a key text and a C string. */
int payload_key_is(struct span key, const char *name, bool *eq) SD_MUSTCHECK;
/* The value of obj's member name (n == 0: absent). 0 or -ENOMEM. */
int payload_member(struct span obj, const char *name, struct span *value) SD_MUSTCHECK;
/* An integer's value: 0; -ERANGE past 64 bits; -EINVAL when v is no number
 * or has a fraction or exponent (JSON readers make those floats). */
int payload_int(struct span v, long long *out) SD_MUSTCHECK;
/* A number's value as strtod reads it (inf past the doubles). 0 or -ENOMEM. */
int payload_double(struct span v, double *out) SD_MUSTCHECK;

/* Walking JSON text that jansson already accepted (no validation): the index
 * past the whitespace at i; past the string whose opening quote is at i; past
 * the value (scalar, array or object) that starts at i. */
size_t payload_skip_ws(struct span s, size_t i);
/* Whether s is a JSON array that needs no parser to tell it valid: nested
 * arrays at most max_depth deep ([] is one) of numbers, true, false, null
 * and strings of printable ASCII without escapes; no object (whose keys
 * could repeat). false says only that the parser must look. */
bool payload_plain_array(struct span s, size_t max_depth);
size_t payload_string_end(struct span s, size_t i);
size_t payload_value_end(struct span s, size_t i);

/* a / d rounded toward minus infinity (d > 0): microseconds to whole
 * milliseconds or seconds, before 1970 too. */
long long payload_floor_div(long long a, long long d);

/* The UUID text a row was staged with (36 characters, from the uuid column). */
#define PAYLOAD_UUID_LEN 36

#endif
