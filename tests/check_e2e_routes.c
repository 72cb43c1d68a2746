/* End to end with routes: one staged_jobs table, one relay, three Redis: two
 * Sidekiq shards (a real Sidekiq 6.4 on each) and a Celery target (a real
 * Celery worker). 30,000 jobs over 12 queues from concurrent producers; one
 * shard's Redis is SIGKILLed mid-run and started again 10 s later. Each job
 * runs exactly once, on the worker of its route, each producer's jobs of a
 * queue in their commit order (held ones too), and the other targets'
 * latency holds while the shard is down. */
#include "fmacros.h"

#include <check.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suites.h"
#include "support/redis_server.h"
#include "support/relay_keys.h"

#define JOBS 30000
#define PRODUCERS 4
#define TX_ROWS 10
#define PRODUCE_MS 60000
#define KILL_AT_MS 20000
#define DOWN_MS 10000
/* The relay's --poll-interval (its default), and the latency bound's floor. */
#define POLL_MS 100
#define POLL_INTERVAL "100ms"

/* The queues: a1-a5 on shard a (the default target), b1-b3 and bx.one on
 * shard b (three by name, one by glob), ml.* on the Celery target. */

/* Shard b's and ml's Redis (tests/support/redis_server.h): an AOF fsynced
 * before each reply, so the SIGKILL of shard b loses nothing it acknowledged
 * and the jobs it held that Sidekiq had not taken come back with it: a loss
 * after the restart is the relay's, not the test's. (An RDB would lose every
 * write since its last save.) Its port is below the ephemeral range, so no
 * outgoing connection takes it in the 10 s it is down. */
static void own_redis_start(struct redis_server *x, const char *name)
{
	char dir[PATH_MAX], cmd[PATH_MAX + 16], err[REDIS_ERRLEN];

	snprintf(dir, sizeof(dir), "%s/%s", h_env("TEST_DIR"), name);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_msg(redis_server_start(x, dir, err) == 0, "%s", err);
}

/* What a worker needs: where its jobs come from, where it records, its name. */
struct worker_env {
	char url[64], record[256], shard[16], path[PATH_MAX];
};

static void sidekiq_env(void *arg)
{
	const struct worker_env *e = arg;

	setenv("REDIS_URL", e->url, 1);
	setenv("E2E_RECORD_URL", e->record, 1);
	setenv("E2E_SHARD", e->shard, 1);
}

/* One thread, so a queue's jobs run in the order they were pushed. */
static void start_sidekiq(struct relay_proc *p, struct worker_env *e, const char *name, const char *const *qs, int nq)
{
	char worker[PATH_MAX];
	const char *argv[64] = { "sidekiq", "-r", worker, "-c", "1", "-t", "5", "-e", "test" };
	int n = 9;
	struct proc_opts o = { .argv = argv,
			       .cwd = h_env("TEST_DIR"),
			       .child_setup = sidekiq_env,
			       .child_arg = e,
			       .die_with_parent = true };

	ck_assert_ptr_nonnull(realpath("tests/e2e/worker.rb", worker));
	for (int i = 0; i < nq; i++) {
		argv[n++] = "-q";
		argv[n++] = qs[i];
	}
	argv[n] = NULL;
	h_proc_start(p, name, &o);
}

static void celery_env(void *arg)
{
	const struct worker_env *e = arg;

	setenv("CELERY_BROKER_URL", e->url, 1);
	setenv("PYTHONPATH", e->path, 1);
	setenv("E2E_RECORD_URL", e->record, 1);
	setenv("E2E_SHARD", e->shard, 1);
}

