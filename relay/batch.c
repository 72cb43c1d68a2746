/* One batch in flight: the jobs built from the rows read, and the rows rejected. */
#include "fmacros.h"

#include <errno.h>
#include <stdlib.h>

#include "batch.h"

void batch_init(struct batch *b)
{
	buf_init(&b->payloads);
	b->jobs = NULL;
	b->dead = NULL;
	b->njobs = b->ndead = b->cap = 0;
}

int batch_reset(struct batch *b, size_t n)
{
	buf_reset(&b->payloads);
	b->njobs = b->ndead = 0;
	if (n > b->cap) {
		struct batch_job *jobs = realloc(b->jobs, n * sizeof(*jobs));
		if (!jobs)
			return -ENOMEM;
		b->jobs = jobs;
		struct batch_dead *dead = realloc(b->dead, n * sizeof(*dead));
		if (!dead)
			return -ENOMEM;
		b->dead = dead;
		b->cap = n;
	}
	return 0;
}

int batch_add(struct batch *b, const struct job_row *row, const struct job_opts *opts)
{
	struct batch_job *j = &b->jobs[b->njobs];
	struct batch_dead *d = &b->dead[b->ndead];
	int rc;

	if (b->njobs + b->ndead >= b->cap)
		return -ENOMEM;
	rc = job_build(row, opts, &b->payloads, &j->out, d->reason, sizeof(d->reason));
	if (rc < 0)
		return rc;
	if (rc == JOB_REJECT) {
		d->id = row->id;
		b->ndead++;
		return 0;
	}
	j->id = row->id;
	j->queue = row->queue;
	j->queue_len = row->queue_len;
	j->jid = row->jid;
	b->njobs++;
	return 0;
}

void batch_free(struct batch *b)
{
	if (!b)
		return;
	buf_free(&b->payloads);
	free(b->jobs);
	free(b->dead);
	batch_init(b);
}
