/* Routes (--route) against real servers: rows split between two Redis by
 * queue and by their route column, a route column naming no route, a target
 * that stops answering while the other flows, and a leader killed after one
 * target acknowledged its part of a batch and before the other did. */
#include "fmacros.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suites.h"
#include "support/redis_server.h"

START_TEST(rows_go_to_the_target_their_queue_or_route_column_names)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct h_second b;
	char got[4096], want[4096], reason[300];

	h_reset();
	h_second_start(&b, "bq,bglob.*", "");
	h_stage(c, "default", 1, 5);
	h_stage(c, "bq", 100, 5);
	h_stage(c, "bglob.x", 200, 3);
	/* The route column beats the rules; "default" names the default target. */
	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args, route) VALUES"
		 " ('default', 'HardWorker', '[300]', 'b'), ('bq', 'HardWorker', '[301]', 'default'),"
		 " ('default', 'HardWorker', '[302]', 'nope'), ('bq', 'HardWorker', '[303]', '')");
	{
		const char *args[] = { "--once", "--route", b.route, NULL };
		ck_assert_int_eq(h_relay_run("routed-split", args), 0);
	}
	h_list_args(r, "queue:default", got, sizeof(got));
	ck_assert_str_eq(got, "1,2,3,4,5");
	h_list_args(r, "queue:bq", got, sizeof(got));
	ck_assert_str_eq(got, "301");
	h_list_args(b.r, "queue:bq", got, sizeof(got));
	h_series(100, 5, want, sizeof(want));
	strcat(want, ",303"); /* an empty route names none: the rules pick */
	ck_assert_str_eq(got, want);
	h_list_args(b.r, "queue:bglob.x", got, sizeof(got));
	ck_assert_str_eq(got, "200,201,202");
	h_list_args(b.r, "queue:default", got, sizeof(got));
	ck_assert_str_eq(got, "300");
	/* Sidekiq's own layout on each: the queues set names what each holds. */
	ck_assert_int_eq(h_cmd_int(b.r, "SISMEMBER queues bq"), 1);
	ck_assert_int_eq(h_cmd_int(r, "SISMEMBER queues bglob.x"), 0);
	/* Each target keeps its own fence and epoch. */
	ck_assert_int_eq(h_cmd_int(b.r, "EXISTS %s", h_epoch_key()), 0);
	ck_assert_int_eq(h_cmd_int(b.r, "EXISTS stagedrain:%lld:b:epoch", 0x73746764726eLL), 1);
	ck_assert_int_eq(h_cmd_int(r, "EXISTS %s", h_epoch_key()), 1);
	/* A route no rule defines: dead-lettered with the reason, the rest went on. */
	h_sql_text(c, "SELECT reason FROM staged_jobs_dead WHERE args::text = '[302]' AND route = 'nope'", reason,
		   sizeof(reason));
	ck_assert_msg(strstr(reason, "route \"nope\"") != NULL, "reason: %s", reason);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	h_second_stop(&b);
	redisFree(r);
	PQfinish(c);
}
END_TEST

/* Target b stops answering (SIGSTOP): its rows wait held, in order, while the
 * default target's keep flowing; once it answers again they arrive, each once. */
