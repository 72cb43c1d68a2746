/* The routed backlog (`--only routed`): --jobs jobs over three queues, each
 * routed to its own Redis (the bench's, and two more started here with the
 * same persistence), against the same backlog drained by one relay into the
 * one Redis, in the same run: what routing costs, and the routed relay's
 * memory. Every job is then checked on the Redis its queue's route names,
 * once, in id order, and on no other. */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NTARGETS 3
#define MIB(kib) ((double)(kib) / 1024.0)
/* Jobs read back per LRANGE when checking a list. */
#define CHECK_CHUNK 10000

/* One more Redis: its own directory, the bench Redis's AOF setting. */
struct extra {
	struct proc proc;
	int port;
	char log[600];
	redisContext *r;
};

/* Connects once it listens; NULL if it exited first (lost its port). */
static redisContext *extra_connect(const struct extra *x)
{
	char err[REDIS_ERRLEN];
	long long end = mono_ms() + 10000;
	redisContext *r;

	while (!(r = redis_open(x->port, 0, err))) {
		check_stop();
		if (proc_exited(&x->proc))
			return NULL;
		if (mono_ms() > end)
			die("%s; see %s", err, x->log);
		sleep_ms(20);
	}
	return r;
}

/* The bench's Redis runs with appendonly yes and --redis-fsync (tests/services.sh
 * and start_servers): the routes' Redis do the same work per write. */
static void extra_start(const struct bench_env *env, struct extra *x, int k)
{
	char port[16], dir[600];

	snprintf(dir, sizeof(dir), "%s/routed-redis%d", env->srv.dir, k);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		die("mkdir %s: %s", dir, strerror(errno));
	snprintf(x->log, sizeof(x->log), "%s/routed-redis%d.log", env->srv.dir, k);
	x->r = NULL;
	for (int attempt = 0; !x->r; attempt++) {
		const char *argv[] = { "redis-server",
				       "--bind",
				       "127.0.0.1",
				       "--port",
				       port,
				       "--dir",
				       dir,
				       "--save",
				       "",
				       "--appendonly",
				       "yes",
				       "--appendfsync",
				       env->opts->redis_fsync,
				       NULL };
		if (attempt == 3)
			die("redis for route %d did not start; see %s", k, x->log);
		x->port = bench_free_port();
		snprintf(port, sizeof(port), "%d", x->port);
		child_start(&x->proc, &(struct proc_opts){ .argv = argv, .log = x->log, .log_append = true });
		if (!(x->r = extra_connect(x)))
			(void)child_wait(&x->proc, 1000); /* lost the port: try another */
	}
}

static void extra_stop(struct extra *x)
{
	pid_t pid = x->proc.pid;

	redisFree(x->r);
	x->r = NULL;
	if (child_stop(&x->proc, SIGTERM, 10000) < 0)
		note("redis %d did not stop within 10 s of SIGTERM; killed it", (int)pid);
}

/* n jobs, args [seq], queue q(seq % 3): job seq has id order seq. */
static void stage_mixed(PGconn *c, long long n)
{
	sql(c,
	    "INSERT INTO staged_jobs (queue, job_class, args)"
	    " SELECT 'q' || (i %% %d), 'BenchJob', jsonb_build_array(i) FROM generate_series(0, %lld) i ORDER BY i",
	    NTARGETS, n - 1);
	sql(c, "VACUUM ANALYZE staged_jobs");
}

/* Jobs of queue qk among n staged. */
static long long staged_for(long long n, int k)
{
	return n / NTARGETS + (k < n % NTARGETS);
}

/* args[0] of a Sidekiq job hash, or -1. */
static long long job_seq(const char *json)
{
	const char *p = strstr(json, "\"args\":[");
	char *end;
	long long v;

	if (!p)
		return -1;
	v = strtoll(p + 8, &end, 10);
	return end == p + 8 ? -1 : v;
}

/* queue:qk on r holds exactly its jobs, each once, oldest at the tail (Sidekiq
 * LPUSHes, workers BRPOP), in id order: k, k + 3, k + 6, ... */
static void check_list(const char *name, redisContext *r, int k, long long n)
{
	long long len = staged_for(n, k);

	for (long long from = 0; from < len; from += CHECK_CHUNK) {
		redisReply *rep = redis_or(r, die_msg, "LRANGE queue:q%d %lld %lld", k, from, from + CHECK_CHUNK - 1);
		for (size_t i = 0; i < rep->elements; i++) {
			long long want = k + NTARGETS * (len - 1 - (from + (long long)i));
			const redisReply *e = rep->element[i];
			long long got = e->type == REDIS_REPLY_STRING ? job_seq(e->str) : -1;
			if (got != want)
				die("%s: queue:q%d[%lld] holds job %lld where job %lld belongs (lost, duplicated or out of "
				    "order)",
				    name, k, from + (long long)i, got, want);
		}
		freeReplyObject(rep);
	}
}

/* Every queue on its own target and on no other; the Sidekiq `queues` set of
 * each target names only its queues. */
