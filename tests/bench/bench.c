/* `make bench`: starts a throwaway Postgres and Redis, measures the relay
 * binary as a real process against the naive loop and the raw limit, and
 * prints one table (also written to build/bench.txt). */
#include "bench.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

static struct bench_env env;

#define MIB(kib) ((double)(kib) / 1024.0)

/* Runs at exit, whatever the path: relay children first, then the servers. */
static void cleanup(void)
{
	children_stop_all();
	if (env.srv.up) {
		if (services_stop(&env.srv) != 0)
			note("could not stop the servers in %s; stop them by PID from there", env.srv.dir);
		else if (env.opts && env.opts->keep)
			note("kept %s (relay logs)", env.srv.dir);
		else
			(void)services_remove(&env.srv);
	}
	table_free();
}

void check_stop(void)
{
	if (interrupted) {
		note("interrupted; stopping the relay and the servers");
		exit(130);
	}
}

static void usage(FILE *out)
{
	fprintf(out, "usage: bench [options]\n"
		     "  --runs N            runs per figure (default 3; median, min and max are shown)\n"
		     "  --jobs N            backlog size (default 1000000)\n"
		     "  --minutes N         long-transaction scenario length (default 10)\n"
		     "  --big-jobs N        memory scenario: jobs one relay drains (default 10000000; 0 skips)\n"
		     "  --steady-seconds N  length of each steady-load measurement (default 30)\n"
		     "  --trigger-seconds N length of each trigger on/off measurement (default 10)\n"
		     "  --batch-size N      relay and naive loop batch size (default 1000)\n"
		     "  --xid-seconds N     xid-holder: seconds an xid-holding transaction stays open before\n"
		     "                      the relay restarts under it, and again after (default 60)\n"
		     "  --xid-backlog N     xid-holder: rows drained just after the holder begins, which the\n"
		     "                      restarted relay finds dead below it (default 200000)\n"
		     "  --xid-rate N        xid-holder: staging transactions/s, single-row (default 2000)\n"
		     "  --xid-rollback PCT  xid-holder: share of them rolled back (default 15)\n"
		     "  --xid-holders LIST  xid-holder: idle (idle in transaction after a write) and/or\n"
		     "                      prepared (PREPARE TRANSACTION), one after the other (default both)\n"
		     "  --only LIST         comma-separated: backlog,steady,trigger,long,memory,xid-holder,wait,\n"
		     "                      release,routed,cluster\n"
		     "                      (the xid-holding long transaction alone, about 5 minutes:\n"
		     "                      --only xid-holder --runs 1; what --redis-wait-replicas 1 costs\n"
		     "                      against no replica and an unwaited one, on min(--jobs, 200k)\n"
		     "                      jobs, under a minute: --only wait; --jobs held behind a cap of\n"
		     "                      --batch-size and released, without and with a long transaction:\n"
		     "                      --only release; --jobs BullMQ jobs into one redis and into a\n"
		     "                      3-master redis cluster (also with --redis-wait-replicas 1):\n"
		     "                      --only cluster)\n"
		     "  --bin PATH          relay binary (default bin/stagedrain)\n"
		     "  --relay-args ARGS   extra relay flags, split on spaces\n"
		     "  --redis-fsync MODE  redis appendfsync: always, everysec (default) or no\n"
		     "  --services PATH     tests/services.sh\n"
		     "  --out PATH          where the table is also written (default build/bench.txt)\n"
		     "  --keep              keep the servers' directory, with the relay logs, after the run\n");
}

/* A non-empty list of a and b only. */
static bool list_ok(const char *list, const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);

	if (!*list)
		return false;
	for (const char *p = list; *p;) {
		if (strncmp(p, a, la) == 0 && (p[la] == ',' || !p[la]))
			p += la;
		else if (strncmp(p, b, lb) == 0 && (p[lb] == ',' || !p[lb]))
			p += lb;
		else
			return false;
		if (*p == ',' && *++p == '\0')
			return false;
	}
	return true;
}

static long long parse_num(const char *s, const char *flag, long long min, long long max)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < min || v > max) {
		fprintf(stderr, "bench: %s must be a whole number from %lld to %lld\n", flag, min, max);
		exit(2);
	}
	return v;
}

