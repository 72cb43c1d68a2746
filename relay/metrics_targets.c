/* Each target's figures (routes.h): whether it is up, what it relayed, how
 * long its pushes took, what waits held for it. */
#include "fmacros.h"

#include <stdio.h>
#include <string.h>

#include "metrics.h"
#include "metrics_text.h"

void metrics_targets(struct metrics *m, const char *const *names, size_t n)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->ntargets = n < METRICS_MAX_TARGETS ? n : METRICS_MAX_TARGETS;
	for (size_t i = 0; i < m->ntargets; i++) {
		memset(&m->targets[i], 0, sizeof(m->targets[i]));
		snprintf(m->targets[i].name, sizeof(m->targets[i].name), "%s", names[i]);
		m->targets[i].workers_elsewhere = -1;
	}
	pthread_mutex_unlock(&m->lock);
}

/* Target i's figures, locked, or NULL when it is not named. */
static struct metrics_target *lock_target(struct metrics *m, size_t i)
{
	if (!m)
		return NULL;
	pthread_mutex_lock(&m->lock);
	if (i < m->ntargets)
		return &m->targets[i];
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

void metrics_target_up(struct metrics *m, size_t i, bool up)
{
	struct metrics_target *t = lock_target(m, i);

	if (!t)
		return;
	t->up = up;
	pthread_mutex_unlock(&m->lock);
}

void metrics_target_readers(struct metrics *m, size_t i, bool elsewhere)
{
	struct metrics_target *t = lock_target(m, i);

	if (!t)
		return;
	t->workers_elsewhere = elsewhere;
	pthread_mutex_unlock(&m->lock);
}

void metrics_target_pushed(struct metrics *m, size_t i, long long jobs, double secs)
{
	struct metrics_target *t = lock_target(m, i);

	if (!t)
		return;
	t->relayed += (unsigned long long)jobs;
	t->pushes++;
	t->push_seconds += secs;
	pthread_mutex_unlock(&m->lock);
}

void metrics_target_fenced(struct metrics *m, size_t i, long long jobs)
{
	struct metrics_target *t = lock_target(m, i);

	if (!t)
		return;
	t->relayed += (unsigned long long)jobs;
	pthread_mutex_unlock(&m->lock);
}

void metrics_target_held(struct metrics *m, size_t i, long long held)
{
	struct metrics_target *t = lock_target(m, i);

	if (!t)
		return;
	t->held = held;
	pthread_mutex_unlock(&m->lock);
}

bool metrics_targets_ready_locked(const struct metrics *m)
{
	for (size_t i = 0; i < m->ntargets; i++)
		if (m->targets[i].up)
			return true;
	return false;
}

/* One series of every target: its value as the line's tail. */
static int series(const struct metrics *m, struct buf *out, const char *name, const char *type, const char *help,
		  int (*value)(struct buf *out, const struct metrics_target *t))
{
	int rc = metrics_put_head(out, name, type, help);

	for (size_t i = 0; rc == 0 && i < m->ntargets; i++)
		if ((rc = buf_printf(out, "stagedrain_%s{target=\"%s\"} ", name, m->targets[i].name)) == 0)
			rc = value(out, &m->targets[i]);
	return rc;
}

static int up_value(struct buf *out, const struct metrics_target *t)
{
	return buf_printf(out, "%d\n", t->up);
}

static int relayed_value(struct buf *out, const struct metrics_target *t)
{
	return buf_printf(out, "%llu\n", t->relayed);
}

static int held_value(struct buf *out, const struct metrics_target *t)
{
	return buf_printf(out, "%lld\n", t->held);
}

/*
 * The pushes' time as a summary without quantiles: one family,
 * stagedrain_target_push_seconds, whose _sum and _count samples keep the
 * names they had. Prometheus reads _sum and _count only as parts of a summary
 * or a histogram (promtool refuses them typed counter), and rate(_sum) /
 * rate(_count) is the mean push time a summary is for; quantiles would need
 * a window of samples the relay has no use for.
 */
static int push_summary(const struct metrics *m, struct buf *out)
{
	int rc = metrics_put_head(out, "target_push_seconds", "summary",
				  "Time the target's pushes took, from send to acknowledgement, in committed "
				  "transactions.");

	for (size_t i = 0; rc == 0 && i < m->ntargets; i++)
		rc = buf_printf(out,
				"stagedrain_target_push_seconds_sum{target=\"%s\"} %.6f\n"
				"stagedrain_target_push_seconds_count{target=\"%s\"} %llu\n",
				m->targets[i].name, m->targets[i].push_seconds, m->targets[i].name,
				m->targets[i].pushes);
	return rc;
}

/* Left out for a target not looked at yet, or whose workers register nothing (Laravel). */
static int elsewhere_gauge(const struct metrics *m, struct buf *out)
{
	int rc = metrics_put_head(out, "target_workers_elsewhere", "gauge",
				  "1 while the target's workers register in Redis under another key prefix or "
				  "database and none where it pushes: its jobs wait unread (stagedrain move).");

	for (size_t i = 0; rc == 0 && i < m->ntargets; i++)
		if (m->targets[i].workers_elsewhere >= 0)
			rc = buf_printf(out, "stagedrain_target_workers_elsewhere{target=\"%s\"} %d\n",
					m->targets[i].name, m->targets[i].workers_elsewhere);
	return rc;
}

int metrics_targets_format(const struct metrics *m, struct buf *out)
{
	int rc = series(m, out, "target_up", "gauge",
			"1 while the target (--route; default: --redis-url) takes jobs; 0 while its jobs wait in "
			"staged_jobs_held (unreachable, over its memory bound, too few replicas, or not led).",
			up_value);

	if (rc == 0)
		rc = series(m, out, "target_jobs_relayed_total", "counter",
			    "Jobs the target acknowledged in committed transactions.", relayed_value);
	if (rc == 0)
		rc = series(m, out, "target_jobs_held", "gauge",
			    "Jobs waiting in staged_jobs_held for the target (down, or capped queues).", held_value);
	if (rc == 0)
		rc = push_summary(m, out);
	if (rc == 0)
		rc = elsewhere_gauge(m, out);
	return rc == 0 ? metrics_cluster_format(m, out) : rc;
}
