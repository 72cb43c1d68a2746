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
		char dir[PATH_MAX], err[REDIS_ERRLEN];
		snprintf(dir, sizeof(dir), "%s/redis-route%d", e->srv.dir, k + 1);
		if (redis_server_start(&rc->redis[k], dir, err) < 0) {
			say("routes: %s", err);
			return -1;
		}
		snprintf(rc->flag[k], sizeof(rc->flag[k]), "r%d %s --redis-url %s", k + 1,
			 queues[ROUTES_FIRST_QUEUE + k], rc->redis[k].url);
	}
	return 0;
}

void routes_args(const struct routes_chaos *rc, const char **args, size_t *n)
{
	for (int k = 0; k < ROUTES_EXTRA; k++) {
		args[(*n)++] = "--route";
		args[(*n)++] = rc->flag[k];
	}
}

int routes_restart(struct routes_chaos *rc, int k, unsigned long long *rng)
{
	char err[REDIS_ERRLEN];

	(void)redis_server_stop(&rc->redis[k], SIGKILL, 5000);
	sleep_ms(rnd_range(rng, 0, 1000));
	if (redis_server_restart(&rc->redis[k], err) < 0) {
		say("routes: %s", err);
		return -1;
	}
	rc->restarts[k]++;
	return 0;
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
		rc_ = e->redis ? seen_load(e, &n) : -1;
		*entries += n;
		if (e->queue_redis[ROUTES_FIRST_QUEUE + k])
			redisFree(e->queue_redis[ROUTES_FIRST_QUEUE + k]);
		e->queue_redis[ROUTES_FIRST_QUEUE + k] = e->redis;
	}
	e->redis = own;
	e->srv.redis_port = own_port;
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
