/* Held rows in the metrics: staged_jobs_held by target and queue, as the leader's watcher reads it. */
#include "fmacros.h"

#include <string.h>

#include "metrics.h"
#include "metrics_text.h"

/* The pair's entry, added on first sight; past METRICS_HELD_SERIES the
 * target's METRICS_OTHER_QUEUE one (added even past it: one per target);
 * NULL only when out of memory. Called with the lock held. */
static struct metrics_held_row *pair(struct metrics *m, const char *target, const char *queue)
{
	struct metrics_held_row *h;

	for (size_t i = 0; i < m->nheld; i++)
		if (strcmp(m->held[i].target, target) == 0 && strcmp(m->held[i].queue, queue) == 0)
			return &m->held[i];
	if (m->nheld >= METRICS_HELD_SERIES && strcmp(queue, METRICS_OTHER_QUEUE) != 0)
		return pair(m, target, METRICS_OTHER_QUEUE);
	if (buf_grow_array((void **)&m->held, &m->capheld, m->nheld + 1, sizeof(*m->held)) < 0)
		return NULL;
	h = &m->held[m->nheld++];
	memset(h, 0, sizeof(*h));
	memcpy(h->target, target, strlen(target) + 1);
	memcpy(h->queue, queue, strlen(queue) + 1);
	return h;
}

void metrics_held_reading(struct metrics *m, const struct metrics_held_row *rows, size_t n, bool read)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->held_read = read;
	for (size_t i = 0; i < m->nheld; i++) {
		m->held[i].rows = 0;
		m->held[i].oldest_s = 0;
	}
	for (size_t i = 0; read && i < n; i++) {
		struct metrics_held_row *h = pair(m, rows[i].target, rows[i].queue);
		if (!h)
			continue;
		h->rows += rows[i].rows;
		if (rows[i].oldest_s > h->oldest_s)
			h->oldest_s = rows[i].oldest_s;
	}
	pthread_mutex_unlock(&m->lock);
}

/* Target t's oldest held row's age over every queue; 0 when none is held. */
static double target_oldest(const struct metrics *m, const char *t)
{
	double oldest = 0;

	for (size_t i = 0; i < m->nheld; i++)
		if (m->held[i].rows > 0 && strcmp(m->held[i].target, t) == 0 && m->held[i].oldest_s > oldest)
			oldest = m->held[i].oldest_s;
	return oldest;
}

int metrics_held_format(const struct metrics *m, struct buf *out)
{
	int rc = metrics_put_head(out, "held_jobs", "gauge",
				  "Jobs waiting in staged_jobs_held, by queue and target (the target down, or "
				  "the queue at its cap). Leader only.");

	for (size_t i = 0; rc == 0 && m->held_read && i < m->nheld; i++) {
		const struct metrics_held_row *h = &m->held[i];
		if ((rc = buf_puts(out, "stagedrain_held_jobs{queue=\"")) == 0 &&
		    (rc = metrics_put_label(out, h->queue, strlen(h->queue))) == 0 &&
		    (rc = buf_puts(out, "\",target=\"")) == 0 &&
		    (rc = metrics_put_label(out, h->target, strlen(h->target))) == 0)
			rc = buf_printf(out, "\"} %lld\n", h->rows);
	}
	if (rc == 0)
		rc = metrics_put_head(out, "target_oldest_held_age_seconds", "gauge",
				      "Age of the oldest job waiting in staged_jobs_held for the target, since it was "
				      "staged; 0 when none. Leader only.");
	for (size_t i = 0; rc == 0 && m->held_read && i < m->ntargets; i++)
		rc = buf_printf(out, "stagedrain_target_oldest_held_age_seconds{target=\"%s\"} %.3f\n",
				m->targets[i].name, target_oldest(m, m->targets[i].name));
	return rc;
}
