/* What --redis-wait-replicas costs: one backlog drained with no replica, with
 * a replica the relay does not wait for, and with one it waits for (WAIT 1),
 * in turn within each run so a drift in the machine's speed hits all three. */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/logs.h"

enum way { WAY_PLAIN, WAY_REPLICA, WAY_WAIT, NWAYS };

static const char *const way_names[NWAYS] = { "no replica", "1 replica, wait 0", "1 replica, wait 1" };
static const char *const way_logs[NWAYS] = { "wait-plain", "wait-replica", "wait-wait1" };

/* What one drain gave. */
struct drained {
	double rate;    /* jobs/s, from the relay's start to the last job in Redis */
	double push_us; /* median over the run's batches */
	long long rolled_back;
};

struct replica {
	struct proc proc;
	int port;
	char log[600];
};

long long wait_jobs(const struct bench_opts *o)
{
	return o->jobs < WAIT_MAX_JOBS ? o->jobs : WAIT_MAX_JOBS;
}

/* Whether the server's INFO replication holds line (e.g. "connected_slaves:1"). */
static bool info_says(redisContext *r, const char *line)
{
	redisReply *rep = redis_or(r, die_msg, "INFO replication");
	size_t n = strlen(line);
	bool found = false;

	for (const char *p = rep->str; p && (p = strstr(p, line)) != NULL; p += n)
		if ((p == rep->str || p[-1] == '\n') && (p[n] == '\r' || p[n] == '\n' || !p[n]))
			found = true;
	freeReplyObject(rep);
	return found;
}

/* Polls until the server's INFO replication holds line; false after timeout_ms
 * or once the replica (if given) exited. */
static bool wait_info(redisContext *r, const char *line, int timeout_ms, const struct proc *replica)
{
	long long end = mono_ms() + timeout_ms;

	while (!info_says(r, line)) {
		check_stop();
		if (mono_ms() > end || (replica && proc_exited(replica)))
			return false;
		sleep_ms(10);
	}
	return true;
}

/* Connects to the replica once it listens; NULL if it exited first. */
static redisContext *replica_connect(const struct replica *rp)
{
	char err[REDIS_ERRLEN];
	long long end = mono_ms() + 10000;
	redisContext *r;

	while (!(r = redis_open(rp->port, 2000, err))) {
		check_stop();
		if (proc_exited(&rp->proc))
			return NULL;
		if (mono_ms() > end)
			die("%s; see %s", err, rp->log);
		sleep_ms(20);
	}
	return r;
}

/* A redis-server --replicaof the bench's Redis, in the servers' directory,
 * without persistence of its own; returns once the master counts it and its
 * link is up. */
