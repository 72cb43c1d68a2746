/* Backpressure and fair release against the real servers: a capped queue holds
 * one tenant's flood in Postgres and releases it round-robin with a newcomer's
 * job (one slot at a time too, a late commit's as well), a transaction a read
 * splits in id order, across relay kills,
 * the crash fence and a relay restarted without caps, while uncapped queues
 * and scheduled jobs flow; held rows that can no longer be jobs, a key of the
 * wrong type, the metrics, Resque's list; and the Redis memory bound, which
 * pauses the relay before Redis says OOM. */
#include "fmacros.h"

#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suites.h"

#define WAIT_MS 15000
#define BATCH 50
#define FAST_RELAY "--batch-size", "50", "--poll-interval", "20ms", "--log-level", "debug"
/* Args of the one-off jobs, far from any flood's 1..n. */
#define B_ARG 900001
#define B2_ARG 900002
#define CRITICAL_ARG 700001

/* The test's worker: pops a list as the format's worker does, and records what
 * it got in order, and the longest the list was whenever it looked. */
struct consumer {
	redisContext *r;
	const char *key;
	const char *pop; /* RPOP after LPUSH (Sidekiq), LPOP after RPUSH (Resque) */
	long long cap;   /* the queue's cap: the list may exceed it by one batch at most */
	int n, max;
	long long *args; /* args[0] of each job popped */
	char (*jid)[32]; /* its jid ("" for a format without one) */
	long long max_len;
};

static void consumer_init(struct consumer *k, const char *key, const char *pop, long long cap, int max)
{
	*k = (struct consumer){ .r = h_redis(), .key = key, .pop = pop, .cap = cap, .max = max };
	k->args = calloc((size_t)max, sizeof(*k->args));
	k->jid = calloc((size_t)max, sizeof(*k->jid));
	ck_assert(k->args && k->jid);
}

static void consumer_free(struct consumer *k)
{
	redisFree(k->r);
	free(k->args);
	free(k->jid);
}

static long long sample_len(struct consumer *k)
{
	long long len = h_cmd_int(k->r, "LLEN %s", k->key);

	if (len > k->max_len)
		k->max_len = len;
	return len;
}

/* One job, if the list has one. */
static bool pop_one(struct consumer *k)
{
	redisReply *rep = h_cmd(k->r, "%s %s", k->pop, k->key);
	json_t *job;
	const char *jid;

	if (rep->type == REDIS_REPLY_NIL) {
		freeReplyObject(rep);
		return false;
	}
	ck_assert_int_eq(rep->type, REDIS_REPLY_STRING);
	ck_assert_msg(k->n < k->max, "%s: more than the %d jobs staged", k->key, k->max);
	job = json_loadb(rep->str, rep->len, 0, NULL);
	ck_assert_msg(job != NULL, "%s: not json: %s", k->key, rep->str);
	k->args[k->n] = json_integer_value(json_array_get(json_object_get(job, "args"), 0));
	jid = json_string_value(json_object_get(job, "jid"));
	snprintf(k->jid[k->n], sizeof(k->jid[0]), "%s", jid ? jid : "");
	k->n++;
	json_decref(job);
	freeReplyObject(rep);
	(void)sample_len(k);
	return true;
}

/* Pops until `until` jobs were popped in all, gap_ms apart (a steady worker);
 * fails if none comes for WAIT_MS. */
static void consume(struct consumer *k, struct relay_proc *p, int until, int gap_ms)
{
	long long last = mono_ms();

	while (k->n < until) {
		if (pop_one(k)) {
			last = mono_ms();
			if (gap_ms)
				sleep_ms(gap_ms);
			continue;
		}
		RELAY_CHECK(p, mono_ms() - last < WAIT_MS, "%s: %d of %d jobs popped, then none for %d ms; see %s",
			    k->key, k->n, until, WAIT_MS, p->log);
		sleep_ms(1);
	}
}

static long long staged(PGconn *c)
{
	return h_sql(c, "SELECT count(*) FROM staged_jobs");
}

static long long held(PGconn *c, const char *queue)
{
	return h_sql(c, "SELECT count(*) FROM staged_jobs_held WHERE queue = '%s'", queue);
}

/* Waits until the relay read everything staged, the list holds len jobs and
 * the held table want_held (< 0: any number) of the queue's. */
static void wait_settled(struct consumer *k, struct relay_proc *p, PGconn *c, const char *queue, long long len,
			 long long want_held)
{
	long long t0 = mono_ms(), s, h, l;

	for (;;) {
		s = staged(c);
		h = held(c, queue);
		l = sample_len(k);
		if (s == 0 && l == len && (want_held < 0 || h == want_held))
			return;
		RELAY_CHECK(p, l <= k->cap + BATCH, "%s has %lld jobs: over its cap %lld by more than a batch; see %s",
			    k->key, l, k->cap, p->log);
		RELAY_CHECK(p, mono_ms() - t0 < WAIT_MS,
			    "not settled after %d ms: %lld staged, %lld held, %s has %lld (want 0, %lld, %lld); see %s",
			    WAIT_MS, s, h, k->key, l, want_held, len, p->log);
		sleep_ms(10);
	}
}

