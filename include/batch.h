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
	const char *jid;    /* 24 hex digits, also in the fetched rows */
	const char *tenant; /* NULL: the NULL tenant; also in the fetched rows */
	size_t tenant_len;
	long long hold_id; /* 0: read from staged_jobs; else released from staged_jobs_held */
	size_t target;     /* the target it goes to (routes.h): its opts' */
	struct job_out out;
};

struct batch_dead {
	long long id;
	long long hold_id; /* as for a job */
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
/* Makes room for n more rows, keeping what the batch holds. 0 or -ENOMEM. */
int batch_grow(struct batch *b, size_t n) SD_MUSTCHECK;
/* Moves the jobs keep(job, arg) is true of out of the jobs, keeping the order
 * of the rest; those read from staged_jobs go to kept (a released one stays
 * in the held table, which the caller sees to). Returns how many moved. */
size_t batch_keep(struct batch *b, bool (*keep)(const struct batch_job *j, void *arg), void *arg);
/* Moves every dead row read from staged_jobs to kept, and drops those
 * released from the held table (they stay there): their move to the dead
 * table failed. Returns how many of the latter there were. */
size_t batch_keep_dead(struct batch *b);
/* Sorts kept ascending, as the gaps want them. */
void batch_sort_kept(struct batch *b);
void batch_free(struct batch *b);

#endif
