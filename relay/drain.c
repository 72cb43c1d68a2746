/*
 * The relay loop: one batch's way, top to bottom. Each step is a module that
 * takes the parts it needs and never calls back up here:
 *
 *   ladder_ensure_ready   lead (the lock), each target READY       ladder.c
 *   read_plan_next        rows, gaps and bytes the read may take   read_plan.c
 *   pg_source_fetch       read: cursor, gaps, snapshot             pg_source.c
 *   build_batch           rows to jobs by format and target,       build.c
 *                         then release holds and releases          (release.c)
 *   pg_source_move_dead   rows that cannot be jobs, dead-lettered  pg_source.c
 *   push_first            split by target; send, reply, fence      push.c
 *   drain_txn             more batches in the same transaction,    drain.c
 *                         read while Redis pushes the one before   (pipe.c)
 *   pg_source_commit      delete what was pushed, COMMIT           pg_source.c
 *                         (the session and the lock: pg_session.c)
 *   read_plan_done        the cursor and the gaps advance          read_plan.c
 *   report_batch          counts, metrics, log lines               report.c
 *
 * A step that fails goes to fault.c, which rolls back and lets the ladder
 * fall back; with --once, once.c says when the run is over.
 */
#include "fmacros.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "drain.h"

#define GAPS_MAX 10000 /* gap ranges tracked at most; past it the closest merge (gaps.h) */

/* One target per route (routes.h), t[0] the default one; what release
 * sees of them points into them. Left empty when out of memory:
 * drain_start then fails. */
static void init_targets(struct drain *d)
{
	const struct routes *r = &d->cfg->routes;

	d->nt = 0;
	d->t = calloc(r->n ? r->n : 1, sizeof(*d->t));
	d->rts = calloc(r->n ? r->n : 1, sizeof(*d->rts));
	if (!d->t || !d->rts || r->n == 0)
		return;
	for (size_t i = 0; i < r->n; i++) {
		struct target *t = &d->t[i];
		target_init(t, i, r->t[i].name, r->t[i].cfg, &d->stopping);
		d->rts[i] = (struct release_target){ .name = t->route,
						     .bp = &t->bp,
						     .conn = &t->redis.conn,
						     .opts = &t->opts,
						     .queue_up = t->cfg->redis.cluster ? target_queue_up : NULL,
						     .arg = t };
	}
	d->nt = r->n;
	release_targets(&d->release, d->rts, d->nt);
}

void drain_init(struct drain *d, const struct config *cfg, volatile sig_atomic_t *stop, struct metrics *m)
{
	memset(d, 0, sizeof(*d));
	d->cfg = cfg;
	d->metrics = m;
	stop_init(&d->stopping, stop, cfg->stop_timeout_ms);
	pg_source_init(&d->pg, cfg);
	pg_source_stop_on(&d->pg, &d->stopping);
	batch_init(&d->batch);
	gaps_init(&d->gaps, GAPS_MAX);
	release_init(&d->release, cfg);
	narrow_init(&d->narrow);
	init_targets(d);
	once_init(&d->once, cfg, &d->pg, d->t, d->nt, &d->release, &d->gaps, &d->tally);
	d->ladder = (struct ladder){ .cfg = cfg,
				     .stopping = &d->stopping,
				     .pg = &d->pg,
				     .t = d->t,
				     .nt = d->nt,
				     .gaps = &d->gaps,
				     .release = &d->release,
				     .once = &d->once,
				     .tally = &d->tally,
				     .metrics = m };
	ladder_init(&d->ladder);
	read_plan_init(&d->plan, cfg, &d->ladder, &d->gaps, &d->narrow);
	build_init(&d->build, cfg, d->t, d->nt, d->rts, &d->release, m);
	push_init(&d->push, d->t, d->nt, &d->release, m);
	pipe_init(&d->pipe);
	fault_init(&d->fault, &d->ladder, &d->push, &d->narrow, &d->batch);
	report_init(&d->report, &d->tally, m, &d->pg, &d->gaps, &d->release);
}

