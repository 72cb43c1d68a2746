/* The cursor and its gaps against a real Postgres: late commits still arrive,
 * rolled-back ids never stall, a transaction a read splits still reaches its
 * queue in id order, drained rows are not walked again, a busy relay reads
 * again at once, and the optional trigger wakes an idle one. */
#include "fmacros.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "suites.h"

static const char *const queues[] = { "queue:default", NULL };

static void wait_llen(redisContext *r, long long n, int timeout_ms)
{
	long long t0 = mono_ms();

	while (h_cmd_int(r, "LLEN queue:default") < n) {
		ck_assert_msg(mono_ms() - t0 < timeout_ms, "%lld jobs not in redis within %d ms", n, timeout_ms);
		sleep_ms(5);
	}
}

/* The push lands before the delete commits: wait for the table, not Redis. */
static void wait_staged_empty(PGconn *c)
{
	ck_assert_msg(h_wait_staged_empty(c, 10000), "%lld rows still staged after 10 s",
		      h_sql(c, "SELECT count(*) FROM staged_jobs"));
}

/* A transaction that staged a job and has not committed yet. */
static PGconn *open_staging(const char *job_class)
{
	PGconn *c = h_pg();

	h_sql(c, "BEGIN");
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('%s', '[0]')", job_class);
	return c;
}

START_TEST(a_late_commit_below_the_cursor_arrives_promptly)
{
	static const char *const args[] = { "--batch-size", "50", "--poll-interval", "50ms", "--log-level",
					    "debug",        NULL };
	PGconn *c = h_pg(), *late = open_staging("Late"), *rolled = open_staging("Never");
	redisContext *r = h_redis();
	struct relay_proc p;
	json_t *jobs;
	long long t0;

	/* Ids 1 and 2 are taken but not committed; 3..202 commit first. */
	h_stage(c, "default", 1, 200);
	h_relay_start(&p, "relay", args);
	wait_llen(r, 200, 10000);
	h_sql(rolled, "ROLLBACK");
	h_stage(c, "default", 201, 100);
	wait_llen(r, 300, 10000);

	t0 = mono_ms();
	h_sql(late, "COMMIT");
	wait_llen(r, 301, 1000);
	ck_assert_int_lt(mono_ms() - t0, 1000);
	/* LPUSH: the head of the list is the job pushed last. */
	jobs = h_list_jobs(r, "queue:default");
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(jobs, 0), "class")), "Late");
	json_decref(jobs);
	wait_staged_empty(c);
	/* Both gaps retire once their transactions ended: nothing is tracked. */
	ck_assert(h_log_wait(&p, "gaps=0", 5000));
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 5000), 0);
	PQfinish(late);
	PQfinish(rolled);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* Waits until key holds n jobs, then checks that they were pushed with args
 * 1..n in that order (LPUSH: the head of the list is the job pushed last). */
static void assert_pushed_in_order(struct relay_proc *p, redisContext *r, const char *key, int n)
{
	long long t0 = mono_ms();
	char got[256] = "", want[256] = "";
	json_t *jobs;

	while (h_cmd_int(r, "LLEN %s", key) < n) {
		RELAY_CHECK(p, mono_ms() - t0 < 10000, "%s: not %d jobs within 10 s; see %s", key, n, p->log);
		sleep_ms(5);
	}
	jobs = h_list_jobs(r, key);
	ck_assert_int_eq(json_array_size(jobs), n);
	for (int i = 0; i < n; i++) {
		json_t *j = json_array_get(jobs, (size_t)(n - 1 - i));
		size_t at = strlen(got);
		snprintf(got + at, sizeof(got) - at, " %lld",
			 (long long)json_integer_value(json_array_get(json_object_get(j, "args"), 0)));
		at = strlen(want);
		snprintf(want + at, sizeof(want) - at, " %d", i + 1);
	}
	json_decref(jobs);
	RELAY_CHECK(p, strcmp(got, want) == 0, "%s: pushed in the order%s, not%s; see %s", key, got, want, p->log);
}

