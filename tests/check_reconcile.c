/* The fence reconcile a new leader runs before it pushes: Redis failing in
 * the middle of it, and a fence key that stagedrain did not write. */
#include "fmacros.h"

#include <check.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "support/relay_keys.h"
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
	ck_assert_msg(h_wait_staged_empty(c, 20000), "staged jobs not drained within 20 s");
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

/* Takes from the default user (the relay's and the test's) the right to read
 * key, or only to write it: each command that reads it then fails (NOPERM),
 * as a Redis failing mid-reconcile would, while the test can still read the
 * queue and what a Sidekiq probe reads. The other key of the two, and every
 * key it begins (the epoch's: its token key), stay allowed. */
static void deny(redisContext *r, const char *key, bool write_only)
{
	const char *other = strcmp(key, h_fence_key()) == 0 ? h_epoch_key() : h_fence_key();

	freeReplyObject(h_cmd(r, "ACL SETUSER default resetkeys ~queue:* ~queues ~schedule ~processes ~%s*", other));
	if (write_only)
		freeReplyObject(h_cmd(r, "ACL SETUSER default %%W~%s", key));
}

/* Undoes deny: every key readable and writable again. */
static void allow_all(redisContext *r)
{
	freeReplyObject(h_cmd(r, "ACL SETUSER default allkeys"));
}

