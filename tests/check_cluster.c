/*
 * A Redis Cluster target, against a real cluster (services.sh cluster-start:
 * three masters, a replica each, cluster-node-timeout 1 s): BullMQ queues
 * spread over the masters by hash tag, each job once and in order; Laravel's
 * list; the fence per slot across a crash; a slot migrated while jobs flow;
 * a master SIGKILLed and its replica promoted while jobs flow, with and
 * without cluster-require-full-coverage.
 */
#include "fmacros.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "redis_cluster.h"
#include "suites.h"
#include "support/services.h"

#define WAIT_MS 30000
#define NQ 6

static void cluster_up(void)
{
	h_reset();
	h_services("cluster-start");
}

static void cluster_up_partial(void)
{
	const char *const args[] = { "no-coverage", NULL };

	h_reset();
	ck_assert_int_eq(services_run_args(h_servers(), "cluster-start", args, NULL), 0);
}

static void cluster_down(void)
{
	h_services("cluster-stop");
}

/* The seed list cluster-start wrote: redis-cluster://h:p,h:p,h:p. */
static const char *cluster_url(void)
{
	static char url[256];
	char path[600];
	FILE *f;

	snprintf(path, sizeof(path), "%s/cluster.url", h_env("TEST_DIR"));
	ck_assert_ptr_nonnull(f = fopen(path, "r"));
	ck_assert_ptr_nonnull(fgets(url, sizeof(url), f));
	fclose(f);
	url[strcspn(url, "\n")] = '\0';
	return url;
}

static unsigned slot_of(const char *key)
{
	return cluster_key_slot(key, strlen(key));
}

/* A connection to the master that serves key's slot now. */
static redisContext *owner_of(const char *key)
{
	int port = services_cluster_master_of(h_servers(), (int)slot_of(key));
	char err[REDIS_ERRLEN];
	redisContext *r;

	ck_assert_int_gt(port, 0);
	r = redis_open(port, 5000, err);
	ck_assert_msg(r != NULL, "%s", err);
	return r;
}

/* n jobs for queue, their data {"n": first ... first + n - 1}, in one transaction. */
static void stage(PGconn *c, const char *queue, int first, int n)
{
	h_sql(c,
	      "INSERT INTO staged_jobs (queue, job_class, args)"
	      " SELECT '%s', 'work', ('[{\"n\":' || i || '}]')::json"
	      " FROM generate_series(%d, %d) i ORDER BY i",
	      queue, first, first + n - 1);
}

/* BullMQ's wait list of queue holds n jobs whose data counts 1 .. n in the
 * order a worker takes them (from the list's tail): each job once, in order. */
static void assert_queue(const char *prefix, const char *queue, int n)
{
	char key[256];
	redisContext *r;
	redisReply *ids;

	snprintf(key, sizeof(key), "%s%s:wait", prefix, queue);
	r = owner_of(key);
	ids = h_cmd(r, "LRANGE %s 0 -1", key);
	ck_assert_msg(ids->elements == (size_t)n, "%s holds %zu jobs, not %d", key, ids->elements, n);
	for (size_t i = 0; i < ids->elements; i++) {
		const char *id = ids->element[ids->elements - 1 - i]->str;
		redisReply *data = h_cmd(r, "HGET %s%s:%s data", prefix, queue, id);
		char want[32];
		snprintf(want, sizeof(want), "{\"n\":%zu}", i + 1);
		ck_assert_msg(data->type == REDIS_REPLY_STRING && strcmp(data->str, want) == 0,
			      "%s: job %zu is %s, not %s", key, i + 1,
			      data->type == REDIS_REPLY_STRING ? data->str : "?", want);
		freeReplyObject(data);
	}
	freeReplyObject(ids);
	redisFree(r);
}

static void start_as(struct relay_proc *p, const char *name, const char *format, const char *const *more)
{
	const char *argv[32] = { "--redis-url", cluster_url(),  "--format", format,        "--poll-interval",
				 "20ms",        "--batch-size", "100",      "--http-addr", "127.0.0.1:0" };
	int n = 10;

	for (; more && *more && n < 31; more++)
		argv[n++] = *more;
	argv[n] = NULL;
	h_relay_start(p, name, argv);
	RELAY_CHECK(p, h_log_wait(p, "msg=leading ", WAIT_MS), "relay %s did not lead; see %s", name, p->log);
}

