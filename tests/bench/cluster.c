/* The cluster backlog (`--only cluster`): --jobs BullMQ jobs over twelve
 * hash-tagged queues, four on each master of a Redis Cluster of three masters
 * and a replica each (services.sh cluster-start), drained by one relay into
 * the bench's one Redis, into the cluster, and into the cluster with
 * --redis-wait-replicas 1, in turn within each run (the order rotating from
 * run to run): what the cluster target gives or costs against one Redis on
 * the same machine. Every job is then checked on the server that holds its
 * queue, once, in id order. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/logs.h"

#define NQ 12 /* queues, NQ / NMASTERS on each master */
#define NMASTERS 3
#define NNODES 6 /* services.sh cluster-start: a replica for each master */
#define MIB(kib) ((double)(kib) / 1024.0)
/* Jobs read back per LRANGE (and their HGETs pipelined) when checking a queue. */
#define CHECK_CHUNK 10000

enum way { WAY_ONE, WAY_CLUSTER, WAY_WAIT, NWAYS };

static const char *const way_names[NWAYS] = { "one redis", "cluster", "cluster, wait 1" };
static const char *const way_logs[NWAYS] = { "cluster-one", "cluster-three", "cluster-wait1" };

/* The cluster services.sh started: its nodes by role, the seed url. */
struct cluster {
	char url[256];
	int master_port[NMASTERS], replica_port[NNODES - NMASTERS];
	redisContext *master[NMASTERS], *replica[NNODES - NMASTERS];
	/* the queues, "{qI}" with I chosen so that each master serves NQ / NMASTERS */
	char queue[NQ][16];
	int queue_master[NQ];
};

/* Where one way's jobs go: the server that holds each queue, the servers
 * whose CPU it costs. */
struct side {
	redisContext *owner[NQ];
	redisContext *const *masters, *const *replicas;
	int nmasters, nreplicas;
};

/* What one drain gave. */
struct drained {
	double rate;           /* jobs/s, from the relay's start to the last job in Redis */
	double relay_cpu;      /* s */
	double masters_cpu;    /* s, summed over the side's masters (the one Redis) */
	double replicas_cpu;   /* s, summed over its replicas; NAN without */
	long long hwm;         /* KiB */
	long long rolled_back; /* pushes the relay rolled back and repeated */
	long long waits;       /* WAITs the masters ran */
};

static redisContext *node_connect(int port)
{
	char err[REDIS_ERRLEN];
	redisContext *r = redis_open(port, 0, err);

	if (!r)
		die("%s", err);
	return r;
}

/* A line services.sh wrote in its directory: DIR/name. */
static void read_line(const struct bench_env *env, const char *name, char *out, size_t len)
{
	char path[700];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", env->srv.dir, name);
	if (!(f = fopen(path, "r")) || !fgets(out, (int)len, f))
		die("could not read %s", path);
	fclose(f);
	out[strcspn(out, "\n")] = '\0';
}

/* The port of the master that serves slot in node r's CLUSTER SLOTS, or -1. */
static int master_of(redisContext *r, long long slot)
{
	redisReply *rep = redis_or(r, die_msg, "CLUSTER SLOTS");
	int port = -1;

	for (size_t i = 0; i < rep->elements; i++) {
		const redisReply *e = rep->element[i];
		if (e->elements >= 3 && e->element[0]->integer <= slot && slot <= e->element[1]->integer &&
		    e->element[2]->elements >= 2)
			port = (int)e->element[2]->element[1]->integer;
	}
	freeReplyObject(rep);
	return port;
}

static int index_of(const int *ports, int n, int port)
{
	for (int i = 0; i < n; i++)
		if (ports[i] == port)
			return i;
	return -1;
}

/* Starts the cluster, sorts its nodes into masters and replicas, gives every
 * node the bench Redis's appendfsync, and picks the queues: {q0}, {q1}, ...,
 * each taken while its master serves fewer than NQ / NMASTERS. */
