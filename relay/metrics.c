/* What /metrics and /readyz report, kept under one mutex and written as Prometheus text. */
#include "fmacros.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "sidekiq_probe.h"

/* From a one-job batch on loopback (about a millisecond) to a push that hit
 * the default --redis-timeout (5 s) twice over. */
const double metrics_bucket_bounds[METRICS_NBUCKETS] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
							 0.25,  0.5,    1,     2.5,  5,     10 };

static const char *const server_names[METRICS_NSERVERS] = { "postgres", "redis" };

#define METRICS_STR_(x) #x
#define METRICS_STR(x) METRICS_STR_(x)

int metrics_init(struct metrics *m)
{
	memset(m, 0, sizeof(*m));
	metrics_db_unknown(&m->db);
	return -pthread_mutex_init(&m->lock, NULL);
}

void metrics_free(struct metrics *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nqueues; i++)
		free(m->queues[i].name);
	free(m->queues);
	free(m->held);
	pthread_mutex_destroy(&m->lock);
	memset(m, 0, sizeof(*m));
}

/* The label of a long name: its head, cut on a UTF-8 boundary, "...#" and a
 * 64-bit FNV-1a hash of the whole name: METRICS_LABEL_MAX bytes in out,
 * which holds one more for snprintf's nul. */
size_t metrics_short_label(const char *name, size_t len, char *out)
{
	unsigned long long h = 14695981039346656037ULL;
	size_t head = METRICS_LABEL_MAX - 20;

	if (len <= METRICS_LABEL_MAX) {
		memcpy(out, name, len);
		out[len] = '\0';
		return len;
	}
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)name[i]) * 1099511628211ULL;
	while (head > 0 && ((unsigned char)name[head] & 0xc0) == 0x80)
		head--;
	memcpy(out, name, head);
	return head + (size_t)snprintf(out + head, METRICS_LABEL_MAX + 1 - head, "...#%016llx", h);
}

/* The queue's counter, added on first sight; past the bounds (queues, label
 * bytes), or out of memory, the shared METRICS_OTHER_QUEUE one. hint: where
 * the last job's was. */
static struct metrics_queue *queue_slot(struct metrics *m, const char *name, size_t len, size_t *hint)
{
	char label[METRICS_LABEL_MAX + 1];
	struct metrics_queue *q;
	bool full;

	if (len > METRICS_LABEL_MAX) {
		len = metrics_short_label(name, len, label);
		name = label;
	}
	full = m->nqueues >= METRICS_MAX_QUEUES || m->label_bytes + len > METRICS_LABEL_BUDGET;

	if (*hint < m->nqueues && m->queues[*hint].len == len && memcmp(m->queues[*hint].name, name, len) == 0)
		return &m->queues[*hint];
	for (size_t i = 0; i < m->nqueues; i++) {
		if (m->queues[i].len == len && memcmp(m->queues[i].name, name, len) == 0) {
			*hint = i;
			return &m->queues[i];
		}
	}
	if (full) {
		name = METRICS_OTHER_QUEUE;
		len = strlen(name);
		for (size_t i = 0; i < m->nqueues; i++)
			if (m->queues[i].len == len && memcmp(m->queues[i].name, name, len) == 0)
				return &m->queues[i];
	}
	if (m->nqueues == m->capqueues) {
		size_t cap = m->capqueues ? m->capqueues * 2 : 8;
		if (!(q = realloc(m->queues, cap * sizeof(*q))))
			return NULL;
		m->queues = q;
		m->capqueues = cap;
	}
	q = &m->queues[m->nqueues];
	if (!(q->name = strndup(name, len)))
		return NULL;
	q->len = len;
	m->label_bytes += len;
	q->relayed = q->pending = 0;
	q->capped = false;
	q->held_total = q->released_total = 0;
	q->held_seconds = 0;
	*hint = m->nqueues++;
	return q;
}

/* Called with the lock held. */
static void add_pending(struct metrics *m, const struct batch *b)
{
	size_t hint = 0;

	for (size_t i = 0; i < b->njobs; i++) {
		struct metrics_queue *q = queue_slot(m, b->jobs[i].queue, b->jobs[i].queue_len, &hint);
		if (q)
			q->pending++;
	}
}

void metrics_batch_pushed(struct metrics *m, const struct batch *b)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->nqueues; i++)
		m->queues[i].pending = 0;
	add_pending(m, b);
	pthread_mutex_unlock(&m->lock);
}

void metrics_batch_also(struct metrics *m, const struct batch *b)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	add_pending(m, b);
	pthread_mutex_unlock(&m->lock);
}