static void start(struct relay_proc *p, const char *name, const char *const *more)
{
	start_as(p, name, "bullmq", more);
}

static void stop(struct relay_proc *p)
{
	h_relay_kill(p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(p, WAIT_MS), 0);
}

/* Queues {q1} .. {q6}: their hash tags put them on every master. */
static const char *queue_name(int q)
{
	static char names[NQ][16];

	snprintf(names[q], sizeof(names[q]), "{q%d}", q + 1);
	return names[q];
}

START_TEST(queues_spread_over_the_masters_each_job_once_in_order)
{
	PGconn *c = h_pg();
	struct relay_proc p;
	bool on[65536] = { false };
	int masters = 0;

	for (int q = 0; q < NQ; q++)
		stage(c, queue_name(q), 1, 300);
	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args) VALUES ('untagged', 'work', '[{}]')");
	start(&p, "relay", NULL);
	RELAY_CHECK(&p, h_wait_staged_empty(c, WAIT_MS), "jobs still staged; see %s", p.log);
	for (int q = 0; q < NQ; q++) {
		char key[64];
		int port;
		snprintf(key, sizeof(key), "bull:%s:wait", queue_name(q));
		assert_queue("bull:", queue_name(q), 300);
		port = services_cluster_master_of(h_servers(), (int)slot_of(key));
		masters += !on[port];
		on[port] = true;
	}
	ck_assert_int_eq(masters, 3);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE reason LIKE "
				  "'queue \"untagged\" has no hash tag for Redis Cluster%%'"),
			 1);
	{
		char *body = NULL;
		int st = 0;
		body = h_http_get(h_http_port(&p), "/metrics", &st);
		RELAY_CHECK(&p,
			    st == 200 && strstr(body, "stagedrain_cluster_masters{target=\"default\"} 3\n") &&
				    strstr(body, "stagedrain_cluster_masters_connected{target=\"default\"} 3\n") &&
				    strstr(body, "stagedrain_cluster_slots_unsettled{target=\"default\"} 0\n"),
			    "/metrics lacks the cluster's figures:\n%s", body);
		free(body);
	}
	stop(&p);
	{
		const char *const status[] = { "status", "--redis-url", cluster_url(), "--format", "bullmq", NULL };
		struct relay_proc st;
		h_relay_start(&st, "status", status);
		ck_assert_int_ge(h_relay_wait(&st, WAIT_MS), 0);
		RELAY_CHECK(&st, h_log_contains(st.log, "cluster_state ok, 3 masters, 16384 of 16384 slots served"),
			    "status has no cluster line; see %s", st.log);
	}
	PQfinish(c);
}
END_TEST

/* A prefix with a hash tag puts every queue in one slot. */
START_TEST(a_tagged_prefix_puts_every_queue_in_one_slot)
{
	static const char *const more[] = { "--bullmq-prefix", "{bull}", NULL };
	PGconn *c = h_pg();
	struct relay_proc p;

	stage(c, "mail", 1, 50);
	stage(c, "push", 1, 50);
	start(&p, "relay", more);
	RELAY_CHECK(&p, h_wait_staged_empty(c, WAIT_MS), "jobs still staged; see %s", p.log);
	assert_queue("{bull}:", "mail", 50);
	assert_queue("{bull}:", "push", 50);
	ck_assert_uint_eq(slot_of("{bull}:mail:wait"), slot_of("{bull}:push:wait"));
	stop(&p);
	PQfinish(c);
}
END_TEST

/* Laravel's list, hash-tagged by its queue's name as Laravel's docs ask. */
START_TEST(laravel_jobs_land_in_their_tagged_list)
{
	PGconn *c = h_pg();
	redisContext *r;
	struct relay_proc p;

	stage(c, "{default}", 1, 40);
	start_as(&p, "relay", "laravel", NULL);
	RELAY_CHECK(&p, h_wait_staged_empty(c, WAIT_MS), "jobs still staged; see %s", p.log);
	r = owner_of("laravel_database_queues:{default}");
	ck_assert_int_eq(h_cmd_int(r, "LLEN laravel_database_queues:{default}"), 40);
	ck_assert_int_eq(h_cmd_int(r, "LLEN laravel_database_queues:{default}:notify"), 40);
	redisFree(r);
	stop(&p);
	PQfinish(c);
}
END_TEST