/* Waits until tenant's jobs in queue are all held (none staged, none released). */
static void wait_held(struct relay_proc *p, PGconn *c, const char *tenant, long long n)
{
	long long t0 = mono_ms();

	while (staged(c) > 0 || h_sql(c, "SELECT count(*) FROM staged_jobs_held WHERE tenant = '%s'", tenant) != n) {
		RELAY_CHECK(p, mono_ms() - t0 < WAIT_MS, "tenant %s: not %lld held after %d ms; see %s", tenant, n,
			    WAIT_MS, p->log);
		sleep_ms(10);
	}
}

/* Stages n jobs for tenant (NULL: the shared one) in one transaction, args
 * [first+i] (with pad bytes after it), recorded in `expected` as well. */
static void stage(PGconn *c, const char *queue, const char *tenant, int first, int n, int pad)
{
	char t[64] = "NULL";

	if (tenant)
		snprintf(t, sizeof(t), "'%s'", tenant);
	h_sql(c,
	      "WITH s AS (INSERT INTO staged_jobs (queue, job_class, args, tenant)"
	      " SELECT '%s', 'HardWorker', CASE WHEN %d > 0 THEN jsonb_build_array(i, repeat('x', %d))"
	      " ELSE jsonb_build_array(i) END, %s"
	      " FROM generate_series(%d, %d) i ORDER BY i"
	      " RETURNING id, jid, queue, job_class, args)"
	      " INSERT INTO expected SELECT * FROM s",
	      queue, pad, pad, t, first, first + n - 1);
}

/* Where the job with args[0] == arg was popped (-1: never); it must be there once. */
static int popped_at(const struct consumer *k, long long arg)
{
	int at = -1;

	for (int i = 0; i < k->n; i++)
		if (k->args[i] == arg) {
			ck_assert_msg(at < 0, "job %lld popped twice: at %d and %d", arg, at, i);
			at = i;
		}
	return at;
}

/* Writes what k popped, in order, to TEST_DIR/popped.txt for a failure to point at. */
static const char *dump(const struct consumer *k)
{
	static char path[600];
	FILE *f;

	snprintf(path, sizeof(path), "%s/popped.txt", h_env("TEST_DIR"));
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	for (int i = 0; i < k->n; i++)
		fprintf(f, "%d %lld %s\n", i, k->args[i], k->jid[i]);
	fclose(f);
	return path;
}

/* The jobs with args[0] in lo..hi were popped in rising order, n of them. */
static void assert_in_order(const struct consumer *k, long long lo, long long hi, int n)
{
	long long prev = lo - 1;
	int got = 0;

	for (int i = 0; i < k->n; i++) {
		if (k->args[i] < lo || k->args[i] > hi)
			continue;
		if (k->args[i] <= prev)
			ck_abort_msg("job %lld popped (at %d) after job %lld; the order is in %s", k->args[i], i, prev,
				     dump(k));
		prev = k->args[i];
		got++;
	}
	ck_assert_int_eq(got, n);
}

/* Every expected job arrived exactly once: popped by k, or still in one of the
 * lists of keys (NULL-terminated). */
static void assert_each_once(PGconn *c, redisContext *r, const struct consumer *k, const char *const *keys)
{
	char *arr = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&arr, &len);

	fputc('{', f);
	for (int i = 0; i < k->n; i++)
		fprintf(f, "%s%s", i ? "," : "", *k->jid[i] ? k->jid[i] : "NULL");
	fputc('}', f);
	fclose(f);
	h_load_seen(c, r, keys);
	h_sql(c, "INSERT INTO seen (jid, key) SELECT unnest('%s'::text[]), '%s'", arr, k->key);
	free(arr);
	ck_assert_int_eq(h_missing(c), 0);
	ck_assert_int_eq(h_duplicates(c), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM seen"), h_sql(c, "SELECT count(*) FROM expected"));
}

static void assert_drained(PGconn *c, const struct consumer *k)
{
	ck_assert_int_eq(staged(c), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 0);
	ck_assert_msg(k->max_len <= k->cap + BATCH, "%s reached %lld jobs: over its cap %lld by more than a batch",
		      k->key, k->max_len, k->cap);
}

static void stop_relay(struct relay_proc *p)
{
	h_relay_kill(p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(p, 15000), 0);
}

static void setup(void)
{
	PGconn *c;
	redisContext *r;

	h_reset();
	c = h_pg();
	h_sql(c, "TRUNCATE staged_jobs_held RESTART IDENTITY");
	h_snapshot_expected(c); /* empty: stage() fills it */
	PQfinish(c);
	r = h_redis();
	freeReplyObject(h_cmd(r, "CONFIG SET maxmemory 0")); /* a failed memory test may have left it set */
	redisFree(r);
}

/* The flood, the newcomer and the uncapped queue of the issue. kills: how
 * many times the relay is SIGKILLed and started again while it releases. */
