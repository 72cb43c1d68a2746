/* What /metrics and /readyz report, kept under one mutex: the drain's and the watcher's updates. */
#include "fmacros.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "metrics_text.h"
#include "sidekiq_probe.h"

/* From a one-job batch on loopback (about a millisecond) to a push that hit
 * the default --redis-timeout (5 s) twice over. */
const double metrics_bucket_bounds[METRICS_NBUCKETS] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
							 0.25,  0.5,    1,     2.5,  5,     10 };

const char *const metrics_server_names[METRICS_NSERVERS] = { "postgres", "redis" };

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