/* Killed between its pushes and its commit, a leader leaves a fence in each
 * slot it pushed to: its successor deletes those rows, pushing none twice. */
START_TEST(a_crash_between_push_and_commit_pushes_nothing_twice)
{
	static const char *const once[] = { "--once", NULL };
	PGconn *c = h_pg(), *lock = h_pg();
	struct relay_proc a;

	for (int q = 0; q < NQ; q++)
		stage(c, queue_name(q), 1, 20);
	h_block_commits(c);
	h_sql(lock, "SELECT pg_advisory_lock(42425)");
	start(&a, "relay-a", NULL);
	RELAY_CHECK(&a, h_wait_blocked(c, 10000), "A's commit is not waiting");
	h_relay_crash(&a, c);
	h_sql(lock, "SELECT pg_advisory_unlock(42425)");
	h_unblock_commits(c);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), NQ * 20);
	for (int q = 0; q < NQ; q++)
		stage(c, queue_name(q), 21, 10);
	{
		struct relay_proc b;
		start(&b, "relay-b", once);
		ck_assert_int_eq(h_relay_wait(&b, WAIT_MS), 0);
		RELAY_CHECK(&b, h_log_contains(b.log, "not pushing them again"), "B did not read the fences; see %s",
			    b.log);
	}
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	for (int q = 0; q < NQ; q++)
		assert_queue("bull:", queue_name(q), 30);
	PQfinish(lock);
	PQfinish(c);
}
END_TEST

/* Stages 10 jobs on each of queues every 20 ms for ms milliseconds; *next counts them per queue. */
static void produce(PGconn *c, int nq, int *next, int ms)
{
	long long t0 = mono_ms();

	while (mono_ms() - t0 < ms) {
		for (int q = 0; q < nq; q++)
			stage(c, queue_name(q), next[q], 10);
		for (int q = 0; q < nq; q++)
			next[q] += 10;
		sleep_ms(20);
	}
}

/* `services.sh verb DIR args...` in a child, while 10 jobs go to each of the
 * first nq queues every 20 ms until it ends. */
static void while_running(const char *verb, const char *const *args, PGconn *c, int nq, int *next)
{
	pid_t kid = fork();
	int st = 0;

	ck_assert_int_ge(kid, 0);
	if (kid == 0)
		_exit(services_run_args(h_servers(), verb, args, NULL) == 0 ? 0 : 1);
	while (waitpid(kid, &st, WNOHANG) == 0)
		produce(c, nq, next, 20);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "services.sh %s failed", verb);
}

/* A slot moved to another master, key by key (ASK while half moved), while
 * its queue's jobs flow, with --redis-wait-replicas 1: every job once, in
 * order, and nothing held up past the move. */
START_TEST(a_slot_migrated_while_jobs_flow_keeps_each_job_once_in_order)
{
	PGconn *c = h_pg();
	struct relay_proc p;
	static const char *const wait[] = { "--redis-wait-replicas", "1", "--redis-wait-timeout", "300ms", NULL };
	int next[NQ] = { 1, 1, 1, 1, 1, 1 }, from, to;
	char slot[16], port[16];

	start(&p, "relay", wait); /* WAIT after a part sent again goes where that part went */
	produce(c, 2, next, 500);
	snprintf(slot, sizeof(slot), "%u", slot_of("{q1}"));
	from = services_cluster_master_of(h_servers(), (int)slot_of("{q1}"));
	to = services_cluster_master_of(h_servers(), (int)slot_of("{q2}"));
	if (to == from)
		to = services_cluster_master_of(h_servers(), (int)slot_of("{q3}"));
	ck_assert_int_ne(to, from);
	snprintf(port, sizeof(port), "%d", to);
	setenv("CLUSTER_MIGRATE_PAUSE_MS", "50", 1);
	while_running("cluster-move-slot", (const char *const[]){ slot, port, NULL }, c, 2, next);
	unsetenv("CLUSTER_MIGRATE_PAUSE_MS");
	produce(c, 2, next, 500);
	RELAY_CHECK(&p, h_wait_staged_empty(c, WAIT_MS), "jobs still staged; see %s", p.log);
	ck_assert_int_eq(services_cluster_master_of(h_servers(), (int)slot_of("{q1}")), to);
	assert_queue("bull:", "{q1}", next[0] - 1);
	assert_queue("bull:", "{q2}", next[1] - 1);
	stop(&p);
	PQfinish(c);
}
END_TEST

