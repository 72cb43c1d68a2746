/* Redis Sentinel, against real servers (services.sh sentinel-start: a primary,
 * one replica, three sentinels): the relay finds the master through the
 * sentinels, follows a failover without losing a job, and with
 * --redis-wait-replicas keeps a job staged until a replica holds it. */
#include "fmacros.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suites.h"
#include "support/fake_sentinel.h"

#define MASTER "stagedrain-test"
#define WAIT_MS 30000

static const char *const queues[] = { "queue:default", NULL };

static void sentinel_up(void)
{
	PGconn *c;

	h_reset();
	h_services("sentinel-start");
	c = h_pg();
	h_snapshot_expected(c); /* empty: h_stage_expected fills it */
	PQfinish(c);
}

/* The same topology on TLS only: rediss-sentinel:// with tls-start's CA. */
static void sentinel_tls_up(void)
{
	PGconn *c;

	h_reset();
	h_services("sentinel-tls-start");
	c = h_pg();
	h_snapshot_expected(c);
	PQfinish(c);
}

/* Stopped here too, so each case starts from the same topology. */
static void sentinel_down(void)
{
	h_services("sentinel-stop");
}

static redisContext *open_port(int port)
{
	char err[REDIS_ERRLEN];
	redisContext *r = redis_open(port, 5000, err);

	ck_assert_msg(r != NULL, "%s", err);
	return r;
}

/* The master's port as the first sentinel names it now. */
static int master_port(void)
{
	redisContext *r = open_port(h_port("sentinel1"));
	redisReply *rep = h_cmd(r, "SENTINEL get-master-addr-by-name %s", MASTER);
	int port;

	ck_assert_int_eq(rep->type, REDIS_REPLY_ARRAY);
	ck_assert_int_eq(rep->elements, 2);
	port = atoi(rep->element[1]->str);
	freeReplyObject(rep);
	redisFree(r);
	return port;
}

/* Waits until the sentinels name a master other than old; returns its port. */
static int wait_new_master(int old)
{
	long long t0 = mono_ms();
	int port;

	while ((port = master_port()) == old) {
		ck_assert_msg(mono_ms() - t0 < WAIT_MS, "no failover away from port %d within %d ms", old, WAIT_MS);
		sleep_ms(100);
	}
	return port;
}

static const char *sentinel_url(const char *scheme)
{
	static char url[256];

	snprintf(url, sizeof(url), "%s://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/%s/0", scheme, h_port("sentinel1"),
		 h_port("sentinel2"), h_port("sentinel3"), MASTER);
	return url;
}

/* A fake sentinel on fake_port listed first, then the three real ones. */
static const char *url_with_fake(int fake_port)
{
	static char url[256];

	snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/%s/0",
		 fake_port, h_port("sentinel1"), h_port("sentinel2"), h_port("sentinel3"), MASTER);
	return url;
}

/* Starts the relay through the sentinels with args after the URLs, and waits
 * for its first connection, which must name the primary and the master name. */
