/* One batch in flight: the jobs built from the rows read, and the rows rejected. */
#ifndef STAGEDRAIN_BATCH_H
#define STAGEDRAIN_BATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "fmacros.h"
#include "job.h"

struct batch_job {
	long long id;
	const char *queue; /* points into the fetched rows; valid until they are freed */
	size_t queue_len;
	const char *jid; /* 24 hex digits, also in the fetched rows */
	struct job_out out;
};

struct batch_dead {
	long long id;
	char reason[JOB_REASON_SIZE];
};

/* Arrays and payload memory are kept between batches: the relay's memory stays flat. */
struct batch {
	struct buf payloads;
	struct batch_job *jobs;
	size_t njobs;
	struct batch_dead *dead;
	size_t ndead;
	long long *kept; /* ids read but left staged: a job whose Redis key has the wrong
			    type, a dead row that could not be moved */
	size_t nkept;
	size_t cap;
};

void batch_init(struct batch *b);
/* Makes room for n rows and empties the batch. Returns 0 or -ENOMEM. */
int batch_reset(struct batch *b, size_t n) SD_MUSTCHECK;
/* Builds row into a job, or records it as dead. Returns 0 or -ENOMEM. */
int batch_add(struct batch *b, const struct job_row *row, const struct job_opts *opts) SD_MUSTCHECK;
/* Moves the jobs hold(job, arg) is true of from the jobs to kept, keeping the
 * order of the rest. Returns how many moved. */
size_t batch_hold(struct batch *b, bool (*hold)(const struct batch_job *j, void *arg), void *arg);
/* Moves every dead row to kept: its move to the dead table failed. */
void batch_keep_dead(struct batch *b);
/* Sorts kept ascending, as the gaps want them. */
void batch_sort_kept(struct batch *b);
void batch_free(struct batch *b);

#endif