static void start_celery(struct relay_proc *p, struct worker_env *e)
{
	const char *argv[] = { "/usr/bin/python3",
			       "-m",
			       "celery",
			       "-A",
			       "celery_tasks",
			       "worker",
			       "--pool",
			       "solo",
			       "-c",
			       "1",
			       "-Q",
			       "ml.one,ml.two,ml.three",
			       "--without-heartbeat",
			       "--without-gossip",
			       "--without-mingle",
			       "--loglevel",
			       "WARNING",
			       NULL };
	struct proc_opts o = { .argv = argv,
			       .cwd = h_env("TEST_DIR"),
			       .child_setup = celery_env,
			       .child_arg = e,
			       .die_with_parent = true };

	ck_assert_ptr_nonnull(realpath("tests/e2e", e->path));
	h_proc_start(p, "routes-celery", &o);
}

static void stop_worker(struct relay_proc *p)
{
	h_relay_kill(p, SIGTERM);
	if (h_relay_wait(p, 20000) < 0) {
		h_relay_kill(p, SIGKILL);
		(void)h_relay_wait(p, 5000);
	}
}

/* Producers: each commits TX_ROWS rows a transaction, spread over the
 * queues, paced to JOBS in PRODUCE_MS, and records each row in `exp` in the
 * same statement. Every tenth row of queue a1 names route shard2 by its
 * column: Sidekiq's per-job pool. */
struct producer {
	pthread_t thread;
	int k;
	long long t0;
	_Atomic long long *committed;
	char err[256];
};

static void *produce(void *arg)
{
	struct producer *p = arg;
	PGconn *c = PQconnectdb(h_env("TEST_PG_URL"));
	int txns = JOBS / PRODUCERS / TX_ROWS;

	/* Fewer fsyncs to stall the relay's (see the latency bound): nothing
	 * here crashes Postgres, so an asynchronous commit loses nothing. */
	PQclear(PQexec(c, "SET synchronous_commit = off"));

	for (int t = 0; t < txns && PQstatus(c) == CONNECTION_OK; t++) {
		char sql[1024];
		PGresult *res;
		/* Each its own phase: not all four committing at one instant. */
		long long due = p->t0 + ((long long)t * PRODUCERS + p->k) * PRODUCE_MS / txns / PRODUCERS;
		while (mono_ms() < due)
			sleep_ms(2);
		snprintf(
			sql, sizeof(sql),
			"WITH s AS (INSERT INTO staged_jobs (queue, job_class, args, route)"
			" SELECT q.name, CASE WHEN q.name LIKE 'ml.%%' THEN 'e2e.record' ELSE 'StagedrainE2eJob' END,"
			"  jsonb_build_array((extract(epoch FROM clock_timestamp()) * 1000)::int8),"
			"  CASE WHEN q.name = 'a1' AND (%d + i) %% 10 = 0 THEN 'shard2' END"
			" FROM generate_series(0, %d) i, LATERAL (SELECT (ARRAY['a1','a2','a3','a4','a5','b1','b2','b3',"
			"  'bx.one','ml.one','ml.two','ml.three'])[1 + (%d + i * 5) %% 12] AS name) q ORDER BY i"
			" RETURNING id, jid, uuid::text AS uuid, queue, route, (args->>0)::int8 AS t_ms)"
			" INSERT INTO exp SELECT *, %d FROM s",
			t, TX_ROWS - 1, p->k * 7 + t * 3, p->k);
		res = PQexec(c, sql);
		if (PQresultStatus(res) != PGRES_COMMAND_OK)
			snprintf(p->err, sizeof(p->err), "%s", PQerrorMessage(c));
		PQclear(res);
		if (p->err[0])
			break;
		atomic_fetch_add(p->committed, TX_ROWS);
	}
	if (PQstatus(c) != CONNECTION_OK && !p->err[0])
		snprintf(p->err, sizeof(p->err), "%s", PQerrorMessage(c));
	PQfinish(c);
	return NULL;
}

/* A percentile (0..1) of column col (ms) of runs, over one worker's jobs
 * (shard a, b or ml) committed in [from, to) ms since the epoch; *n: how many.
 * With one_stall, the jobs committed from 100 ms before the worst one (its
 * largest col) to 1 s after are left out: one stall of up to a second. */
