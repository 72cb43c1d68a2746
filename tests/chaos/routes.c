/* Chaos with routes: see routes.h. */
#include "fmacros.h"

#include <signal.h>
#include <stdio.h>

#include "routes.h"
#include "support/redis.h"
#include "support/timing.h"

int routes_start(struct routes_chaos *rc, struct env *e)
{
	for (int k = 0; k < ROUTES_EXTRA; k++) {
		char dir[PATH_MAX], err[REDIS_ERRLEN], sql[160];
		snprintf(dir, sizeof(dir), "%s/redis-route%d", e->srv.dir, k + 1);
		if (redis_server_start(&rc->redis[k], dir, err) < 0) {
			say("routes: %s", err);
			return -1;
		}
		snprintf(rc->flag[k], sizeof(rc->flag[k]), "r%d %s --redis-url %s", k + 1,
			 queues[ROUTES_FIRST_QUEUE + k], rc->redis[k].url);
		/* The queue goes to rK, not to the default target. */
		snprintf(sql, sizeof(sql),
			 "UPDATE chaos_routed SET target = 'r%d' WHERE queue = '%s' AND target = 'default'", k + 1,
			 queues[ROUTES_FIRST_QUEUE + k]);
		if (env_val(e, sql) < 0)
			return -1;
	}
	snprintf(rc->flag_r3, sizeof(rc->flag_r3), "r3 - --redis-url %s", rc->redis[0].url);
	return 0;
}

const char *routes_set_text(enum routes_set set)
{
	return set == ROUTES_NO_R2      ? "r2 removed (its queue to the default target, r2's held rows wait)"
	       : set == ROUTES_EXTRA_R3 ? "r3 added (a route-column-only route to r1's redis, unused)"
					: "the normal routes (r1, r2)";
}

const char *routes_set_kind(enum routes_set set)
{
	return set == ROUTES_NO_R2      ? "route change: r2 removed"
	       : set == ROUTES_EXTRA_R3 ? "route change: r3 added"
					: "route change: normal set";
}

bool routes_set_has_r2(enum routes_set set)
{
	return set != ROUTES_NO_R2;
}

void routes_args(const struct routes_chaos *rc, enum routes_set set, struct relay_argv *a)
{
	for (int k = 0; k < ROUTES_EXTRA; k++)
		if (k != 1 || routes_set_has_r2(set))
			(void)relay_argv_add(a, "--route", rc->flag[k]);
	if (set == ROUTES_EXTRA_R3)
		(void)relay_argv_add(a, "--route", rc->flag_r3);
}

int routes_note_removed(struct env *e)
{
	char sql[160];

	snprintf(sql, sizeof(sql), "INSERT INTO chaos_routed VALUES ('%s', 'default') ON CONFLICT DO NOTHING",
		 queues[ROUTES_FIRST_QUEUE + 1]);
	return env_val(e, sql) < 0 ? -1 : 0;
}

void routes_kill(struct routes_chaos *rc, int k)
{
	(void)redis_server_stop(&rc->redis[k], SIGKILL, 5000);
}

int routes_revive(struct routes_chaos *rc, int k)
{
	char err[REDIS_ERRLEN];

	if (redis_server_restart(&rc->redis[k], err) < 0) {
		say("routes: %s", err);
		return -1;
	}
	rc->restarts[k]++;
	return 0;
}

int routes_restart(struct routes_chaos *rc, int k, unsigned long long *rng)
{
	routes_kill(rc, k);
	sleep_ms(rnd_range(rng, 0, 1000));
	return routes_revive(rc, k);
}

int routes_seen_load(struct routes_chaos *rc, struct env *e, long long *entries)
{
	redisContext *own = e->redis;
	int own_port = e->srv.redis_port, rc_ = 0;

	for (int k = 0; rc_ == 0 && k < ROUTES_EXTRA; k++) {
		char err[REDIS_ERRLEN];
		long long n = 0;
		/* seen_load reads e's Redis: this target's, for the while. */
		e->redis = redis_open(rc->redis[k].port, 2000, err);
		e->srv.redis_port = rc->redis[k].port;
		e->seen_target = k == 0 ? "r1" : "r2";
		rc_ = e->redis ? seen_load(e, &n) : -1;
		*entries += n;
		if (e->queue_redis[ROUTES_FIRST_QUEUE + k])
			redisFree(e->queue_redis[ROUTES_FIRST_QUEUE + k]);
		e->queue_redis[ROUTES_FIRST_QUEUE + k] = e->redis;
	}
	e->redis = own;
	e->srv.redis_port = own_port;
	e->seen_target = NULL;
	return rc_;
}

void routes_stop(struct routes_chaos *rc, struct env *e)
{
	for (int k = 0; k < ROUTES_EXTRA; k++) {
		if (e->queue_redis[ROUTES_FIRST_QUEUE + k])
			redisFree(e->queue_redis[ROUTES_FIRST_QUEUE + k]);
		e->queue_redis[ROUTES_FIRST_QUEUE + k] = NULL;
		(void)redis_server_stop(&rc->redis[k], SIGTERM, 10000);
	}
}