static void acceptance(int kills)
{
	/* Both ways to say it: a cap on default alone, or on every queue but critical. */
	static const char *const one[] = { "--queue-limit", "default=100", FAST_RELAY, NULL };
	static const char *const all[] = {
		"--max-queue-length", "100", "--queue-limit", "critical=0", FAST_RELAY, NULL
	};
	static const char *const rest[] = { "queue:critical", NULL };
	const char *const *args = kills ? all : one;
	PGconn *c = h_pg();
	struct consumer k;
	struct relay_proc p;
	char name[32];
	int at, total = 5000 + 1 + (kills ? 1 : 0);
	long long t0;

	consumer_init(&k, "queue:default", "RPOP", 100, total);
	/* Staged before the relay runs; one that outlives a read keeps id order
	 * too (a_transaction_split_by_a_read_is_released_in_id_order). */
	stage(c, "default", "A", 1, 5000, 0);
	h_relay_start(&p, kills ? "acceptance-kills" : "acceptance", args);
	wait_settled(&k, &p, c, "default", 100, 4900);
	stage(c, "default", "B", B_ARG, 1, 0);
	wait_held(&p, c, "B", 1);
	ck_assert_int_eq(sample_len(&k), 100);

	/* A steady worker: B's job comes right after A's 101st, or is the 101st. */
	consume(&k, &p, 300, 2);
	at = popped_at(&k, B_ARG);
	RELAY_CHECK(&p, at == 100 || at == 101, "B's job popped at %d, not among the first two released after it", at);

	/* An uncapped queue flows past the held ones with its usual latency. */
	stage(c, "critical", "A", CRITICAL_ARG, 1, 0);
	for (t0 = mono_ms(); h_cmd_int(k.r, "LLEN queue:critical") == 0;) {
		RELAY_CHECK(&p, mono_ms() - t0 < 1000, "the uncapped queue's job took over 1 s; see %s", p.log);
		consume(&k, &p, k.n + 1, 2);
	}

	for (int i = 1; i <= kills; i++) {
		consume(&k, &p, k.n + 400, 2);
		h_relay_kill(&p, SIGKILL);
		ck_assert_int_eq(h_relay_wait(&p, 5000), 128 + SIGKILL);
		snprintf(name, sizeof(name), "acceptance-kills-%d", i);
		h_relay_start(&p, name, args);
		if (i == 2) {
			/* Staged after a restart, B2 is as fair: the list is full, so
			 * whatever comes after the 100 in it was released after B2. */
			int before;
			wait_settled(&k, &p, c, "default", 100, -1);
			stage(c, "default", "B", B2_ARG, 1, 0);
			wait_held(&p, c, "B", 1);
			before = k.n;
			consume(&k, &p, k.n + 150, 2);
			at = popped_at(&k, B2_ARG) - before;
			RELAY_CHECK(&p, at == 100 || at == 101,
				    "B2 popped %d after it was staged, not among the first two released", at);
		}
	}
	consume(&k, &p, total, 0);
	stop_relay(&p);
	assert_in_order(&k, 1, 5000, 5000);
	assert_each_once(c, k.r, &k, rest);
	assert_drained(c, &k);
	PQfinish(c);
	consumer_free(&k);
}

START_TEST(a_newcomer_is_released_right_after_a_flood_it_came_behind)
{
	acceptance(0);
}
END_TEST

START_TEST(kills_mid_release_lose_nothing_and_keep_it_fair)
{
	acceptance(3);
}
END_TEST

/* A relay killed after pushing released jobs and before its commit deleted
 * them from the held table (blocked by a row lock, then its session ended as
 * a dead host's would): the next leader's fence deletes them from there
 * instead of releasing them again. */
START_TEST(a_release_killed_before_its_commit_is_not_pushed_twice)
{
	static const char *const args[] = { "--queue-limit", "default=10", FAST_RELAY, NULL };
	PGconn *c = h_pg(), *locker = h_pg();
	struct consumer k;
	struct relay_proc p;
	long long t0;

	consumer_init(&k, "queue:default", "RPOP", 10, 50);
	stage(c, "default", "A", 1, 50, 0);
	h_relay_start(&p, "fence", args);
	wait_settled(&k, &p, c, "default", 10, 40);
	h_sql(locker, "BEGIN");
	h_sql(locker, "SELECT 1 FROM staged_jobs_held WHERE (round, hold_id) ="
		      " (SELECT round, hold_id FROM staged_jobs_held ORDER BY round, hold_id LIMIT 1) FOR UPDATE");
	/* The release that pushes the locked row (with the others there was room
	 * for when it looked) then blocks in its delete. */
	consume(&k, &p, 5, 0);
	for (t0 = mono_ms(); sample_len(&k) <= 5; sleep_ms(5))
		RELAY_CHECK(&p, mono_ms() - t0 < WAIT_MS, "nothing released into the 5 free slots; see %s", p.log);
	sleep_ms(200);
	RELAY_CHECK(&p, held(c, "default") == 40, "the release committed past the row lock");
	h_relay_crash(&p, c);
	h_sql(locker, "ROLLBACK");
	PQfinish(locker);

	h_relay_start(&p, "fence-next", args);
	RELAY_CHECK(&p, h_log_wait(&p, "not pushing them again", WAIT_MS), "no fence reconcile in %s", p.log);
	consume(&k, &p, 50, 0);
	stop_relay(&p);
	assert_in_order(&k, 1, 50, 50);
	assert_each_once(c, k.r, &k, (const char *const[]){ NULL });
	assert_drained(c, &k);
	PQfinish(c);
	consumer_free(&k);
}
END_TEST

