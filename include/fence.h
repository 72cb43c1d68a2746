/* The crash fence: which rows the last batch pushed, written to Redis in the
 * same atomic script call as the batch, so a new leader can delete them instead of
 * pushing them again. Pure: formats and parses, no I/O. */
#ifndef STAGEDRAIN_FENCE_H
#define STAGEDRAIN_FENCE_H

#include <stddef.h>

#include "batch.h"
#include "buf.h"
#include "fmacros.h"

/* A parsed fence, as Postgres array literals ready for the delete. */
struct fence {
	long long epoch;
	size_t n;
	struct buf ids;  /* "{1,2,3}" */
	struct buf jids; /* "{aaa…,bbb…,ccc…}" */
};

void fence_init(struct fence *f);
void fence_free(struct fence *f);
/* Appends "epoch=E jobs=ID:JID,ID:JID,…" for the batch's pushed jobs. */
int fence_write(struct buf *out, long long epoch, const struct batch *b) SD_MUSTCHECK;
/* Appends ",ID:JID,…": the batch's jobs, after what fence_write wrote for
 * an earlier batch of the same transaction. */
int fence_write_more(struct buf *out, const struct batch *b) SD_MUSTCHECK;
/* Parses what fence_write wrote, and what fence_write_more added; -EINVAL for anything else (nothing to trust). */
int fence_parse(struct fence *f, const char *text, size_t len) SD_MUSTCHECK;

#endif
