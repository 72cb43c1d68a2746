/* Chaos with queue caps: tenants and the consumer (see caps.h). */
#include "fmacros.h"

#include <stdatomic.h>
#include <stdio.h>

#include "caps.h"

const char *caps_tenant(unsigned long long *rng)
{
	static const char *const small[] = { "'t1'", "'t2'", "'t3'", "'t4'", "'t5'", "'t6'", "'t7'", "'t8'" };
	unsigned long long k = rnd(rng) % 10;

	if (k < 7)
		return "'big'";
	if (k == 7)
		return "NULL";
	return small[rnd(rng) % (sizeof(small) / sizeof(small[0]))];
}

/* LLEN of every capped list, kept as the longest seen; nothing while Redis is down. */
static void sample_longest(struct env *e, struct caps_stats *st)
{
	for (int q = 0; q < NQUEUES; q++) {
		redisReply *r = q == CAPS_UNCAPPED ? NULL : env_cmd(e, "LLEN queue:%s", queues[q]);
		if (r && r->type == REDIS_REPLY_INTEGER && r->integer > atomic_load(&st->longest))
			atomic_store(&st->longest, r->integer);
		freeReplyObject(r);
	}
}

/* Whether pacing allows another pop now (rate jobs/s since start_ms). */
static bool may_pop(struct caps_stats *st, long long start_ms, long long popped)
{
	return !atomic_load(&st->pace) || popped < atomic_load(&st->rate) * (mono_ms() - start_ms) / 1000;
}

/* One job from the right of queue:<q> to the left of chaos:popped:<q>: one
 * atomic command, so a reply lost to a Redis restart loses no job. 1 if it
 * moved one, 0 if the list was empty, -1 if Redis did not answer. */
static int move_one(struct env *e, const char *q)
{
	redisReply *r = env_cmd(e, "LMOVE queue:%s chaos:popped:%s RIGHT LEFT", q, q);
	int rc = !r ? -1 : r->type == REDIS_REPLY_STRING ? 1 : 0;

	freeReplyObject(r);
	return rc;
}

int caps_consume(struct env *e, struct caps_stats *st)
{
	long long start = mono_ms(), next_sample = 0, popped = 0;
	int q = 0, empty = 0, rc;

	while (!interrupted) {
		if (mono_ms() >= next_sample) {
			sample_longest(e, st);
			next_sample = mono_ms() + 10;
		}
		if (!may_pop(st, start, popped)) {
			sleep_ms(1);
			continue;
		}
		if ((rc = move_one(e, queues[q])) < 0) {
			sleep_ms(50); /* Redis is restarting */
			continue;
		}
		q = (q + 1) % NQUEUES;
		if (rc == 1) {
			popped++;
			atomic_fetch_add(&st->popped, 1);
			empty = 0;
		} else if (++empty == NQUEUES) {
			empty = 0;
			if (atomic_load(&st->finish))
				return 0;
			sleep_ms(2);
		}
	}
	return 1;
}

int caps_restore(struct env *e)
{
	for (int q = 0; q < NQUEUES; q++) {
		redisReply *len = env_cmd(e, "LLEN queue:%s", queues[q]);
		redisReply *ex = env_cmd(e, "EXISTS chaos:popped:%s", queues[q]);
		redisReply *mv = NULL;
		int rc = 0;
		if (!len || len->type != REDIS_REPLY_INTEGER || len->integer != 0 || !ex ||
		    ex->type != REDIS_REPLY_INTEGER) {
			say("caps: queue:%s still holds jobs after the consumer finished", queues[q]);
			rc = -1;
		} else if (ex->integer == 1 &&
			   !(mv = env_cmd(e, "RENAME chaos:popped:%s queue:%s", queues[q], queues[q]))) {
			rc = -1;
		}
		freeReplyObject(len);
		freeReplyObject(ex);
		freeReplyObject(mv);
		if (rc < 0)
			return -1;
	}
	return 0;
}