/* One slot per poll: a release that ranks within tenants and takes rank then id
 * would give A's next job every time and never reach B. */
START_TEST(one_slot_at_a_time_still_reaches_a_newcomer)
{
	static const char *const args[] = { "--queue-limit", "default=10", FAST_RELAY, NULL };
	PGconn *c = h_pg();
	struct consumer k;
	struct relay_proc p;
	int at;

	consumer_init(&k, "queue:default", "RPOP", 10, 101);
	stage(c, "default", "A", 1, 100, 0);
	h_relay_start(&p, "one-slot", args);
	wait_settled(&k, &p, c, "default", 10, 90);
	for (int i = 1; i <= 3; i++) {
		consume(&k, &p, k.n + 1, 0);
		wait_settled(&k, &p, c, "default", 10, 90 - i);
	}
	stage(c, "default", "B", B_ARG, 1, 0);
	wait_held(&p, c, "B", 1);
	for (int i = 1; i <= 2; i++) {
		consume(&k, &p, k.n + 1, 0);
		wait_settled(&k, &p, c, "default", 10, 88 - i);
	}
	consume(&k, &p, 101, 0);
	stop_relay(&p);
	/* 3 popped and 10 in the list before B was staged: the two releases
	 * after it are pops 13 and 14 (from 0). */
	at = popped_at(&k, B_ARG);
	ck_assert_msg(at == 13 || at == 14, "B's job popped at %d: not within two releases", at);
	assert_in_order(&k, 1, 100, 100);
	assert_each_once(c, k.r, &k, (const char *const[]){ NULL });
	assert_drained(c, &k);
	PQfinish(c);
	consumer_free(&k);
}
END_TEST

/* Rows without a tenant are one tenant, not one each: released in turns with X's. */
START_TEST(the_null_tenant_takes_turns_like_any_other)
{
	static const char *const args[] = { "--queue-limit", "default=10", FAST_RELAY, NULL };
	PGconn *c = h_pg();
	struct consumer k;
	struct relay_proc p;

	consumer_init(&k, "queue:default", "RPOP", 10, 120);
	stage(c, "default", NULL, 1, 60, 0);
	stage(c, "default", "X", 1001, 60, 0);
	h_relay_start(&p, "null-tenant", args);
	wait_settled(&k, &p, c, "default", 10, 110);
	consume(&k, &p, 120, 0);
	stop_relay(&p);
	assert_in_order(&k, 1, 60, 60);
	assert_in_order(&k, 1001, 1060, 60);
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(k.args[i], i + 1);
	/* The 50 NULL rows held and X's first 50 alternate; X's last 10 follow. */
	for (int i = 11; i < 110; i++)
		ck_assert_msg((k.args[i] > 1000) != (k.args[i - 1] > 1000),
			      "jobs %lld and %lld (at %d) are one tenant's", k.args[i - 1], k.args[i], i);
	for (int i = 110; i < 120; i++)
		ck_assert_int_gt(k.args[i], 1000);
	assert_each_once(c, k.r, &k, (const char *const[]){ NULL });
	assert_drained(c, &k);
	PQfinish(c);
	consumer_free(&k);
}
END_TEST

/* A relay started without caps still releases what an earlier one held. */
START_TEST(held_rows_are_released_by_a_relay_without_caps)
{
	PGconn *c = h_pg();
	struct consumer k;

	consumer_init(&k, "queue:default", "RPOP", 20, 200);
	stage(c, "default", "A", 1, 150, 0);
	stage(c, "default", NULL, 1001, 50, 0);
	/* --once with a full capped queue and no worker stops with the rest held,
	 * and says so in its exit status (3: jobs left). */
	ck_assert_int_eq(h_relay_run("capped", (const char *const[]){ "--once", "--queue-limit", "default=20",
								      FAST_RELAY, NULL }),
			 3);
	ck_assert_int_eq(sample_len(&k), 20);
	ck_assert_int_eq(held(c, "default"), 180);
	ck_assert_int_eq(staged(c), 0);
	ck_assert_int_eq(h_relay_run("uncapped", (const char *const[]){ "--once", FAST_RELAY, NULL }), 0);
	ck_assert_int_eq(sample_len(&k), 200);
	while (pop_one(&k))
		;
	ck_assert_int_eq(k.n, 200);
	assert_in_order(&k, 1, 150, 150);
	assert_in_order(&k, 1001, 1050, 50);
	assert_each_once(c, k.r, &k, (const char *const[]){ NULL });
	k.cap = 200; /* uncapped now */
	assert_drained(c, &k);
	PQfinish(c);
	consumer_free(&k);
}
END_TEST

/* A held row that can no longer be a job when it is released (--max-job-bytes
 * lowered since) goes to the dead table with its reason; the rest arrive. */