/* True once key holds n jobs, within 10 s. */
static bool wait_key(redisContext *r, const char *key, long long n)
{
	long long t0 = mono_ms();

	while (h_cmd_int(r, "LLEN %s", key) < n) {
		if (mono_ms() - t0 > 10000)
			return false;
		sleep_ms(5);
	}
	return true;
}

/*
 * T stages its first jobs, a read passes their ids, T stages more and
 * commits: its first ids sit in a gap below the cursor, its later ones above
 * it. They become visible together and must reach the queue in id order.
 * At start-up the first read makes T's first ids an old gap at once; in the
 * steady state the gap T's first ids fall into (behind U's committed job)
 * turns old while T runs. Before the fix the later jobs came first: the old
 * gap was read on the timer, up to 500 ms after the rows above the cursor.
 */
static void split_transaction(bool steady)
{
	static const char *const args[] = { "--batch-size", "50", "--poll-interval", "20ms", "--log-level",
					    "debug",        NULL };
	PGconn *c = h_pg(), *t = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;

	if (steady) {
		h_relay_start(&p, "relay", args);
		h_stage(c, "default", 1, 5);
		RELAY_CHECK(&p, wait_key(r, "queue:default", 5), "the earlier jobs did not arrive; see %s", p.log);
	}
	h_sql(t, "BEGIN");
	h_stage(t, "q", 1, 3);
	if (!steady)
		h_relay_start(&p, "relay", args);
	/* Committed after T's first ids: once it is in Redis, a read has passed them. */
	h_stage(c, "other", 100, 1);
	RELAY_CHECK(&p, wait_key(r, "queue:other", 1), "U's job did not arrive; see %s", p.log);
	if (steady)
		sleep_ms(700); /* T's first ids are an old gap now (young for 200 ms) */
	h_stage(t, "q", 4, 3);
	h_sql(t, "COMMIT");
	assert_pushed_in_order(&p, r, "queue:q", 6);
	wait_staged_empty(c);
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 5000), 0);
	PQfinish(t);
	PQfinish(c);
	redisFree(r);
}

START_TEST(a_transaction_split_by_the_first_read_arrives_in_id_order)
{
	split_transaction(false);
}
END_TEST

START_TEST(a_transaction_split_by_a_read_in_the_steady_state_arrives_in_id_order)
{
	split_transaction(true);
}
END_TEST

/* One batch holding late rows from gaps, new rows and rows that cannot be
 * jobs, in both parts: the gap rows go by id, the new ones by range, the bad
 * ones to the dead table, and nothing else is touched. */
START_TEST(a_batch_of_late_new_and_dead_rows_deletes_exactly_what_it_read)
{
	static const char *const args[] = { "--batch-size", "50", "--poll-interval", "20ms", NULL };
	PGconn *c = h_pg(), *late = open_staging("Late"), *open_tx;
	redisContext *r = h_redis();
	struct relay_proc p;

	h_sql(late, "INSERT INTO staged_jobs (job_class, args) VALUES ('LateBad', '{}')");
	h_stage(c, "default", 1, 10); /* ids 3..12: ids 1 and 2 become a gap */
	h_relay_start(&p, "relay", args);
	wait_llen(r, 10, 10000);

	h_relay_kill(&p, SIGSTOP);
	h_sql(late, "COMMIT");
	h_stage(c, "default", 11, 20);
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('NewBad', '\"x\"')");
	h_stage(c, "default", 31, 20);
	/* An id in the middle of the new rows that is not committed yet: the range
	 * delete runs in the batch's snapshot, so it cannot take this row. */
	open_tx = open_staging("StillOpen");
	h_stage(c, "default", 51, 5);
	h_relay_kill(&p, SIGCONT);

	wait_llen(r, 10 + 1 + 20 + 20 + 5, 10000);
	wait_staged_empty(c);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 2);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE job_class IN ('LateBad', 'NewBad')"), 2);
	h_sql(open_tx, "COMMIT");
	wait_llen(r, 10 + 1 + 20 + 20 + 5 + 1, 10000);
	wait_staged_empty(c);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 10 + 1 + 20 + 20 + 5 + 1);
	ck_assert(!h_log_contains(p.log, "rows changed under the batch"));
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 5000), 0);
	PQfinish(open_tx);
	PQfinish(late);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/*
 * A gap holding more rows than one batch: a transaction takes ids 1..100 and
 * stays open while later rows commit and drain, so the 100 ids become one gap
 * below the cursor. Once it commits, every read of the gap is cut short by
 * --batch-size 10: the rest of the gap must stay tracked until all 100 rows
 * are read. Each arrives exactly once. The generous wait allows for old gaps
 * being re-read on a timer rather than on every batch.
 */