static void replica_start(const struct bench_env *env, struct replica *rp, redisContext *master)
{
	char port[16], mport[16], dir[600];
	redisContext *r = NULL;

	snprintf(dir, sizeof(dir), "%s/replica", env->srv.dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		die("mkdir %s: %s", dir, strerror(errno));
	snprintf(rp->log, sizeof(rp->log), "%s/replica.log", env->srv.dir);
	snprintf(mport, sizeof(mport), "%d", env->srv.redis_port);
	for (int attempt = 0; !r; attempt++) {
		const char *argv[] = { "redis-server", "--bind",      "127.0.0.1", "--port", port,
				       "--dir",        dir,           "--save",    "",       "--appendonly",
				       "no",           "--replicaof", "127.0.0.1", mport,    NULL };
		if (attempt == 3)
			die("the replica did not start; see %s", rp->log);
		rp->port = bench_free_port();
		snprintf(port, sizeof(port), "%d", rp->port);
		child_start(&rp->proc, &(struct proc_opts){ .argv = argv, .log = rp->log, .log_append = true });
		if (!(r = replica_connect(rp)))
			(void)child_wait(&rp->proc, 1000); /* lost the port: try another */
	}
	if (!wait_info(r, "master_link_status:up", 30000, &rp->proc))
		die("the replica's link to the bench redis did not come up in 30 s; see %s", rp->log);
	if (!wait_info(master, "connected_slaves:1", 10000, NULL))
		die("the bench redis does not count the replica; see %s", rp->log);
	redisFree(r);
}

static void replica_stop(struct replica *rp)
{
	pid_t pid = rp->proc.pid;

	if (child_stop(&rp->proc, SIGTERM, 10000) < 0)
		note("the replica %d did not stop within 10 s of SIGTERM; killed it", (int)pid);
}

/* How many WAIT commands the server has run (INFO commandstats). */
static long long wait_calls(redisContext *r)
{
	redisReply *rep = redis_or(r, die_msg, "INFO commandstats");
	const char *p = strstr(rep->str, "cmdstat_wait:calls=");
	long long n = p ? strtoll(p + 19, NULL, 10) : 0;

	freeReplyObject(rep);
	return n;
}

/* The median push time of the batches a relay's debug log lists (µs); their number into *batches. */
static double median_push_us(const struct relay *rel, long long *batches)
{
	struct batch_rec *v = NULL;
	size_t n = 0, cap = 0, k = 0;
	double *t, med = NAN;

	if (relay_log_list(rel->log, 0, &v, &n, &cap) < 0)
		die("could not read %s", rel->log);
	if (!(t = malloc(sizeof(*t) * (n ? n : 1))))
		die("out of memory");
	for (size_t i = 0; i < n; i++)
		if (v[i].timed && v[i].jobs > 0)
			t[k++] = v[i].push_us;
	*batches = (long long)k;
	if (k) {
		qsort(t, k, sizeof(*t), cmp_dbl);
		med = k % 2 ? t[k / 2] : (t[k / 2 - 1] + t[k / 2]) / 2;
	}
	free(t);
	free(v);
	return med;
}

/* One drain of n staged jobs by a relay started with the way's flags. */
static struct drained drain(const struct bench_env *env, enum way w, long long n, int run, redisContext *r,
			    redisContext *replica)
{
	static const char *const wait0[] = { "--redis-wait-replicas", "0", NULL };
	static const char *const wait1[] = { "--redis-wait-replicas", "1", NULL };
	const char *const *flags = w == WAY_PLAIN ? NULL : w == WAY_REPLICA ? wait0 : wait1;
	PGconn *c = pg_connect(env);
	struct drained d;
	struct relay rel;
	long long t0, waits, batches;

	note("wait run %d: relay, %s", run + 1, way_names[w]);
	bench_reset(env);
	stage_backlog(env, "default", 0, n);
	if (!info_says(r, w == WAY_PLAIN ? "connected_slaves:0" : "connected_slaves:1"))
		die("wait: the bench redis does not have the replicas this way needs (%s)", way_names[w]);
	waits = wait_calls(r);
	t0 = mono_us();
	relay_start_with(&rel, env, way_logs[w], "debug", flags);
	wait_llen(r, "queue:default", n, &rel);
	d.rate = (double)n * 1e6 / (double)(mono_us() - t0);
	if (relay_stop(&rel) != 0)
		die("the relay did not exit cleanly; see %s", rel.log);
	if (redis_int(r, "LLEN queue:default") != n)
		die("wait: queue:default holds more than the %lld jobs staged (duplicates)", n);
	if (sql(c, "SELECT count(*) FROM staged_jobs") != 0)
		die("wait: rows left in staged_jobs after the drain");
	/* Every batch was acknowledged before its rows were deleted: the replica has them all. */
	if (w == WAY_WAIT && redis_int(replica, "LLEN queue:default") != n)
		die("wait: the replica lacks jobs the relay waited for; see %s", rel.log);
	d.push_us = median_push_us(&rel, &batches);
	/* The flag did what it says: a WAIT per batch (and one for the fence at start), or none. */
	waits = wait_calls(r) - waits;
	if (w == WAY_WAIT ? waits < batches : waits != 0)
		die("wait: the relay ran %lld WAITs for %lld batches (%s); see %s", waits, batches, way_names[w],
		    rel.log);
	d.rolled_back = logs_count(rel.log, "could not push a batch to redis");
	PQfinish(c);
	check_stop();
	return d;
}

static void report(const struct drained *d)
{
	char fig[96];

	for (int w = 0; w < NWAYS; w++) {
		snprintf(fig, sizeof(fig), "drain, %s (jobs/s)", way_names[w]);
		table_add("wait", fig, 0, d[w].rate);
	}
	table_add("wait", "drain: wait 1 / no replica", 2, d[WAY_WAIT].rate / d[WAY_PLAIN].rate);
	table_add("wait", "drain: wait 1 / replica, wait 0", 2, d[WAY_WAIT].rate / d[WAY_REPLICA].rate);
	for (int w = 0; w < NWAYS; w++) {
		snprintf(fig, sizeof(fig), "push per batch, median, %s (us)", way_names[w]);
		table_add("wait", fig, 0, d[w].push_us);
	}
	table_add("wait", "push: wait 1 / no replica", 2, d[WAY_WAIT].push_us / d[WAY_PLAIN].push_us);
	table_add("wait", "push: wait 1 / replica, wait 0", 2, d[WAY_WAIT].push_us / d[WAY_REPLICA].push_us);
	/* A short WAIT rolls the batch back and repeats it: the figures above would include that. */
	table_add("wait", "wait 1: pushes rolled back", 0, (double)d[WAY_WAIT].rolled_back);
	table_target("wait", "wait 1: pushes rolled back", CMP_LE, 0, "0");
}

void scenario_wait(const struct bench_env *env, int run)
{
	long long n = wait_jobs(env->opts);
	redisContext *r = redis_connect(env), *rr;
	struct drained d[NWAYS];
	struct replica rp = { { 0, -1 }, 0, "" };

	/* A full sync would otherwise wait 5 s for more replicas to share it. */
	redis_ok(r, "CONFIG SET repl-diskless-sync-delay 0");
	/* The last run's replica may still be leaving. */
	if (!wait_info(r, "connected_slaves:0", 10000, NULL))
		die("wait: a replica is still attached to the bench redis");
	d[WAY_PLAIN] = drain(env, WAY_PLAIN, n, run, r, NULL);
	note("wait run %d: starting a replica of the bench redis", run + 1);
	bench_reset(env); /* so that its full sync copies nothing */
	replica_start(env, &rp, r);
	if (!(rr = replica_connect(&rp)))
		die("the replica exited; see %s", rp.log);
	d[WAY_REPLICA] = drain(env, WAY_REPLICA, n, run, r, rr);
	d[WAY_WAIT] = drain(env, WAY_WAIT, n, run, r, rr);
	redisFree(rr);
	replica_stop(&rp);
	report(d);
	redisFree(r);
}
