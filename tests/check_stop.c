/* A stop signal during a batch that cannot finish quickly: the relay exits
 * within the bound, and the batch is either still staged or named by the
 * fence, so a fresh relay delivers every job exactly once. */
#include "fmacros.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suites.h"

/* Many large rows: one very large batch (about 20 MB of args). */
#define ROWS 20000
#define ROW_BYTES 1000
/* The default --stop-timeout (5 s) plus the second an abandoned statement gets
 * to end, plus a margin for a slow (sanitizer) build. */
#define EXIT_BOUND_MS 8000

static const char *const queues[] = { "queue:default", NULL };

/* Stages ROWS large jobs and records them in `expected` (h_snapshot_expected). */
static void stage_large(PGconn *c)
{
	h_sql(c,
	      "WITH s AS (INSERT INTO staged_jobs (queue, job_class, args)"
	      " SELECT 'default', 'HardWorker', jsonb_build_array(i, repeat('x', %d))"
	      " FROM generate_series(1, %d) i ORDER BY i"
	      " RETURNING id, jid, queue, job_class, args)"
	      " INSERT INTO expected SELECT * FROM s",
	      ROW_BYTES, ROWS);
}

/* True while Redis holds a paused client's command: the relay's push. */
static bool push_held(redisContext *r)
{
	redisReply *info = h_cmd(r, "INFO clients");
	bool held = strstr(info->str, "blocked_clients:1") != NULL;

	freeReplyObject(info);
	return held;
}

/* Sends SIGTERM and returns how long the relay took to exit (-1: it did not
 * within EXIT_BOUND_MS; it is then killed). Its exit status must be 0. */
static long long stop_and_time(struct relay_proc *p)
{
	long long t0 = mono_ms();
	int st;

	h_relay_kill(p, SIGTERM);
	st = h_relay_wait(p, EXIT_BOUND_MS);
	if (st < 0) {
		h_relay_kill(p, SIGKILL);
		(void)h_relay_wait(p, 5000);
		return -1;
	}
	ck_assert_msg(st == 0, "the relay exited %d after SIGTERM; see %s", st, p->log);
	return mono_ms() - t0;
}

/* A fresh relay relays what is left and deletes what the fence names: each
 * job is in Redis exactly once and nothing stays staged. */
static void assert_fresh_relay_delivers_each_once(PGconn *c, redisContext *r)
{
	static const char *const once[] = { "--once", "--batch-size", "5000", NULL };

	ck_assert_int_eq(h_relay_run("fresh", once), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	h_assert_each_once(c, r, queues, "queue:default", ROWS);
}

/*
 * Redis holds the push (CLIENT PAUSE WRITE: the script is read but not run)
 * and --redis-timeout is long: the relay must not wait for it after SIGTERM.
 * It closes the socket, so the held script never runs (a paused client that
 * is gone runs nothing), and the rows stay staged.
 */
START_TEST(a_stop_while_redis_holds_the_push_exits_within_the_bound)
{
	static const char *const args[] = { "--batch-size", "20000", "--redis-timeout", "30s", "--log-level",
					    "debug",        NULL };
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;
	long long took;

	h_snapshot_expected(c);
	h_relay_start(&p, "held_push", args);
	RELAY_CHECK(&p, h_log_wait(&p, "leading", 10000), "the relay did not lead; see %s", p.log);
	freeReplyObject(h_cmd(r, "CLIENT PAUSE 30000 WRITE"));
	stage_large(c);
	for (long long t0 = mono_ms(); !push_held(r);) {
		RELAY_CHECK(&p, mono_ms() - t0 < 20000, "the relay's push never reached redis; see %s", p.log);
		sleep_ms(20);
	}
	took = stop_and_time(&p);
	freeReplyObject(h_cmd(r, "CLIENT UNPAUSE"));
	ck_assert_msg(took >= 0, "the relay did not exit within %d ms of SIGTERM while redis held its push; see %s",
		      EXIT_BOUND_MS, p.log);
	ck_assert_msg(h_log_contains(p.log, "stopped on signal"), "no stop line in %s", p.log);
	ck_assert_msg(h_log_contains(p.log, "abandoned the batch"), "the log does not say the batch was abandoned: %s",
		      p.log);
	/* The held script never ran: every row is still staged, nothing pushed. */
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), ROWS);
	ck_assert_int_eq(h_cmd_int(r, "EXISTS queue:default"), 0);
	assert_fresh_relay_delivers_each_once(c, r);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/*
 * The push landed, but the delete waits on a row another session locked
 * (the relay's statements may take 4 x --redis-timeout, 20 s by default):
 * after SIGTERM the statement is cancelled and the transaction rolled back,
 * and the fence names the batch, so the next leader deletes its rows instead
 * of pushing them again.
 */
