/* The fence reconcile a new leader runs before it pushes: Redis failing in
 * the middle of it, and a fence key that stagedrain did not write. */
#include "fmacros.h"

#include <check.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "suites.h"

/* The relay's sessions (the watcher's have another name). */
#define RELAY_SESSIONS "FROM pg_stat_activity WHERE application_name = 'stagedrain'"

static const char *const queues[] = { "queue:default", NULL };
static const char *const relay_args[] = { "--batch-size", "200", "--poll-interval", "20ms", NULL };

static void wait_llen(redisContext *r, long long n)
{
	long long t0 = mono_ms();

	while (h_cmd_int(r, "LLEN queue:default") < n) {
		ck_assert_msg(mono_ms() - t0 < 10000, "%lld jobs not in redis within 10 s", n);
		sleep_ms(5);
	}
}

static void wait_drained(PGconn *c)
{
	long long t0 = mono_ms();

	while (h_sql(c, "SELECT count(*) FROM staged_jobs") > 0) {
		ck_assert_msg(mono_ms() - t0 < 20000, "staged jobs not drained within 20 s");
		sleep_ms(20);
	}
}

/* Copies the value of the one row the query must return (a text) into out. */
static void one_row_text(PGconn *c, const char *sql, char *out, size_t len)
{
	PGresult *res = PQexec(c, sql);

	ck_assert_msg(PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1, "%s: %s", sql, PQerrorMessage(c));
	snprintf(out, len, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
}

/* A Redis string value, copied into out; the key must exist. */
static void redis_text(redisContext *r, const char *key, char *out, size_t len)
{
	redisReply *rep = h_cmd(r, "GET %s", key);

	ck_assert_msg(rep->type == REDIS_REPLY_STRING, "%s is not set", key);
	snprintf(out, len, "%s", rep->str);
	freeReplyObject(rep);
}

/* Replaces a key with a list: every GET or INCR of it fails with WRONGTYPE,
 * while the batch script's SET of it (as of the fence) still succeeds. */
static void make_unreadable(redisContext *r, const char *key)
{
	freeReplyObject(h_cmd(r, "DEL %s", key));
	ck_assert_int_eq(h_cmd_int(r, "RPUSH %s not-a-string", key), 1);
}

static void put_back(redisContext *r, const char *key, const char *value)
{
	freeReplyObject(h_cmd(r, "DEL %s", key));
	freeReplyObject(h_cmd(r, "SET %s %s", key, value));
}

/*
 * Leaves what a leader that died between its push and its delete leaves: n
 * jobs in Redis, the fence naming them, their rows still staged. A row lock
 * holds its delete until it is killed, and its session is ended with it (a
 * dead host takes its session along).
 */
static void crash_after_push(PGconn *c, redisContext *r, int n)
{
	PGconn *locker = h_pg();
	struct relay_proc p;
	long long t0;

	h_stage(c, "default", 1, n);
	h_sql(locker, "BEGIN");
	h_sql(locker, "SELECT 1 FROM staged_jobs WHERE id = 1 FOR UPDATE");
	h_relay_start(&p, "crashed", relay_args);
	wait_llen(r, n);
	t0 = mono_ms();
	while (h_sql(c, "SELECT count(*) " RELAY_SESSIONS " AND wait_event_type = 'Lock'") == 0) {
		ck_assert_msg(mono_ms() - t0 < 10000, "the relay's delete never waited on the row lock");
		sleep_ms(10);
	}
	h_relay_kill(&p, SIGKILL);
	ck_assert_int_eq(h_relay_wait(&p, 5000), 128 + SIGKILL);
	h_sql(c, "SELECT count(pg_terminate_backend(pid)) " RELAY_SESSIONS);
	while (h_sql(c, "SELECT count(*) " RELAY_SESSIONS) > 0)
		sleep_ms(10);
	h_sql(locker, "ROLLBACK");
	PQfinish(locker);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), n);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), n);
}

/* Nothing pushed, nothing deleted: Redis still holds only the crashed
 * leader's batch and every row is still staged. */
static void assert_untouched(PGconn *c, redisContext *r, int pushed, int staged, const char *log)
{
	ck_assert_msg(h_cmd_int(r, "LLEN queue:default") == pushed,
		      "the new leader pushed before its fence was settled; see %s", log);
	ck_assert_msg(h_sql(c, "SELECT count(*) FROM staged_jobs") == staged,
		      "the new leader deleted rows before its fence was settled; see %s", log);
}

/*
 * Redis refuses the new leader's INCR of the epoch, then its GET of the fence
 * (each key briefly holds a list). The relay retries each with back-off and
 * pushes nothing meanwhile, not even jobs staged since; once it can read the
 * fence it deletes the batch the fence names instead of pushing it again.
 */
