/* End to end on a capped queue: a real Sidekiq server (plain, and with ActiveJob) runs a held flood
 * and the jobs of tenants who staged after it, each exactly once, the late ones early. */
#include "fmacros.h"

#include <check.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "suites.h"

#define CAP 50     /* --queue-limit default=CAP */
#define BATCH 50   /* --batch-size: how far past the cap one batch may take the list */
#define FLOOD 1500 /* tenant t1's jobs, staged first */
#define LATE 4     /* tenants t2..t5, staged one after the other while the flood runs */
#define PER_LATE 3
#define JOBS (FLOOD + LATE * PER_LATE)
#define STAGE_LATE_AT 200 /* flood jobs that ran before the late tenants stage */
/* Flood jobs that may run between a late tenant's staging and its last job:
 * what the list held then (at most CAP + BATCH), one flood job per round and
 * the jobs the worker's threads had in hand, with room to spare (about 55 ran
 * in practice); in id order it would be about 1,300. */
#define FAIR_BOUND (CAP + BATCH + 50)
#define WAIT_MS 30000

/* A worker and what it records: each run RPUSHed to `ran` in the order the
 * jobs ran, and counted per job in the hash `runs`. */
struct flavor {
	const char *name; /* of the logs */
	const char *format;
	const char *job_class;
	const char *worker;
	const char *ran;
	const char *runs;
	const char *same_job; /* SQL: run r is expected job e, beyond jid, class, queue and args */
};

static const struct flavor plain = {
	.name = "capped",
	.format = "sidekiq",
	.job_class = "StagedrainE2eJob",
	.worker = "tests/e2e/worker.rb",
	.ran = "e2e:ran",
	.runs = "e2e:runs",
	.same_job = "true",
};

/* ActiveJob's job_id is the row's uuid, its provider_job_id (our "jid") the Sidekiq jid. */
static const struct flavor activejob = {
	.name = "capped-aj",
	.format = "activejob",
	.job_class = "StagedAjJob",
	.worker = "tests/e2e/activejob_worker.rb",
	.ran = "aj:ran",
	.runs = "aj:runs",
	.same_job = "r.j->>'kind' = 'activejob' AND r.j->>'id' = e.uuid",
};

struct run {
	const struct flavor *f;
	PGconn *c;
	redisContext *r;
	struct relay_proc relay, worker;
	bool relay_up, worker_up;
	long long max_len; /* the longest queue:default sampled */
};

/* A failed check must not leave the relay or the worker running. */
static void stop_all(struct run *x)
{
	if (x->worker_up) {
		h_relay_kill(&x->worker, SIGKILL);
		(void)h_relay_wait(&x->worker, 5000);
	}
	if (x->relay_up) {
		h_relay_kill(&x->relay, SIGKILL);
		(void)h_relay_wait(&x->relay, 5000);
	}
	x->worker_up = x->relay_up = false;
}

#define RUN_CHECK(x, cond, ...)                                                                                        \
	do {                                                                                                           \
		if (!(cond)) {                                                                                         \
			stop_all(x);                                                                                   \
			ck_abort_msg(__VA_ARGS__);                                                                     \
		}                                                                                                      \
	} while (0)

/* SQL while the processes run: a failure stops them before it fails the test. */
SD_PRINTF(2, 3) static long long run_sql(struct run *x, const char *fmt, ...)
{
	char err[SQL_ERRLEN];
	long long v = 0;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = sql_vrun(x->c, &v, err, fmt, ap);
	va_end(ap);
	RUN_CHECK(x, rc == 0, "%s", err);
	return v;
}

static const char *not_an_integer(const redisContext *r, const redisReply *rep)
{
	if (!rep)
		return r->errstr;
	return rep->type == REDIS_REPLY_ERROR ? rep->str : "not an integer";
}

/* VERB KEY answering an integer, the same way. */
static long long run_int(struct run *x, const char *verb, const char *key)
{
	redisReply *rep = redisCommand(x->r, "%s %s", verb, key);
	long long v;

	RUN_CHECK(x, rep && rep->type == REDIS_REPLY_INTEGER, "%s %s: %s", verb, key, not_an_integer(x->r, rep));
	v = rep->integer;
	freeReplyObject(rep);
	return v;
}

static void sample(struct run *x)
{
	long long n = run_int(x, "LLEN", "queue:default");

	if (n > x->max_len)
		x->max_len = n;
}

/* n jobs each of tenants t<first>..t<last> on queue default, args [tenant, i],
 * in one transaction, kept in capped_expected. */