START_TEST(a_target_that_stops_answering_holds_its_rows_while_the_other_flows)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct h_second b;
	struct relay_proc p;
	char got[8192], want[8192], *page;
	double up_b, up_default, relayed, held;
	int port, status;

	h_reset();
	h_second_start(&b, "bq", " --sidekiq-version 7");
	{
		const char *args[] = { "--route",
				       b.route,
				       "--redis-timeout",
				       "300",
				       "--poll-interval",
				       "50",
				       "--sidekiq-version",
				       "7",
				       "--http-addr",
				       "127.0.0.1:0",
				       NULL };
		h_relay_start(&p, "routed-down", args);
	}
	port = h_http_port(&p);
	h_stage(c, "bq", 1, 10);
	RELAY_CHECK(&p, h_wait_len(b.r, "queue:bq", 10, 10000), "b never got its first jobs");
	kill(b.pid, SIGSTOP);
	for (int k = 0; k < 10; k++) {
		h_stage(c, "bq", 11 + k * 10, 10);
		h_stage(c, "default", 1 + k * 10, 10);
		sleep_ms(50);
	}
	RELAY_CHECK(&p, h_wait_len(r, "queue:default", 100, 20000), "the default target stopped with b");
	RELAY_CHECK(&p, h_sql(c, "SELECT count(*) FROM staged_jobs_held WHERE target = 'b'") > 0,
		    "b's rows were not held");
	/* Each target's state shows; the relay is ready while one target is. */
	/* The last batch's commit may trail its push by a moment. */
	for (long long t0 = mono_ms();; sleep_ms(50)) {
		page = h_http_get(port, "/metrics", &status);
		up_b = h_metric_sample(page, "stagedrain_target_up{target=\"b\"}");
		up_default = h_metric_sample(page, "stagedrain_target_up{target=\"default\"}");
		relayed = h_metric_sample(page, "stagedrain_target_jobs_relayed_total{target=\"default\"}");
		held = h_metric_sample(page, "stagedrain_target_jobs_held{target=\"b\"}");
		free(page);
		if ((up_b == 0 && up_default == 1 && relayed >= 100 && held > 0) || mono_ms() - t0 > 5000)
			break;
	}
	RELAY_CHECK(&p, up_b == 0 && up_default == 1 && relayed >= 100 && held > 0,
		    "target_up b %g default %g, default relayed %g, b held %g", up_b, up_default, relayed, held);
	free(h_http_get(port, "/readyz", &status));
	RELAY_CHECK(&p, status == 200, "not ready with the default target up: %d", status);
	kill(b.pid, SIGCONT);
	RELAY_CHECK(&p, h_wait_len(b.r, "queue:bq", 110, 30000), "b's held rows never arrived");
	sleep_ms(300);
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 10000), 0);
	h_list_args(b.r, "queue:bq", got, sizeof(got));
	h_series(1, 110, want, sizeof(want));
	ck_assert_str_eq(got, want);
	h_list_args(r, "queue:default", got, sizeof(got));
	h_series(1, 100, want, sizeof(want));
	ck_assert_str_eq(got, want);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	ck_assert(h_log_contains(p.log, "target=b"));
	h_second_stop(&b);
	redisFree(r);
	PQfinish(c);
}
END_TEST

/* Target b hangs (SIGSTOP: connections open, nothing answers) rather than
 * refusing: after the one push that waits out --redis-timeout, b's rows wait
 * held while its reconnection attempts, each as long, run off the relay's
 * loop, and the default target's jobs keep arriving within a second. */
START_TEST(a_target_that_hangs_holds_up_no_other)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct h_second b;
	struct relay_proc p;
	long long worst = 0;

	h_reset();
	h_second_start(&b, "bq", " --sidekiq-version 7");
	{
		const char *args[] = {
			"--route", b.route, "--redis-timeout", "3s", "--poll-interval", "20", "--sidekiq-version",
			"7",       NULL
		};
		h_relay_start(&p, "routed-hang", args);
	}
	RELAY_CHECK(&p, h_log_wait_count(&p, "msg=leading", 2, 10000), "the relay never led on both targets");
	kill(b.pid, SIGSTOP);
	h_stage(c, "bq", 1, 1);
	h_stage(c, "default", 1, 1);
	RELAY_CHECK(&p, h_wait_len(r, "queue:default", 1, 10000), "the default target stopped with b");
	for (long long t0 = mono_ms(); h_sql(c, "SELECT count(*) FROM staged_jobs_held WHERE target = 'b'") == 0;)
		RELAY_CHECK(&p, mono_ms() - t0 < 10000, "b's rows were not held");
	/* Eight seconds: b's back-off tries again every 0.1 to 3 s, each try 3 s long. */
	for (int k = 0; k < 16; k++) {
		long long t0 = mono_ms();
		h_stage(c, "bq", 10 + k, 1);
		h_stage(c, "default", 10 + k, 1);
		RELAY_CHECK(&p, h_wait_len(r, "queue:default", 2 + k, 10000), "the default target stopped with b");
		if (mono_ms() - t0 > worst)
			worst = mono_ms() - t0;
		sleep_ms(500);
	}
	kill(b.pid, SIGCONT);
	RELAY_CHECK(&p, h_wait_len(b.r, "queue:bq", 17, 20000), "b's held rows never arrived");
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 10000), 0);
	ck_assert_msg(worst < 1000, "a default job waited %lld ms while b hung", worst);
	h_second_stop(&b);
	redisFree(r);
	PQfinish(c);
}
END_TEST