static double latency(PGconn *c, const char *col, const char *shard, double pct, long long from, long long to,
		      bool one_stall, long long *n)
{
	char v[64];
	char sql[768];

	snprintf(sql, sizeof(sql),
		 "WITH w AS (SELECT %s AS v, t_ms FROM runs WHERE shard = '%s' AND t_ms >= %lld AND t_ms < %lld),"
		 " worst AS (SELECT t_ms FROM w ORDER BY v DESC NULLS LAST LIMIT 1)"
		 " SELECT coalesce(percentile_disc(%g) WITHIN GROUP (ORDER BY v), 0), count(*) FROM w, worst"
		 " WHERE %s OR w.t_ms < worst.t_ms - 100 OR w.t_ms > worst.t_ms + 1000",
		 col, shard, from, to, pct, one_stall ? "false" : "true");
	h_sql_text(c, sql, v, sizeof(v));
	*n = (long long)h_sql(c, "SELECT count(*) FROM runs WHERE shard = $$%s$$ AND t_ms >= %lld AND t_ms < %lld",
			      shard, from, to);
	return atof(v);
}

/* The jobs waiting in shard b's Sidekiq queues. */
static long long b_waiting(const struct redis_server *b)
{
	char err[REDIS_ERRLEN];
	redisContext *r = redis_open(b->port, 2000, err);
	long long n = 0;

	ck_assert_msg(r, "%s", err);
	for (int i = 0; i < 5; i++)
		n += h_cmd_int(r, "LLEN queue:%s", (const char *[]){ "b1", "b2", "b3", "bx.one", "a1" }[i]);
	redisFree(r);
	return n;
}

/* What the relay left in one target's Redis: which Sidekiq queues its `queues`
 * set registers (sorted, comma-separated) and which targets' epoch keys it
 * holds ("default", "shard2", "ml" that exist, comma-separated). */
struct layout {
	char queues[128], epochs[64];
};

static void read_layout(int port, struct layout *l)
{
	char err[REDIS_ERRLEN], key[128];
	redisContext *r = redis_open(port, 2000, err);
	redisReply *q;
	static const char *const routes[] = { "shard2", "ml" };

	*l = (struct layout){ 0 };
	ck_assert_msg(r, "%s", err);
	q = h_cmd(r, "SORT queues ALPHA");
	for (size_t i = 0; i < q->elements; i++)
		snprintf(l->queues + strlen(l->queues), sizeof(l->queues) - strlen(l->queues), "%s%s", i ? "," : "",
			 q->element[i]->str);
	freeReplyObject(q);
	if (h_cmd_int(r, "EXISTS %s", h_epoch_key()))
		strcat(l->epochs, "default");
	for (int i = 0; i < 2; i++) {
		snprintf(key, sizeof(key), KEYS_ROUTE_OWN_FMT, "", KEYS_LOCK_DEFAULT, routes[i], KEYS_EPOCH);
		if (h_cmd_int(r, "EXISTS %s", key))
			snprintf(l->epochs + strlen(l->epochs), sizeof(l->epochs) - strlen(l->epochs), "%s%s",
				 *l->epochs ? "," : "", routes[i]);
	}
	redisFree(r);
}

/* Now, on Postgres' clock (the one t_ms is read from), in ms since the epoch. */
static long long pg_now_ms(PGconn *c)
{
	return (long long)h_sql(c, "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::int8");
}

