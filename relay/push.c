/* The push step of a batch: each target's part, sent and acknowledged (push.h). */
#include "fmacros.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "log.h"
#include "push.h"

void push_init(struct push *p, struct target *t, size_t nt, struct release *release, struct metrics *metrics)
{
	*p = (struct push){ .t = t, .nt = nt, .release = release, .metrics = metrics };
}

void push_free(struct push *p)
{
	if (!p)
		return;
	free(p->scratch);
	p->scratch = NULL;
	p->capscratch = 0;
}

/* Jobs of a target's part whose Redis keys have the wrong type. */
struct blocked_arg {
	struct target *t;
	struct release *release;
};

static bool job_blocked(const struct batch_job *j, void *arg)
{
	struct blocked_arg *a = arg;
	bool blocked = j->target == a->t->index && redis_sink_blocked(&a->t->redis, &a->t->part, j);

	if (blocked && j->hold_id)
		release_unrelease(a->release, j);
	return blocked;
}

/* Names the keys of the wrong type, at most once a minute while they stay so
 * (wrongtype_log_ms: when last named; 0: not since a clean push). */
static void log_wrong_types(struct target *t, size_t kept)
{
	long long now = clock_mono_ms();
	const char *type, *key = redis_sink_bad_key(&t->redis, 0, &type);

	if (t->wrongtype_log_ms && now - t->wrongtype_log_ms < 60000)
		return;
	t->wrongtype_log_ms = now;
	log_warn("a redis key the batch writes has the wrong type; its jobs stay staged until it is fixed",
		 LOGF(F_STR("key", key), F_STR("type", type), F_INT("keys", t->redis.nbad), F_INT("jobs_kept", kept),
		      F_STR("target", t->name)));
}

/*
 * A target's push found keys of the wrong type (rc) and wrote nothing: the
 * jobs for those keys are kept (staged, re-read with the old gaps) and the
 * rest is pushed again, so one bad key holds up only its own jobs.
 */
static int push_kept(struct push *p, struct batch *b, struct target *t, int rc)
{
	struct blocked_arg arg = { t, p->release };
	const struct batch_job *grouped;
	size_t kept = b->nkept;

	/* A part whose jobs were all kept pushes nothing. */
	for (int tries = 0; rc == REDIS_SINK_WRONGTYPE && tries < 4; tries++) {
		batch_keep(b, job_blocked, &arg);
		if (!(grouped = target_group(b, p->nt, &p->scratch, &p->capscratch)))
			return -ENOMEM;
		target_view(t, b, grouped);
		log_wrong_types(t, b->nkept - kept);
		rc = redis_sink_push(&t->redis, &t->part);
	}
	if (rc == REDIS_SINK_WRONGTYPE) {
		snprintf(t->redis.errstr, sizeof(t->redis.errstr), "keys of the wrong type kept changing");
		return -EIO;
	}
	return rc;
}

int push_send(struct push *p, struct batch *b, struct target **failed)
{
	const struct batch_job *grouped = target_group(b, p->nt, &p->scratch, &p->capscratch);
	long long now = clock_mono_us();
	int rc = grouped ? 0 : -ENOMEM;

	*failed = &p->t[0];
	for (size_t i = 0; rc == 0 && i < p->nt; i++) {
		struct target *t = &p->t[i];
		target_view(t, b, grouped);
		if (t->part.njobs == 0)
			continue;
		*failed = t;
		/* A push that left may land: the fence names it from now. */
		if ((rc = redis_sink_send(&t->redis, &t->part, t->pushed)) != 0)
			break;
		t->in_flight = t->pushed = true;
		t->push_us = now;
	}
	return rc;
}

int push_replies(struct push *p, struct batch *b, struct target **failed, bool first)
{
	int rc = 0;

	for (size_t i = 0; i < p->nt; i++) {
		struct target *t = &p->t[i];
		int one;
		if (!t->in_flight)
			continue;
		t->in_flight = false;
		one = redis_sink_reply(&t->redis);
		if (first && one == 0)
			t->wrongtype_log_ms = 0; /* the keys are fixed: say so again if they break */
		if (first && one == REDIS_SINK_WRONGTYPE)
			one = push_kept(p, b, t, one);
		t->push_us = clock_mono_us() - t->push_us;
		if (one == 0)
			t->txn_jobs += (long long)t->part.njobs;
		else if (rc == 0) {
			rc = one;
			*failed = t;
		}
	}
	return rc;
}

int push_first(struct push *p, struct batch *b, struct target **failed)
{
	struct target *later = NULL;
	int rc = push_send(p, b, failed);
	int replies = push_replies(p, b, rc ? &later : failed, true);

	return rc ? rc : replies;
}

void push_undo(struct push *p, enum target_state to)
{
	for (size_t i = 0; i < p->nt; i++) {
		if (p->t[i].pushed)
			target_fall_back(&p->t[i], to);
		p->t[i].pushed = false;
		p->t[i].txn_jobs = 0;
	}
}

void push_settle(struct push *p)
{
	for (size_t i = 0; i < p->nt; i++) {
		struct target *t = &p->t[i];
		if (!t->pushed)
			continue;
		t->pushed = false;
		redis_sink_committed(&t->redis);
		backoff_reset(&t->backoff);
		t->relayed += t->txn_jobs;
		metrics_target_pushed(p->metrics, i, t->txn_jobs, (double)t->push_us / 1e6);
		t->txn_jobs = 0;
	}
}

void push_drop_in_flight(struct push *p)
{
	for (size_t i = 0; i < p->nt; i++) {
		if (p->t[i].in_flight)
			redis_sink_close(&p->t[i].redis);
		p->t[i].in_flight = false;
	}
}