/* redis-cli --cluster reshard moves 2,000 slots, {q1}'s among them (the
 * lowest of its master's, 5461-10922), to another master while every
 * queue's jobs flow: each job once, in order. */
START_TEST(a_reshard_while_jobs_flow_keeps_each_job_once_in_order)
{
	PGconn *c = h_pg();
	struct relay_proc p;
	int next[NQ] = { 1, 1, 1, 1, 1, 1 }, from, to;
	char fromp[16], top[16];

	start(&p, "relay", NULL);
	produce(c, NQ, next, 300);
	from = services_cluster_master_of(h_servers(), (int)slot_of("{q1}"));
	to = services_cluster_master_of(h_servers(), 0);
	ck_assert_int_ne(to, from);
	snprintf(fromp, sizeof(fromp), "%d", from);
	snprintf(top, sizeof(top), "%d", to);
	while_running("cluster-reshard", (const char *const[]){ fromp, top, "2000", NULL }, c, NQ, next);
	produce(c, NQ, next, 300);
	RELAY_CHECK(&p, h_wait_staged_empty(c, WAIT_MS), "jobs still staged; see %s", p.log);
	ck_assert_int_eq(services_cluster_master_of(h_servers(), (int)slot_of("{q1}")), to);
	for (int q = 0; q < NQ; q++)
		assert_queue("bull:", queue_name(q), next[q] - 1);
	stop(&p);
	PQfinish(c);
}
END_TEST

/* A job of queue q staged now: how long until the relay took it (ms). */
static long long one_job_ms(PGconn *c, int q, int *next)
{
	long long t0 = mono_ms();

	stage(c, queue_name(q), next[q]++, 1);
	while (h_sql(c, "SELECT count(*) FROM staged_jobs WHERE queue = '%s'", queue_name(q)) > 0 &&
	       mono_ms() - t0 < WAIT_MS)
		sleep_ms(5);
	return mono_ms() - t0;
}

/* The relay's /metrics holds text. */
static bool metrics_say(struct relay_proc *p, const char *text)
{
	int st = 0;
	char *body = h_http_get(h_http_port(p), "/metrics", &st);
	bool yes = st == 200 && strstr(body, text) != NULL;

	free(body);
	return yes;
}

/*
 * The master of {q1} SIGKILLed while jobs flow, with --redis-wait-replicas 1:
 * its replica takes over, with no replica of its own until the old master
 * rejoins, so WAIT 1 cannot succeed there: {q1}'s jobs wait held (counted,
 * /readyz says why) while the other masters' queues go on, and every job
 * arrives once, in order, after the rejoin. The other masters' queues are
 * not held up by the failover with cluster-require-full-coverage no; with
 * yes, every node answers CLUSTERDOWN until the promotion.
 */
