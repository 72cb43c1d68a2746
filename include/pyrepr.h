/* Python's repr of JSON values, as Celery's saferepr writes argsrepr. */
#ifndef STAGEDRAIN_PYREPR_H
#define STAGEDRAIN_PYREPR_H

#include "buf.h"
#include "fmacros.h"
#include "payload.h"

/* Appends celery.utils.saferepr of what json.loads gives for json (text
 * jansson accepted): single-quoted strings with only ' escaped, True, False,
 * None, Python's float repr, containers past 3 levels as [...], cut at 1024
 * code points. 0 or -ENOMEM. */
int pyrepr_saferepr(struct buf *b, struct span json) SD_MUSTCHECK;

#endif
