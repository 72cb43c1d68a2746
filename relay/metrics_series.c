/* The relay's series, as metrics_format writes them for /metrics from struct metrics, under its lock. */
#include "fmacros.h"

#include <math.h>
#include <string.h>

#include "metrics.h"
#include "metrics_text.h"

#define METRICS_STR_(x) #x
#define METRICS_STR(x) METRICS_STR_(x)

static int format_relayed(struct metrics *m, struct buf *out)
{
	int rc = metrics_put_head(out, "jobs_relayed_total", "counter",
				  "Jobs pushed to Redis and deleted from staged_jobs, by queue.");

	for (size_t i = 0; rc == 0 && i < m->nqueues; i++) {
		if ((rc = buf_puts(out, "stagedrain_jobs_relayed_total{queue=\"")) == 0 &&
		    (rc = metrics_put_label(out, m->queues[i].name, m->queues[i].len)) == 0)
			rc = buf_printf(out, "\"} %llu\n", m->queues[i].relayed);
	}
	return rc;
}

/* One series per queue that has held jobs, ever. */
static int held_series(struct metrics *m, struct buf *out, const char *name, const char *type, const char *help,
		       int which)
{
	int rc = metrics_put_head(out, name, type, help);

	for (size_t i = 0; rc == 0 && i < m->nqueues; i++) {
		const struct metrics_queue *q = &m->queues[i];
		double v = which == 1   ? (double)q->held_total
			   : which == 2 ? (double)q->released_total
					: q->held_seconds;
		if (!q->capped)
			continue;
		if ((rc = buf_printf(out, "stagedrain_%s{queue=\"", name)) == 0 &&
		    (rc = metrics_put_label(out, q->name, q->len)) == 0)
			rc = buf_printf(out, "\"} %.*f\n", which == 3 ? 6 : 0, v);
	}
	return rc;
}

static int format_held(struct metrics *m, struct buf *out)
{
	int rc = metrics_held_format(m, out);

	if (rc == 0)
		rc = held_series(m, out, "jobs_held_total", "counter",
				 "Jobs moved to staged_jobs_held (their queue was at its cap), by queue.", 1);
	if (rc == 0)
		rc = held_series(m, out, "jobs_released_total", "counter", "Held jobs released to Redis, by queue.", 2);
	if (rc == 0)
		rc = held_series(m, out, "held_seconds_total", "counter",
				 "Time the released jobs had spent held, summed, by queue.", 3);
	if (rc == 0)
		rc = metrics_put_head(out, "backpressure_seconds_total", "counter",
				      "Time spent holding jobs back: queue_length (a capped queue holds jobs), "
				      "redis_memory (paused by --max-redis-memory).");
	if (rc == 0)
		rc = buf_printf(out,
				"stagedrain_backpressure_seconds_total{reason=\"queue_length\"} %.3f\n"
				"stagedrain_backpressure_seconds_total{reason=\"redis_memory\"} %.3f\n",
				m->backpressure_seconds[METRICS_HELD_QUEUE],
				m->backpressure_seconds[METRICS_HELD_MEMORY]);
	if (rc == 0)
		rc = metrics_put_head(out, "redis_memory_paused", "gauge",
				      "1 while --max-redis-memory keeps the relay from pushing.");
	return rc ? rc : buf_printf(out, "stagedrain_redis_memory_paused %d\n", m->memory_paused ? 1 : 0);
}

static int format_batches(struct metrics *m, struct buf *out)
{
	unsigned long long cum = 0;
	int rc = metrics_put_head(out, "batches_total", "counter", "Batches committed: pushed to Redis, then deleted.");

	if (rc == 0)
		rc = buf_printf(out, "stagedrain_batches_total %llu\n", m->batches);
	if (rc == 0)
		rc = metrics_put_head(out, "batch_duration_seconds", "histogram",
				      "Time from reading a batch to committing its delete.");
	for (size_t k = 0; rc == 0 && k < METRICS_NBUCKETS; k++) {
		cum += m->buckets[k];
		rc = buf_printf(out, "stagedrain_batch_duration_seconds_bucket{le=\"%g\"} %llu\n",
				metrics_bucket_bounds[k], cum);
	}
	cum += m->buckets[METRICS_NBUCKETS];
	if (rc == 0)
		rc = buf_printf(out,
				"stagedrain_batch_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
				"stagedrain_batch_duration_seconds_sum %.6f\n"
				"stagedrain_batch_duration_seconds_count %llu\n",
				cum, m->duration_sum, cum);
	return rc;
}

