/* What a batch's failed step does (fault.h). */
#include "fmacros.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fault.h"
#include "log.h"

void fault_init(struct fault *f, struct ladder *l, struct push *p, struct narrow *n, const struct batch *b)
{
	*f = (struct fault){ .ladder = l, .push = p, .narrow = n, .batch = b };
}

/* Whatever went wrong after the fetch and before the push: blamed on its side. */
int fault_build(struct fault *f, int rc)
{
	if (rc == RELEASE_PG_FAILED) {
		ladder_pg_trouble(f->ladder, "could not hold or release jobs; will retry");
		return -EIO;
	}
	pg_source_rollback(f->ladder->pg);
	if (rc == RELEASE_REDIS_FAILED) {
		struct target *t = &f->ladder->t[f->ladder->release->failed_target];
		target_fall_back(t, TARGET_NEED_EPOCH);
		ladder_redis_trouble(f->ladder, t, -EIO,
				     "could not read the capped queues' lengths; rolled back, will retry");
		return -EIO;
	}
	return rc;
}

/*
 * Redis refused the batch, it seems for what it holds. If Redis is down
 * (no fresh connection answers PING), this is ordinary trouble: back off.
 * Otherwise read fewer rows next time, at once, until one job is refused
 * alone, twice; it is dead-lettered with Redis's answer if Redis still runs
 * a push of nothing, so a Redis refusing every push never costs a job.
 */
static int push_refused(struct fault *f, struct target *t, size_t nrows)
{
	char answer[sizeof(t->redis.errstr)];
	const struct batch *b = &t->part;

	memcpy(answer, t->redis.errstr, sizeof(answer));
	if (redis_sink_connect(&t->redis) < 0) {
		narrow_calm(f->narrow);
		ladder_redis_trouble(f->ladder, t, -EIO,
				     "could not push a batch to redis, nor reach it again; rolled back, will retry");
		return -EIO;
	}
	if (narrow_refused(f->narrow, nrows, b->njobs, b->jobs[0].id, answer)) {
		if (redis_sink_probe(&t->redis) < 0) {
			narrow_calm(f->narrow);
			ladder_redis_trouble(f->ladder, t, -EIO,
					     "redis refuses even a push of nothing; rolled back, will retry");
			return -EIO;
		}
		narrow_condemn(f->narrow);
		log_warn("redis refused one job twice, alone; it goes to staged_jobs_dead",
			 LOGF(F_INT("id", b->jobs[0].id), F_STR("error", answer)));
		return -EIO;
	}
	/* Released jobs are not narrowed (the held read keeps its own size): with
	 * them in the batch, wait as for any trouble rather than spin. */
	if (b->jobs[b->njobs - 1].hold_id) {
		ladder_redis_trouble(f->ladder, t, -EIO,
				     "redis refused a batch with released jobs; rolled back, will retry");
		return -EIO;
	}
	log_warn("redis refused a batch for what it holds; reading fewer rows to find the one it refuses",
		 LOGF(F_STR("error", answer), F_INT("rows", nrows), F_INT("next_rows", f->narrow->limit)));
	return -EIO;
}

/*
 * The batch at a stop (hold_at_stop) held its down targets' rows: that is
 * committed, nothing else (the other rows stay staged). A target whose push
 * failed may have taken those rows (the reply lost, not the push), and only
 * its fence can tell: held for it, a successor without that target leaves
 * them be, where staged it would push them elsewhere (docs/topologies.md).
 */
static int commit_holds(struct fault *f, size_t held)
{
	PGresult *res = pg_source_exec(f->ladder->pg, "COMMIT");
	bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;

	PQclear(res);
	if (!ok) {
		pg_source_rollback(f->ladder->pg);
		log_warn("stopping: could not commit the rows the batch held; they stay staged",
			 LOGF(F_INT("rows", (long long)held), F_STR("error", PQerrorMessage(f->ladder->pg->conn))));
		return -EIO;
	}
	log_info("stopping: held the rows of the targets that are down, so that a relay without their routes leaves "
		 "them be; the other rows stay staged",
		 LOGF(F_INT("held", (long long)held)));
	return 0;
}

/*
 * A stop signal cut the batch short (or came before its push): roll back and
 * say where its rows are. Not pushed, they stay staged. A push cut short may
 * still have landed whole (Redis had the script), and one that landed before
 * its delete was cut short did: either way its fence names the rows, so the
 * next leader deletes them instead of pushing them again.
 */
static int abandon_batch(struct fault *f, bool at_delete, const char *error)
{
	size_t held, released;

	release_counts(f->ladder->release, &held, &released);
	if (!error && f->ladder->release->hold_only && held > 0)
		return commit_holds(f, held);
	pg_source_rollback(f->ladder->pg);
	if (!error) {
		log_info("stopping: the batch read was not pushed; its rows stay staged", LOGF(F_STR("step", "push")));
		return 0;
	}
	log_warn(at_delete ? "stopping: abandoned the batch in flight at its delete and rolled back; redis has "
			     "its push and the fence names its rows, so the next leader deletes them"
			   : "stopping: abandoned the batch in flight at its push and rolled back; its rows stay "
			     "staged, or, if redis ran the push, the fence names them",
		 LOGF(F_STR("step", at_delete ? "delete" : "push"), F_INT("jobs", f->batch->njobs),
		      F_STR("error", error)));
	return -EIO;
}

/* Target t's push failed (rc): roll back and let t back off, or narrow. */
int fault_push(struct fault *f, struct target *t, int rc, size_t nrows)
{
	/* Stale: another relay took an epoch since ours. Otherwise the push
	 * may still land (a reply lost or late): either way this epoch must
	 * not push again. A new one refuses the old push if it comes late,
	 * and the fence, read after, names it if it came first. The targets
	 * that acknowledged theirs settle their fences. */
	push_undo(f->push, TARGET_NEED_FENCE);
	target_fall_back(t, TARGET_NEED_EPOCH);
	if (stop_seen(f->ladder->stopping))
		return abandon_batch(f, false, t->redis.errstr);
	pg_source_rollback(f->ladder->pg);
	if (rc == REDIS_SINK_REFUSED)
		return push_refused(f, t, nrows);
	if (rc == REDIS_SINK_WRONGTYPE)
		snprintf(t->redis.errstr, sizeof(t->redis.errstr),
			 "a later batch of the transaction has keys of the wrong type; its first batch keeps them");
	ladder_redis_trouble(f->ladder, t, rc > 0 ? -EIO : rc,
			     "could not push a batch to redis; rolled back, will retry");
	return -EIO;
}

/* The delete or the COMMIT after acknowledged pushes failed (or with
 * epoch_lost, a read while a push was in flight, whose target's
 * connection the pipe closed). */
int fault_commit(struct fault *f, bool epoch_lost)
{
	push_undo(f->push, TARGET_NEED_FENCE);
	for (size_t i = 0; epoch_lost && i < f->ladder->nt; i++)
		if (!redis_sink_connected(&f->ladder->t[i].redis))
			target_fall_back(&f->ladder->t[i], TARGET_NEED_EPOCH);
	if (stop_seen(f->ladder->stopping))
		return abandon_batch(f, true, f->ladder->pg->errstr);
	ladder_pg_trouble(f->ladder, "pushed a batch but could not delete it; the fence will delete it");
	return -EIO;
}

int fault_txn_pg(struct fault *f, bool in_flight)
{
	push_drop_in_flight(f->push);
	pg_source_rollback(f->ladder->pg);
	return fault_commit(f, in_flight);
}

int fault_stopped(struct fault *f)
{
	return abandon_batch(f, false, NULL);
}