static void cluster_up(const struct bench_env *env, struct cluster *cl)
{
	char log[700], line[32];
	int nm = 0, nr = 0, taken = 0;

	snprintf(log, sizeof(log), "%s/cluster-bench.log", env->srv.dir);
	if (services_run(&env->srv, "cluster-start", log) != 0)
		die("services.sh cluster-start failed; see %s", log);
	read_line(env, "cluster.url", cl->url, sizeof(cl->url));
	for (int k = 1; k <= NNODES; k++) {
		char name[32];
		redisContext *r;
		redisReply *rep;
		int port;
		snprintf(name, sizeof(name), "cluster-n%d.port", k);
		read_line(env, name, line, sizeof(line));
		port = atoi(line);
		r = node_connect(port);
		redis_ok(r, "CONFIG SET appendfsync %s", env->opts->redis_fsync);
		rep = redis_or(r, die_msg, "INFO replication");
		if (strstr(rep->str, "role:master") && nm < NMASTERS) {
			cl->master_port[nm] = port;
			cl->master[nm++] = r;
		} else if (!strstr(rep->str, "role:master") && nr < NNODES - NMASTERS) {
			cl->replica_port[nr] = port;
			cl->replica[nr++] = r;
		} else {
			die("the cluster does not have %d masters and %d replicas", NMASTERS, NNODES - NMASTERS);
		}
		freeReplyObject(rep);
	}
	if (nm != NMASTERS)
		die("the cluster has %d masters, not %d", nm, NMASTERS);
	{
		int per[NMASTERS] = { 0 };
		for (int i = 0; taken < NQ; i++) {
			char q[16];
			long long slot;
			int m;
			if (i == 1000)
				die("no %d queues {qN} spread evenly over the cluster's masters", NQ);
			snprintf(q, sizeof(q), "{q%d}", i);
			slot = redis_int(cl->master[0], "CLUSTER KEYSLOT %s", q);
			m = index_of(cl->master_port, NMASTERS, master_of(cl->master[0], slot));
			if (m < 0)
				die("no master of the cluster serves slot %lld", slot);
			if (per[m] == NQ / NMASTERS)
				continue;
			per[m]++;
			snprintf(cl->queue[taken], sizeof(cl->queue[taken]), "%s", q);
			cl->queue_master[taken++] = m;
		}
	}
}

static void cluster_down(const struct bench_env *env, struct cluster *cl)
{
	char log[700];

	for (int i = 0; i < NMASTERS; i++)
		redisFree(cl->master[i]);
	for (int i = 0; i < NNODES - NMASTERS; i++)
		redisFree(cl->replica[i]);
	snprintf(log, sizeof(log), "%s/cluster-bench.log", env->srv.dir);
	if (services_run(&env->srv, "cluster-stop", log) != 0)
		note("services.sh cluster-stop failed; see %s", log);
}

/* n jobs, args [seq], job seq to queue seq % NQ: each queue's jobs in id order. */
static void stage(PGconn *c, const struct cluster *cl, long long n)
{
	char names[NQ * 24] = "";
	size_t len = 0;

	for (int k = 0; k < NQ; k++)
		len += (size_t)snprintf(names + len, sizeof(names) - len, "%s'%s'", k ? "," : "", cl->queue[k]);
	sql(c,
	    "INSERT INTO staged_jobs (queue, job_class, args)"
	    " SELECT (ARRAY[%s])[i %% %d + 1], 'BenchJob', jsonb_build_array(i) FROM generate_series(0, %lld) i"
	    " ORDER BY i",
	    names, NQ, n - 1);
	sql(c, "VACUUM ANALYZE staged_jobs");
}

/* Jobs of queue k among n staged. */
static long long staged_for(long long n, int k)
{
	return n / NQ + (k < n % NQ);
}

/* Jobs in the wait lists, each on its queue's server. */
struct side_of {
	const struct side *s;
	const struct cluster *cl;
};

static long long pushed(void *arg)
{
	const struct side *s = ((const struct side_of *)arg)->s;
	const struct cluster *cl = ((const struct side_of *)arg)->cl;
	long long sum = 0;

	for (int k = 0; k < NQ; k++)
		sum += redis_int(s->owner[k], "LLEN bull:%s:wait", cl->queue[k]);
	return sum;
}

/* BullMQ's wait list of queue k holds exactly its jobs, each once, the oldest
 * at the tail (workers take from there), their data in id order: k, k + NQ, ... */
static void check_queue(const char *name, redisContext *r, const struct cluster *cl, int k, long long n)
{
	long long len = staged_for(n, k);

	if (redis_int(r, "LLEN bull:%s:wait", cl->queue[k]) != len)
		die("%s: bull:%s:wait does not hold its %lld jobs", name, cl->queue[k], len);
	for (long long from = 0; from < len; from += CHECK_CHUNK) {
		redisReply *ids = redis_or(r, die_msg, "LRANGE bull:%s:wait %lld %lld", cl->queue[k], from,
					   from + CHECK_CHUNK - 1);
		for (size_t i = 0; i < ids->elements; i++)
			if (ids->element[i]->type != REDIS_REPLY_STRING ||
			    redisAppendCommand(r, "HGET bull:%s:%s data", cl->queue[k], ids->element[i]->str) !=
				    REDIS_OK)
				die("%s: bull:%s:wait[%lld] is not a job id", name, cl->queue[k], from + (long long)i);
		for (size_t i = 0; i < ids->elements; i++) {
			long long want = k + NQ * (len - 1 - (from + (long long)i)), got = -1;
			redisReply *data = NULL;
			char *end;
			if (redisGetReply(r, (void **)&data) != REDIS_OK)
				die("%s: HGET: %s", name, r->errstr);
			if (data->type == REDIS_REPLY_STRING) {
				got = strtoll(data->str, &end, 10);
				if (*end)
					got = -1;
			}
			if (got != want)
				die("%s: bull:%s:wait[%lld] holds job %lld where job %lld belongs (lost, duplicated or "
				    "out of order)",
				    name, cl->queue[k], from + (long long)i, got, want);
			freeReplyObject(data);
		}
		freeReplyObject(ids);
	}
}