START_TEST(a_held_row_that_is_no_longer_a_job_is_dead_lettered_on_release)
{
	PGconn *c = h_pg();
	struct consumer k;
	char reason[256];

	consumer_init(&k, "queue:default", "RPOP", 5, 20);
	stage(c, "default", "A", 1, 10, 0);
	stage(c, "default", "A", 11, 1, 2000);
	stage(c, "default", "A", 12, 9, 0);
	ck_assert_int_eq(h_relay_run("capped",
				     (const char *const[]){ "--once", "--queue-limit", "default=5", FAST_RELAY, NULL }),
			 3);
	ck_assert_int_eq(held(c, "default"), 15);
	ck_assert_int_eq(h_relay_run("smaller",
				     (const char *const[]){ "--once", "--max-job-bytes", "1k", FAST_RELAY, NULL }),
			 0);
	while (pop_one(&k))
		;
	ck_assert_int_eq(k.n, 19);
	ck_assert_int_eq(popped_at(&k, 11), -1);
	assert_in_order(&k, 1, 20, 19);
	h_sql_text(c, "SELECT reason FROM staged_jobs_dead WHERE id = 11", reason, sizeof(reason));
	ck_assert_msg(strstr(reason, "--max-job-bytes") != NULL, "dead for: \"%s\"", reason);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE tenant = 'A'"), 1);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held"), 0);
	ck_assert_int_eq(staged(c), 0);
	PQfinish(c);
	consumer_free(&k);
}
END_TEST

/* A capped queue whose key is not a list reads as full: its jobs wait held,
 * the warning names the key, other queues flow, and a fixed key drains. */
START_TEST(a_capped_queue_whose_key_is_not_a_list_holds_its_jobs)
{
	static const char *const args[] = { "--queue-limit", "default=10", FAST_RELAY, NULL };
	PGconn *c = h_pg();
	struct consumer k;
	struct relay_proc p;
	long long t0;

	consumer_init(&k, "queue:default", "RPOP", 10, 30);
	freeReplyObject(h_cmd(k.r, "SET queue:default oops"));
	stage(c, "default", "A", 1, 30, 0);
	stage(c, "critical", "A", CRITICAL_ARG, 1, 0);
	h_relay_start(&p, "wrongtype", args);
	for (t0 = mono_ms(); h_cmd_int(k.r, "LLEN queue:critical") == 0 || staged(c) > 0; sleep_ms(10))
		RELAY_CHECK(&p, mono_ms() - t0 < WAIT_MS, "the uncapped queue waited behind the broken one; see %s",
			    p.log);
	RELAY_CHECK(&p, held(c, "default") == 30, "%lld held, not 30", held(c, "default"));
	RELAY_CHECK(&p, logs_count_both(p.log, "wrong type", "key=queue:default") >= 1,
		    "no warning naming the key in %s", p.log);
	freeReplyObject(h_cmd(k.r, "DEL queue:default"));
	consume(&k, &p, 30, 0);
	stop_relay(&p);
	assert_in_order(&k, 1, 30, 30);
	assert_each_once(c, k.r, &k, (const char *const[]){ "queue:critical", NULL });
	assert_drained(c, &k);
	PQfinish(c);
	consumer_free(&k);
}
END_TEST

/* An error reply to a capped queue's LLEN (here NOPERM: the relay's ACL user
 * may not run LLEN) is logged as Redis's answer, not as a wrong type. The
 * queue's length is unknown, so it counts as full: its jobs wait held, other
 * queues flow, and once the ACL allows LLEN again they are all released. */
START_TEST(an_error_reading_a_capped_queue_is_named_and_its_jobs_wait)
{
	PGconn *c = h_pg();
	struct consumer k;
	struct relay_proc p;
	char url[300];
	long long t0;
	const char *args[] = { "--pg-url",      h_env("TEST_PG_URL"), "--redis-url", url,
			       "--queue-limit", "default=10",         FAST_RELAY,    NULL };

	consumer_init(&k, "queue:default", "RPOP", 10, 30);
	freeReplyObject(h_cmd(k.r, "ACL SETUSER sd_nollen on resetpass >pw ~* &* +@all -llen"));
	snprintf(url, sizeof(url), "redis://sd_nollen:pw@127.0.0.1:%s/0", h_env("TEST_REDIS_PORT"));
	stage(c, "default", "A", 1, 30, 0);
	stage(c, "critical", "A", CRITICAL_ARG, 1, 0);
	h_relay_start_bare(&p, "llen-noperm", args);
	for (t0 = mono_ms(); h_cmd_int(k.r, "LLEN queue:critical") == 0 || staged(c) > 0; sleep_ms(10))
		RELAY_CHECK(&p, mono_ms() - t0 < WAIT_MS, "the uncapped queue waited behind the unreadable one; see %s",
			    p.log);
	RELAY_CHECK(&p, held(c, "default") == 30, "%lld held, not 30", held(c, "default"));
	RELAY_CHECK(&p, h_log_wait(&p, "NOPERM", WAIT_MS), "no line gives redis's NOPERM answer in %s", p.log);
	RELAY_CHECK(&p, logs_count_both(p.log, "NOPERM", "key=queue:default") >= 1, "the line lacks the key in %s",
		    p.log);
	RELAY_CHECK(&p, !h_log_contains(p.log, "wrong type"), "NOPERM reported as a wrong type in %s", p.log);
	freeReplyObject(h_cmd(k.r, "ACL SETUSER sd_nollen +llen"));
	consume(&k, &p, 30, 0);
	stop_relay(&p);
	freeReplyObject(h_cmd(k.r, "ACL DELUSER sd_nollen"));
	assert_in_order(&k, 1, 30, 30);
	assert_each_once(c, k.r, &k, (const char *const[]){ "queue:critical", NULL });
	assert_drained(c, &k);
	PQfinish(c);
	consumer_free(&k);
}
END_TEST