START_TEST(a_gap_larger_than_a_batch_is_read_to_its_end)
{
	static const char *const args[] = { "--batch-size", "10", "--poll-interval", "20ms", NULL };
	PGconn *c = h_pg(), *late = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;

	h_snapshot_expected(c);
	h_sql(late, "BEGIN");
	h_stage(late, "default", 1, 100);
	/* Recorded by the late transaction itself: the rows become expected as they commit. */
	h_sql(late, "INSERT INTO expected SELECT id, jid, queue, job_class, args FROM staged_jobs");
	h_relay_start(&p, "relay", args);
	h_stage_expected(c, "default", 101, 30);
	wait_llen(r, 30, 10000);
	wait_staged_empty(c);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM expected"), 30);

	h_sql(late, "COMMIT");
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM expected"), 130);
	wait_staged_empty(c);
	h_assert_each_once(c, r, queues, "queue:default", 130);
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 5000), 0);
	PQfinish(late);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* Index entries the relay's reads returned: a read that starts at the head of
 * the table walks every drained row a long transaction keeps from cleanup. */
static long long pkey_entries_read(PGconn *c)
{
	sleep_ms(1200); /* backends report their counts at most once a second */
	h_sql(c, "SELECT pg_stat_clear_snapshot()");
	return h_sql(c, "SELECT idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = 'staged_jobs_pkey'");
}

START_TEST(drained_rows_are_not_walked_again_under_a_long_transaction)
{
	enum { ROUNDS = 40, PER_ROUND = 250 };
	static const char *const args[] = { "--batch-size", "250", "--poll-interval", "20ms", NULL };
	PGconn *c = h_pg(), *old = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;
	long long before, walked;

	h_snapshot_expected(c); /* empty: each round records its jids as it stages them */
	/* A snapshot that pins the xmin horizon: no dead row can be cleaned up. */
	h_sql(old, "BEGIN ISOLATION LEVEL REPEATABLE READ");
	h_sql(old, "SELECT count(*) FROM staged_jobs");
	h_relay_start(&p, "relay", args);
	ck_assert(h_log_wait(&p, "leading", 10000));
	before = pkey_entries_read(c);
	for (int i = 0; i < ROUNDS; i++) {
		h_stage_expected(c, "default", i * PER_ROUND, PER_ROUND);
		wait_llen(r, (long long)(i + 1) * PER_ROUND, 10000);
	}
	walked = pkey_entries_read(c) - before;
	/* Reading from the head would return about ROUNDS^2 * PER_ROUND / 2 = 200,000
	 * entries; a cursor returns each row about once, plus what its reads meet
	 * of a round still being staged (an index returns entries before their
	 * visibility is checked): the polls', and the read a full batch's
	 * transaction makes for the next one (pipe.h). */
	ck_assert_msg(walked < 4 * ROUNDS * PER_ROUND, "the relay's reads returned %lld index entries for %d rows",
		      walked, ROUNDS * PER_ROUND);
	h_sql(old, "COMMIT");
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 5000), 0);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), ROUNDS * PER_ROUND);
	/* The count alone would pass with one job lost and another pushed twice. */
	wait_staged_empty(c);
	h_load_seen(c, r, queues);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM expected"), ROUNDS * PER_ROUND);
	ck_assert_int_eq(h_missing(c), 0);
	ck_assert_int_eq(h_duplicates(c), 0);
	PQfinish(old);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* Polling backs off only while reads find nothing: after a batch the relay
 * looks again within milliseconds, whatever --poll-interval says. */