void drain_free(struct drain *d)
{
	if (!d)
		return;
	pg_source_free(&d->pg);
	for (size_t i = 0; i < d->nt; i++)
		target_free(&d->t[i]);
	free(d->t);
	free(d->rts);
	d->t = NULL;
	d->rts = NULL;
	d->nt = 0;
	batch_free(&d->batch);
	push_free(&d->push);
	pipe_free(&d->pipe);
	gaps_free(&d->gaps);
	release_free(&d->release);
}

int drain_start(struct drain *d)
{
	return ladder_start(&d->ladder);
}

/* A read that moved nothing: its snapshot ends, and the gaps advance past
 * what it saw (a gap that closed, rows that are not there). */
static int nothing_read(struct drain *d)
{
	const struct gaps_read *seen = pg_source_seen(&d->pg);

	pg_source_rollback(&d->pg);
	return d->gaps.n || seen->skip_to ? read_plan_done(&d->plan, seen, NULL, 0) : 0;
}

/* Sends the read of the rows above the last read, within what the
 * transaction may still take. */
static int read_more(struct drain *d, bool *busy)
{
	const struct pg_read *r = &d->pg.read;

	*busy = true;
	return pg_source_send_next(&d->pg, r->ids[r->seen.n - 1], d->plan.limit,
				   pipe_budget(&d->pipe, d->plan.max_bytes));
}

/* A later batch's push failed (rc, target t) while Postgres may be running
 * a read (busy): take its results (whatever they say) and roll back. */
static int txn_push_failed(struct drain *d, struct target *t, int rc, bool busy)
{
	if (busy)
		pg_source_discard(&d->pg);
	pg_source_rollback(&d->pg);
	return fault_push(&d->fault, t, rc, d->batch.njobs);
}

/* Out of memory mid-transaction: nothing in flight may stay (the relay
 * stops on -ENOMEM; the next leader reads the fence). */
static int txn_out_of_memory(struct drain *d, int rc, bool busy)
{
	if (busy)
		pg_source_discard(&d->pg);
	push_drop_in_flight(&d->push);
	pg_source_rollback(&d->pg);
	return rc;
}

/* The transaction committed: the jobs it pushed count, the gaps advance. */
static int txn_committed(struct drain *d, struct batch_times *t, const struct gaps_read *first)
{
	struct gaps_read seen;
	int rc;

	report_step(t, &t->commit_us);
	d->once.moved = d->pipe.jobs;
	ladder_pg_ok(&d->ladder);
	push_settle(&d->push);
	pipe_seen(&d->pipe, first, &seen);
	if ((rc = read_plan_done(&d->plan, &seen, NULL, 0)) < 0)
		return rc;
	report_txn(&d->report, &d->pipe, t);
	return (int)d->pipe.jobs;
}

/*
 * The first batch went through and more rows wait: the transaction goes on
 * with more batches before its commit (pipe.h), as long as they come full
 * and plain. Each turn, Postgres reads the next rows while the relay builds
 * these and Redis runs the push before; each push appends to the fence, so
 * the fence names every batch pushed and not committed.
 */