/* A job due later goes to Sidekiq's schedule, past a full queue's cap: it is
 * never held (Sidekiq moves it to the queue when due). */
START_TEST(a_scheduled_job_is_never_held_by_a_cap)
{
	static const char *const args[] = { "--queue-limit", "default=10", FAST_RELAY, NULL };
	PGconn *c = h_pg();
	struct consumer k;
	struct relay_proc p;
	char jid[64], *at;
	redisReply *rep;

	consumer_init(&k, "queue:default", "RPOP", 10, 20);
	stage(c, "default", "A", 1, 20, 0);
	h_relay_start(&p, "scheduled", args);
	wait_settled(&k, &p, c, "default", 10, 10);
	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args, tenant, run_at)"
		 " VALUES ('default', 'HardWorker', '[800001]', 'B', now() + interval '1 hour')");
	h_sql_text(c, "SELECT jid FROM staged_jobs WHERE tenant = 'B'", jid, sizeof(jid));
	wait_settled(&k, &p, c, "default", 10, 10);
	stop_relay(&p);
	rep = h_cmd(k.r, "ZRANGE schedule 0 -1");
	ck_assert_int_eq(rep->elements, 1);
	at = strstr(rep->element[0]->str, jid);
	ck_assert_msg(at != NULL, "the schedule holds another job: %s", rep->element[0]->str);
	freeReplyObject(rep);
	PQfinish(c);
	consumer_free(&k);
}
END_TEST

/* Without a maxmemory the memory bound has nothing to measure against: the
 * relay says so once and pushes as usual. */
START_TEST(the_memory_bound_without_maxmemory_says_so_and_pushes)
{
	static const char *const args[] = { "--max-redis-memory", "80", FAST_RELAY, NULL };
	PGconn *c = h_pg();
	struct consumer k;
	struct relay_proc p;

	consumer_init(&k, "queue:default", "RPOP", 300, 300);
	stage(c, "default", "A", 1, 300, 0);
	h_relay_start(&p, "no-maxmemory", args);
	wait_settled(&k, &p, c, "default", 300, 0);
	stop_relay(&p);
	ck_assert_int_eq(h_log_count(p.log, "--max-redis-memory has no effect"), 1);
	ck_assert_int_eq(h_log_count(p.log, "pausing"), 0);
	PQfinish(c);
	consumer_free(&k);
}
END_TEST

/* A job whose transaction commits after the relay read past its id comes
 * through its gap and is held in the round its tenant is due: right behind
 * the flood's job of the round being released, not at the end. */
START_TEST(a_late_commit_to_a_held_queue_takes_its_turn)
{
	static const char *const args[] = { "--queue-limit", "default=10", FAST_RELAY, NULL };
	PGconn *c = h_pg(), *late = h_pg();
	struct consumer k;
	struct relay_proc p;
	int at;

	consumer_init(&k, "queue:default", "RPOP", 10, 31);
	h_sql(late, "BEGIN");
	stage(late, "default", "L", B_ARG, 1, 0); /* the lowest id, not committed yet */
	stage(c, "default", "A", 1, 30, 0);
	h_relay_start(&p, "late", args);
	wait_settled(&k, &p, c, "default", 10, 20);
	h_sql(late, "COMMIT");
	PQfinish(late);
	wait_held(&p, c, "L", 1);
	consume(&k, &p, 31, 0);
	stop_relay(&p);
	at = popped_at(&k, B_ARG);
	ck_assert_msg(at == 10 || at == 11, "the late commit popped at %d, not among the first two released after it",
		      at);
	assert_in_order(&k, 1, 30, 30);
	assert_each_once(c, k.r, &k, (const char *const[]){ NULL });
	assert_drained(c, &k);
	PQfinish(c);
	consumer_free(&k);
}
END_TEST

/* One transaction's jobs to a capped queue, split by a read: T stages 100,
 * a read passes their ids (a job to an uncapped queue arrives), T stages 100
 * more and commits. Its jobs are held and released in id order: before the
 * fix the later 100 were read first, above the cursor, and held before the
 * first 100, which came through their gap on the timer. */
START_TEST(a_transaction_split_by_a_read_is_released_in_id_order)
{
	static const char *const args[] = { "--queue-limit", "default=10", FAST_RELAY, NULL };
	static const char *const rest[] = { "queue:critical", NULL };
	PGconn *c = h_pg(), *t = h_pg();
	struct consumer k;
	struct relay_proc p;
	long long t0;

	consumer_init(&k, "queue:default", "RPOP", 10, 200);
	h_sql(t, "BEGIN");
	stage(t, "default", "A", 1, 100, 0);
	h_relay_start(&p, "split", args);
	stage(c, "critical", "B", CRITICAL_ARG, 1, 0);
	for (t0 = mono_ms(); h_cmd_int(k.r, "LLEN queue:critical") == 0; sleep_ms(5))
		RELAY_CHECK(&p, mono_ms() - t0 < WAIT_MS, "the uncapped queue's job did not arrive; see %s", p.log);
	stage(t, "default", "A", 101, 100, 0);
	h_sql(t, "COMMIT");
	PQfinish(t);
	wait_settled(&k, &p, c, "default", 10, 190);
	consume(&k, &p, 200, 0);
	stop_relay(&p);
	assert_in_order(&k, 1, 200, 200);
	assert_each_once(c, k.r, &k, rest);
	assert_drained(c, &k);
	PQfinish(c);
	consumer_free(&k);
}
END_TEST