static void stage(struct run *x, int first, int last, int n)
{
	run_sql(x,
		"WITH s AS (INSERT INTO staged_jobs (queue, job_class, args, tenant)"
		" SELECT 'default', '%s', jsonb_build_array('t' || t, i), 't' || t"
		" FROM generate_series(%d, %d) t, generate_series(1, %d) i ORDER BY t, i"
		" RETURNING jid, uuid::text, args)"
		" INSERT INTO capped_expected SELECT * FROM s",
		x->f->job_class, first, last, n);
}

static void start_relay(struct run *x)
{
	char limit[32], batch[16];
	const char *args[] = { "--queue-limit", limit,         "--batch-size", batch, "--format",
			       x->f->format,    "--log-level", "debug",        NULL };

	snprintf(limit, sizeof(limit), "default=%d", CAP);
	snprintf(batch, sizeof(batch), "%d", BATCH);
	h_relay_start(&x->relay, x->f->name, args);
	x->relay_up = true;
}

static void worker_env(void *arg)
{
	setenv("REDIS_URL", arg, 1);
}

/* The stock server on queue default with its usual five threads, run where
 * there is no config/sidekiq.yml (the test directory). */
static void start_worker(struct run *x)
{
	static char url[256];
	char worker[PATH_MAX], name[64];
	const char *argv[] = { "sidekiq", "-r", worker, "-q", "default", "-c", "5", "-t", "5", "-e", "test", NULL };
	struct proc_opts o = { .argv = argv, .cwd = h_env("TEST_DIR"), .child_setup = worker_env, .child_arg = url };

	snprintf(url, sizeof(url), "%s", h_env("TEST_REDIS_URL"));
	snprintf(name, sizeof(name), "sidekiq-%s", x->f->name);
	RUN_CHECK(x, realpath(x->f->worker, worker) != NULL, "no %s", x->f->worker);
	h_proc_start(&x->worker, name, &o);
	x->worker_up = true;
}

/* With no worker yet, the relay reads the whole flood: it fills the list to
 * the cap and holds the rest in staged_jobs_held, then pushes nothing more. */
static void hold_flood(struct run *x)
{
	long long t0 = mono_ms(), len, held;

	while (run_sql(x, "SELECT count(*) FROM staged_jobs") > 0 && mono_ms() - t0 < WAIT_MS) {
		sample(x);
		sleep_ms(10);
	}
	for (int i = 0; i < 30; i++, sleep_ms(10)) /* and, with no worker, stays there */
		sample(x);
	len = run_int(x, "LLEN", "queue:default");
	held = run_sql(x, "SELECT count(*) FROM staged_jobs_held WHERE queue = 'default'");
	RUN_CHECK(x, run_sql(x, "SELECT count(*) FROM staged_jobs") == 0, "the relay did not read the flood; see %s",
		  x->relay.log);
	RUN_CHECK(x, len >= CAP && x->max_len <= CAP + BATCH, "queue:default reached %lld (now %lld), cap %d",
		  x->max_len, len, CAP);
	RUN_CHECK(x, len + held == FLOOD, "%lld pushed + %lld held != %d staged", len, held, FLOOD);
}

/* Samples the list until the worker recorded n runs (or jobs, by key/verb). */
static void wait_runs(struct run *x, const char *verb, const char *key, long long n)
{
	long long t0 = mono_ms();

	while (run_int(x, verb, key) < n && mono_ms() - t0 < WAIT_MS) {
		sample(x);
		sleep_ms(5);
	}
	RUN_CHECK(x, run_int(x, verb, key) >= n, "%s %s < %lld after %d ms; see %s", verb, key, n, WAIT_MS,
		  x->worker.log);
}

static void stop_gracefully(struct run *x)
{
	h_relay_kill(&x->worker, SIGTERM);
	RUN_CHECK(x, h_relay_wait(&x->worker, 15000) == 0, "sidekiq did not stop cleanly; see %s", x->worker.log);
	x->worker_up = false;
	h_relay_kill(&x->relay, SIGTERM);
	RUN_CHECK(x, h_relay_wait(&x->relay, 15000) == 0, "the relay did not stop cleanly; see %s", x->relay.log);
	x->relay_up = false;
}

