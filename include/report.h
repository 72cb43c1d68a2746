/* What a batch says when it is done: the times of its steps, its counts in
 * the tally and the metrics, its log lines (the rows it moved to
 * staged_jobs_dead, the debug line the bench reads), and the relay's last
 * line when it stops. */
#ifndef STAGEDRAIN_REPORT_H
#define STAGEDRAIN_REPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "batch.h"
#include "gaps.h"
#include "metrics.h"
#include "pg_source.h"
#include "pipe.h"
#include "release.h"
#include "stop.h"
#include "tally.h"

struct report {
	struct tally *tally; /* borrowed, as the rest */
	struct metrics *metrics;
	const struct pg_source *pg;
	const struct gaps *gaps;
	const struct release *release;
};

/* Microseconds each step of a batch took, for the debug log and the bench. */
struct batch_times {
	long long t0_us; /* when the batch began */
	long long fetch_us, push_us, commit_us;
	size_t held, released;
};

void report_init(struct report *r, struct tally *tally, struct metrics *m, const struct pg_source *pg,
		 const struct gaps *g, const struct release *release);
/* A batch begins: its clock starts. */
void report_begin(struct batch_times *t);
/* Its read (fetch), push or commit ended: the step's time is the batch's
 * so far less the other steps'. */
void report_step(struct batch_times *t, long long *step_us);
/* The rows of b that cannot be jobs stay staged: their move to staged_jobs_dead failed. */
void report_dead_kept(const struct report *r, const struct batch *b);
/* b went to Redis: its jobs in the metrics (also: a later batch of a transaction). */
void report_pushed(const struct report *r, const struct batch *b, bool also);
/* b committed alone, as t says. */
void report_batch(struct report *r, const struct batch *b, const struct batch_times *t);
/* A pipelined transaction (p) committed, as t says. */
void report_txn(struct report *r, const struct pipe *p, const struct batch_times *t);
/* The relay's last line: what it moved, and what it leaves (held, kept). */
void report_stopped(const struct report *r, struct stop *stopping);

#endif