/* The value of the sample named exactly series on /metrics; NAN if absent. */
static double metric(int port, const char *series)
{
	int st;
	char *page = h_http_get(port, "/metrics", &st);
	double v = h_metric_sample(page, series);

	ck_assert_int_eq(st, 200);
	free(page);
	return v;
}

/* Scrapes until series is want, or fails after WAIT_MS. */
static void wait_metric(struct relay_proc *p, int port, const char *series, double want)
{
	long long t0 = mono_ms();
	double v;

	while ((v = metric(port, series)) != want) {
		RELAY_CHECK(p, mono_ms() - t0 < WAIT_MS, "%s is %g, not %g, after %d ms", series, v, want, WAIT_MS);
		sleep_ms(50);
	}
}

/* A field of INFO section (-1 if absent). */
static long long info_field(redisContext *r, const char *section, const char *field)
{
	redisReply *rep = h_cmd(r, "INFO %s", section);
	char key[128], *at;
	long long v = -1;

	snprintf(key, sizeof(key), "\n%s:", field);
	at = strstr(rep->str, key);
	if (at)
		v = strtoll(at + strlen(key), NULL, 10);
	freeReplyObject(rep);
	return v;
}

static void assert_never_oom(redisContext *r, const struct relay_proc *p)
{
	redisReply *rep = h_cmd(r, "INFO errorstats");

	ck_assert_msg(strstr(rep->str, "errorstat_OOM") == NULL, "redis answered OOM:\n%s", rep->str);
	freeReplyObject(rep);
	ck_assert_int_eq(h_log_count(p->log, "OOM"), 0);
}

/* With Redis close to its maxmemory the relay stops short of it, says so once,
 * and goes on once a worker has made room. */
START_TEST(the_memory_bound_pauses_before_redis_is_full)
{
	static const char *const args[] = {
		"--max-redis-memory", "80", "--http-addr", "127.0.0.1:0", FAST_RELAY, NULL
	};
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct consumer k;
	struct relay_proc p;
	long long maxmem;
	int port;

	consumer_init(&k, "queue:default", "RPOP", 2000, 2000);
	freeReplyObject(h_cmd(r, "CONFIG SET maxmemory-policy noeviction"));
	freeReplyObject(h_cmd(r, "CONFIG RESETSTAT"));
	maxmem = info_field(r, "memory", "used_memory") + 4 * 1024 * 1024;
	freeReplyObject(h_cmd(r, "CONFIG SET maxmemory %lld", maxmem));
	stage(c, "default", "A", 1, 2000, 4000); /* about 8 MB, twice what fits */
	h_relay_start(&p, "memory", args);
	port = h_http_port(&p);
	RELAY_CHECK(&p, h_log_wait(&p, "pausing", WAIT_MS), "no \"pausing\" line in %s", p.log);
	wait_metric(&p, port, "stagedrain_redis_memory_paused", 1);
	sleep_ms(500);
	RELAY_CHECK(&p, h_log_count(p.log, "pausing") == 1, "\"pausing\" said more than once in %s", p.log);
	RELAY_CHECK(&p, staged(c) > 0, "everything pushed: the bound never held anything back");
	RELAY_CHECK(&p, info_field(r, "memory", "used_memory") < maxmem, "redis reached its maxmemory");
	assert_never_oom(r, &p);

	consume(&k, &p, 2000, 0);
	wait_metric(&p, port, "stagedrain_redis_memory_paused", 0);
	RELAY_CHECK(&p, metric(port, "stagedrain_backpressure_seconds_total{reason=\"redis_memory\"}") > 0,
		    "no time paused counted");
	stop_relay(&p);
	assert_never_oom(r, &p);
	freeReplyObject(h_cmd(r, "CONFIG SET maxmemory 0"));
	assert_in_order(&k, 1, 2000, 2000);
	assert_each_once(c, r, &k, (const char *const[]){ NULL });
	assert_drained(c, &k);
	PQfinish(c);
	redisFree(r);
	consumer_free(&k);
}
END_TEST

