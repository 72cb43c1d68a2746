/* Chaos with routes: see routes.h. */
#include "fmacros.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "routes.h"
#include "support/redis.h"
#include "support/timing.h"

/* A port nothing listens on now, from the kernel. */
static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* Starts target k's Redis and waits until it answers. */
static int run_redis(struct routes_chaos *rc, int k)
{
	char port[16], log[PATH_MAX + 16];
	const char *argv[] = { "redis-server", "--bind", "127.0.0.1",     "--port", port,     "--dir", rc->dir[k],
			       "--appendonly", "yes",    "--appendfsync", "always", "--save", "",      NULL };
	struct proc_opts o = { .argv = argv, .log = log, .log_append = true };
	long long until = mono_ms() + 10000;

	snprintf(port, sizeof(port), "%d", rc->port[k]);
	snprintf(log, sizeof(log), "%s/redis.log", rc->dir[k]);
	if (proc_start(&rc->proc[k], &o) < 0)
		return -1;
	while (mono_ms() < until) {
		char err[REDIS_ERRLEN];
		redisContext *r = redis_open(rc->port[k], 500, err);
		if (r) {
			redisFree(r);
			return 0;
		}
		sleep_ms(20);
	}
	say("routes: redis on port %d did not start; see %s", rc->port[k], log);
	return -1;
}

int routes_start(struct routes_chaos *rc, struct env *e)
{
	for (int k = 0; k < ROUTES_EXTRA; k++) {
		char cmd[PATH_MAX + 16];
		snprintf(rc->dir[k], sizeof(rc->dir[k]), "%s/redis-route%d", e->srv.dir, k + 1);
		snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", rc->dir[k]);
		if (system(cmd) != 0 || (rc->port[k] = free_port()) < 0 || run_redis(rc, k) < 0)
			return -1;
		snprintf(rc->flag[k], sizeof(rc->flag[k]), "r%d %s --redis-url redis://127.0.0.1:%d/0", k + 1,
			 queues[ROUTES_FIRST_QUEUE + k], rc->port[k]);
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
	(void)proc_signal(&rc->proc[k], SIGKILL);
	(void)proc_wait(&rc->proc[k], 5000);
	sleep_ms(rnd_range(rng, 0, 1000));
	if (run_redis(rc, k) < 0)
		return -1;
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
		e->redis = redis_open(rc->port[k], 2000, err);
		e->srv.redis_port = rc->port[k];
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
		(void)proc_stop(&rc->proc[k], SIGTERM, 10000);
	}
}