static int drain_txn(struct drain *d, struct batch_times *t)
{
	struct gaps_read first = *pg_source_seen(&d->pg);
	const struct read_plan *rp = &d->plan;
	bool in_flight = false, busy = false, plain = true;
	struct target *failed = NULL;
	int nrows = 0, rc;

	if ((rc = pipe_begin(&d->pipe, &d->pg, &d->batch)) < 0)
		return txn_out_of_memory(d, rc, false);
	if (read_more(d, &busy) < 0 || pg_source_take_next(&d->pg, &d->gaps, rp->limit, &nrows) < 0)
		return fault_txn_pg(&d->fault, false);
	while (nrows > 0) {
		busy = false;
		if (pipe_go_on(&d->pipe, nrows, rp->limit, rp->max_bytes) && !stop_seen(&d->stopping) &&
		    read_more(d, &busy) < 0)
			return fault_txn_pg(&d->fault, in_flight);
		if ((rc = build_more(&d->build, &d->pg, &d->batch, nrows, &plain)) < 0)
			return txn_out_of_memory(d, rc, busy);
		if (in_flight && (rc = push_replies(&d->push, &d->batch, &failed, false)) != 0)
			return txn_push_failed(d, failed, rc, busy);
		in_flight = false;
		if (!plain || stop_seen(&d->stopping))
			break; /* a row that is not a plain job: the next transaction reads it first */
		in_flight = true;
		if ((rc = push_send(&d->push, &d->batch, &failed)) != 0) {
			struct target *also;

			/* The sends before this one are read off first (their fences
			 * name them); what failed is this send's. */
			int before = push_replies(&d->push, &d->batch, &also, false);

			(void)before;
			return txn_push_failed(d, failed, rc, busy);
		}
		if ((rc = pipe_add(&d->pipe, &d->pg.read, &d->batch)) < 0)
			return txn_out_of_memory(d, rc, busy);
		report_pushed(&d->report, &d->batch, true);
		if (!busy)
			break;
		if (pg_source_take_next(&d->pg, &d->gaps, rp->limit, &nrows) < 0)
			return fault_txn_pg(&d->fault, in_flight);
		busy = false;
	}
	if (busy)
		pg_source_discard(&d->pg); /* rows above a batch that stays: the next transaction reads them */
	if (in_flight && (rc = push_replies(&d->push, &d->batch, &failed, false)) != 0)
		return txn_push_failed(d, failed, rc, false);
	if ((rc = pipe_commit(&d->pipe, &d->pg)) == -EIO)
		return fault_txn_pg(&d->fault, false);
	if (rc < 0)
		return txn_out_of_memory(d, rc, false);
	return txn_committed(d, t, &first);
}

/* The batch committed alone: what it moved counts, the gaps advance. */
static int committed(struct drain *d, struct batch_times *t, int nrows)
{
	int rc;

	report_step(t, &t->commit_us);
	d->once.moved = (long long)(d->batch.njobs + d->batch.ndead + t->held);
	ladder_pg_ok(&d->ladder);
	push_settle(&d->push);
	if (release_needed(&d->release))
		release_commit(&d->release, d->metrics);
	rc = read_plan_done(&d->plan, pg_source_seen(&d->pg), &d->batch, (size_t)nrows + t->released);
	if (rc < 0)
		return rc;
	report_batch(&d->report, &d->batch, t);
	return nrows ? nrows : (int)t->released;
}

/* One batch: the jobs it moved (0: none), or a negative code after its
 * fault was handled. */
static int drain_batch(struct drain *d)
{
	struct read_plan *rp = &d->plan;
	struct target *failed = NULL;
	struct batch_times t;
	int nrows = 0, rc;

	report_begin(&t);
	d->once.moved = 0;
	d->once.all_read = false;
	if ((rc = read_plan_next(rp, d->once.read_all)) != 0)
		return rc > 0 ? 0 : rc;
	if (pg_source_fetch(&d->pg, &d->gaps, rp->limit, rp->young_since, rp->max_bytes, &nrows) < 0) {
		ladder_pg_trouble(&d->ladder, "could not read a batch; will retry");
		return -EIO;
	}
	d->once.all_read = rp->young_since == GAP_OLD;
	d->once.read_all = false;
	report_step(&t, &t.fetch_us);
	read_plan_read(rp, t.fetch_us / 1000);
	d->release.hold_through = ladder_hold_through(&d->ladder);
	if (nrows == 0 && !release_needed(&d->release))
		return nothing_read(d);
	if ((rc = build_batch(&d->build, &d->pg, &d->narrow, &d->batch, nrows, rp->max_bytes)) < 0)
		return fault_build(&d->fault, rc);
	release_counts(&d->release, &t.held, &t.released);
	if (nrows == 0 && t.released == 0)
		return nothing_read(d);
	if ((rc = pg_source_move_dead(&d->pg, &d->batch)) < 0) {
		ladder_pg_trouble(&d->ladder, "could not move rows to staged_jobs_dead; will retry");
		return rc;
	}
	if (rc == PG_SOURCE_DEAD_KEPT) {
		release_dead_kept(&d->release);
		report_dead_kept(&d->report, &d->batch);
	}
	report_step(&t, &t.fetch_us);
	if (stop_seen(&d->stopping))
		return fault_stopped(&d->fault);
	if ((rc = push_first(&d->push, &d->batch, &failed)) != 0)
		return fault_push(&d->fault, failed, rc, (size_t)nrows + t.released);
	report_step(&t, &t.push_us);
	report_pushed(&d->report, &d->batch, false);
	if (rp->limit == d->cfg->batch_size && !release_needed(&d->release) &&
	    pipe_fits(&d->pg.read, &d->batch, nrows, rp->limit, rp->max_bytes))
		return drain_txn(d, &t);
	if (pg_source_commit(&d->pg, &d->batch) < 0)
		return fault_commit(&d->fault, false);
	return committed(d, &t, nrows);
}