/* One batch for both targets: the default one acknowledges its part, then
 * the relay dies waiting on b's (stopped). Whatever b then does with the push
 * it had, the next leader pushes nothing twice and loses nothing. */
START_TEST(a_leader_killed_after_one_target_acknowledged_pushes_nothing_twice)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct h_second b;
	struct relay_proc p;
	char got[8192], want[8192];

	h_reset();
	h_second_start(&b, "bq", " --sidekiq-version 7");
	{
		const char *args[] = { "--route", b.route, "--redis-timeout", "20000", "--sidekiq-version", "7", NULL };
		h_relay_start(&p, "routed-crash", args);
	}
	RELAY_CHECK(&p, h_log_wait(&p, "target=b", 10000) && h_log_wait_count(&p, "msg=leading", 2, 10000),
		    "the relay never led on both targets");
	kill(b.pid, SIGSTOP);
	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args)"
		 " SELECT CASE WHEN i %% 2 = 0 THEN 'default' ELSE 'bq' END, 'HardWorker', jsonb_build_array(i)"
		 " FROM generate_series(1, 40) i ORDER BY i");
	RELAY_CHECK(&p, h_wait_len(r, "queue:default", 20, 10000), "the default target never acknowledged");
	sleep_ms(100);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 40); /* not committed */
	h_relay_crash(&p, c);
	kill(b.pid, SIGCONT);
	{
		const char *args[] = { "--once", "--route", b.route, NULL };
		ck_assert_int_eq(h_relay_run("routed-crash-2", args), 0);
	}
	h_list_args(r, "queue:default", got, sizeof(got));
	ck_assert_str_eq(got, "2,4,6,8,10,12,14,16,18,20,22,24,26,28,30,32,34,36,38,40");
	h_list_args(b.r, "queue:bq", got, sizeof(got));
	want[0] = '\0';
	for (int i = 1, at = 0; i < 40; i += 2)
		at += snprintf(want + at, sizeof(want) - (size_t)at, "%s%d", i > 1 ? "," : "", i);
	ck_assert_str_eq(got, want);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	h_second_stop(&b);
	redisFree(r);
	PQfinish(c);
}
END_TEST

/* A glob route takes a queue of any length a row may have: a 305-byte bulk-
 * queue (and a 1024-byte one, the longest) reaches the route's Redis, not
 * the default one. */
START_TEST(a_glob_route_takes_long_queue_names)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct h_second b;
	char q305[306], q1024[1025], key[1100], got[64];

	h_reset();
	h_second_start(&b, "bulk-*", "");
	memset(q305, 'x', sizeof(q305) - 1);
	memcpy(q305, "bulk-", 5);
	q305[sizeof(q305) - 1] = '\0';
	memset(q1024, 'y', sizeof(q1024) - 1);
	memcpy(q1024, "bulk-", 5);
	q1024[sizeof(q1024) - 1] = '\0';
	h_stage(c, q305, 1, 2);
	h_stage(c, q1024, 10, 1);
	{
		const char *args[] = { "--once", "--route", b.route, NULL };
		ck_assert_int_eq(h_relay_run("routed-long-queue", args), 0);
	}
	snprintf(key, sizeof(key), "queue:%s", q305);
	h_list_args(b.r, key, got, sizeof(got));
	ck_assert_str_eq(got, "1,2");
	ck_assert_int_eq(h_cmd_int(r, "EXISTS %s", key), 0);
	snprintf(key, sizeof(key), "queue:%s", q1024);
	h_list_args(b.r, key, got, sizeof(got));
	ck_assert_str_eq(got, "10");
	ck_assert_int_eq(h_cmd_int(r, "EXISTS %s", key), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	h_second_stop(&b);
	redisFree(r);
	PQfinish(c);
}
END_TEST

/* The longest retry_in_ms of the log's lines with both a and b; -1: none. */
static int longest_retry(const char *log, const char *a, const char *b)
{
	char line[4096];
	int most = -1;
	FILE *f = fopen(log, "r");

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		const char *d = strstr(line, "retry_in_ms=");
		if (d && strstr(line, a) && strstr(line, b) && atoi(d + strlen("retry_in_ms=")) > most)
			most = atoi(d + strlen("retry_in_ms="));
	}
	fclose(f);
	return most;
}

