/* The routed backlog (`--only routed`): --jobs jobs over three queues, each
 * routed to its own Redis (the bench's, and two more started here), against
 * the same backlog drained by one relay into the one Redis, in the same run:
 * what routing costs, and the routed relay's memory. */
#include "bench.h"

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define NTARGETS 3
#define MIB(kib) ((double)(kib) / 1024.0)

/* One more Redis, without persistence (the bench's own keeps none either). */
struct extra {
	struct proc proc;
	int port;
	redisContext *r;
};

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
	if (port < 0)
		die("no free port for another redis");
	return port;
}

static void extra_start(const struct bench_env *env, struct extra *x, int k)
{
	char port[16], dir[600], log[700];
	const char *argv[] = { "redis-server", "--bind", "127.0.0.1",    "--port", port, "--dir", dir,
			       "--save",       "",       "--appendonly", "no",     NULL };
	struct proc_opts o = { .argv = argv, .log = log };
	long long end = mono_us() + 10000000;

	x->port = free_port();
	snprintf(port, sizeof(port), "%d", x->port);
	snprintf(dir, sizeof(dir), "%s", env->srv.dir);
	snprintf(log, sizeof(log), "%s/routed-redis%d.log", env->srv.dir, k);
	child_start(&x->proc, &o);
	while (!(x->r = redisConnect("127.0.0.1", x->port)) || x->r->err) {
		if (x->r)
			redisFree(x->r);
		x->r = NULL;
		if (mono_us() > end)
			die("redis on port %d did not start; see %s", x->port, log);
		sleep_ms(20);
	}
}

static void extra_stop(struct extra *x)
{
	redisFree(x->r);
	proc_stop(&x->proc, SIGTERM, 10000);
}

/* n jobs, args [seq], round-robin over queues q0, q1 and q2. */
static void stage_mixed(PGconn *c, long long n)
{
	sql(c,
	    "INSERT INTO staged_jobs (queue, job_class, args)"
	    " SELECT 'q' || (i %% %d), 'BenchJob', jsonb_build_array(i) FROM generate_series(0, %lld) i ORDER BY i",
	    NTARGETS, n - 1);
	sql(c, "VACUUM ANALYZE staged_jobs");
}

/* Starts a relay (with flags), waits for every list to fill, and returns
 * its jobs/s; its peak RSS in *hwm. */
static double drain(const struct bench_env *env, const char *name, const char *const *flags, redisContext *const *r,
		    const char *const *keys, long long n, long long *hwm)
{
	PGconn *c = pg_connect(env);
	struct relay rel;
	long long t0 = mono_us(), each = n / NTARGETS;
	double rate;

	relay_start_with(&rel, env, name, "info", flags);
	for (int k = 0; k < NTARGETS; k++)
		wait_llen(r[k], keys[k], each + (k < n % NTARGETS), &rel);
	rate = (double)n * 1e6 / (double)(mono_us() - t0);
	*hwm = proc_hwm_kib(rel.proc.pid);
	if (relay_stop(&rel) != 0)
		die("the relay did not exit cleanly; see %s", rel.log);
	for (int k = 0; k < NTARGETS; k++)
		if (redis_int(r[k], "LLEN %s", keys[k]) != each + (k < n % NTARGETS))
			die("%s: %s holds more jobs than staged for it (duplicates)", name, keys[k]);
	if (sql(c, "SELECT count(*) FROM staged_jobs") != 0)
		die("%s: rows left in staged_jobs after the drain", name);
	PQfinish(c);
	return rate;
}

void scenario_routed(const struct bench_env *env, int run)
{
	long long n = env->opts->jobs, hwm1, hwm3;
	struct extra x[NTARGETS - 1];
	redisContext *r = redis_connect(env);
	PGconn *c = pg_connect(env);
	char route[2][256], fig[128], h[24];
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
		redisContext *const one[] = { r, r, r };
		const char *const keys[] = { "queue:q0", "queue:q1", "queue:q2" };
		single = drain(env, "routed-single", NULL, one, keys, n, &hwm1);
	}
	check_stop();
	note("routed run %d, %s jobs: one relay, three redis", run + 1, h);
	bench_reset(env);
	for (int k = 0; k < NTARGETS - 1; k++)
		redis_ok(x[k].r, "FLUSHALL");
	stage_mixed(c, n);
	{
		redisContext *const three[] = { r, x[0].r, x[1].r };
		const char *const keys[] = { "queue:q0", "queue:q1", "queue:q2" };
		const char *const flags[] = { "--route", route[0], "--route", route[1], NULL };
		routed = drain(env, "routed-three", flags, three, keys, n, &hwm3);
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
	snprintf(fig, sizeof(fig), "routed relay peak RSS, %s backlog (MiB)", h);
	table_add("routed", fig, 1, hwm3 < 0 ? NAN : MIB(hwm3));
	table_target("routed", fig, CMP_LE, 16, "<= 16");
	redisFree(r);
	PQfinish(c);
}