static void failover(bool coverage)
{
	static const char *const wait[] = { "--redis-wait-replicas", "1", "--redis-wait-timeout", "300ms", NULL };
	PGconn *c = h_pg();
	struct relay_proc p;
	int next[NQ] = { 1, 1, 1, 1, 1, 1 }, dead, other = -1;
	long long gap, worst = 0, t0;
	char port[16], out[256];
	const char *const args[] = { port, NULL };

	start(&p, "relay", wait);
	produce(c, NQ, next, 300);
	RELAY_CHECK(&p, h_wait_staged_empty(c, WAIT_MS), "jobs still staged; see %s", p.log);
	dead = services_cluster_master_of(h_servers(), (int)slot_of("{q1}"));
	for (int q = 1; q < NQ && other < 0; q++)
		if (services_cluster_master_of(h_servers(), (int)slot_of(queue_name(q))) != dead)
			other = q;
	snprintf(port, sizeof(port), "%d", dead);
	ck_assert_int_eq(services_run_args(h_servers(), "cluster-kill", args, NULL), 0);
	/* Until the promotion: {q1}'s jobs, and one job at a time of another
	 * master's queue, timed. */
	t0 = mono_ms();
	while (services_cluster_master_of(h_servers(), (int)slot_of("{q1}")) < 0 && mono_ms() - t0 < WAIT_MS) {
		stage(c, "{q1}", next[0], 10);
		next[0] += 10;
		gap = one_job_ms(c, other, next);
		worst = gap > worst ? gap : worst;
	}
	ck_assert_int_eq(services_output(h_servers(), "cluster-wait-promoted", args, out, sizeof(out)), 0);
	printf("cluster failover (full coverage %s): promoted after %lld ms; another master's job waited %lld ms at "
	       "most meanwhile\n",
	       coverage ? "yes" : "no", mono_ms() - t0, worst);
	fflush(stdout);
	/* The promoted master has no replica: {q1} waits held, the others go. */
	produce(c, NQ, next, 300);
	RELAY_CHECK(&p, one_job_ms(c, other, next) < 5000, "another master's queue waits; see %s", p.log);
	RELAY_CHECK(&p, h_sql(c, "SELECT count(*) FROM staged_jobs_held WHERE queue = '{q1}'") > 0,
		    "{q1}'s jobs are not held; see %s", p.log);
	RELAY_CHECK(&p, !metrics_say(&p, "stagedrain_cluster_slots_unsettled{target=\"default\"} 0\n"),
		    "no slot is unsettled; see %s", p.log);
	{
		int st = 0;
		char *body = h_http_get(h_http_port(&p), "/readyz", &st);
		RELAY_CHECK(&p, st == 503 && strstr(body, "slots not served"), "/readyz says %d %s", st, body);
		free(body);
	}
	ck_assert_int_eq(services_run_args(h_servers(), "cluster-revive", args, NULL), 0);
	produce(c, NQ, next, 300);
	RELAY_CHECK(&p, h_wait_staged_empty(c, WAIT_MS), "jobs still staged after the rejoin; see %s", p.log);
	t0 = mono_ms();
	while (h_sql(c, "SELECT count(*) FROM staged_jobs_held") > 0 && mono_ms() - t0 < WAIT_MS)
		sleep_ms(20);
	RELAY_CHECK(&p, h_sql(c, "SELECT count(*) FROM staged_jobs_held") == 0, "jobs still held; see %s", p.log);
	for (int q = 0; q < NQ; q++)
		assert_queue("bull:", queue_name(q), next[q] - 1);
	if (!coverage)
		RELAY_CHECK(&p, worst < 2500, "another master's job waited %lld ms; see %s", worst, p.log);
	stop(&p);
	PQfinish(c);
}

START_TEST(a_master_killed_while_jobs_flow_full_coverage)
{
	failover(true);
}
END_TEST

START_TEST(a_master_killed_while_jobs_flow_partial_coverage)
{
	failover(false);
}
END_TEST

static Suite *cluster_suite_of(const char *name, void (*up)(void), const TTest *const *tests)
{
	Suite *s = suite_create(name);
	TCase *tc = tcase_create(name);

	tcase_add_checked_fixture(tc, up, cluster_down);
	tcase_set_timeout(tc, 120);
	for (; *tests; tests++)
		tcase_add_test(tc, *tests);
	suite_add_tcase(s, tc);
	return s;
}

Suite *cluster_suite(void)
{
	return cluster_suite_of("cluster", cluster_up,
				(const TTest *const[]){ queues_spread_over_the_masters_each_job_once_in_order,
							a_tagged_prefix_puts_every_queue_in_one_slot,
							laravel_jobs_land_in_their_tagged_list,
							a_crash_between_push_and_commit_pushes_nothing_twice, NULL });
}

Suite *cluster_moves_suite(void)
{
	return cluster_suite_of("cluster_moves", cluster_up,
				(const TTest *const[]){ a_slot_migrated_while_jobs_flow_keeps_each_job_once_in_order,
							a_reshard_while_jobs_flow_keeps_each_job_once_in_order,
							a_master_killed_while_jobs_flow_full_coverage, NULL });
}

Suite *cluster_failover_suite(void)
{
	return cluster_suite_of("cluster_failover", cluster_up_partial,
				(const TTest *const[]){ a_master_killed_while_jobs_flow_partial_coverage, NULL });
}