static void parse_opts(struct bench_opts *o, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "runs", required_argument, NULL, 'r' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "minutes", required_argument, NULL, 'm' },
		{ "big-jobs", required_argument, NULL, 'b' },
		{ "steady-seconds", required_argument, NULL, 's' },
		{ "trigger-seconds", required_argument, NULL, 't' },
		{ "batch-size", required_argument, NULL, 'B' },
		{ "only", required_argument, NULL, 'o' },
		{ "bin", required_argument, NULL, 'x' },
		{ "relay-args", required_argument, NULL, 'a' },
		{ "redis-fsync", required_argument, NULL, 'f' },
		{ "services", required_argument, NULL, 'S' },
		{ "out", required_argument, NULL, 'O' },
		{ "xid-seconds", required_argument, NULL, 1000 },
		{ "xid-backlog", required_argument, NULL, 1001 },
		{ "xid-rate", required_argument, NULL, 1002 },
		{ "xid-rollback", required_argument, NULL, 1003 },
		{ "xid-holders", required_argument, NULL, 1004 },
		{ "keep", no_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct bench_opts){ .runs = 3,
				  .jobs = 1000000,
				  .minutes = 10,
				  .big_jobs = 10000000,
				  .steady_seconds = 30,
				  .trigger_seconds = 10,
				  .batch_size = 1000,
				  .only = "",
				  .bin = "bin/stagedrain",
				  .out = "build/bench.txt",
				  .redis_fsync = "everysec",
				  .relay_args = "",
				  .services = "tests/services.sh",
				  .xid_seconds = 60,
				  .xid_backlog = 200000,
				  .xid_rate = 2000,
				  .xid_rollback = 15,
				  .xid_holders = "idle,prepared" };
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'r':
			o->runs = (int)parse_num(optarg, "--runs", 1, BENCH_MAX_RUNS);
			break;
		case 'j':
			o->jobs = parse_num(optarg, "--jobs", 1000, 100000000);
			break;
		case 'm':
			o->minutes = (int)parse_num(optarg, "--minutes", 1, BENCH_MAX_MINUTES);
			break;
		case 'b':
			o->big_jobs = parse_num(optarg, "--big-jobs", 0, 1000000000);
			break;
		case 's':
			o->steady_seconds = (int)parse_num(optarg, "--steady-seconds", 3, 3600);
			break;
		case 't':
			o->trigger_seconds = (int)parse_num(optarg, "--trigger-seconds", 1, 600);
			break;
		case 'B':
			o->batch_size = (int)parse_num(optarg, "--batch-size", 1, 100000);
			break;
		case 'o':
			o->only = optarg;
			break;
		case 'x':
			o->bin = optarg;
			break;
		case 'a':
			o->relay_args = optarg;
			break;
		case 'f':
			o->redis_fsync = optarg;
			break;
		case 'S':
			o->services = optarg;
			break;
		case 'O':
			o->out = optarg;
			break;
		case 1000:
			o->xid_seconds = (int)parse_num(optarg, "--xid-seconds", 10, 3600);
			break;
		case 1001:
			o->xid_backlog = parse_num(optarg, "--xid-backlog", 0, 100000000);
			break;
		case 1002:
			o->xid_rate = (int)parse_num(optarg, "--xid-rate", 100, 50000);
			break;
		case 1003:
			o->xid_rollback = (int)parse_num(optarg, "--xid-rollback", 0, 90);
			break;
		case 1004:
			o->xid_holders = optarg;
			break;
		case 'k':
			o->keep = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(2);
		}
	}
	if (optind < argc) {
		usage(stderr);
		exit(2);
	}
	if (strcmp(o->redis_fsync, "always") && strcmp(o->redis_fsync, "everysec") && strcmp(o->redis_fsync, "no")) {
		fprintf(stderr, "bench: --redis-fsync must be always, everysec or no\n");
		exit(2);
	}
	if (!list_ok(o->xid_holders, "idle", "prepared")) {
		fprintf(stderr, "bench: --xid-holders must be idle, prepared or idle,prepared\n");
		exit(2);
	}
}