static int format_state(struct metrics *m, struct buf *out)
{
	int rc = metrics_put_head(out, "dead_letter_jobs_total", "counter",
				  "Rows that could not be jobs, moved to staged_jobs_dead.");

	if (rc == 0)
		rc = buf_printf(out, "stagedrain_dead_letter_jobs_total %llu\n", m->dead);
	if (rc == 0)
		rc = metrics_put_head(out, "is_leader", "gauge",
				      "1 while this relay holds the leader lock, 0 on a standby.");
	if (rc == 0)
		rc = buf_printf(out, "stagedrain_is_leader %d\n", m->leader);
	if (rc == 0)
		rc = metrics_put_head(out, "leader_epoch", "gauge",
				      "Epoch this relay took in Redis when it became leader; 0 on a standby.");
	if (rc == 0)
		rc = buf_printf(out, "stagedrain_leader_epoch %lld\n", m->epoch);
	if (rc == 0)
		rc = metrics_put_head(out, "reconnects_total", "counter",
				      "Times the relay reconnected to a server after losing it.");
	for (int s = 0; rc == 0 && s < METRICS_NSERVERS; s++)
		rc = buf_printf(out, "stagedrain_reconnects_total{server=\"%s\"} %llu\n", metrics_server_names[s],
				m->reconnects[s]);
	return rc;
}

/* A foreign session keeps every relay a standby for as long as it lives: alert on it. */
static int format_lock(struct metrics *m, struct buf *out)
{
	int rc = metrics_put_head(
		out, "leader_lock_foreign", "gauge",
		"1 while this relay stands by because a session that is not a relay holds the leader lock.");

	return rc ? rc : buf_printf(out, "stagedrain_leader_lock_foreign %d\n", m->lock_foreign);
}

/* Which Redis the relay writes to: after a failover, the master it follows. */
static int format_redis(struct metrics *m, struct buf *out)
{
	int rc = metrics_put_head(
		out, "redis_wait_short_total", "counter",
		"Pushes and fences fewer replicas acknowledged than --redis-wait-replicas; rolled back "
		"and tried again.");

	if (rc == 0)
		rc = buf_printf(out, "stagedrain_redis_wait_short_total %llu\n", m->wait_short);
	if (rc == 0 && m->redis_address[0])
		rc = metrics_put_head(
			out, "redis_master_info", "gauge",
			"The Redis server the relay pushes to (behind sentinels, the master it follows).");
	if (rc == 0 && m->redis_address[0] && (rc = buf_puts(out, "stagedrain_redis_master_info{address=\"")) == 0 &&
	    (rc = metrics_put_label(out, m->redis_address, strlen(m->redis_address))) == 0 &&
	    (rc = buf_puts(out, "\",master_name=\"")) == 0 &&
	    (rc = metrics_put_label(out, m->redis_master, strlen(m->redis_master))) == 0)
		rc = buf_printf(out, "\",tls=\"%s\"} 1\n", m->redis_tls ? "true" : "false");
	return rc;
}

/* What jobs look like: for Sidekiq's layouts, the timestamps written and
 * the version that runs (read from the fleet) or was configured. */
static int format_jobs(struct metrics *m, struct buf *out)
{
	int rc = 0;

	if (!m->format)
		return 0;
	rc = metrics_put_head(
		out, "job_format_info", "gauge",
		"The job format the relay writes; for Sidekiq's layouts, the timestamps it writes, the Sidekiq "
		"version read from the live processes (or configured), and which.");
	if (rc == 0)
		rc = buf_printf(out, "stagedrain_job_format_info{format=\"%s\",timestamps=\"%s\",sidekiq_version=\"",
				m->format, m->timestamps);
	if (rc == 0)
		rc = metrics_put_label(out, m->sidekiq_version, strlen(m->sidekiq_version));
	if (rc == 0)
		rc = buf_printf(out, "\",sidekiq_version_source=\"%s\"} 1\n", m->sidekiq_source);
	return rc;
}

static const char *const xmin_kinds[METRICS_XMIN_KINDS] = { "backend", "standby", "slot", "prepared" };

/* One series per kind, 0 when none holds; a kind the watcher could not see
 * (another role's backends, a standby, without pg_read_all_stats) is left out. */
static int holder_series(struct buf *out, const char *name, const char *help, const double *v, int decimals)
{
	int rc = metrics_put_head(out, name, "gauge", help);

	for (int k = 0; rc == 0 && k < METRICS_XMIN_KINDS; k++)
		if (!isnan(v[k]))
			rc = buf_printf(out, "stagedrain_%s{kind=\"%s\"} %.*f\n", name, xmin_kinds[k], decimals, v[k]);
	return rc;
}