START_TEST(a_stop_while_postgres_holds_the_delete_exits_within_the_bound)
{
	static const char *const args[] = { "--batch-size", "20000", "--log-level", "debug", NULL };
	PGconn *c = h_pg(), *locker = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;
	long long took;

	h_snapshot_expected(c);
	stage_large(c);
	h_sql(locker, "BEGIN");
	h_sql(locker, "SELECT 1 FROM staged_jobs WHERE id = %d FOR UPDATE", ROWS);
	h_relay_start(&p, "held_delete", args);
	for (long long t0 = mono_ms();
	     h_cmd_int(r, "LLEN queue:default") < ROWS ||
	     h_sql(c, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'stagedrain'"
		      " AND wait_event_type = 'Lock'") == 0;) {
		RELAY_CHECK(&p, mono_ms() - t0 < 20000, "the relay's delete never waited on the lock; see %s", p.log);
		sleep_ms(20);
	}
	took = stop_and_time(&p);
	h_sql(locker, "ROLLBACK");
	ck_assert_msg(took >= 0,
		      "the relay did not exit within %d ms of SIGTERM while postgres held its delete; see %s",
		      EXIT_BOUND_MS, p.log);
	ck_assert_msg(h_log_contains(p.log, "stopped on signal"), "no stop line in %s", p.log);
	ck_assert_msg(h_log_contains(p.log, "abandoned the batch"), "the log does not say the batch was abandoned: %s",
		      p.log);
	/* Pushed and not deleted: the fence must name it. */
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), ROWS);
	ck_assert_int_eq(h_cmd_int(r, "EXISTS %s", h_fence_key()), 1);
	assert_fresh_relay_delivers_each_once(c, r);
	PQfinish(locker);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/*
 * The watcher's round waits on a table another session locked (its query
 * may take 10 s): the stop must not wait for it. The drain's fetch waits on
 * the same lock and is cancelled past --stop-timeout; the exit then waits
 * half a second for the watcher and leaves without it.
 */
START_TEST(a_stop_while_the_watcher_waits_on_postgres_exits_within_the_bound)
{
	static const char *const args[] = { "--http-addr", "127.0.0.1:0", "--watch-interval", "200ms", "--stop-timeout",
					    "1s",          NULL };
	PGconn *c = h_pg(), *locker = h_pg();
	struct relay_proc p;
	long long t0;
	int st;

	h_relay_start(&p, "held_watcher", args);
	RELAY_CHECK(&p, h_log_wait(&p, "leading", 10000), "the relay did not lead; see %s", p.log);
	h_sql(locker, "BEGIN");
	h_sql(locker, "LOCK TABLE staged_jobs IN ACCESS EXCLUSIVE MODE");
	for (t0 = mono_ms(); h_sql(c, "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
				      "'stagedrain-watch' AND wait_event_type = 'Lock'") == 0;) {
		RELAY_CHECK(&p, mono_ms() - t0 < 20000, "the watcher never waited on the lock; see %s", p.log);
		sleep_ms(20);
	}
	t0 = mono_ms();
	h_relay_kill(&p, SIGTERM);
	st = h_relay_wait(&p, 5000);
	h_sql(locker, "ROLLBACK");
	RELAY_CHECK(&p, st == 0, "the relay did not exit 0 within 5 s of SIGTERM (%d after %lld ms); see %s", st,
		    mono_ms() - t0, p.log);
	ck_assert_msg(h_log_contains(p.log, "exiting without it"), "the watcher was not left behind: %s", p.log);
	PQfinish(locker);
	PQfinish(c);
}
END_TEST

Suite *stop_suite(void)
{
	Suite *s = suite_create("stop");
	TCase *tc = tcase_create("stop");

	tcase_add_checked_fixture(tc, h_reset, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, a_stop_while_redis_holds_the_push_exits_within_the_bound);
	tcase_add_test(tc, a_stop_while_postgres_holds_the_delete_exits_within_the_bound);
	tcase_add_test(tc, a_stop_while_the_watcher_waits_on_postgres_exits_within_the_bound);
	suite_add_tcase(s, tc);
	return s;
}