/*
 * Target b's Redis (one of the test's own, AOF fsynced) is SIGKILLed and
 * stays down until b's back-off has grown to 5 s or more (its cap is 10 s),
 * b's rows held meanwhile. Started again, it gets every held job, in order,
 * within 1.5 s of answering: a returning target is probed often, whatever
 * back-off its failures reached.
 */
START_TEST(a_returning_target_gets_its_held_jobs_within_a_second_whatever_its_back_off)
{
	PGconn *c = h_pg();
	struct redis_server b;
	struct relay_proc p;
	redisContext *rb;
	char dir[600], cmd[700], err[REDIS_ERRLEN], route[300], got[4096], want[4096];
	long long back, took;
	int retry = -1;

	h_reset();
	snprintf(dir, sizeof(dir), "%s/routed-return-redis", h_env("TEST_DIR"));
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_msg(redis_server_start(&b, dir, err) == 0, "%s", err);
	snprintf(route, sizeof(route), "b bq --redis-url %s --sidekiq-version 7", b.url);
	{
		const char *args[] = { "--route", route, "--sidekiq-version", "7", NULL };
		h_relay_start(&p, "routed-return", args);
	}
	RELAY_CHECK(&p, h_log_wait_count(&p, "msg=leading", 2, 10000), "the relay never led on both targets");
	h_stage(c, "bq", 1, 1);
	rb = redis_open(b.port, 2000, err);
	RELAY_CHECK(&p, rb != NULL, "%s", err);
	RELAY_CHECK(&p, h_wait_len(rb, "queue:bq", 1, 10000), "b never got its first job");
	redisFree(rb);
	ck_assert_int_ge(redis_server_stop(&b, SIGKILL, 5000), 0);
	h_stage(c, "bq", 2, 5);
	for (long long t0 = mono_ms(); retry < 5000; sleep_ms(100)) {
		retry = longest_retry(p.log, "could not reconnect to redis", "target=b");
		RELAY_CHECK(&p, mono_ms() - t0 < 25000, "b's back-off never reached 5 s (%d ms); see %s", retry, p.log);
	}
	h_stage(c, "bq", 7, 5);
	for (long long t0 = mono_ms(); h_sql(c, "SELECT count(*) FROM staged_jobs_held WHERE target = 'b'") < 10;)
		RELAY_CHECK(&p, mono_ms() - t0 < 10000, "b's rows were not held");
	ck_assert_msg(redis_server_restart(&b, err) == 0, "%s", err);
	back = mono_ms(); /* it answers PING */
	rb = redis_open(b.port, 2000, err);
	RELAY_CHECK(&p, rb != NULL, "%s", err);
	RELAY_CHECK(&p, h_wait_len(rb, "queue:bq", 11, 15000), "b's held rows never arrived");
	took = mono_ms() - back;
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 10000), 0);
	ck_assert_msg(took < 1500, "b's held jobs arrived %lld ms after its redis answered (back-off %d ms); see %s",
		      took, retry, p.log);
	h_list_args(rb, "queue:bq", got, sizeof(got));
	h_series(1, 11, want, sizeof(want));
	ck_assert_str_eq(got, want);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held"), 0);
	redisFree(rb);
	(void)redis_server_stop(&b, SIGTERM, 5000);
	PQfinish(c);
}
END_TEST

Suite *routed_suite(void)
{
	Suite *s = suite_create("routed");
	TCase *tc = tcase_create("routed");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, rows_go_to_the_target_their_queue_or_route_column_names);
	tcase_add_test(tc, a_target_that_stops_answering_holds_its_rows_while_the_other_flows);
	tcase_add_test(tc, a_leader_killed_after_one_target_acknowledged_pushes_nothing_twice);
	tcase_add_test(tc, a_target_that_hangs_holds_up_no_other);
	tcase_add_test(tc, a_glob_route_takes_long_queue_names);
	tcase_add_test(tc, a_returning_target_gets_its_held_jobs_within_a_second_whatever_its_back_off);
	suite_add_tcase(s, tc);
	return s;
}