/* Held jobs on /metrics, by queue (never by tenant), and the released ones counted. */
START_TEST(held_and_released_jobs_are_metrics_by_queue)
{
	static const char *const args[] = { "--queue-limit", "default=10", "--http-addr",
					    "127.0.0.1:0",   FAST_RELAY,   NULL };
	PGconn *c = h_pg();
	struct consumer k;
	struct relay_proc p;
	char *page;
	int port, st;

	consumer_init(&k, "queue:default", "RPOP", 10, 200);
	h_relay_start(&p, "metrics", args);
	port = h_http_port(&p);
	stage(c, "default", "A", 1, 150, 0);
	stage(c, "default", "B", 1001, 50, 0);
	wait_settled(&k, &p, c, "default", 10, 190);
	wait_metric(&p, port, "stagedrain_held_jobs{queue=\"default\",target=\"default\"}", 190);
	RELAY_CHECK(&p, metric(port, "stagedrain_jobs_held_total{queue=\"default\"}") == 190, "jobs_held_total");
	/* 40 slots come free: 40 released, 10 of them still in the list. */
	consume(&k, &p, 40, 0);
	wait_settled(&k, &p, c, "default", 10, 150);
	wait_metric(&p, port, "stagedrain_held_jobs{queue=\"default\",target=\"default\"}", 150);
	wait_metric(&p, port, "stagedrain_jobs_released_total{queue=\"default\"}", 40);
	RELAY_CHECK(&p, metric(port, "stagedrain_held_seconds_total{queue=\"default\"}") > 0, "held_seconds_total");
	RELAY_CHECK(&p, metric(port, "stagedrain_backpressure_seconds_total{reason=\"queue_length\"}") > 0,
		    "backpressure_seconds_total");
	page = h_http_get(port, "/metrics", &st);
	RELAY_CHECK(&p, strstr(page, "tenant=") == NULL, "a tenant on /metrics:\n%s", page);
	free(page);
	/* A new leader shows what is held before it releases anything (the list is full). */
	stop_relay(&p);
	h_relay_start(&p, "metrics-next", args);
	port = h_http_port(&p);
	wait_metric(&p, port, "stagedrain_held_jobs{queue=\"default\",target=\"default\"}", 150);
	RELAY_CHECK(&p, h_cmd_int(k.r, "LLEN queue:default") == 10, "the new leader pushed past the cap");
	consume(&k, &p, 200, 0);
	wait_metric(&p, port, "stagedrain_jobs_released_total{queue=\"default\"}", 150);
	wait_metric(&p, port, "stagedrain_held_jobs{queue=\"default\",target=\"default\"}", 0);
	stop_relay(&p);
	assert_drained(c, &k);
	PQfinish(c);
	consumer_free(&k);
}
END_TEST

/* Resque's list is the one its cap counts; its worker pops the left end. */
START_TEST(a_resque_queue_is_capped_and_fair_too)
{
	static const char *const args[] = { "--format", "resque", "--queue-limit", "default=20", FAST_RELAY, NULL };
	PGconn *c = h_pg();
	struct consumer k;
	struct relay_proc p;
	int at;

	consumer_init(&k, "resque:queue:default", "LPOP", 20, 301);
	stage(c, "default", "A", 1, 300, 0);
	h_relay_start(&p, "resque", args);
	wait_settled(&k, &p, c, "default", 20, 280);
	stage(c, "default", "B", B_ARG, 1, 0);
	wait_held(&p, c, "B", 1);
	consume(&k, &p, 301, 2);
	stop_relay(&p);
	at = popped_at(&k, B_ARG);
	ck_assert_msg(at == 20 || at == 21, "B's job popped at %d, not among the first two released after it", at);
	/* Resque's jobs carry no jid: their args, each once and in order, say it. */
	assert_in_order(&k, 1, 300, 300);
	assert_drained(c, &k);
	PQfinish(c);
	consumer_free(&k);
}
END_TEST

Suite *release_suite(void)
{
	Suite *s = suite_create("release");
	TCase *tc = tcase_create("release"), *order;

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, a_newcomer_is_released_right_after_a_flood_it_came_behind);
	tcase_add_test(tc, kills_mid_release_lose_nothing_and_keep_it_fair);
	tcase_add_test(tc, a_release_killed_before_its_commit_is_not_pushed_twice);
	tcase_add_test(tc, one_slot_at_a_time_still_reaches_a_newcomer);
	tcase_add_test(tc, the_null_tenant_takes_turns_like_any_other);
	tcase_add_test(tc, held_rows_are_released_by_a_relay_without_caps);
	tcase_add_test(tc, a_late_commit_to_a_held_queue_takes_its_turn);
	tcase_add_test(tc, a_held_row_that_is_no_longer_a_job_is_dead_lettered_on_release);
	tcase_add_test(tc, a_capped_queue_whose_key_is_not_a_list_holds_its_jobs);
	tcase_add_test(tc, an_error_reading_a_capped_queue_is_named_and_its_jobs_wait);
	tcase_add_test(tc, a_scheduled_job_is_never_held_by_a_cap);
	tcase_add_test(tc, the_memory_bound_without_maxmemory_says_so_and_pushes);
	tcase_add_test(tc, held_and_released_jobs_are_metrics_by_queue);
	tcase_add_test(tc, a_resque_queue_is_capped_and_fair_too);
	tcase_add_test(tc, the_memory_bound_pauses_before_redis_is_full);
	suite_add_tcase(s, tc);
	/* One transaction's jobs in id order: CK_RUN_CASE=order runs these and cursor's. */
	order = tcase_create("order");
	tcase_add_checked_fixture(order, setup, NULL);
	tcase_set_timeout(order, 90);
	tcase_add_test(order, a_transaction_split_by_a_read_is_released_in_id_order);
	suite_add_tcase(s, order);
	return s;
}