/* The CPU seconds of n servers, summed; NAN for none. */
static double servers_cpu_s(redisContext *const *r, int n)
{
	double sum = n ? 0 : NAN;

	for (int i = 0; i < n; i++)
		sum += redis_cpu_s(r[i]);
	return sum;
}

/* How many WAIT commands the servers have run (INFO commandstats). */
static long long wait_calls(redisContext *const *r, int n)
{
	long long sum = 0;

	for (int i = 0; i < n; i++) {
		redisReply *rep = redis_or(r[i], die_msg, "INFO commandstats");
		const char *p = strstr(rep->str, "cmdstat_wait:calls=");
		sum += p ? strtoll(p + 19, NULL, 10) : 0;
		freeReplyObject(rep);
	}
	return sum;
}

/* Starts a relay with flags, waits until every job is in Redis, stops it, checks every job. */
static struct drained drain(const struct bench_env *env, enum way w, const char *const *flags, const struct side *s,
			    const struct cluster *cl, long long n, int run)
{
	PGconn *c = pg_connect(env);
	struct drained d;
	struct relay rel;
	double m0, r0;
	long long t0, waits;
	char h[24];

	note("cluster run %d, %s BullMQ jobs: one relay, %s", run + 1, human(n, h, sizeof(h)), way_names[w]);
	bench_reset(env);
	for (int i = 0; i < NMASTERS; i++)
		redis_ok(cl->master[i], "FLUSHALL");
	stage(c, cl, n);
	m0 = servers_cpu_s(s->masters, s->nmasters);
	r0 = servers_cpu_s(s->replicas, s->nreplicas);
	waits = wait_calls(s->masters, s->nmasters);
	t0 = mono_us();
	relay_start_with(&rel, env, way_logs[w], "info", flags);
	wait_count(pushed, &(struct side_of){ s, cl }, "the wait lists", n, &rel);
	d.rate = (double)n * 1e6 / (double)(mono_us() - t0);
	d.hwm = proc_hwm_kib(rel.proc.pid);
	d.relay_cpu = proc_cpu_s(rel.proc.pid);
	if (relay_stop(&rel) != 0)
		die("the relay did not exit cleanly; see %s", rel.log);
	d.masters_cpu = servers_cpu_s(s->masters, s->nmasters) - m0;
	d.replicas_cpu = servers_cpu_s(s->replicas, s->nreplicas) - r0;
	d.waits = wait_calls(s->masters, s->nmasters) - waits;
	d.rolled_back = logs_count(rel.log, "could not push a batch to redis");
	if (sql(c, "SELECT count(*) FROM staged_jobs") != 0)
		die("%s: rows left in staged_jobs after the drain", way_names[w]);
	if (sql(c, "SELECT count(*) FROM staged_jobs_held") + sql(c, "SELECT count(*) FROM staged_jobs_dead") != 0)
		die("%s: rows held or dead-lettered; see %s", way_names[w], rel.log);
	for (int k = 0; k < NQ; k++)
		check_queue(way_names[w], s->owner[k], cl, k, n);
	/* The flag did what it says: WAITs on the masters, or none. */
	if (w == WAY_WAIT ? d.waits == 0 : d.waits != 0)
		die("%s: the masters ran %lld WAITs; see %s", way_names[w], d.waits, rel.log);
	if (w == WAY_WAIT)
		note("cluster run %d: the masters ran %lld WAITs for %lld jobs", run + 1, d.waits, n);
	PQfinish(c);
	check_stop();
	return d;
}

