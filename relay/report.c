/* What a batch says when it is done (report.h). */
#include "fmacros.h"

#include "clock.h"
#include "log.h"
#include "report.h"

void report_init(struct report *r, struct tally *tally, struct metrics *m, const struct pg_source *pg,
		 const struct gaps *g, const struct release *release)
{
	*r = (struct report){ .tally = tally, .metrics = m, .pg = pg, .gaps = g, .release = release };
}

void report_begin(struct batch_times *t)
{
	*t = (struct batch_times){ .t0_us = clock_mono_us() };
}

void report_step(struct batch_times *t, long long *step_us)
{
	*step_us = 0;
	*step_us = clock_mono_us() - t->t0_us - t->fetch_us - t->push_us - t->commit_us;
}

void report_dead_kept(const struct report *r, const struct batch *b)
{
	log_warn("could not move rows that cannot be jobs to staged_jobs_dead; they stay staged and"
		 " are tried again, the batch goes on",
		 LOGF(F_STR("error", r->pg->errstr), F_STR("sqlstate", r->pg->sqlstate), F_INT("rows", b->nkept)));
}

void report_pushed(const struct report *r, const struct batch *b, bool also)
{
	if (also)
		metrics_batch_also(r->metrics, b);
	else
		metrics_batch_pushed(r->metrics, b); /* the commit frees the queue names */
}

void report_batch(struct report *r, const struct batch *b, const struct batch_times *t)
{
	const char *queue, *job_class, *reason;
	long long dead_id, id;
	int n = 0;

	/* What `stagedrain dead show DEAD_ID` and `dead replay` take. */
	for (; (queue = pg_source_dead_moved(r->pg, n, &dead_id, &id, &job_class, &reason)) != NULL; n++)
		log_warn("moved a row that cannot be a job to staged_jobs_dead",
			 LOGF(F_INT("dead_id", dead_id), F_INT("id", id), F_STR("queue", queue),
			      F_STR("class", job_class), F_STR("reason", reason)));
	/* A role that may not read the dead rows back (granted by an older roles.sql). */
	for (size_t i = 0; n == 0 && i < b->ndead; i++)
		log_warn("moved a row that cannot be a job to staged_jobs_dead",
			 LOGF(F_INT("id", b->dead[i].id), F_STR("reason", b->dead[i].reason)));
	r->tally->relayed += (long long)b->njobs;
	r->tally->dead += (long long)b->ndead;
	metrics_batch_done(r->metrics, b->ndead, (double)(t->fetch_us + t->push_us + t->commit_us) / 1e6,
			   r->gaps->cursor);
	if (log_enabled(LOG_DEBUG))
		log_debug("batch relayed",
			  LOGF(F_INT("jobs", b->njobs), F_INT("dead", b->ndead), F_INT("held", t->held),
			       F_INT("released", t->released), F_INT("release_us", r->release->release_us),
			       F_INT("first_id", b->njobs ? b->jobs[0].id : 0), F_INT("cursor", r->gaps->cursor),
			       F_INT("gaps", r->gaps->n), F_INT("due", r->pg->read.due), F_INT("fetch_us", t->fetch_us),
			       F_INT("push_us", t->push_us), F_INT("commit_us", t->commit_us)));
}

void report_txn(struct report *r, const struct pipe *p, const struct batch_times *t)
{
	r->tally->relayed += p->jobs;
	metrics_batches_done(r->metrics, p->batches, 0, (double)(clock_mono_us() - t->t0_us) / 1e6, r->gaps->cursor);
	/* One line for the transaction: its times are its batches' together. */
	if (log_enabled(LOG_DEBUG))
		log_debug("batch relayed", LOGF(F_INT("batches", p->batches), F_INT("jobs", p->jobs),
						F_INT("first_id", p->ids[0]), F_INT("cursor", r->gaps->cursor),
						F_INT("gaps", r->gaps->n), F_INT("fetch_us", t->fetch_us),
						F_INT("push_us", t->push_us), F_INT("commit_us", t->commit_us)));
}

void report_stopped(const struct report *r, struct stop *stopping)
{
	bool stopped = stop_seen(stopping);

	/* Held and kept rows stay staged: say how many. stop_ms: from the stop
	 * signal, as first seen, to here. */
	log_info(stopped ? "stopped on signal" : "stopped",
		 LOGF(F_INT("jobs_relayed", r->tally->relayed), F_INT("jobs_dead", r->tally->dead),
		      F_INT("jobs_held", rounds_held(&r->release->rounds)), F_INT("rows_kept", gaps_kept(r->gaps)),
		      F_INT("stop_ms", stopped ? clock_mono_ms() - stopping->seen_ms : 0)));
}