void metrics_fenced(struct metrics *m, const char *queue, size_t len, unsigned long long n)
{
	struct metrics_queue *q;
	size_t hint = 0;

	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	if ((q = queue_slot(m, queue, len, &hint)) != NULL)
		q->relayed += n;
	pthread_mutex_unlock(&m->lock);
}

void metrics_held(struct metrics *m, const char *queue, size_t len, long long held, long long nheld, long long released,
		  double waited_s)
{
	struct metrics_queue *q;
	size_t hint = 0;

	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	if ((q = queue_slot(m, queue, len, &hint)) != NULL) {
		q->capped = true;
		(void)held; /* stagedrain_held_jobs is the watcher's reading, by target too (metrics_held.c) */
		q->held_total += (unsigned long long)nheld;
		q->released_total += (unsigned long long)released;
		q->held_seconds += waited_s;
	}
	pthread_mutex_unlock(&m->lock);
}

void metrics_backpressure(struct metrics *m, enum metrics_held_why why, double seconds, bool on)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->backpressure_seconds[why] += seconds;
	if (why == METRICS_HELD_MEMORY)
		m->memory_paused = on;
	pthread_mutex_unlock(&m->lock);
}

void metrics_batch_done(struct metrics *m, size_t ndead, double seconds, long long cursor)
{
	metrics_batches_done(m, 1, ndead, seconds, cursor);
}

void metrics_batches_done(struct metrics *m, size_t nbatches, size_t ndead, double seconds, long long cursor)
{
	double each = nbatches ? seconds / (double)nbatches : seconds;
	size_t k = 0;

	if (!m)
		return;
	while (k < METRICS_NBUCKETS && each > metrics_bucket_bounds[k])
		k++;
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->nqueues; i++) {
		m->queues[i].relayed += m->queues[i].pending;
		m->queues[i].pending = 0;
	}
	m->dead += ndead;
	m->batches += nbatches;
	m->buckets[k] += nbatches;
	m->duration_sum += seconds;
	m->cursor = cursor;
	pthread_mutex_unlock(&m->lock);
}

void metrics_leader(struct metrics *m, bool leader, long long cursor)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->leader = leader;
	m->cursor = cursor;
	if (!leader)
		m->epoch = 0;
	pthread_mutex_unlock(&m->lock);
}

void metrics_epoch(struct metrics *m, long long epoch)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->epoch = epoch;
	pthread_mutex_unlock(&m->lock);
}

void metrics_lock_foreign(struct metrics *m, bool foreign)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->lock_foreign = foreign;
	pthread_mutex_unlock(&m->lock);
}

void metrics_redis_server(struct metrics *m, const char *address, const char *master_name, bool tls)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	snprintf(m->redis_address, sizeof(m->redis_address), "%s", address);
	snprintf(m->redis_master, sizeof(m->redis_master), "%s", master_name ? master_name : "");
	m->redis_tls = tls;
	pthread_mutex_unlock(&m->lock);
}

void metrics_job_format(struct metrics *m, const char *format, const struct sidekiq_seen *seen)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->format = format;
	m->timestamps = seen ? seen->timestamps : "";
	snprintf(m->sidekiq_version, sizeof(m->sidekiq_version), "%s", seen ? seen->version : "");
	m->sidekiq_source = seen ? seen->source : "";
	pthread_mutex_unlock(&m->lock);
}

void metrics_wait_short(struct metrics *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->wait_short++;
	pthread_mutex_unlock(&m->lock);
}

void metrics_connected(struct metrics *m, enum metrics_server s, bool up, bool reconnect)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->connected[s] = up;
	m->reconnects[s] += reconnect;
	pthread_mutex_unlock(&m->lock);
}

void metrics_probe(struct metrics *m, enum metrics_server s, bool ok, const char *err)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->probed[s] = true;
	m->probe_ok[s] = ok;
	snprintf(m->probe_err[s], sizeof(m->probe_err[s]), "%s", ok || !err ? "" : err);
	pthread_mutex_unlock(&m->lock);
}

void metrics_db_unknown(struct metrics_db *db)
{
	memset(db, 0, sizeof(*db));
	db->backlog_jobs = db->oldest_job_age_s = db->oldest_xact_age_s = db->dead_tuples = NAN;
	for (int k = 0; k < METRICS_XMIN_KINDS; k++)
		db->holder_age_s[k] = db->holder_xids[k] = NAN;
	db->dead_oldest_age_s = db->dead_misdirected = NAN;
}

void metrics_db_reading(struct metrics *m, const struct metrics_db *db)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->db = *db;
	pthread_mutex_unlock(&m->lock);
}

