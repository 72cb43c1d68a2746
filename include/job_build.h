/* Turning a staged row into a job of the relay's format: pure, no I/O. */
#ifndef STAGEDRAIN_JOB_BUILD_H
#define STAGEDRAIN_JOB_BUILD_H

#include <stddef.h>

#include "batch.h"
#include "buf.h"
#include "fmacros.h"
#include "job.h"

/*
 * Appends row's payload to out_buf. Returns 0 and fills out; JOB_REJECT with
 * a one-line reason when the row cannot be a job (the buffer is left as it
 * was); or -ENOMEM.
 */
int job_build(const struct job_row *row, const struct job_opts *opts, struct buf *out_buf, struct job_out *out,
	      char *reason, size_t reasonlen) SD_MUSTCHECK;
/* Builds row into one of b's jobs, or records it as dead; hold_id says where
 * it was read (0: staged_jobs). Returns 0 or -ENOMEM. */
int job_build_add(struct batch *b, const struct job_row *row, const struct job_opts *opts,
		  long long hold_id) SD_MUSTCHECK;

#endif