static void assert_each_ran_once(struct run *x)
{
	ck_assert_int_eq(h_sql(x->c, "SELECT count(*) FROM capped_expected"), JOBS);
	ck_assert_int_eq(h_sql(x->c, "SELECT count(*) FROM capped_ran"), JOBS);
	ck_assert_int_eq(h_sql(x->c, "SELECT count(DISTINCT j->>'jid') FROM capped_ran"), JOBS);
	ck_assert_int_eq(h_cmd_int(x->r, "HLEN %s", x->f->runs), JOBS);
	ck_assert_int_eq(h_sql(x->c,
			       "SELECT count(*) FROM capped_expected e JOIN capped_ran r ON r.j->>'jid' = e.jid"
			       " WHERE r.j->>'class' = '%s' AND r.j->>'queue' = 'default' AND r.j->'args' = e.args"
			       " AND %s",
			       x->f->job_class, x->f->same_job),
			 JOBS);
	ck_assert_int_eq(h_sql(x->c, "SELECT count(*) FROM staged_jobs"), 0);
	ck_assert_int_eq(h_sql(x->c, "SELECT count(*) FROM staged_jobs_held"), 0);
	ck_assert_int_eq(h_sql(x->c, "SELECT count(*) FROM staged_jobs_dead"), 0);
	ck_assert_int_eq(h_cmd_int(x->r, "LLEN queue:default"), 0);
	ck_assert_int_eq(h_cmd_int(x->r, "ZCARD retry"), 0);
	ck_assert_int_eq(h_cmd_int(x->r, "ZCARD dead"), 0);
}

/* Each late tenant's jobs ran soon after it staged them (at[i] runs had been
 * recorded then), while most of the flood was still to run. */
static void assert_late_ran_early(struct run *x, const long long *at)
{
	long long last, before, after;

	for (int i = 0; i < LATE; i++) {
		last = h_sql(x->c, "SELECT max(pos) FROM capped_ran WHERE j->'args'->>0 = 't%d'", i + 2);
		before = h_sql(x->c,
			       "SELECT count(*) FROM capped_ran WHERE j->'args'->>0 = 't1' AND pos >= %lld"
			       " AND pos < %lld",
			       at[i], last);
		ck_assert_msg(before < FAIR_BOUND, "%lld flood jobs ran between t%d's staging and its last job", before,
			      i + 2);
	}
	after = h_sql(x->c, "SELECT count(*) FROM capped_ran WHERE j->'args'->>0 = 't1' AND pos >"
			    " (SELECT max(pos) FROM capped_ran WHERE j->'args'->>0 <> 't1')");
	ck_assert_msg(after >= FLOOD / 2, "only %lld flood jobs ran after the late tenants' last: nothing to jump",
		      after);
}

/* The relay caps queue default at CAP with --batch-size BATCH; t1 floods it
 * before any worker runs, a real Sidekiq server then consumes it, and once
 * STAGE_LATE_AT jobs ran t2..t5 stage a few jobs each, one transaction each. */
static void capped_run(const struct flavor *f)
{
	struct run x = { .f = f };
	long long at[LATE];

	x.c = h_pg();
	x.r = h_redis();
	h_sql(x.c, "CREATE TABLE capped_expected (jid text, uuid text, args jsonb)");
	stage(&x, 1, 1, FLOOD);
	start_relay(&x);
	hold_flood(&x);
	start_worker(&x);
	wait_runs(&x, "LLEN", f->ran, STAGE_LATE_AT);
	for (int i = 0; i < LATE; i++) {
		at[i] = run_int(&x, "LLEN", f->ran);
		stage(&x, i + 2, i + 2, PER_LATE);
	}
	wait_runs(&x, "HLEN", f->runs, JOBS);
	for (int i = 0; i < 100; i++, sleep_ms(15)) /* room for a duplicate run to show */
		sample(&x);
	stop_gracefully(&x);

	ck_assert_msg(x.max_len <= CAP + BATCH, "queue:default reached %lld, cap %d + batch %d", x.max_len, CAP, BATCH);
	h_load_list(x.c, x.r, x.f->ran, "capped_ran"); /* pos: the order they ran in */
	assert_each_ran_once(&x);
	assert_late_ran_early(&x, at);
	redisFree(x.r);
	PQfinish(x.c);
}

START_TEST(sidekiq_runs_a_capped_queue_once_and_fairly)
{
	capped_run(&plain);
}
END_TEST

/* The same through ActiveJob on Sidekiq (--format activejob). */
START_TEST(activejob_runs_a_capped_queue_once_and_fairly)
{
	capped_run(&activejob);
}
END_TEST

/* h_reset, and this suite's own tables dropped. */
static void capped_reset(void)
{
	PGconn *c;

	h_reset();
	c = h_pg();
	h_sql(c, "DROP TABLE IF EXISTS capped_expected, capped_ran");
	PQfinish(c);
}

Suite *capped_e2e_suite(void)
{
	Suite *s = suite_create("capped_e2e");
	TCase *tc = tcase_create("sidekiq-capped");

	tcase_add_checked_fixture(tc, capped_reset, NULL);
	tcase_set_timeout(tc, 120); /* room for every wait to time out and stop what runs */
	tcase_add_test(tc, sidekiq_runs_a_capped_queue_once_and_fairly);
	tcase_add_test(tc, activejob_runs_a_capped_queue_once_and_fairly);
	suite_add_tcase(s, tc);
	return s;
}