START_TEST(redis_failing_during_the_reconcile_is_retried_before_any_push)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;
	char fence[4096], epoch[32];
	bool retried;

	crash_after_push(c, r, 10);
	h_snapshot_expected(c);
	redis_text(r, h_fence_key(), fence, sizeof(fence));
	redis_text(r, h_epoch_key(), epoch, sizeof(epoch));
	make_unreadable(r, h_epoch_key());
	make_unreadable(r, h_fence_key());

	h_relay_start(&p, "next", relay_args);
	retried = h_log_wait_count(&p, "INCR failed", 2, 10000);
	assert_untouched(c, r, 10, 10, p.log);
	ck_assert_msg(retried, "no retried INCR failure; see %s", p.log);
	put_back(r, h_epoch_key(), epoch);

	/* Its epoch taken, it must still wait for the fence, with new jobs staged. */
	ck_assert(h_log_wait(&p, "msg=leading", 10000));
	h_stage_expected(c, "default", 11, 20);
	retried = h_log_wait_count(&p, "GET failed", 2, 10000);
	assert_untouched(c, r, 10, 30, p.log);
	ck_assert_msg(retried, "no retried GET failure; see %s", p.log);
	ck_assert_int_ge(h_log_count(p.log, "could not take a new epoch in redis; will retry"), 2);
	ck_assert_int_ge(h_log_count(p.log, "could not read the fence from redis; will retry"), 2);
	put_back(r, h_fence_key(), fence);

	ck_assert(h_log_wait(&p, "not pushing them again", 10000));
	wait_drained(c);
	h_assert_each_once(c, r, queues, "queue:default", 30);
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 5000), 0);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/*
 * Starts a relay that finds text in the fence key; it must say it ignores
 * it, delete nothing the text names, and drain every staged row.
 */
static void drain_past_fence(redisContext *r, const char *name, const char *text)
{
	struct relay_proc p;
	int st;

	freeReplyObject(h_cmd(r, "SET %s %s", h_fence_key(), text));
	h_relay_start(&p, name, (const char *const[]){ "--once", "--batch-size", "200", NULL });
	st = h_relay_wait(&p, 20000);
	if (st < 0) {
		h_relay_kill(&p, SIGKILL);
		(void)h_relay_wait(&p, 5000);
	}
	ck_assert_msg(st == 0, "with fence \"%s\" the relay did not drain and exit (status %d); see %s", text, st,
		      p.log);
	ck_assert_msg(!h_log_contains(p.log, "not pushing them again"),
		      "fence \"%s\" made the relay delete staged rows it never pushed; see %s", text, p.log);
	ck_assert_msg(h_log_contains(p.log, "ignoring a fence that is not stagedrain's"),
		      "fence \"%s\" was not reported as foreign; see %s", text, p.log);
	ck_assert(!h_log_contains(p.log, "level=warn msg=\"could not"));
}

/*
 * A fence key holding text stagedrain did not write: garbage, a fence with a
 * garbage epoch naming a staged row, and one that names two staged rows before
 * it turns into garbage. None may delete a row that was never pushed, and
 * none may stall the drain.
 */
START_TEST(a_fence_that_is_not_ours_is_ignored)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	char named[128], text[512];

	h_snapshot_expected(c);
	h_stage_expected(c, "default", 1, 10);
	drain_past_fence(r, "garbage", "epoch=abc");

	h_stage_expected(c, "default", 11, 10);
	one_row_text(c, "SELECT id || ':' || jid FROM staged_jobs ORDER BY id OFFSET 2 LIMIT 1", named, sizeof(named));
	snprintf(text, sizeof(text), "epoch=abc jobs=%s", named);
	drain_past_fence(r, "bad-epoch", text);

	h_stage_expected(c, "default", 21, 10);
	one_row_text(c,
		     "SELECT string_agg(id || ':' || jid, ',' ORDER BY id) FROM"
		     " (SELECT id, jid FROM staged_jobs ORDER BY id LIMIT 2) x",
		     named, sizeof(named));
	snprintf(text, sizeof(text), "epoch=1 jobs=%s,junk", named);
	drain_past_fence(r, "bad-tail", text);

	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 0);
	h_assert_each_once(c, r, queues, "queue:default", 30);
	PQfinish(c);
	redisFree(r);
}
END_TEST

Suite *reconcile_suite(void)
{
	Suite *s = suite_create("reconcile");
	TCase *tc = tcase_create("fence");

	tcase_add_checked_fixture(tc, h_reset, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, redis_failing_during_the_reconcile_is_retried_before_any_push);
	tcase_add_test(tc, a_fence_that_is_not_ours_is_ignored);
	suite_add_tcase(s, tc);
	return s;
}