bool metrics_leader_cursor(struct metrics *m, long long *cursor)
{
	bool leader;

	if (!m)
		return false;
	pthread_mutex_lock(&m->lock);
	leader = m->leader;
	*cursor = m->cursor;
	pthread_mutex_unlock(&m->lock);
	return leader;
}

/* A label value as the exposition format escapes it: \\, \" and \n. */
int metrics_put_label(struct buf *out, const char *s, size_t len)
{
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < len; i++) {
		if (s[i] == '\\')
			rc = buf_puts(out, "\\\\");
		else if (s[i] == '"')
			rc = buf_puts(out, "\\\"");
		else if (s[i] == '\n')
			rc = buf_puts(out, "\\n");
		else
			rc = buf_append(out, &s[i], 1);
	}
	return rc;
}

static int head(struct buf *out, const char *name, const char *type, const char *help)
{
	return buf_printf(out, "# HELP stagedrain_%s %s\n# TYPE stagedrain_%s %s\n", name, help, name, type);
}

/* A gauge the watcher reads: its sample is left out while the value is unknown. */
static int gauge(struct buf *out, const char *name, const char *help, double v, int decimals)
{
	int rc = head(out, name, "gauge", help);

	if (rc == 0 && !isnan(v))
		rc = buf_printf(out, "stagedrain_%s %.*f\n", name, decimals, v);
	return rc;
}