START_TEST(a_busy_relay_reads_again_at_once)
{
	static const char *const args[] = { "--poll-interval", "60s", NULL };
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;

	h_relay_start(&p, "relay", args);
	ck_assert(h_log_wait(&p, "leading", 10000));
	h_stage(c, "default", 0, 1);
	wait_llen(r, 1, 5000);
	for (int i = 1; i < 6; i++) {
		long long t0;
		sleep_ms(20);
		t0 = mono_ms();
		h_stage(c, "default", i, 1);
		wait_llen(r, i + 1, 5000);
		ck_assert_int_lt(mono_ms() - t0, 1000);
	}
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 5000), 0);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* With sql/notify.sql installed, a commit wakes a relay that has been idle
 * long enough to wait seconds between reads. */
START_TEST(the_optional_notify_trigger_wakes_an_idle_relay)
{
	static const char *const args[] = { "--poll-interval", "60s", NULL };
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;
	char script[4096];
	FILE *f = fopen("sql/notify.sql", "r");
	size_t n;
	long long t0;

	ck_assert_ptr_nonnull(f);
	n = fread(script, 1, sizeof(script) - 1, f);
	fclose(f);
	script[n] = '\0';
	h_sql(c, "%s", script);
	h_relay_start(&p, "relay", args);
	ck_assert(h_log_wait(&p, "leading", 10000));
	sleep_ms(5000); /* empty reads: the relay now waits 4 s and more between them */
	t0 = mono_ms();
	h_stage(c, "default", 0, 1);
	wait_llen(r, 1, 10000);
	ck_assert_int_lt(mono_ms() - t0, 1000);
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 5000), 0);
	h_sql(c, "DROP TRIGGER staged_jobs_notify ON staged_jobs");
	PQfinish(c);
	redisFree(r);
}
END_TEST

START_TEST(a_sequence_that_caches_ids_is_refused)
{
	static const char *const once[] = { "--once", NULL };
	PGconn *c = h_pg();
	char log[600];

	h_sql(c, "ALTER SEQUENCE staged_jobs_id_seq CACHE 20");
	ck_assert_int_eq(h_relay_run("cached", once), 1);
	h_sql(c, "ALTER SEQUENCE staged_jobs_id_seq CACHE 1");
	snprintf(log, sizeof(log), "%s/cached.log", h_env("TEST_DIR"));
	ck_assert(h_log_contains(log, "has CACHE 20"));
	ck_assert_int_eq(h_relay_run("fine", once), 0);
	PQfinish(c);
}
END_TEST

Suite *cursor_suite(void)
{
	Suite *s = suite_create("cursor");
	TCase *tc = tcase_create("cursor"), *order;

	tcase_add_checked_fixture(tc, h_reset, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, a_late_commit_below_the_cursor_arrives_promptly);
	tcase_add_test(tc, a_batch_of_late_new_and_dead_rows_deletes_exactly_what_it_read);
	tcase_add_test(tc, a_gap_larger_than_a_batch_is_read_to_its_end);
	tcase_add_test(tc, drained_rows_are_not_walked_again_under_a_long_transaction);
	tcase_add_test(tc, a_busy_relay_reads_again_at_once);
	tcase_add_test(tc, the_optional_notify_trigger_wakes_an_idle_relay);
	tcase_add_test(tc, a_sequence_that_caches_ids_is_refused);
	suite_add_tcase(s, tc);
	/* One transaction's jobs in id order: CK_RUN_CASE=order runs these and release's. */
	order = tcase_create("order");
	tcase_add_checked_fixture(order, h_reset, NULL);
	tcase_set_timeout(order, 60);
	tcase_add_test(order, a_transaction_split_by_the_first_read_arrives_in_id_order);
	tcase_add_test(order, a_transaction_split_by_a_read_in_the_steady_state_arrives_in_id_order);
	suite_add_tcase(s, order);
	return s;
}
