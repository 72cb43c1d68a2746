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

/* jansson's encoding of v, streamed into b. 0 or -ENOMEM. */
int payload_json(struct buf *b, const json_t *v, size_t flags) SD_MUSTCHECK;
/* s as a JSON string; s must be checked UTF-8 without NULs. flags as
 * json_dumps' (JSON_ESCAPE_SLASH for PHP's "\/"). 0 or -ENOMEM. */
int payload_string(struct buf *b, struct span s, size_t flags) SD_MUSTCHECK;
/* Merges obj's members but those named in skip (NULL-terminated, or NULL)
 * into the object being written: {"a":1} becomes ,"a":1. 0 or -ENOMEM. */
int payload_merge(struct buf *b, const json_t *obj, const char *const *skip) SD_MUSTCHECK;
/* Copies JSON text that jansson accepted without its insignificant
 * whitespace, every number and string exactly as written; with escape_slash
 * every "/" in a string becomes "\/" (PHP's json_encode). 0 or -ENOMEM. */
int payload_compact(struct buf *b, struct span json, bool escape_slash) SD_MUSTCHECK;
/* ",\"key\":" */
int payload_key(struct buf *b, const char *key) SD_MUSTCHECK;
/* Truncates b back to len (a rejected or failed row leaves no bytes). */
void payload_rewind(struct buf *b, size_t len);

/* Walking JSON text that jansson already accepted (no validation): the index
 * past the whitespace at i; past the string whose opening quote is at i; past
 * the value (scalar, array or object) that starts at i. */
size_t payload_skip_ws(struct span s, size_t i);
size_t payload_string_end(struct span s, size_t i);
size_t payload_value_end(struct span s, size_t i);

/* The UUID text a row was staged with (36 characters, from the uuid column). */
#define PAYLOAD_UUID_LEN 36

#endif
