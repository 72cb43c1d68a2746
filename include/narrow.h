/* Narrowing: finding the row of a batch Redis refuses for a reason of its
 * own (not the relay's: no WRONGTYPE, stale epoch or Redis that is down), by
 * reading smaller batches until one row is refused alone, twice. */
#ifndef STAGEDRAIN_NARROW_H
#define STAGEDRAIN_NARROW_H

#include <stdbool.h>
#include <stddef.h>

#include "fmacros.h"
#include "job.h"

/*
 * Every narrowed batch is an ordinary one (read in id order, pushed by the
 * fenced script, committed before the next), so the fence and the order
 * within a queue hold as for any batch: narrowing only reads fewer rows.
 */
struct narrow {
	int limit;           /* rows the next read takes at most; 0: --batch-size */
	long left;           /* rows still to pass at this limit before whole batches again */
	long long suspect;   /* the job refused once alone; 0: none */
	long long condemned; /* the job refused alone twice: dead-lettered when next read */
	char reason[JOB_REASON_SIZE];
};

void narrow_init(struct narrow *n);
/* The next read's row limit. */
int narrow_limit(const struct narrow *n, int batch_size);
/* A batch of nrows rows, njobs of them pushed (the first: first_id), was
 * refused with answer, and Redis answers PING. True when that was the second
 * refusal of the same job alone: it is to be condemned (narrow_condemn). */
bool narrow_refused(struct narrow *n, size_t nrows, size_t njobs, long long first_id, const char *answer);
/* Redis agreed a push of nothing was fine: the suspect is the cause. */
void narrow_condemn(struct narrow *n);
/* Redis itself was the trouble (down, or refusing everything): back to whole batches. */
void narrow_calm(struct narrow *n);
/* Why row id cannot be a job, when narrowing found it; NULL otherwise. */
const char *narrow_unfit(const struct narrow *n, long long id);
/* A batch of nrows rows committed. */
void narrow_passed(struct narrow *n, size_t nrows);

#endif