static void report(const struct drained *d, long long n)
{
	char fig[128], h[24];

	human(n, h, sizeof(h));
	snprintf(fig, sizeof(fig), "one redis, %d queues, %s BullMQ jobs (jobs/s)", NQ, h);
	table_add("cluster", fig, 0, d[WAY_ONE].rate);
	snprintf(fig, sizeof(fig), "cluster, %d masters + replicas, %s jobs (jobs/s)", NMASTERS, h);
	table_add("cluster", fig, 0, d[WAY_CLUSTER].rate);
	snprintf(fig, sizeof(fig), "cluster, --redis-wait-replicas 1, %s jobs (jobs/s)", h);
	table_add("cluster", fig, 0, d[WAY_WAIT].rate);
	snprintf(fig, sizeof(fig), "cluster / one redis, %s jobs", h);
	table_add("cluster", fig, 2, d[WAY_CLUSTER].rate / d[WAY_ONE].rate);
	snprintf(fig, sizeof(fig), "cluster wait 1 / one redis, %s jobs", h);
	table_add("cluster", fig, 2, d[WAY_WAIT].rate / d[WAY_ONE].rate);
	snprintf(fig, sizeof(fig), "cluster wait 1 / cluster, %s jobs", h);
	table_add("cluster", fig, 2, d[WAY_WAIT].rate / d[WAY_CLUSTER].rate);
	for (int w = 0; w < NWAYS; w++) {
		snprintf(fig, sizeof(fig), "relay CPU per job, %s (us)", way_names[w]);
		table_add("cluster", fig, 2, d[w].relay_cpu * 1e6 / (double)n);
	}
	for (int w = 0; w < NWAYS; w++) {
		snprintf(fig, sizeof(fig), "Redis CPU per job, %s, master%s (us)", way_names[w],
			 w == WAY_ONE ? "" : "s");
		table_add("cluster", fig, 2, d[w].masters_cpu * 1e6 / (double)n);
		if (w == WAY_ONE)
			continue;
		snprintf(fig, sizeof(fig), "Redis CPU per job, %s, replicas (us)", way_names[w]);
		table_add("cluster", fig, 2, d[w].replicas_cpu * 1e6 / (double)n);
	}
	snprintf(fig, sizeof(fig), "one-redis relay peak RSS, %s backlog (MiB)", h);
	table_add("cluster", fig, 1, d[WAY_ONE].hwm < 0 ? NAN : MIB(d[WAY_ONE].hwm));
	snprintf(fig, sizeof(fig), "cluster relay peak RSS, %s backlog (MiB)", h);
	table_add("cluster", fig, 1, d[WAY_CLUSTER].hwm < 0 ? NAN : MIB(d[WAY_CLUSTER].hwm));
	table_target("cluster", fig, CMP_LE, 16, "<= 16");
	/* A short WAIT rolls the batch back and repeats it: the rate above would include that. */
	table_add("cluster", "cluster wait 1: pushes rolled back", 0, (double)d[WAY_WAIT].rolled_back);
	table_target("cluster", "cluster wait 1: pushes rolled back", CMP_LE, 0, "0");
}

void scenario_cluster(const struct bench_env *env, int run)
{
	long long n = env->opts->jobs;
	redisContext *one = redis_connect(env);
	struct cluster cl;
	struct side sides[NWAYS];
	struct drained d[NWAYS];
	char per[NMASTERS][NQ * 8];

	note("cluster run %d: starting a redis cluster, %d masters and a replica each", run + 1, NMASTERS);
	cluster_up(env, &cl);
	for (int m = 0; m < NMASTERS; m++) {
		size_t len = 0;
		per[m][0] = '\0';
		for (int k = 0; k < NQ; k++)
			if (cl.queue_master[k] == m)
				len += (size_t)snprintf(per[m] + len, sizeof(per[m]) - len, " %s", cl.queue[k]);
	}
	note("cluster run %d: master %d serves%s, master %d%s, master %d%s", run + 1, cl.master_port[0], per[0],
	     cl.master_port[1], per[1], cl.master_port[2], per[2]);
	sides[WAY_ONE] = (struct side){ .masters = &one, .nmasters = 1 };
	sides[WAY_CLUSTER] = (struct side){
		.masters = cl.master, .nmasters = NMASTERS, .replicas = cl.replica, .nreplicas = NNODES - NMASTERS
	};
	for (int k = 0; k < NQ; k++) {
		sides[WAY_ONE].owner[k] = one;
		sides[WAY_CLUSTER].owner[k] = cl.master[cl.queue_master[k]];
	}
	sides[WAY_WAIT] = sides[WAY_CLUSTER];
	/* Each run starts one further along, so that no way always follows the same one. */
	for (int i = 0; i < NWAYS; i++) {
		enum way w = (enum way)((run + i) % NWAYS);
		const char *const one_flags[] = { "--format", "bullmq", NULL };
		const char *const cluster_flags[] = { "--format", "bullmq", "--redis-url", cl.url, NULL };
		const char *const wait_flags[] = { "--format", "bullmq", "--redis-url", cl.url, "--redis-wait-replicas",
						   "1",        NULL };
		const char *const *flags = w == WAY_ONE ? one_flags : w == WAY_CLUSTER ? cluster_flags : wait_flags;
		d[w] = drain(env, w, flags, &sides[w], &cl, n, run);
	}
	for (int i = 0; i < NMASTERS; i++)
		redis_ok(cl.master[i], "FLUSHALL");
	redis_ok(one, "FLUSHALL");
	cluster_down(env, &cl);
	report(d, n);
	redisFree(one);
}