START_TEST(three_targets_each_job_once_on_its_worker_in_order_through_a_shard_outage)
{
	PGconn *c = h_pg();
	redisContext *ra = h_redis();
	struct redis_server b, ml;
	struct relay_proc relay, wa, wb, wc;
	struct worker_env ea, eb, ec;
	struct producer prod[PRODUCERS];
	struct layout lay[3];
	_Atomic long long committed = 0;
	char route_b[256], route_ml[256], err[REDIS_ERRLEN];
	long long t0, epoch0, kill_ms, back_ms, done = 0, held_b = 0, held_others = 0, waiting_at_kill,
						waiting_after_restart;
	int relay_rc;
	static const char *const qa[] = { "a1", "a2", "a3", "a4", "a5" };
	static const char *const qb[] = { "b1", "b2", "b3", "bx.one", "a1" };

	h_reset();
	h_sql(c, "DROP TABLE IF EXISTS exp");
	h_sql(c, "CREATE TABLE exp (id int8, jid text, uuid text, queue text, route text, t_ms int8, producer int)");
	own_redis_start(&b, "redis-shard-b");
	own_redis_start(&ml, "redis-ml");
	/* Shard a's and ml's Redis are never killed: their fsync at each write
	 * only adds the disk's stalls to the latency compared below (a push
	 * of 10 jobs took 291 ms once, on this shared machine's disk). Shard
	 * b's keeps it. The test Redis gets it back before any check. */
	{
		char err[REDIS_ERRLEN];
		redisContext *r = redis_open(ml.port, 2000, err);
		ck_assert_msg(r, "%s", err);
		freeReplyObject(h_cmd(r, "CONFIG SET appendfsync no"));
		redisFree(r);
		freeReplyObject(h_cmd(ra, "CONFIG SET appendfsync no"));
	}
	snprintf(route_b, sizeof(route_b), "shard2 b1,b2,b3,bx.* --redis-url %s", b.url);
	snprintf(route_ml, sizeof(route_ml), "ml ml.* --redis-url %s --format celery", ml.url);

	/* Every worker records its runs into the test Redis (shard a's), which
	 * stays up: shard b's worker records nothing into the Redis that dies. */
	ea = (struct worker_env){ .shard = "a" };
	snprintf(ea.url, sizeof(ea.url), "%s", h_env("TEST_REDIS_URL"));
	eb = (struct worker_env){ .shard = "b" };
	snprintf(eb.url, sizeof(eb.url), "%s", b.url);
	ec = (struct worker_env){ .shard = "ml" };
	snprintf(ec.url, sizeof(ec.url), "%s", ml.url);
	snprintf(ea.record, sizeof(ea.record), "%s", h_env("TEST_REDIS_URL"));
	snprintf(eb.record, sizeof(eb.record), "%s", h_env("TEST_REDIS_URL"));
	snprintf(ec.record, sizeof(ec.record), "%s", h_env("TEST_REDIS_URL"));
	start_sidekiq(&wa, &ea, "routes-sidekiq-a", qa, 5);
	start_sidekiq(&wb, &eb, "routes-sidekiq-b", qb, 5);
	start_celery(&wc, &ec);
	{
		const char *args[] = { "--route", route_b,           "--route",     route_ml, "--redis-timeout",
				       "1s",      "--poll-interval", POLL_INTERVAL, NULL };
		h_relay_start(&relay, "routes-relay", args);
	}

	t0 = mono_ms();
	for (int k = 0; k < PRODUCERS; k++) {
		prod[k] = (struct producer){ .k = k, .t0 = t0, .committed = &committed };
		ck_assert_int_eq(pthread_create(&prod[k].thread, NULL, produce, &prod[k]), 0);
	}
	/* Mid-run: shard b's worker stops, then its Redis dies, for DOWN_MS.
	 * The worker stops first because Sidekiq's BRPOP fetch takes a job off
	 * the list before running it: a job whose pop the Redis had written
	 * and fsynced but whose reply the SIGKILL cut off would be lost by the
	 * test, not by the relay. The jobs pushed after it stopped wait in the
	 * lists, and must be there after the restart (the AOF). */
	while (mono_ms() - t0 < KILL_AT_MS)
		sleep_ms(50);
	stop_worker(&wb);
	waiting_at_kill = b_waiting(&b);
	kill_ms = pg_now_ms(c);
	(void)redis_server_stop(&b, SIGKILL, 5000);
	/* While it is down: shard b's rows are held, no other target's are. */
	while (pg_now_ms(c) - kill_ms < DOWN_MS) {
		long long nb = (long long)h_sql(c, "SELECT count(*) FROM staged_jobs_held WHERE target = 'shard2'");
		long long no = (long long)h_sql(c, "SELECT count(*) FROM staged_jobs_held"
						   " WHERE target IS DISTINCT FROM 'shard2'");
		held_b = nb > held_b ? nb : held_b;
		held_others = no > held_others ? no : held_others;
		sleep_ms(200);
	}
	back_ms = pg_now_ms(c);
	ck_assert_msg(redis_server_restart(&b, err) == 0, "%s", err);
	waiting_after_restart = b_waiting(&b);
	start_sidekiq(&wb, &eb, "routes-sidekiq-b-again", qb, 5);
	for (int k = 0; k < PRODUCERS; k++)
		pthread_join(prod[k].thread, NULL);
	for (long long w0 = mono_ms(); committed == JOBS && mono_ms() - w0 < 120000; sleep_ms(200)) {
		done = h_cmd_int(ra, "LLEN e2e:ran") + h_cmd_int(ra, "LLEN e2e:celery:ran");
		if (done >= JOBS)
			break;
	}
	sleep_ms(500); /* a duplicate would come now */
	freeReplyObject(h_cmd(ra, "CONFIG SET appendfsync always"));
	read_layout(h_port("redis"), &lay[0]);
	read_layout(b.port, &lay[1]);
	read_layout(ml.port, &lay[2]);
	stop_worker(&wa);
	stop_worker(&wb);
	stop_worker(&wc);
	h_relay_kill(&relay, SIGTERM);
	relay_rc = h_relay_wait(&relay, 10000);
	if (relay_rc < 0) {
		h_relay_kill(&relay, SIGKILL);
		(void)h_relay_wait(&relay, 5000);
	}
	(void)redis_server_stop(&b, SIGTERM, 5000);
	(void)redis_server_stop(&ml, SIGTERM, 5000);

	/* Everything is stopped: a failed check below leaves nothing running. */
	for (int k = 0; k < PRODUCERS; k++)
		ck_assert_msg(!prod[k].err[0], "producer %d: %s", k, prod[k].err);
	ck_assert_int_eq(committed, JOBS);
	ck_assert_int_eq(relay_rc, 0);
	ck_assert_msg(held_b > 0, "no row of shard2 was held while its redis was down");
	ck_assert_msg(held_others == 0, "%lld rows of the targets that were up were held", held_others);
	/* Each target's Redis in its own format's layout, with its own epoch:
	 * shard b's Sidekiq sees a1 too (the route column), the Celery
	 * target no Sidekiq queue. */
	ck_assert_str_eq(lay[0].queues, "a1,a2,a3,a4,a5");
	ck_assert_str_eq(lay[1].queues, "a1,b1,b2,b3,bx.one");
	ck_assert_str_eq(lay[2].queues, "");
	ck_assert_str_eq(lay[0].epochs, "default");
	ck_assert_str_eq(lay[1].epochs, "shard2");
	ck_assert_str_eq(lay[2].epochs, "ml");
	ck_assert_msg(waiting_at_kill > 0 && waiting_after_restart >= waiting_at_kill,
		      "shard b's lists held %lld jobs at the SIGKILL, %lld after the restart", waiting_at_kill,
		      waiting_after_restart);

	/* Every run, Sidekiq's and Celery's, with its shard and the row it was. */
	h_load_list(c, ra, "e2e:ran", "sk_json");
	h_load_list(c, ra, "e2e:celery:ran", "ce_json");
	h_sql(c, "DROP TABLE IF EXISTS runs");
	h_sql(c, "CREATE TABLE runs AS"
		 " SELECT e.id, e.queue, e.route, e.producer, j.j->>'shard' AS shard, j.pos, e.t_ms,"
		 "  ((j.j->>'ran_at')::float8 * 1000)::int8 AS ran_ms, 'sidekiq' AS kind,"
		 "  ((j.j->>'enqueued_at')::float8 * 1000)::int8 AS push_ms"
		 " FROM sk_json j LEFT JOIN exp e ON e.jid = j.j->>'jid'"
		 " UNION ALL SELECT e.id, e.queue, e.route, e.producer, j.j->>'shard', 100000000 + j.pos, e.t_ms,"
		 "  ((j.j->>'ran_at')::float8 * 1000)::int8, 'celery', NULL"
		 " FROM ce_json j LEFT JOIN exp e ON e.uuid = j.j->>'id'");
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM exp"), JOBS);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM runs WHERE id IS NULL"), 0); /* nothing strange ran */
	ck_assert_int_eq(h_sql(c,
			       "SELECT count(*) FROM exp e WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = e.id)"),
			 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) - count(DISTINCT id) FROM runs"), 0);
	/* On the worker of its route: by column first, then by queue. */
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM runs WHERE shard <> CASE"
				  " WHEN route = 'shard2' THEN 'b' WHEN queue LIKE 'ml.%%' THEN 'ml'"
				  " WHEN queue LIKE 'b%%' THEN 'b' ELSE 'a' END"),
			 0);
	ck_assert_int_gt(h_sql(c, "SELECT count(*) FROM runs WHERE route = 'shard2'"), 0);
	/* In order per queue on each worker (one thread each): a producer's
	 * transactions commit one after the other, so its rows' ids are their
	 * commit order (across producers, the order is the commits', which ids
	 * do not give: a lower id may commit later). Shard b's queues hold
	 * rows pushed before the SIGKILL, rows held while it was down and rows
	 * committed after it came back: a held row overtaken by a later one
	 * shows here. */
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM (SELECT id < lag(id) OVER (PARTITION BY shard, queue, producer"
				  " ORDER BY pos) AS back FROM runs) x WHERE back"),
			 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held"), 0);

	/* The other targets' latency while shard b was down, against before
	 * (from 5 s in, past the workers' warm-up, to the SIGKILL; from 0.5 s
	 * after it, once the relay saw it, to the restart). t_ms is read in
	 * the producer's INSERT, a few ms before its COMMIT returns, alike in
	 * both windows.
	 *
	 * Commit to run (ran_ms - t_ms) is printed, not held to a bound: it is
	 * mostly the worker's backlog. Celery's solo pool and one Sidekiq
	 * thread are slower than the relay, and this machine's two cores are
	 * shared with other developers' runs: under their load it reached a
	 * p99 of 25 s in both windows, and a backlog that grows through the
	 * run would fail a 2x bound with the relay doing nothing wrong.
	 * Held to the bound are two measures the backlog does not move:
	 * - commit to push (shard a, Sidekiq): enqueued_at, the relay's clock
	 *   when it formatted the batch, minus t_ms. The relay serves every
	 *   target from one loop, so a stall that b's outage caused shows here
	 *   on every job committed during it (a relay SIGSTOPped 300 ms every
	 *   1.5 s while b was down: p99 291 ms against 11 ms before, caught).
	 *   Celery's messages carry no push time.
	 * - wait (both targets): from a job's commit, or from the previous
	 *   run of its worker if that came later, to its run. A target made
	 *   systematically slower leaves its worker idle with jobs committed,
	 *   and the wait grows. A stall shows in it on one job only, the first
	 *   the idle worker runs after it (the SIGSTOPs above left its p99 at
	 *   13 ms): it checks the Celery target for slowness, not for stalls.
	 * Each window's p99 leaves out its worst stall, up to a second of
	 * commits: this shared machine's disk stalls the relay now and then,
	 * before b's SIGKILL as often as after, with the relay of before the
	 * targets' connection threads too (a push of 10 jobs took 291 ms, a
	 * read 153 ms and its commit 79 ms; two runs of ten failed on one such
	 * stall while b was down). A target held up by b stalls at every try
	 * of b's (seven reconnections in the 10 s), which one exclusion does
	 * not hide.
	 * The bound is 2x the p99 before, but never below the p99 before
	 * + POLL_MS. A p99 of tens of ms doubles by chance: three workers,
	 * three Redis, Postgres, four producers and the relay share two
	 * cores, and an idle relay looks again after up to --poll-interval
	 * (staging does not NOTIFY): a job committed just after a look waits
	 * for the next (when the four producers committed at one instant, 1-2%
	 * of jobs waited near 65 ms in both windows: a p99 of 25 ms before and
	 * 70 ms during in one run, nothing else different). The floor lets through a target that
	 * waited up to one more poll; one that waited for b's Redis (the 1 s
	 * --redis-timeout, the reconnect back-off, or b's 10 s) fails. */
	h_sql(c, "ALTER TABLE runs ADD COLUMN wait_ms int8");
	h_sql(c, "UPDATE runs r SET wait_ms = r.ran_ms - greatest(r.t_ms, w.prev) FROM (SELECT id,"
		 " lag(ran_ms) OVER (PARTITION BY shard, kind ORDER BY pos) AS prev FROM runs) w WHERE w.id = r.id");
	epoch0 = (long long)h_sql(c, "SELECT min(t_ms) FROM exp");
	for (int i = 0; i < 3; i++) {
		const char *shard = i == 2 ? "ml" : "a", *col = i == 1 ? "push_ms - t_ms" : "wait_ms";
		const char *what = i == 1 ? "commit to push" : "wait";
		long long from[2] = { epoch0 + 5000, kill_ms + 500 }, to[2] = { kill_ms, back_ms }, n[2];
		double run99[2], p50[2], p99[2], trim99[2], bound;

		for (int w = 0; w < 2; w++) {
			run99[w] = latency(c, "ran_ms - t_ms", shard, 0.99, from[w], to[w], false, &n[w]);
			p50[w] = latency(c, col, shard, 0.5, from[w], to[w], false, &n[w]);
			p99[w] = latency(c, col, shard, 0.99, from[w], to[w], false, &n[w]);
			trim99[w] = latency(c, col, shard, 0.99, from[w], to[w], true, &n[w]);
		}
		bound = 2 * trim99[0] > trim99[0] + POLL_MS ? 2 * trim99[0] : trim99[0] + POLL_MS;
		fprintf(stderr,
			"routes e2e: shard %s, before / while b was down: %lld / %lld jobs, commit to run p99"
			" %.0f / %.0f ms, %s p50 %.0f / %.0f ms, p99 %.0f / %.0f ms, without the worst stall"
			" %.0f / %.0f ms (bound %.0f ms)\n",
			shard, n[0], n[1], run99[0], run99[1], what, p50[0], p50[1], p99[0], p99[1], trim99[0],
			trim99[1], bound);
		ck_assert_msg(n[0] >= 1000 && n[1] >= 1000, "shard %s: %lld jobs before, %lld during", shard, n[0],
			      n[1]);
		ck_assert_msg(
			trim99[1] <= bound,
			"shard %s: p99 %s %.0f ms while b was down (%.0f ms with its worst stall), %.0f ms before",
			shard, what, trim99[1], p99[1], trim99[0]);
	}
	redisFree(ra);
	PQfinish(c);
}
END_TEST

Suite *routes_e2e_suite(void)
{
	Suite *s = suite_create("routes_e2e");
	TCase *tc = tcase_create("routes_e2e");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, three_targets_each_job_once_on_its_worker_in_order_through_a_shard_outage);
	suite_add_tcase(s, tc);
	return s;
}
