/* Reading back what a Celery envelope carries, with OpenSSL's base64 (not the relay's encoder). */
#ifndef STAGEDRAIN_TEST_CELERY_BODY_H
#define STAGEDRAIN_TEST_CELERY_BODY_H

#include <stddef.h>

#include <jansson.h>

/* The envelope's body, base64-decoded and parsed with jansson's flags: the
 * [args, kwargs, embed] of a protocol 2 task. NULL when it is not base64 or
 * not JSON (the caller asserts). */
json_t *celery_body(const json_t *envelope, size_t flags);
/* The body's text itself, NUL-terminated, its length in *len (the caller
 * frees it); NULL when it is not base64. For numbers jansson cannot read. */
char *celery_body_text(const json_t *envelope, size_t *len);

#endif