/* Whether a comma-separated list names item (an empty list names everything). */
bool list_has(const char *list, const char *item)
{
	size_t n = strlen(item);

	if (!*list)
		return true;
	for (const char *p = list; (p = strstr(p, item)) != NULL; p += n)
		if ((p == list || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
			return true;
	return false;
}

static bool want(const char *scenario)
{
	return list_has(env.opts->only, scenario);
}

const char *human(long long n, char *out, size_t len)
{
	if (n >= 1000000 && n % 1000000 == 0)
		snprintf(out, len, "%lldM", n / 1000000);
	else if (n >= 1000 && n % 1000 == 0)
		snprintf(out, len, "%lldk", n / 1000);
	else
		snprintf(out, len, "%lld", n);
	return out;
}

/* ---- servers ---- */

static void start_servers(void)
{
	redisContext *r;

	note("starting a throwaway postgres and redis");
	if (services_start(&env.srv, env.opts->services, "bench") < 0)
		die("%s start failed", env.opts->services);
	note("servers and relay logs in %s", env.srv.dir);
	check_stop();
	if (services_migrate(&env.srv, env.opts->bin) != 0)
		die("%s migrate failed; see %s/migrate.log", env.opts->bin, env.srv.dir);
	/* Redis persistence is set here, like Postgres's fsync=off, so that disk
	 * flushes, which are neither the relay's nor the baselines' cost, stay out. */
	r = redis_connect(&env);
	redis_ok(r, "CONFIG SET appendfsync %s", env.opts->redis_fsync);
	redisFree(r);
}

void wait_relay_ready(const struct bench_env *e, const struct relay *rel)
{
	PGconn *c = pg_connect(e);
	redisContext *r = redis_connect(e);
	long long end = mono_us() + 60000000;

	redis_ok(r, "DEL queue:probe");
	sql(c, "INSERT INTO staged_jobs (queue, job_class) VALUES ('probe', 'Probe')");
	while (redis_int(r, "LLEN queue:probe") < 1) {
		check_stop();
		if (mono_us() > end)
			die("the relay pushed nothing within 60 s; see %s", rel->log);
		if (proc_hwm_kib(rel->proc.pid) < 0)
			die("the relay exited; see %s", rel->log);
		sleep_ms(5);
	}
	redis_ok(r, "DEL queue:probe");
	redisFree(r);
	PQfinish(c);
}

void wait_count(long long (*count)(void *arg), void *arg, const char *what, long long n, const struct relay *rel)
{
	long long last = -1, progress = mono_us(), got;

	while ((got = count(arg)) < n) {
		check_stop();
		/* A relay that exited (a flag it refused) pushes no more: count once more, as it may have pushed the last
		 * jobs just before. */
		if (rel && proc_exited(&rel->proc) && (got = count(arg)) < n)
			die("%s holds %lld of %lld jobs and the relay exited; see %s", what, got, n, rel->log);
		if (got != last) {
			last = got;
			progress = mono_us();
		} else if (mono_us() - progress > 60000000) {
			die("%s stuck at %lld of %lld jobs for 60 s%s%s", what, got, n, rel ? "; see " : "",
			    rel ? rel->log : "");
		}
		sleep_ms(2);
	}
}

struct llen_of {
	redisContext *r;
	const char *key;
};

static long long llen(void *arg)
{
	const struct llen_of *l = arg;

	return redis_int(l->r, "LLEN %s", l->key);
}

void wait_llen(redisContext *r, const char *key, long long n, const struct relay *rel)
{
	wait_count(llen, &(struct llen_of){ r, key }, key, n, rel);
}

/* ---- backlog: relay vs raw limit vs naive loop ---- */

/* The smaller backlog measured besides --jobs. */
#define BACKLOG_SMALL 200000

/* Postgres's durability for what follows: fsync and synchronous_commit on,
 * or fsync off (the other scenarios' setting, disk flushes left out). */
static void set_durable(PGconn *c, bool durable)
{
	sql(c, "ALTER SYSTEM SET fsync = %s", durable ? "on" : "off");
	sql(c, "ALTER SYSTEM SET synchronous_commit = on");
	sql(c, "SELECT pg_reload_conf()");
	sleep_ms(300); /* the server rereads its settings by then; each contender connects anew */
}

/* One "<what>, <size> jobs, <fsync> (us)" row: CPU seconds as µs per job. */
static void cpu_figure(const char *what, const char *h, const char *fs, double sec, long long n)
{
	char fig[128];

	snprintf(fig, sizeof(fig), "%s, %s jobs, %s (us)", what, h, fs);
	table_add("backlog", fig, 2, sec * 1e6 / (double)n);
}

/* The three drains' CPU per job, each side, and how the relay's compares with the raw limit's. */
static void backlog_cpu(const struct drain_cpu *raw, const struct drain_cpu *relay, const struct drain_cpu *naive,
			long long n, const char *h, const char *fs, bool durable)
{
	char fig[128];

	cpu_figure("relay CPU per job", h, fs, relay->self, n);
	cpu_figure("relay's Postgres backend CPU per job", h, fs, relay->backend, n);
	cpu_figure("Redis CPU per job, relay drain", h, fs, relay->redis, n);
	cpu_figure("raw limit CPU per job (bench + redis-cli)", h, fs, raw->self, n);
	cpu_figure("raw limit's Postgres backend CPU per job", h, fs, raw->backend, n);
	cpu_figure("Redis CPU per job, raw limit", h, fs, raw->redis, n);
	cpu_figure("naive loop CPU per job (bench thread)", h, fs, naive->self, n);
	cpu_figure("naive loop's Postgres backend CPU per job", h, fs, naive->backend, n);
	cpu_figure("Redis CPU per job, naive loop", h, fs, naive->redis, n);
	snprintf(fig, sizeof(fig), "Postgres backend CPU per job, relay / raw limit, %s jobs, %s", h, fs);
	table_add("backlog", fig, 2, relay->backend / raw->backend);
	if (durable)
		table_target("backlog", fig, CMP_LE, 1.5, "<= 1.50");
	snprintf(fig, sizeof(fig), "relay + its backend + Redis CPU per job / raw's, %s jobs, %s", h, fs);
	table_add("backlog", fig, 2,
		  (relay->self + relay->backend + relay->redis) / (raw->self + raw->backend + raw->redis));
}

static void backlog_once(int run, long long n, bool durable, bool largest)
{
	PGconn *c = pg_connect(&env);
	redisContext *r = redis_connect(&env);
	long long t0, hwm;
	double raw, relay, naive;
	struct drain_cpu raw_cpu, relay_cpu;
	int nbackends = 0;
	struct relay rel;
	struct naive nv = { .env = &env, .batch_size = env.opts->batch_size };
	const char *fs = durable ? "fsync on" : "fsync off";
	char fig[128], h[24];

	human(n, h, sizeof(h));
	set_durable(c, durable);
	note("backlog run %d, %s jobs, %s: raw limit (COPY out, redis-cli --pipe, DELETE)", run + 1, h, fs);
	bench_reset(&env);
	stage_backlog(&env, "default", 0, n);
	raw_cpu.redis = redis_cpu_s(r);
	t0 = mono_us();
	if (raw_drain(&env, &raw_cpu) != n)
		die("the raw limit moved a different number of jobs than staged");
	raw = (double)n * 1e6 / (double)(mono_us() - t0);
	raw_cpu.redis = redis_cpu_s(r) - raw_cpu.redis;
	if (redis_int(r, "LLEN queue:default") != n)
		die("raw limit: queue:default does not hold %lld jobs", n);
	check_stop();

	note("backlog run %d, %s jobs, %s: relay", run + 1, h, fs);
	bench_reset(&env);
	stage_backlog(&env, "default", 0, n);
	relay_cpu.redis = redis_cpu_s(r);
	t0 = mono_us();
	relay_start(&rel, &env, "backlog", "info");
	wait_llen(r, "queue:default", n, &rel);
	relay = (double)n * 1e6 / (double)(mono_us() - t0);
	hwm = proc_hwm_kib(rel.proc.pid);
	/* The relay and its sessions began with this drain: their whole CPU time
	 * is its cost. Backends exit with their session, so read before the stop. */
	relay_cpu.self = proc_cpu_s(rel.proc.pid);
	relay_cpu.backend = pg_app_cpu_s(c, "stagedrain%", &nbackends);
	relay_cpu.redis = redis_cpu_s(r) - relay_cpu.redis;
	if (nbackends == 0)
		note("found no Postgres backend of the relay (application_name stagedrain%%)");
	if (relay_stop(&rel) != 0)
		die("the relay did not exit cleanly; see %s", rel.log);
	if (redis_int(r, "LLEN queue:default") != n)
		die("relay: queue:default holds more than the %lld jobs staged (duplicates)", n);
	if (sql(c, "SELECT count(*) FROM staged_jobs") != 0)
		die("relay: rows left in staged_jobs after the drain");
	check_stop();

	note("backlog run %d, %s jobs, %s: naive loop", run + 1, h, fs);
	bench_reset(&env);
	stage_backlog(&env, "default", 0, n);
	nv.cpu.redis = redis_cpu_s(r);
	t0 = mono_us();
	if (naive_drain(&nv) != n)
		die("naive loop: moved %lld of %lld jobs: %s", nv.moved, n, nv.err);
	naive = (double)n * 1e6 / (double)(mono_us() - t0);
	nv.cpu.redis = redis_cpu_s(r) - nv.cpu.redis;
	check_stop();
	set_durable(c, false);

	snprintf(fig, sizeof(fig), "raw limit, %s jobs, %s (jobs/s)", h, fs);
	table_add("backlog", fig, 0, raw);
	snprintf(fig, sizeof(fig), "relay drain, %s jobs, %s (jobs/s)", h, fs);
	table_add("backlog", fig, 0, relay);
	snprintf(fig, sizeof(fig), "naive loop, batch %d, %s jobs, %s (jobs/s)", env.opts->batch_size, h, fs);
	table_add("backlog", fig, 0, naive);
	snprintf(fig, sizeof(fig), "relay / raw limit, %s jobs, %s", h, fs);
	table_add("backlog", fig, 2, relay / raw);
	if (durable)
		table_target("backlog", fig, CMP_GE, 0.8, ">= 0.80");
	snprintf(fig, sizeof(fig), "relay / naive loop, %s jobs, %s", h, fs);
	table_add("backlog", fig, 2, relay / naive);
	if (durable)
		table_target("backlog", fig, CMP_GE, 1.5, ">= 1.50");
	backlog_cpu(&raw_cpu, &relay_cpu, &nv.cpu, n, h, fs, durable);
	if (largest && !durable) {
		snprintf(fig, sizeof(fig), "relay peak RSS, %s backlog (MiB)", h);
		table_add("memory", fig, 1, hwm < 0 ? NAN : MIB(hwm));
		table_target("memory", fig, CMP_LE, 16, "<= 16");
	}
	redisFree(r);
	PQfinish(c);
}

/* The two sizes (200k, and --jobs when larger), each with fsync off
 * and with fsync and synchronous_commit on. */
static void scenario_backlog(int run)
{
	long long n = env.opts->jobs, small = n > BACKLOG_SMALL ? BACKLOG_SMALL : n;

	for (int durable = 0; durable < 2; durable++) {
		if (small < n)
			backlog_once(run, small, durable, false);
		backlog_once(run, n, durable, true);
	}
}

/* ---- steady load: commit -> visible latency ---- */

struct lat latencies(const struct load *l, long long from_us, long long to_us)
{
	struct lat out = { NAN, NAN, NAN, 0, 0 };
	long long *v = malloc(sizeof(*v) * (size_t)(l->nseq ? l->nseq : 1));
	size_t n = 0;

	if (!v)
		die("out of memory");
	for (long long s = 0; s < l->nseq; s++) {
		long long ct = l->commit_us[s];
		if (ct == 0 || ct < from_us || ct >= to_us)
			continue;
		if (l->seen[s] == 0) {
			out.lost++;
			continue;
		}
		out.dup += l->seen[s] > 1;
		/* Negative when the job arrived before COMMIT's reply: it counts as 0. */
		v[n++] = l->visible_us[s] > ct ? l->visible_us[s] - ct : 0;
	}
	if (n) {
		qsort(v, n, sizeof(*v), cmp_ll);
		out.p50 = (double)pct_ll(v, n, 50) / 1000.0;
		out.p99 = (double)pct_ll(v, n, 99) / 1000.0;
		out.max = (double)v[n - 1] / 1000.0;
	}
	free(v);
	return out;
}

/* What another session holds open while the steady load runs. */
enum holder { HOLD_NONE, HOLD_SNAPSHOT, HOLD_XID };
static const char *const holder_names[] = { "", ", held snapshot", ", idle xid holder" };

/* The held session, or NULL: a REPEATABLE READ snapshot taken, or a
 * transaction idle after taking an xid. */
static PGconn *hold_start(enum holder h)
{
	PGconn *c;

	if (h == HOLD_NONE)
		return NULL;
	c = pg_connect(&env);
	sql(c, h == HOLD_SNAPSHOT ? "BEGIN ISOLATION LEVEL REPEATABLE READ" : "BEGIN");
	sql(c, h == HOLD_SNAPSHOT ? "SELECT count(*) FROM staged_jobs" : "SELECT pg_current_xact_id()::text::int8");
	return c;
}

static void steady_figures(const struct load *l, int rate, int rows, enum holder h)
{
	struct lat lat = latencies(l, 0, mono_us() + 1);
	bool target = rate == 2000 && rows == 1;
	char what[64], fig[128];

	snprintf(what, sizeof(what), "%d/s %s%s", rate, rows == 1 ? "1-row tx" : "multi-row tx", holder_names[h]);
	snprintf(fig, sizeof(fig), "%s: latency p50 (ms)", what);
	table_add("steady", fig, 2, lat.p50);
	if (target)
		table_target("steady", fig, CMP_LE, 2, "<= 2");
	snprintf(fig, sizeof(fig), "%s: latency p99 (ms)", what);
	table_add("steady", fig, 2, lat.p99);
	if (target)
		table_target("steady", fig, CMP_LE, 10, "<= 10");
	snprintf(fig, sizeof(fig), "%s: latency max (ms)", what);
	table_add("steady", fig, 2, lat.max);
	snprintf(fig, sizeof(fig), "%s: producers committed (jobs/s)", what);
	table_add("steady", fig, 0, (double)l->committed * 1e6 / (double)(l->end_us - l->start_us));
	snprintf(fig, sizeof(fig), "%s: lost + duplicated jobs", what);
	table_add("steady", fig, 0, (double)(lat.lost + lat.dup));
	table_target("steady", fig, CMP_LE, 0, "0");
}

static void scenario_steady(int run, int rate, int rows, enum holder h)
{
	struct relay rel;
	struct load l = { .env = &env,
			  .table = "staged_jobs",
			  .queue = "bench",
			  .rate = rate,
			  .rows_per_tx = rows,
			  .producers = rows == 1 ? 4 : 1,
			  .seconds = env.opts->steady_seconds,
			  .consume = true };
	PGconn *held;

	note("steady run %d: %d jobs/s in %s transactions for %d s%s", run + 1, rate,
	     rows == 1 ? "single-row" : "multi-row", l.seconds, holder_names[h]);
	bench_reset(&env);
	relay_start(&rel, &env, "steady", "debug");
	wait_relay_ready(&env, &rel);
	held = hold_start(h);
	load_start(&l);
	load_finish(&l, 60);
	if (l.failed)
		die("steady load: %s", l.err);
	check_stop();
	if (held) {
		sql(held, "ROLLBACK");
		PQfinish(held);
	}
	if (relay_stop(&rel) != 0)
		note("the relay did not exit cleanly; see %s", rel.log);
	steady_figures(&l, rate, rows, h);
	load_free(&l);
}

/* ---- trigger: producers' throughput with and without what the relay adds to the schema ---- */

static double unthrottled(int rows)
{
	struct load l = { .env = &env,
			  .table = "staged_jobs",
			  .queue = "bench",
			  .rate = 0,
			  .rows_per_tx = rows,
			  .producers = rows == 1 ? 4 : 2,
			  .seconds = env.opts->trigger_seconds,
			  .consume = false };
	double rate;

	bench_reset(&env);
	load_start(&l);
	load_finish(&l, 0);
	if (l.failed)
		die("producer load: %s", l.err);
	rate = (double)l.committed * 1e6 / (double)(l.end_us - l.start_us);
	load_free(&l);
	return rate;
}

/* Producers' throughput with a piece of schema on and off, in alternating
 * order per run so a drift in the machine's speed cancels out. */
static void compare(PGconn *c, int run, int rows, const char *on_sql, const char *off_sql, double *on, double *off)
{
	for (int k = 0; k < 2; k++) {
		bool enabled = (k == 0) == (run % 2 == 0);
		sql(c, "%s", enabled ? on_sql : off_sql);
		*(enabled ? on : off) = unthrottled(rows);
		check_stop();
	}
}

static void add_costs(const char *what, int rows, double on, double off, bool judged)
{
	char fig[128];
	const char *shape = rows == 1 ? "1-row" : "100-row";

	snprintf(fig, sizeof(fig), "%s producers, %s on (jobs/s)", shape, what);
	table_add("schema", fig, 0, on);
	snprintf(fig, sizeof(fig), "%s producers, %s off (jobs/s)", shape, what);
	table_add("schema", fig, 0, off);
	snprintf(fig, sizeof(fig), "%s producers, drop due to %s (%%)", shape, what);
	table_add("schema", fig, 1, (1 - on / off) * 100);
	if (judged)
		table_target("schema", fig, CMP_LE, 5, "<= 5");
}

/*
 * What the relay asks of the schema costs the producers: the id default that
 * takes the xid first (migration 002), judged against the 5% target; and the
 * opt-in NOTIFY trigger of sql/notify.sql, shown for those who consider it.
 */
static void scenario_trigger(int run)
{
	static const int shapes[] = { 1, 100 };
	static const char id_on[] = "ALTER TABLE staged_jobs ALTER COLUMN id SET DEFAULT CASE WHEN pg_current_xact_id()"
				    " IS NOT NULL THEN nextval('staged_jobs_id_seq'::regclass) END";
	static const char id_off[] =
		"ALTER TABLE staged_jobs ALTER COLUMN id SET DEFAULT nextval('staged_jobs_id_seq')";
	static const char notify_off[] = "DROP TRIGGER IF EXISTS staged_jobs_notify ON staged_jobs";
	PGconn *c = pg_connect(&env);
	char notify_on[2048];
	FILE *f = fopen("sql/notify.sql", "r");
	size_t n = f ? fread(notify_on, 1, sizeof(notify_on) - 1, f) : 0;

	if (f)
		fclose(f);
	notify_on[n] = '\0';
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		int rows = shapes[i];
		double on = NAN, off = NAN;
		note("schema run %d: unthrottled %s producers, xid-first id default on and off", run + 1,
		     rows == 1 ? "single-row" : "100-row");
		compare(c, run, rows, id_on, id_off, &on, &off);
		sql(c, "%s", id_on);
		add_costs("xid-first id default", rows, on, off, true);
		on = off = NAN;
		if (n) {
			note("schema run %d: unthrottled %s producers, optional notify trigger on and off", run + 1,
			     rows == 1 ? "single-row" : "100-row");
			compare(c, run, rows, notify_on, notify_off, &on, &off);
			sql(c, "%s", notify_off);
		}
		add_costs("optional notify trigger", rows, on, off, false);
	}
	PQfinish(c);
}

/* ---- long transaction: flat and lossless with xmin pinned ---- */

struct minute {
	long long backlog_max;
	long long dead_tuples;
};

/*
 * The steady single-row load at 2,000 jobs/s for --minutes with a REPEATABLE
 * READ transaction idle in another session, drained by the relay or by the
 * naive loop. Samples the backlog every second and dead tuples each minute.
 */
static void long_part(int run, bool naive)
{
	int minutes = env.opts->minutes, rate = 2000;
	struct load l = { .env = &env,
			  .table = "staged_jobs",
			  .queue = "default",
			  .rate = rate,
			  .rows_per_tx = 1,
			  .producers = 2,
			  .seconds = minutes * 60,
			  .consume = true };
	struct minute mins[BENCH_MAX_MINUTES] = { { 0, 0 } };
	struct naive_stats nst[BENCH_MAX_MINUTES] = { { 0, 0, 0, 0, 0, 0 } };
	struct batch_minute bm[BENCH_MAX_MINUTES];
	struct naive nv = {
		.env = &env, .batch_size = env.opts->batch_size, .poll_ms = 100, .minutes = minutes, .per_minute = nst
	};
	struct relay rel = { { 0, -1 }, "" };
	PGconn *holder = pg_connect(&env), *stats = pg_connect(&env);
	const char *who = naive ? "naive" : "relay";
	long long t0_wall;
	int last_min = -1;
	struct lat lat;
	char fig[96];

	note("long run %d: %s, %d jobs/s for %d min with a repeatable read transaction left open", run + 1, who, rate,
	     minutes);
	bench_reset(&env);
	if (!naive) {
		relay_start(&rel, &env, "long", "debug");
		wait_relay_ready(&env, &rel);
	}
	sql(holder, "BEGIN ISOLATION LEVEL REPEATABLE READ");
	sql(holder, "SELECT count(*) FROM staged_jobs"); /* takes the snapshot that pins xmin */
	load_start(&l);
	t0_wall = wall_us() - (mono_us() - l.start_us);
	if (naive) {
		nv.t0_us = l.start_us;
		naive_start(&nv);
	}
	while (!interrupted) {
		long long now = mono_us();
		int m = now < l.start_us ? 0 : (int)((now - l.start_us) / 60000000);
		long long backlog = load_committed(&l) - load_consumed(&l);
		if (m >= minutes || l.failed || (naive && nv.moved < 0))
			break;
		if (backlog > mins[m].backlog_max)
			mins[m].backlog_max = backlog;
		if (m != last_min && last_min >= 0)
			mins[last_min].dead_tuples = sql(stats, "SELECT n_dead_tup FROM pg_stat_user_tables"
								" WHERE relname = 'staged_jobs'");
		last_min = m;
		sleep_ms(1000);
	}
	if (last_min >= 0)
		mins[last_min].dead_tuples = sql(stats, "SELECT n_dead_tup FROM pg_stat_user_tables"
							" WHERE relname = 'staged_jobs'");
	load_finish(&l, 120);
	check_stop();
	sql(holder, "ROLLBACK");
	if (naive) {
		nv.stop = 1;
		naive_join(&nv);
		if (nv.moved < 0)
			die("naive loop: %s", nv.err);
	} else if (relay_stop(&rel) != 0) {
		note("the relay did not exit cleanly; see %s", rel.log);
	}
	if (l.failed)
		die("long load: %s", l.err);
	if (!naive)
		relay_log_batches(rel.log, t0_wall, bm, minutes);

	for (int m = 0; m < minutes; m++) {
		long long from = l.start_us + (long long)m * 60000000;
		struct lat ml = latencies(&l, from, from + 60000000);
		if (naive) {
			const struct naive_stats *s = &nst[m];
			double b = s->batches ? (double)s->batches : NAN;
			snprintf(fig, sizeof(fig), "naive: SELECT per batch, minute %d (ms)", m + 1);
			table_add("long", fig, 2, (double)s->select_us / b / 1000);
			snprintf(fig, sizeof(fig), "naive: DELETE per batch, minute %d (ms)", m + 1);
			table_add("long", fig, 2, (double)s->delete_us / b / 1000);
		} else {
			const struct batch_minute *b = &bm[m];
			double nb = b->batches ? (double)b->batches : NAN;
			snprintf(fig, sizeof(fig), "relay: fetch+push+commit per batch, minute %d (ms)", m + 1);
			table_add("long", fig, 2, (b->fetch_us + b->push_us + b->commit_us) / nb / 1000);
			snprintf(fig, sizeof(fig), "relay: jobs per batch, minute %d", m + 1);
			table_add("long", fig, 1, (double)b->jobs / nb);
		}
		snprintf(fig, sizeof(fig), "%s: latency p99, minute %d (ms)", who, m + 1);
		table_add("long", fig, 2, ml.p99);
		snprintf(fig, sizeof(fig), "%s: backlog max, minute %d (jobs)", who, m + 1);
		table_add("long", fig, 0, (double)mins[m].backlog_max);
		snprintf(fig, sizeof(fig), "%s: dead tuples, end of minute %d", who, m + 1);
		table_add("long", fig, 0, (double)mins[m].dead_tuples);
	}

	/* The judged figures: last minute against the first, and losses. */
	if (naive) {
		const struct naive_stats *a = &nst[0], *z = &nst[minutes - 1];
		table_add("long", "naive: SELECT last / first minute", 2,
			  a->batches && z->batches ? ((double)z->select_us / (double)z->batches) /
							     ((double)a->select_us / (double)a->batches)
						   : NAN);
		table_add("long", "naive: DELETE last / first minute", 2,
			  a->batches && z->batches ? ((double)z->delete_us / (double)z->batches) /
							     ((double)a->delete_us / (double)a->batches)
						   : NAN);
	} else {
		const struct batch_minute *a = &bm[0], *z = &bm[minutes - 1];
		double fa = (a->fetch_us + a->push_us + a->commit_us) / (double)a->batches;
		double fz = (z->fetch_us + z->push_us + z->commit_us) / (double)z->batches;
		const char *parts[] = { "fetch", "push", "commit" };
		const double va[] = { a->fetch_us, a->push_us, a->commit_us };
		const double vz[] = { z->fetch_us, z->push_us, z->commit_us };
		for (int k = 0; k < 3; k++) {
			snprintf(fig, sizeof(fig), "relay: %s per batch, first minute (ms)", parts[k]);
			table_add("long", fig, 2, a->batches ? va[k] / (double)a->batches / 1000 : NAN);
			snprintf(fig, sizeof(fig), "relay: %s per batch, last minute (ms)", parts[k]);
			table_add("long", fig, 2, z->batches ? vz[k] / (double)z->batches / 1000 : NAN);
		}
		table_add("long", "relay: batch time last / first minute", 2, a->batches && z->batches ? fz / fa : NAN);
		table_target("long", "relay: batch time last / first minute", CMP_LE, 1.5, "<= 1.50");
	}
	lat = latencies(&l, 0, mono_us() + 1);
	snprintf(fig, sizeof(fig), "%s: backlog max, last minute (jobs)", who);
	table_add("long", fig, 0, (double)mins[minutes - 1].backlog_max);
	if (!naive)
		table_target("long", fig, CMP_LE, rate, "<= 2000 (1 s of load)");
	snprintf(fig, sizeof(fig), "%s: lost jobs", who);
	table_add("long", fig, 0, (double)lat.lost);
	if (!naive)
		table_target("long", fig, CMP_LE, 0, "0");
	snprintf(fig, sizeof(fig), "%s: duplicated jobs", who);
	table_add("long", fig, 0, (double)lat.dup);
	if (!naive)
		table_target("long", fig, CMP_LE, 0, "0");
	load_free(&l);
	PQfinish(holder);
	PQfinish(stats);
}

/* ---- memory: peak RSS while one relay drains --big-jobs ---- */

static void scenario_memory(int run)
{
	long long big = env.opts->big_jobs, chunk = big < 1000000 ? big : 1000000, done = 0;
	long long hwm_first = -1, hwm_end;
	redisContext *r = redis_connect(&env);
	PGconn *c = pg_connect(&env);
	struct relay rel;
	char fig[96], h1[24], h2[24];

	note("memory run %d: one relay drains %lld jobs in backlogs of %lld", run + 1, big, chunk);
	bench_reset(&env);
	relay_start(&rel, &env, "memory", "info");
	wait_relay_ready(&env, &rel);
	while (done < big) {
		long long n = big - done < chunk ? big - done : chunk;
		stage_backlog(&env, "default", done, n);
		wait_llen(r, "queue:default", n, &rel);
		/* Keep Redis small: the jobs were counted, they need not stay. */
		if (redis_int(r, "DEL queue:default") != 1)
			die("memory: queue:default vanished");
		done += n;
		if (hwm_first < 0)
			hwm_first = proc_hwm_kib(rel.proc.pid);
		check_stop();
	}
	hwm_end = proc_hwm_kib(rel.proc.pid);
	if (relay_stop(&rel) != 0)
		die("the relay did not exit cleanly; see %s", rel.log);
	if (sql(c, "SELECT count(*) FROM staged_jobs") != 0)
		die("memory: rows left in staged_jobs after the drain");
	human(chunk, h1, sizeof(h1));
	human(big, h2, sizeof(h2));
	if (big > chunk) {
		snprintf(fig, sizeof(fig), "relay peak RSS after %s jobs (MiB)", h1);
		table_add("memory", fig, 1, MIB(hwm_first));
		table_target("memory", fig, CMP_LE, 16, "<= 16");
	}
	snprintf(fig, sizeof(fig), "relay peak RSS after %s jobs (MiB)", h2);
	table_add("memory", fig, 1, MIB(hwm_end));
	table_target("memory", fig, CMP_LE, 16, "<= 16");
	if (big > chunk) {
		snprintf(fig, sizeof(fig), "relay peak RSS growth %s -> %s (MiB)", h1, h2);
		table_add("memory", fig, 2, MIB(hwm_end - hwm_first));
		table_target("memory", fig, CMP_LE, 1, "<= 1 (flat)");
	}
	redisFree(r);
	PQfinish(c);
}

/* ---- report ---- */

static void header(FILE *out, const char *pgver, const char *redisver, const char *relayver)
{
	const struct bench_opts *o = env.opts;
	struct utsname u;
	char h[24];

	uname(&u);
	fprintf(out, "stagedrain bench: %s, %s %s, %ld cpus\n", relayver, u.sysname, u.release,
		sysconf(_SC_NPROCESSORS_ONLN));
	fprintf(out,
		"servers: PostgreSQL %s with fsync=off (the backlog also with fsync and synchronous_commit on),"
		" Redis %s with appendfsync=%s (throwaway, loopback)\n",
		pgver, redisver, o->redis_fsync);
	fprintf(out,
		"settings: --runs %d --jobs %s --minutes %d --big-jobs %lld --steady-seconds %d "
		"--trigger-seconds %d --batch-size %d%s%s\n",
		o->runs, human(o->jobs, h, sizeof(h)), o->minutes, o->big_jobs, o->steady_seconds, o->trigger_seconds,
		o->batch_size, *o->relay_args ? " --relay-args " : "", o->relay_args);
	if (want("xid-holder"))
		fprintf(out,
			"xid-holder: --xid-seconds %d --xid-backlog %s --xid-rate %d --xid-rollback %d "
			"--xid-holders %s\n",
			o->xid_seconds, human(o->xid_backlog, h, sizeof(h)), o->xid_rate, o->xid_rollback,
			o->xid_holders);
	if (want("wait"))
		fprintf(out, "wait: %s jobs per drain, relay at --log-level debug (push_us of each batch)\n",
			human(wait_jobs(o), h, sizeof(h)));
	if (want("release"))
		fprintf(out,
			"release: %s jobs held behind --queue-limit default=%d, released as a consumer frees the "
			"list; medians over the first and last tenth of the batches that released held jobs (relay at "
			"--log-level debug)\n",
			human(o->jobs, h, sizeof(h)), o->batch_size);
	if (want("routed"))
		fprintf(out,
			"routed: %s jobs, args [i] to queue q(i %% 3), drained with fsync off by one relay into the "
			"bench's redis, then by one relay with --route r1 q1 and r2 q2 into two more redis (appendonly, "
			"appendfsync=%s); each job checked on its queue's redis, once, in id order\n",
			human(o->jobs, h, sizeof(h)), o->redis_fsync);
	if (want("cluster"))
		fprintf(out,
			"cluster: %s BullMQ jobs, args [i] to the i %% 12th of twelve queues {qN} picked so that "
			"each master serves four, drained with fsync off by one relay --format bullmq into the bench's "
			"redis, into a redis cluster of 3 masters and a replica each (services.sh cluster-start, "
			"appendonly, appendfsync=%s, all on this machine's cpus), and into it with "
			"--redis-wait-replicas 1, in turn, the order rotating per run; each job checked on its queue's "
			"server, once, in id order\n",
			human(o->jobs, h, sizeof(h)), o->redis_fsync);
	fprintf(out, "each figure: median, min and max over the runs; result judges the median; "
		     "latency is COMMIT returned -> BRPOP got the job\n\n");
}

static void server_versions(char *pgver, size_t pglen, char *rver, size_t rlen)
{
	PGconn *c = pg_connect(&env);
	redisContext *r = redis_connect(&env);
	redisReply *rep = redisCommand(r, "INFO server");
	const char *v;

	snprintf(pgver, pglen, "%s", PQparameterStatus(c, "server_version"));
	snprintf(rver, rlen, "?");
	if (rep && rep->type == REDIS_REPLY_STRING && (v = strstr(rep->str, "redis_version:")))
		snprintf(rver, rlen, "%.*s", (int)strcspn(v + 14, "\r\n"), v + 14);
	freeReplyObject(rep);
	redisFree(r);
	PQfinish(c);
}

static void relay_version(char *out, size_t len)
{
	char cmd[600];
	FILE *p;

	snprintf(out, len, "relay %s", env.opts->bin);
	snprintf(cmd, sizeof(cmd), "'%s' --version 2>/dev/null", env.opts->bin);
	if ((p = popen(cmd, "r")) != NULL) {
		if (fgets(out, (int)len, p))
			out[strcspn(out, "\n")] = '\0';
		pclose(p);
	}
}

int main(int argc, char **argv)
{
	struct bench_opts opts;
	char pgver[64], rver[64], relayver[128];
	FILE *out;
	long long est;

	parse_opts(&opts, argc, argv);
	env.opts = &opts;
	if (access(opts.bin, X_OK) != 0)
		die("%s is not an executable: run make first", opts.bin);
	catch_signals();
	atexit(cleanup);

	est = opts.runs *
	      ((want("backlog") ? (opts.jobs + BACKLOG_SMALL) * 6 / 20000 : 0) +
	       (want("steady") ? 4 * (opts.steady_seconds + 5) : 0) + (want("trigger") ? 8 * opts.trigger_seconds : 0) +
	       (want("long") ? 2 * 60 * opts.minutes : 0) + (want("memory") ? opts.big_jobs / 20000 : 0) +
	       (want("xid-holder") ? (list_has(opts.xid_holders, "idle") + list_has(opts.xid_holders, "prepared")) *
					     (2 * opts.xid_seconds + 35 + opts.xid_backlog / 50000)
				   : 0) +
	       (want("wait") ? 3 * (1 + wait_jobs(&opts) / 60000) : 0) +
	       (want("release") ? 2 * (10 + opts.jobs / 5000) : 0) + (want("routed") ? opts.jobs * 4 / 20000 : 0) +
	       (want("cluster") ? 10 + opts.jobs * 3 / 30000 : 0));
	note("this takes roughly %lld minutes", est / 60 + 1);
	start_servers();
	if (want("xid-holder") && list_has(opts.xid_holders, "prepared"))
		xid_setup_servers(&env);
	server_versions(pgver, sizeof(pgver), rver, sizeof(rver));
	relay_version(relayver, sizeof(relayver));

	for (int run = 0; run < opts.runs; run++) {
		if (want("backlog"))
			scenario_backlog(run);
		if (want("routed"))
			scenario_routed(&env, run);
		if (want("cluster"))
			scenario_cluster(&env, run);
		if (want("steady")) {
			scenario_steady(run, 2000, 1, HOLD_NONE);
			scenario_steady(run, 2000, 1, HOLD_SNAPSHOT);
			scenario_steady(run, 2000, 1, HOLD_XID);
			scenario_steady(run, 20000, 100, HOLD_NONE);
		}
		if (want("trigger"))
			scenario_trigger(run);
		if (want("long")) {
			long_part(run, false);
			long_part(run, true);
		}
		if (want("memory") && opts.big_jobs > 0)
			scenario_memory(run);
		if (want("xid-holder"))
			scenario_xid_holder(&env, run);
		if (want("wait"))
			scenario_wait(&env, run);
		if (want("release"))
			scenario_release(&env, run);
		check_stop();
	}

	header(stdout, pgver, rver, relayver);
	table_print(stdout);
	fflush(stdout); /* before the note on stderr, which may share the terminal */
	if ((out = fopen(opts.out, "w")) != NULL) {
		header(out, pgver, rver, relayver);
		table_print(out);
		fclose(out);
		note("table written to %s", opts.out);
	} else {
		note("could not write %s: %s", opts.out, strerror(errno));
	}
	return 0;
}
