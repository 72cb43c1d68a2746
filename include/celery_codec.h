/* How Celery's Python side spells a message's values: saferepr of args, base64 of the body, isoformat of times. */
#ifndef STAGEDRAIN_CELERY_CODEC_H
#define STAGEDRAIN_CELERY_CODEC_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "fmacros.h"
#include "payload.h"

/* Python's datetime holds the years 1 to 9999 (epoch microseconds, UTC): a
 * time outside is one no worker reads. */
#define CELERY_CODEC_MIN_US (-62135596800000000LL)
#define CELERY_CODEC_MAX_US 253402300799999999LL

/* Appends Celery's saferepr(args or ()) or saferepr(kwargs) of JSON text json,
 * as a JSON string. 0 or -ENOMEM. */
int celery_codec_repr(struct buf *b, struct span json) SD_MUSTCHECK;
/* Replaces the bytes of b from off on with their base64 (kombu's
 * body_encoding). 0 or -ENOMEM. */
int celery_codec_base64(struct buf *b, size_t off) SD_MUSTCHECK;
/* Appends datetime.isoformat() of an aware UTC time us (epoch microseconds),
 * always with microseconds, as a JSON string. 0, -EINVAL or -ENOMEM. */
int celery_codec_put_iso(struct buf *b, long long us) SD_MUSTCHECK;
/* The JSON string v read as YYYY-MM-DDTHH:MM:SS[.f{1,6}](Z|+HH:MM|-HH:MM):
 * *ok and *us its epoch microseconds, or *ok false when it is not one (a
 * naive time too). 0 or -ENOMEM. */
int celery_codec_read_iso(struct span v, long long *us, bool *ok) SD_MUSTCHECK;

#endif