static void start_relay(struct relay_proc *p, const char *name, const char *url, const char *const *args)
{
	const char *argv[40] = { "--pg-url", h_env("TEST_PG_URL"), "--redis-url", url, "--batch-size",
				 "50",       "--poll-interval",    "20ms" };
	char want[64];
	int n = 8;

	for (; args && *args && n < 39; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	h_relay_start_bare(p, name, argv);
	RELAY_CHECK(p, h_log_wait(p, "msg=connected ", WAIT_MS), "relay %s did not connect; see %s", name, p->log);
	snprintf(want, sizeof(want), "redis=127.0.0.1:%d/0", h_port("sentinel-r1"));
	RELAY_CHECK(p, h_log_contains(p->log, want), "the connected line lacks %s; see %s", want, p->log);
	RELAY_CHECK(p, h_log_contains(p->log, "master_name=" MASTER), "no master_name= in %s", p->log);
}

static void stop_relay(struct relay_proc *p)
{
	h_relay_kill(p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(p, WAIT_MS), 0);
}

static long long staged(PGconn *c)
{
	return h_sql(c, "SELECT count(*) FROM staged_jobs");
}

static void wait_drained(struct relay_proc *p, PGconn *c)
{
	long long t0 = mono_ms();

	while (staged(c) > 0) {
		RELAY_CHECK(p, mono_ms() - t0 < WAIT_MS, "%lld jobs still staged after %d ms; see %s", staged(c),
			    WAIT_MS, p->log);
		sleep_ms(50);
	}
}

/* Stages 10 jobs every 50 ms for ms milliseconds from *next on. */
static void produce(PGconn *c, int *next, int ms)
{
	long long t0 = mono_ms();

	while (mono_ms() - t0 < ms) {
		h_stage_expected(c, "default", *next, 10);
		*next += 10;
		sleep_ms(50);
	}
}

/* The relay logged that it moved from the first primary to port. */
static void assert_master_changed(struct relay_proc *p, int port)
{
	char to[64];

	snprintf(to, sizeof(to), "to=127.0.0.1:%d", port);
	RELAY_CHECK(p, h_log_wait(p, "msg=\"redis master changed\"", WAIT_MS), "no master change in %s", p->log);
	RELAY_CHECK(p, h_log_contains(p->log, to), "the master change does not say %s; see %s", to, p->log);
}

/* Every expected job is on the Redis at port; prints (not asserts) the duplicates. */
static void assert_all_on(PGconn *c, int port, const char *what)
{
	redisContext *r = open_port(port);

	h_load_seen(c, r, queues);
	ck_assert_int_eq(h_missing(c), 0);
	printf("sentinel %s: %lld jobs, %lld duplicates\n", what, h_sql(c, "SELECT count(*) FROM expected"),
	       h_duplicates(c));
	fflush(stdout);
	redisFree(r);
}

/* /readyz says ready and /metrics names the master at port, behind the sentinels. */
static void assert_ready_on(struct relay_proc *p, int port)
{
	int http = h_http_port(p), st = 0;
	long long t0 = mono_ms();
	char info[256], *body = NULL;

	snprintf(info, sizeof(info),
		 "stagedrain_redis_master_info{address=\"127.0.0.1:%d/0\",master_name=\"" MASTER
		 "\",tls=\"false\"} 1\n",
		 port);
	for (;;) {
		free(body);
		body = h_http_get(http, "/metrics", &st);
		if ((st == 200 && strstr(body, info) && strstr(body, "\nstagedrain_ready 1\n")) ||
		    mono_ms() - t0 > WAIT_MS)
			break;
		sleep_ms(100);
	}
	RELAY_CHECK(p, st == 200 && strstr(body, info), "/metrics lacks %s", info);
	RELAY_CHECK(p, strstr(body, "\nstagedrain_ready 1\n"), "/metrics: not ready after the failover");
	free(body);
	body = h_http_get(http, "/readyz", &st);
	RELAY_CHECK(p, st == 200 && strstr(body, "ready leader"), "/readyz: %d %s", st, body);
	free(body);
}

/* A failover the sentinels are asked for. Without WAIT a job pushed to the old
 * primary after the sentinels promoted the replica but before the relay heard
 * of it would be lost when the old primary resyncs from the new one; with
 * --redis-wait-replicas 1 no such job is taken as pushed, so none may go missing. */
START_TEST(follows_a_requested_failover)
{
	PGconn *c = h_pg();
	struct relay_proc p;
	redisContext *s;
	int next = 0, old = master_port(), now;

	start_relay(&p, "sentinel-failover", sentinel_url("redis-sentinel"),
		    (const char *const[]){ "--redis-wait-replicas", "1", "--redis-wait-timeout", "200ms", "--http-addr",
					   "127.0.0.1:0", "--watch-interval", "200ms", NULL });
	produce(c, &next, 1000);
	s = open_port(h_port("sentinel1"));
	freeReplyObject(h_cmd(s, "SENTINEL FAILOVER %s", MASTER));
	redisFree(s);
	produce(c, &next, 3000);
	now = wait_new_master(old);
	produce(c, &next, 2000);
	wait_drained(&p, c);
	assert_master_changed(&p, now);
	assert_ready_on(&p, now);
	stop_relay(&p);
	assert_all_on(c, now, "failover");
	PQfinish(c);
}
END_TEST

/* The primary is killed. A job is taken as pushed once the primary answered
 * the script, and the primary writes the script to its replica in the same
 * event-loop pass as that answer: the kill would have to fall between the two
 * writes for a job to be lost, so none may be. */
START_TEST(follows_the_promotion_after_the_primary_dies)
{
	PGconn *c = h_pg();
	struct relay_proc p;
	int next = 0, old = master_port(), now;

	start_relay(&p, "sentinel-kill", sentinel_url("redis-sentinel"), NULL);
	produce(c, &next, 1000);
	h_services("sentinel-kill");
	produce(c, &next, 2000);
	now = wait_new_master(old);
	produce(c, &next, 1000);
	wait_drained(&p, c);
	assert_master_changed(&p, now);
	stop_relay(&p);
	assert_all_on(c, now, "kill");
	PQfinish(c);
	/* spec11: the reconnect line names the master the way the first one does. */
	ck_assert_msg(logs_count_both(p.log, "msg=\"reconnected to redis\"", "master_name=" MASTER " tls=false") > 0,
		      "the reconnect line lacks master_name= and tls=; see %s", p.log);
}
END_TEST

/* Jobs 0..99 before the cut, drained and on the replica; the replica then
 * stops receiving writes (services.sh sentinel-cut) and jobs 100..199 are staged. */
static void stage_across_a_cut(PGconn *c, struct relay_proc *p)
{
	redisContext *r2 = open_port(h_port("sentinel-r2"));
	long long t0 = mono_ms();

	h_stage_expected(c, "default", 0, 100);
	wait_drained(p, c);
	while (h_cmd_int(r2, "LLEN queue:default") < 100) {
		RELAY_CHECK(p, mono_ms() - t0 < WAIT_MS, "the replica did not get the first 100 jobs");
		sleep_ms(20);
	}
	redisFree(r2);
	h_services("sentinel-cut");
	h_stage_expected(c, "default", 100, 100);
}

/* How many of the jobs staged during the cut the Redis at port lacks. */
static long long missing_after_cut(PGconn *c, int port)
{
	redisContext *r = open_port(port);

	h_load_seen(c, r, queues);
	redisFree(r);
	return h_sql(c, "SELECT count(*) FROM expected e WHERE (e.args->>0)::int >= 100"
			" AND NOT EXISTS (SELECT 1 FROM seen s WHERE s.jid = e.jid)");
}

/* With --redis-wait-replicas 1 a job only the primary holds stays staged.
 * The primary dies and its replica, which never saw those jobs, is promoted:
 * still nothing is deleted while no replica can acknowledge; once the old
 * primary is back as the new one's replica the jobs reach the new master and
 * leave staged_jobs. */
START_TEST(wait_keeps_jobs_staged_until_a_replica_has_them)
{
	PGconn *c = h_pg();
	struct relay_proc p;
	int old = master_port(), now;

	start_relay(&p, "sentinel-wait", sentinel_url("redis-sentinel"),
		    (const char *const[]){ "--redis-wait-replicas", "1", "--redis-wait-timeout", "200ms", NULL });
	stage_across_a_cut(c, &p);
	RELAY_CHECK(&p, h_log_wait(&p, "only 0 of 1 replicas acknowledged", WAIT_MS), "no short WAIT in %s", p.log);
	sleep_ms(1000); /* several batches' WAITs come back short meanwhile */
	RELAY_CHECK(&p, staged(c) == 100, "%lld staged, not the 100 no replica has; see %s", staged(c), p.log);
	h_services("sentinel-kill");
	now = wait_new_master(old);
	assert_master_changed(&p, now);
	sleep_ms(1000); /* the new master has no replica yet */
	RELAY_CHECK(&p, staged(c) == 100, "%lld staged with no replica to acknowledge; see %s", staged(c), p.log);
	h_services("sentinel-revive");
	wait_drained(&p, c);
	stop_relay(&p);
	ck_assert_int_eq(missing_after_cut(c, now), 0);
	assert_all_on(c, now, "wait");
	PQfinish(c);
}
END_TEST

/* The control: without WAIT the same jobs are deleted from staged_jobs while
 * only the primary holds them, and the promoted replica never gets them. */
START_TEST(without_wait_the_cut_loses_jobs)
{
	PGconn *c = h_pg();
	struct relay_proc p;
	int old = master_port(), now;

	start_relay(&p, "sentinel-nowait", sentinel_url("redis-sentinel"), NULL);
	stage_across_a_cut(c, &p);
	wait_drained(&p, c);
	stop_relay(&p);
	h_services("sentinel-kill");
	now = wait_new_master(old);
	ck_assert_int_eq(missing_after_cut(c, now), 100);
	ck_assert_int_eq(h_missing(c), 100); /* and the 100 from before the cut are there */
	PQfinish(c);
}
END_TEST

/* The first sentinel listed names the replica (a stale or misconfigured one).
 * ROLE says slave, so its answer failed: it goes to the back and the next
 * sentinel, which knows the master, is asked. The relay starts and drains;
 * it used to ask the same sentinel again and exit 1. */
START_TEST(a_sentinel_naming_the_replica_does_not_stop_the_start)
{
	PGconn *c = h_pg();
	struct fake_sentinel f;
	struct relay_proc p;
	int next = 0;

	ck_assert_int_eq(fake_sentinel_start(&f, h_port("sentinel-r2")), 0);
	start_relay(&p, "sentinel-stale-start", url_with_fake(f.port), NULL);
	produce(c, &next, 500);
	wait_drained(&p, c);
	stop_relay(&p);
	ck_assert_int_ge(fake_sentinel_asked(&f), 1);
	fake_sentinel_stop(&f);
	assert_all_on(c, h_port("sentinel-r1"), "replica named at start");
	PQfinish(c);
}
END_TEST

/* The first sentinel listed answers first at start-up, rightly, and then
 * misses the failover: it still names the old primary, now a replica. After
 * the failover the relay asks it first (it answered last), finds a replica,
 * and must go on to the sentinels that saw the promotion. */
START_TEST(a_sentinel_that_missed_the_failover_does_not_stop_the_drain)
{
	PGconn *c = h_pg();
	struct fake_sentinel f;
	struct relay_proc p;
	redisContext *s;
	int next = 0, old = master_port(), now, asked;

	ck_assert_int_eq(fake_sentinel_start(&f, old), 0);
	start_relay(&p, "sentinel-stale-failover", url_with_fake(f.port),
		    (const char *const[]){ "--redis-wait-replicas", "1", "--redis-wait-timeout", "200ms", NULL });
	produce(c, &next, 1000);
	wait_drained(&p, c);
	asked = fake_sentinel_asked(&f);
	s = open_port(h_port("sentinel1"));
	freeReplyObject(h_cmd(s, "SENTINEL FAILOVER %s", MASTER));
	redisFree(s);
	produce(c, &next, 3000);
	now = wait_new_master(old);
	produce(c, &next, 2000);
	wait_drained(&p, c);
	assert_master_changed(&p, now);
	stop_relay(&p);
	ck_assert_int_gt(fake_sentinel_asked(&f), asked); /* it was asked, and not believed */
	fake_sentinel_stop(&f);
	assert_all_on(c, now, "stale sentinel after a failover");
	PQfinish(c);
}
END_TEST

/* rediss-sentinel://: TLS to the sentinels and to the master they name, and a
 * requested failover followed over TLS with WAIT: every job once on the new
 * master, which /metrics names with tls="true". */
START_TEST(follows_a_failover_over_tls)
{
	PGconn *c = h_pg();
	struct relay_proc p;
	char ca[600], want[128], info[256], *body;
	int next = 0, st = 0, r2 = h_port("sentinel-r2");
	const char *argv[] = { "--pg-url",
			       h_env("TEST_PG_URL"),
			       "--redis-url",
			       sentinel_url("rediss-sentinel"),
			       "--redis-tls-ca-file",
			       ca,
			       "--redis-wait-replicas",
			       "1",
			       "--redis-wait-timeout",
			       "200ms",
			       "--batch-size",
			       "50",
			       "--poll-interval",
			       "20ms",
			       "--http-addr",
			       "127.0.0.1:0",
			       NULL };

	snprintf(ca, sizeof(ca), "%s/tls/ca.crt", h_env("TEST_DIR"));
	h_relay_start_bare(&p, "sentinel-tls", argv);
	RELAY_CHECK(&p, h_log_wait(&p, "msg=connected ", WAIT_MS), "relay did not connect; see %s", p.log);
	RELAY_CHECK(&p, logs_count_both(p.log, "msg=connected ", "master_name=" MASTER " tls=true") == 1,
		    "the connected line lacks master_name= and tls=true; see %s", p.log);
	produce(c, &next, 1000);
	free(h_tls_cli("sentinel1", "SENTINEL FAILOVER " MASTER));
	produce(c, &next, 3000);
	snprintf(want, sizeof(want), "to=127.0.0.1:%d/0", r2);
	RELAY_CHECK(&p, h_log_wait(&p, "msg=\"redis master changed\"", WAIT_MS), "no master change in %s", p.log);
	RELAY_CHECK(&p, h_log_contains(p.log, want), "the master change does not say %s; see %s", want, p.log);
	wait_drained(&p, c);
	snprintf(info, sizeof(info),
		 "stagedrain_redis_master_info{address=\"127.0.0.1:%d/0\",master_name=\"" MASTER "\",tls=\"true\"} 1",
		 r2);
	body = h_http_get(h_http_port(&p), "/metrics", &st);
	RELAY_CHECK(&p, st == 200 && strstr(body, info), "/metrics lacks %s", info);
	free(body);
	stop_relay(&p);
	/* With WAIT nothing is lost, and a batch the old master took in the
	 * failover's window was not taken as pushed: none twice either. */
	ck_assert_int_eq(h_tls_cli_int("sentinel-r2", "LLEN queue:default"), next);
	ck_assert_int_eq(staged(c), 0);
	PQfinish(c);
}
END_TEST

/* One tcase of tests under fixture up (90 s each): its own suite, so the
 * parallel runs (tests/integration.sh) take the failovers side by side. */
static Suite *sentinel_suite_of(const char *name, void (*up)(void), const TTest *const *tests)
{
	Suite *s = suite_create(name);
	TCase *tc = tcase_create(name);

	tcase_add_checked_fixture(tc, up, sentinel_down);
	tcase_set_timeout(tc, 90);
	for (; *tests; tests++)
		tcase_add_test(tc, *tests);
	suite_add_tcase(s, tc);
	return s;
}

Suite *sentinel_suite(void)
{
	return sentinel_suite_of("sentinel", sentinel_up,
				 (const TTest *const[]){ follows_a_requested_failover,
							 follows_the_promotion_after_the_primary_dies, NULL });
}

Suite *sentinel_wait_suite(void)
{
	return sentinel_suite_of("sentinel_wait", sentinel_up,
				 (const TTest *const[]){ wait_keeps_jobs_staged_until_a_replica_has_them,
							 without_wait_the_cut_loses_jobs, NULL });
}

Suite *sentinel_start_suite(void)
{
	return sentinel_suite_of("sentinel_start", sentinel_up,
				 (const TTest *const[]){ a_sentinel_naming_the_replica_does_not_stop_the_start,
							 a_sentinel_that_missed_the_failover_does_not_stop_the_drain,
							 NULL });
}

Suite *sentinel_tls_suite(void)
{
	return sentinel_suite_of("sentinel_tls", sentinel_tls_up,
				 (const TTest *const[]){ follows_a_failover_over_tls, NULL });
}