static void check_targets(const char *name, redisContext *const *r, long long n)
{
	for (int k = 0; k < NTARGETS; k++) {
		for (int t = 0; t < NTARGETS; t++) {
			long long want = r[t] == r[k] ? staged_for(n, k) : 0;
			long long len = redis_int(r[t], "LLEN queue:q%d", k);
			if (len != want)
				die("%s: queue:q%d holds %lld jobs on the redis of q%d, %lld expected", name, k, len, t,
				    want);
			if (redis_int(r[t], "SISMEMBER queues q%d", k) != (want > 0))
				die("%s: the queues set on the redis of q%d %s q%d", name, t, want ? "lacks" : "names",
				    k);
		}
		check_list(name, r[k], k, n);
	}
}

/* Jobs in every queue's list on every Redis: a job pushed to the wrong Redis
 * counts too, so a drain that misroutes ends and check_targets says where. */
static long long pushed(void *arg)
{
	redisContext *const *r = arg;
	long long sum = 0;

	for (int t = 0; t < NTARGETS; t++) {
		bool seen = false;
		for (int u = 0; u < t; u++)
			seen = seen || r[u] == r[t];
		for (int k = 0; k < NTARGETS && !seen; k++)
			sum += redis_int(r[t], "LLEN queue:q%d", k);
	}
	return sum;
}

/* Starts a relay (with flags), waits until every job is in Redis, and returns
 * its jobs/s; its peak RSS in *hwm. r[k] is queue qk's Redis. */
static double drain(const struct bench_env *env, const char *name, const char *const *flags, redisContext *const *r,
		    long long n, long long *hwm)
{
	PGconn *c = pg_connect(env);
	struct relay rel;
	long long t0 = mono_us();
	double rate;

	relay_start_with(&rel, env, name, "info", flags);
	wait_count(pushed, (void *)r, "the targets' lists", n, &rel);
	rate = (double)n * 1e6 / (double)(mono_us() - t0);
	*hwm = proc_hwm_kib(rel.proc.pid);
	if (relay_stop(&rel) != 0)
		die("the relay did not exit cleanly; see %s", rel.log);
	if (sql(c, "SELECT count(*) FROM staged_jobs") != 0)
		die("%s: rows left in staged_jobs after the drain", name);
	if (sql(c, "SELECT count(*) FROM staged_jobs_held") + sql(c, "SELECT count(*) FROM staged_jobs_dead") != 0)
		die("%s: rows held or dead-lettered; see %s", name, rel.log);
	check_targets(name, r, n);
	PQfinish(c);
	return rate;
}

void scenario_routed(const struct bench_env *env, int run)
{
	long long n = env->opts->jobs, hwm1, hwm3;
	struct extra x[NTARGETS - 1];
	redisContext *r = redis_connect(env);
	PGconn *c = pg_connect(env);
	char route[NTARGETS - 1][256], fig[128], h[24];
	double single, routed;

	human(n, h, sizeof(h));
	for (int k = 0; k < NTARGETS - 1; k++) {
		extra_start(env, &x[k], k + 1);
		snprintf(route[k], sizeof(route[k]), "r%d q%d --redis-url redis://127.0.0.1:%d/0", k + 1, k + 1,
			 x[k].port);
	}
	note("routed run %d, %s jobs: one relay, one redis", run + 1, h);
	bench_reset(env);
	stage_mixed(c, n);
	{
		redisContext *const one[NTARGETS] = { r, r, r };
		single = drain(env, "routed-single", NULL, one, n, &hwm1);
	}
	check_stop();
	note("routed run %d, %s jobs: one relay, three redis", run + 1, h);
	bench_reset(env);
	for (int k = 0; k < NTARGETS - 1; k++)
		redis_ok(x[k].r, "FLUSHALL");
	stage_mixed(c, n);
	{
		redisContext *const three[NTARGETS] = { r, x[0].r, x[1].r };
		const char *const flags[] = { "--route", route[0], "--route", route[1], NULL };
		routed = drain(env, "routed-three", flags, three, n, &hwm3);
	}
	for (int k = 0; k < NTARGETS - 1; k++)
		extra_stop(&x[k]);

	snprintf(fig, sizeof(fig), "one redis, 3 queues, %s jobs (jobs/s)", h);
	table_add("routed", fig, 0, single);
	snprintf(fig, sizeof(fig), "three redis by route, %s jobs (jobs/s)", h);
	table_add("routed", fig, 0, routed);
	snprintf(fig, sizeof(fig), "routed / one redis, %s jobs", h);
	table_add("routed", fig, 2, routed / single);
	table_target("routed", fig, CMP_GE, 0.9, ">= 0.90");
	snprintf(fig, sizeof(fig), "one-redis relay peak RSS, %s backlog (MiB)", h);
	table_add("routed", fig, 1, hwm1 < 0 ? NAN : MIB(hwm1));
	snprintf(fig, sizeof(fig), "routed relay peak RSS, %s backlog (MiB)", h);
	table_add("routed", fig, 1, hwm3 < 0 ? NAN : MIB(hwm3));
	table_target("routed", fig, CMP_LE, 16, "<= 16");
	redisFree(r);
	PQfinish(c);
}