static int format_relayed(struct metrics *m, struct buf *out)
{
	int rc = head(out, "jobs_relayed_total", "counter",
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
	int rc = head(out, name, type, help);

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
		rc = head(out, "backpressure_seconds_total", "counter",
			  "Time spent holding jobs back: queue_length (a capped queue holds jobs), "
			  "redis_memory (paused by --max-redis-memory).");
	if (rc == 0)
		rc = buf_printf(out,
				"stagedrain_backpressure_seconds_total{reason=\"queue_length\"} %.3f\n"
				"stagedrain_backpressure_seconds_total{reason=\"redis_memory\"} %.3f\n",
				m->backpressure_seconds[METRICS_HELD_QUEUE],
				m->backpressure_seconds[METRICS_HELD_MEMORY]);
	if (rc == 0)
		rc = head(out, "redis_memory_paused", "gauge",
			  "1 while --max-redis-memory keeps the relay from pushing.");
	return rc ? rc : buf_printf(out, "stagedrain_redis_memory_paused %d\n", m->memory_paused ? 1 : 0);
}

static int format_batches(struct metrics *m, struct buf *out)
{
	unsigned long long cum = 0;
	int rc = head(out, "batches_total", "counter", "Batches committed: pushed to Redis, then deleted.");

	if (rc == 0)
		rc = buf_printf(out, "stagedrain_batches_total %llu\n", m->batches);
	if (rc == 0)
		rc = head(out, "batch_duration_seconds", "histogram",
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
	int rc = head(out, "dead_letter_jobs_total", "counter",
		      "Rows that could not be jobs, moved to staged_jobs_dead.");

	if (rc == 0)
		rc = buf_printf(out, "stagedrain_dead_letter_jobs_total %llu\n", m->dead);
	if (rc == 0)
		rc = head(out, "is_leader", "gauge", "1 while this relay holds the leader lock, 0 on a standby.");
	if (rc == 0)
		rc = buf_printf(out, "stagedrain_is_leader %d\n", m->leader);
	if (rc == 0)
		rc = head(out, "leader_epoch", "gauge",
			  "Epoch this relay took in Redis when it became leader; 0 on a standby.");
	if (rc == 0)
		rc = buf_printf(out, "stagedrain_leader_epoch %lld\n", m->epoch);
	if (rc == 0)
		rc = head(out, "reconnects_total", "counter",
			  "Times the relay reconnected to a server after losing it.");
	for (int s = 0; rc == 0 && s < METRICS_NSERVERS; s++)
		rc = buf_printf(out, "stagedrain_reconnects_total{server=\"%s\"} %llu\n", server_names[s],
				m->reconnects[s]);
	return rc;
}

/* A foreign session keeps every relay a standby for as long as it lives: alert on it. */
static int format_lock(struct metrics *m, struct buf *out)
{
	int rc = head(out, "leader_lock_foreign", "gauge",
		      "1 while this relay stands by because a session that is not a relay holds the leader lock.");

	return rc ? rc : buf_printf(out, "stagedrain_leader_lock_foreign %d\n", m->lock_foreign);
}

/* Which Redis the relay writes to: after a failover, the master it follows. */
static int format_redis(struct metrics *m, struct buf *out)
{
	int rc = head(out, "redis_wait_short_total", "counter",
		      "Pushes and fences fewer replicas acknowledged than --redis-wait-replicas; rolled back "
		      "and tried again.");

	if (rc == 0)
		rc = buf_printf(out, "stagedrain_redis_wait_short_total %llu\n", m->wait_short);
	if (rc == 0 && m->redis_address[0])
		rc = head(out, "redis_master_info", "gauge",
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
	rc = head(out, "job_format_info", "gauge",
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

/* Both servers reachable; with routes, Redis is any target that takes jobs. */
static bool ready_locked(const struct metrics *m)
{
	for (int s = 0; s < METRICS_NSERVERS; s++) {
		if (s == METRICS_REDIS && m->ntargets > 1 && metrics_targets_ready_locked(m))
			continue;
		if (!m->connected[s] || !m->probed[s] || !m->probe_ok[s])
			return false;
	}
	return true;
}

static const char *const xmin_kinds[METRICS_XMIN_KINDS] = { "backend", "standby", "slot", "prepared" };

/* One series per kind, 0 when none holds; a kind the watcher could not see
 * (another role's backends, a standby, without pg_read_all_stats) is left out. */
static int holder_series(struct buf *out, const char *name, const char *help, const double *v, int decimals)
{
	int rc = head(out, name, "gauge", help);

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
	int rc = head(out, "dead_jobs", "gauge",
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
		rc = gauge(out, "dead_oldest_age_seconds",
			   "Time since the oldest row in staged_jobs_dead failed; 0 when it is empty. Leader only.",
			   m->db.dead_oldest_age_s, 3);
	if (rc == 0)
		rc = gauge(out, "misdirected_jobs",
			   "Rows in staged_jobs_dead staged for a key prefix this relay does not push under "
			   "(reason misdirected: fix the prefix, then stagedrain dead replay). Leader only.",
			   m->db.dead_misdirected, 0);
	return rc;
}

static int format_db(struct metrics *m, struct buf *out)
{
	int rc = head(out, "ready", "gauge", "1 while /readyz answers 200: both servers reachable.");

	if (rc == 0)
		rc = buf_printf(out, "stagedrain_ready %d\n", ready_locked(m));
	if (rc == 0)
		rc = gauge(out, "backlog_jobs",
			   "Jobs staged and not yet relayed (PostgreSQL's live-row estimate for staged_jobs).",
			   m->db.backlog_jobs, 0);
	if (rc == 0)
		rc = gauge(out, "oldest_staged_job_age_seconds",
			   "Age of the oldest job waiting to be relayed (the lowest id staged, stuck rows "
			   "below the cursor included); 0 when none waits. Leader only.",
			   m->db.oldest_job_age_s, 3);
	if (rc == 0)
		rc = gauge(out, "oldest_transaction_age_seconds",
			   "Age of the oldest transaction in the database that holds back vacuum; 0 when none.",
			   m->db.oldest_xact_age_s, 3);
	if (rc == 0)
		rc = gauge(out, "staged_dead_tuples", "Dead rows in staged_jobs that vacuum has not removed yet.",
			   m->db.dead_tuples, 0);
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

/* One server's reason: short by default, since /readyz answers anyone; the
 * watcher's error text (addresses, server messages) only when asked for. */
static int ready_reason(const struct metrics *m, int s, struct buf *out, bool detail)
{
	if (!m->connected[s] && detail && m->probed[s] && !m->probe_ok[s] && *m->probe_err[s])
		return buf_printf(out, "; %s: not connected: %s", server_names[s], m->probe_err[s]);
	if (!m->connected[s])
		return buf_printf(out, "; %s: not connected", server_names[s]);
	if (!m->probed[s])
		return buf_printf(out, "; %s: not checked yet", server_names[s]);
	if (!m->probe_ok[s] && detail)
		return buf_printf(out, "; %s: %s", server_names[s], m->probe_err[s]);
	if (!m->probe_ok[s])
		return buf_printf(out, "; %s: unreachable", server_names[s]);
	return 0;
}

int metrics_ready(struct metrics *m, struct buf *out, bool *ready, bool detail)
{
	const char *role;
	int rc;

	pthread_mutex_lock(&m->lock);
	*ready = ready_locked(m);
	role = m->leader ? "leader" : "standby";
	rc = buf_printf(out, "%s %s", *ready ? "ready" : "not ready", role);
	for (int s = 0; rc == 0 && !*ready && s < METRICS_NSERVERS; s++)
		rc = ready_reason(m, s, out, detail);
	if (rc == 0)
		rc = buf_puts(out, "\n");
	pthread_mutex_unlock(&m->lock);
	return rc;
}