static void setup(void)
{
	redisContext *r = h_redis();

	allow_all(r); /* a failed test may have left its denial */
	redisFree(r);
	h_reset();
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
 * Redis refuses the new leader's epoch, then its read of the fence (the
 * relay's user may not read each key for a while). The relay retries each
 * with back-off and pushes nothing meanwhile, not even jobs staged since; once
 * it can read the fence it deletes the batch the fence names instead of
 * pushing it again.
 */
START_TEST(redis_failing_during_the_reconcile_is_retried_before_any_push)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;
	bool retried;

	crash_after_push(c, r, 10);
	h_snapshot_expected(c);
	deny(r, h_epoch_key(), false);

	h_relay_start(&p, "next", relay_args);
	retried = h_log_wait_count(&p, "could not take a new epoch in redis; will retry", 2, 10000);
	assert_untouched(c, r, 10, 10, p.log);
	ck_assert_msg(retried, "no retried epoch failure; see %s", p.log);
	ck_assert_msg(h_log_contains(p.log, "NOPERM"), "the failure's cause is not logged; see %s", p.log);
	deny(r, h_fence_key(), true);

	/* Its epoch taken, it must still wait for the fence, with new jobs staged. */
	ck_assert(h_log_wait(&p, "msg=leading", 10000));
	h_stage_expected(c, "default", 11, 20);
	retried = h_log_wait_count(&p, "could not read the fence from redis; will retry", 2, 10000);
	assert_untouched(c, r, 10, 30, p.log);
	ck_assert_msg(retried, "no retried fence read failure; see %s", p.log);
	allow_all(r);

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

/* True if Redis holds an epoch as the relay writes it: the count n in the
 * epoch key, 32 lower-case hex digits in its token key (keys.h). */
static bool is_epoch(redisContext *r, long long n)
{
	char count[64], token[64], key[256];
	const char *p;

	redis_text(r, h_epoch_key(), count, sizeof(count));
	redis_text(r, relay_key(key, sizeof(key), "", KEYS_LOCK_DEFAULT, KEYS_EPOCH_TOKEN), token, sizeof(token));
	if (strtoll(count, NULL, 10) != n || strlen(token) != 32)
		return false;
	for (p = token; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

/*
 * Stages n jobs (first, first+1, ...) and runs a relay with --once over one of
 * its own keys left in a state it did not write: it must drain every row and
 * exit 0, having said once what it found and what it did (a line holding
 * both texts).
 */
static void drain_past_bad_key(PGconn *c, const char *name, int first, const char *what, const char *found)
{
	struct relay_proc p;
	int st;

	h_stage_expected(c, "default", first, 10);
	h_relay_start(&p, name, (const char *const[]){ "--once", "--batch-size", "200", NULL });
	st = h_relay_wait(&p, 20000);
	if (st < 0) {
		h_relay_kill(&p, SIGKILL);
		(void)h_relay_wait(&p, 5000);
	}
	ck_assert_msg(st == 0, "%s: the relay did not drain and exit (status %d); see %s", name, st, p.log);
	ck_assert_msg(h_log_count(p.log, what) == 1, "%s: not one line \"%s\"; see %s", name, what, p.log);
	ck_assert_msg(h_log_count(p.log, found) == 1, "%s: not one line naming %s; see %s", name, found, p.log);
	ck_assert_msg(!h_log_contains(p.log, "level=warn msg=\"could not"), "%s: a retried failure; see %s", name,
		      p.log);
}

/*
 * The epoch key holding what the relay cannot count on: text, an epoch at
 * INT64_MAX (INCR would overflow), a list. The relay owns the key: it replaces
 * it with a new epoch of its own and goes on, pushing each job once.
 */
START_TEST(an_epoch_key_in_a_bad_state_is_replaced)
{
	static const struct {
		const char *name, *cmd, *found;
	} bad[] = {
		{ "epoch-text", "SET %s not-an-epoch", "found=\"a string that is not an epoch\"" },
		{ "epoch-int64-max", "SET %s 9223372036854775807", "found=\"an epoch too large to count on" },
		{ "epoch-list", "RPUSH %s not-a-string", "found=\"a list\"" },
	};
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	char epoch[128];

	h_snapshot_expected(c);
	for (int i = 0; i < 3; i++) {
		freeReplyObject(h_cmd(r, "DEL %s", h_epoch_key()));
		freeReplyObject(h_cmd(r, bad[i].cmd, h_epoch_key()));
		drain_past_bad_key(c, bad[i].name, 1 + 10 * i, "replaced the relay's epoch key", bad[i].found);
		redis_text(r, h_epoch_key(), epoch, sizeof(epoch));
		ck_assert_msg(is_epoch(r, 1), "%s: the epoch key holds \"%s\"", bad[i].name, epoch);
	}
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	h_assert_each_once(c, r, queues, "queue:default", 30);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/*
 * The fence key of a type the relay never writes (a list, a hash): it cannot
 * name a batch, so the relay treats it as no fence (as after Redis lost its
 * data), deletes it, says so once, and goes on; its next batch writes a fence.
 */
START_TEST(a_fence_key_of_the_wrong_type_is_replaced)
{
	static const struct {
		const char *name, *cmd, *found;
	} bad[] = {
		{ "fence-list", "RPUSH %s not-a-fence", "found=\"a list\"" },
		{ "fence-hash", "HSET %s epoch 1", "found=\"a hash\"" },
	};
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	char fence[4096];

	h_snapshot_expected(c);
	for (int i = 0; i < 2; i++) {
		freeReplyObject(h_cmd(r, "DEL %s", h_fence_key()));
		freeReplyObject(h_cmd(r, bad[i].cmd, h_fence_key()));
		drain_past_bad_key(c, bad[i].name, 1 + 10 * i, "deleted the fence key", bad[i].found);
		redis_text(r, h_fence_key(), fence, sizeof(fence));
		ck_assert_msg(strncmp(fence, "epoch=", 6) == 0, "%s: the fence key holds \"%s\"", bad[i].name, fence);
	}
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	h_assert_each_once(c, r, queues, "queue:default", 20);
	PQfinish(c);
	redisFree(r);
}
END_TEST

Suite *reconcile_suite(void)
{
	Suite *s = suite_create("reconcile");
	TCase *tc = tcase_create("fence");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, redis_failing_during_the_reconcile_is_retried_before_any_push);
	tcase_add_test(tc, a_fence_that_is_not_ours_is_ignored);
	tcase_add_test(tc, an_epoch_key_in_a_bad_state_is_replaced);
	tcase_add_test(tc, a_fence_key_of_the_wrong_type_is_replaced);
	suite_add_tcase(s, tc);
	return s;
}