static int format_holders(struct metrics *m, struct buf *out)
{
	int rc = holder_series(out, "xmin_holder_age_seconds",
			       "How long the oldest holder of each kind has held back vacuum (the xmin horizon): "
			       "backend, standby (hot_standby_feedback), slot, prepared; for a standby or a slot, "
			       "since the relay saw it begin to; 0 when none.",
			       m->db.holder_age_s, 3);

	if (rc == 0)
		rc = holder_series(out, "xmin_holder_xids",
				   "Transactions begun since the xmin the oldest holder of each kind holds "
				   "(age(xmin)); 0 when none.",
				   m->db.holder_xids, 0);
	return rc;
}

/* The dead-letter table now, read by the leader's watcher. */
static int format_dead(struct metrics *m, struct buf *out)
{
	int rc = metrics_put_head(out, "dead_jobs", "gauge",
				  "Rows in staged_jobs_dead now, by queue (the " METRICS_STR(
					  METRICS_DEAD_QUEUES) " queues with most, the rest as " METRICS_OTHER_QUEUE
							       "). Leader only.");

	for (size_t i = 0; rc == 0 && i < m->db.ndead; i++) {
		const struct metrics_dead_queue *q = &m->db.dead[i];
		if ((rc = buf_puts(out, "stagedrain_dead_jobs{queue=\"")) == 0 &&
		    (rc = metrics_put_label(out, q->queue, strlen(q->queue))) == 0)
			rc = buf_printf(out, "\"} %lld\n", q->rows);
	}
	if (rc == 0)
		rc = metrics_put_gauge(
			out, "dead_oldest_age_seconds",
			"Time since the oldest row in staged_jobs_dead failed; 0 when it is empty. Leader only.",
			m->db.dead_oldest_age_s, 3);
	if (rc == 0)
		rc = metrics_put_gauge(
			out, "misdirected_jobs",
			"Rows in staged_jobs_dead staged for a key prefix this relay does not push under "
			"(reason misdirected: fix the prefix, then stagedrain dead replay). Leader only.",
			m->db.dead_misdirected, 0);
	return rc;
}

static int format_db(struct metrics *m, struct buf *out)
{
	int rc = metrics_put_head(out, "ready", "gauge", "1 while /readyz answers 200: both servers reachable.");

	if (rc == 0)
		rc = buf_printf(out, "stagedrain_ready %d\n", metrics_ready_locked(m));
	if (rc == 0)
		rc = metrics_put_gauge(
			out, "backlog_jobs",
			"Jobs staged and not yet relayed (PostgreSQL's live-row estimate for staged_jobs).",
			m->db.backlog_jobs, 0);
	if (rc == 0)
		rc = metrics_put_gauge(out, "oldest_staged_job_age_seconds",
				       "Age of the oldest job waiting to be relayed (the lowest id staged, stuck rows "
				       "below the cursor included); 0 when none waits. Leader only.",
				       m->db.oldest_job_age_s, 3);
	if (rc == 0)
		rc = metrics_put_gauge(
			out, "oldest_transaction_age_seconds",
			"Age of the oldest transaction in the database that holds back vacuum; 0 when none.",
			m->db.oldest_xact_age_s, 3);
	if (rc == 0)
		rc = metrics_put_gauge(out, "staged_dead_tuples",
				       "Dead rows in staged_jobs that vacuum has not removed yet.", m->db.dead_tuples,
				       0);
	if (rc == 0)
		rc = format_holders(m, out);
	if (rc == 0)
		rc = format_dead(m, out);
	return rc;
}

int metrics_format(struct metrics *m, struct buf *out)
{
	int rc;

	pthread_mutex_lock(&m->lock);
	rc = format_relayed(m, out);
	if (rc == 0)
		rc = format_held(m, out);
	if (rc == 0)
		rc = format_batches(m, out);
	if (rc == 0)
		rc = format_state(m, out);
	if (rc == 0)
		rc = format_lock(m, out);
	if (rc == 0)
		rc = format_redis(m, out);
	if (rc == 0)
		rc = format_jobs(m, out);
	if (rc == 0)
		rc = format_db(m, out);
	if (rc == 0)
		rc = metrics_targets_format(m, out);
	pthread_mutex_unlock(&m->lock);
	return rc;
}