/*
 * Staging transactions notify nobody by default (a NOTIFY serialises their
 * commits: sql/notify.sql, opt-in), so the relay polls: at once after a batch,
 * then 1 ms, 2 ms, 4 ms ... after each empty read, up to --poll-interval. A
 * busy table is read again within a millisecond or two; an idle one costs a
 * few reads a second. A notification, where the trigger is installed, ends
 * the wait early.
 */
static void idle_wait(struct drain *d, int *wait_ms)
{
	bool woken = false;

	if (pg_source_wait_jobs(&d->pg, *wait_ms, d->stopping.flag, &woken) < 0)
		ladder_pg_trouble(&d->ladder, "lost postgres while idle; will reconnect");
	*wait_ms = woken ? 1 : *wait_ms * 2 > d->cfg->poll_interval_ms ? d->cfg->poll_interval_ms : *wait_ms * 2;
}

/*
 * Stopping while leading with a target down and another up: one more batch,
 * which only holds the down targets' rows (fault.c commits them). A push to
 * it that failed just before the stop may have landed, and its rows, still
 * staged, would go elsewhere under a successor without that route.
 */
static void hold_at_stop(struct drain *d)
{
	bool up = false, down = false;

	if (!ladder_leads(&d->ladder))
		return;
	for (size_t i = 0; i < d->nt; i++) {
		up = up || d->t[i].state == TARGET_READY;
		down = down || d->t[i].state != TARGET_READY;
	}
	if (!up || !down)
		return;
	d->release.hold_only = true;
	(void)drain_batch(d);
	d->release.hold_only = false;
}

int drain_run(struct drain *d)
{
	int rc = 0, wait_ms = 1;

	while (!stop_seen(&d->stopping)) {
		long long cursor = d->gaps.cursor;
		bool ready = ladder_ensure_ready(&d->ladder);

		if (d->once.gave_up) {
			rc = 0;
			break;
		}
		if (stop_seen(&d->stopping))
			break; /* read no batch after a stop */
		rc = ready ? drain_batch(d) : -EAGAIN;
		if (rc == -ENOMEM)
			break;
		if (once_trouble_over(&d->once, rc < 0)) {
			rc = -ETIMEDOUT;
			break;
		}
		if (rc >= 0 && d->cfg->once && once_over(&d->once, cursor))
			break;
		if (rc > 0 || d->cfg->once)
			wait_ms = 1;
		else if (rc == 0)
			idle_wait(d, &wait_ms);
		rc = 0;
	}
	pg_source_rollback(&d->pg);
	if (stop_seen(&d->stopping))
		hold_at_stop(d);
	if (rc >= 0 && d->cfg->once && !stop_seen(&d->stopping))
		return once_report(&d->once);
	report_stopped(&d->report, &d->stopping);
	return rc < 0 ? rc : 0;
}
