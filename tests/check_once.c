/* --once tells the truth: it exits 0 only when nothing it could relay is
 * left, and otherwise 3 with one line saying what is left and why (held by a
 * cap, paused by the memory bound, kept by a key of the wrong type, another
 * leader); a late commit in an old gap is relayed before it says it is done. */
#include "fmacros.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "keys.h"
#include "suites.h"

/* The exit status of a --once run that left jobs behind (README, Settings). */
#define EXIT_LEFT 3
#define LEFT_LINE "--once stopped with jobs left"

static void setup(void)
{
	redisContext *r;

	h_reset();
	r = h_redis();
	freeReplyObject(h_cmd(r, "CONFIG SET maxmemory 0")); /* a failed memory test may have left it set */
	redisFree(r);
}

static const char *log_of(const char *name)
{
	static char path[512];

	snprintf(path, sizeof(path), "%s/%s.log", h_env("TEST_DIR"), name);
	return path;
}

/* The one line --once ends with says both things. */
static void assert_left_line(const char *name, const char *a, const char *b)
{
	const char *log = log_of(name);

	ck_assert_msg(h_log_count(log, LEFT_LINE) == 1, "not one \"%s\" line in %s", LEFT_LINE, log);
	ck_assert_msg(logs_count_both(log, LEFT_LINE, a) == 1, "the line does not say \"%s\"; see %s", a, log);
	ck_assert_msg(!b || logs_count_both(log, LEFT_LINE, b) == 1, "the line does not say \"%s\"; see %s", b, log);
}

static void assert_drained(PGconn *c)
{
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held"), 0);
}

/* A capped queue's held jobs can leave only as its consumer pops: --once
 * cannot wait for them, and says how many wait on which queue. */
START_TEST(jobs_held_by_a_cap_exit_3_naming_the_queue)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();

	h_stage(c, "default", 1, 30);
	h_stage(c, "other", 1, 3);
	ck_assert_int_eq(h_relay_run("capped", (const char *const[]){ "--once", "--queue-limit", "default=10", NULL }),
			 EXIT_LEFT);
	assert_left_line("capped", "20 jobs held by a cap on queue default", "jobs_held=20");
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 10);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:other"), 3);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held"), 20);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);

	/* Everything drainable: 0, both tables empty, and no such line. */
	ck_assert_int_eq(h_relay_run("uncapped", (const char *const[]){ "--once", NULL }), 0);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 30);
	assert_drained(c);
	ck_assert_int_eq(h_log_count(log_of("uncapped"), LEFT_LINE), 0);
	ck_assert(logs_count_both(log_of("uncapped"), "stopped", "jobs_relayed=20 ") == 1);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* While Redis is above --max-redis-memory nothing is pushed: --once says so
 * at once, with the rows still staged, instead of claiming it drained. */
START_TEST(a_pause_by_the_memory_bound_exits_3_with_the_rows_still_staged)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	redisReply *info;
	long long used;
	char *at;

	freeReplyObject(h_cmd(r, "CONFIG SET maxmemory-policy noeviction"));
	info = h_cmd(r, "INFO memory");
	at = strstr(info->str, "\nused_memory:");
	ck_assert(at != NULL);
	used = strtoll(at + strlen("\nused_memory:"), NULL, 10);
	freeReplyObject(info);
	/* Used is about half of maxmemory: far above 10 %, below Redis's own OOM. */
	freeReplyObject(h_cmd(r, "CONFIG SET maxmemory %lld", used * 2 + 1024 * 1024));
	h_stage(c, "default", 1, 10);
	ck_assert_int_eq(h_relay_run("paused", (const char *const[]){ "--once", "--max-redis-memory", "10", NULL }),
			 EXIT_LEFT);
	freeReplyObject(h_cmd(r, "CONFIG SET maxmemory 0"));
	assert_left_line("paused", "paused by --max-redis-memory", "10 rows still staged");
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 10);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* Rows whose Redis key has the wrong type stay staged (kept): --once names
 * the key, and the other queues' jobs arrive. */
START_TEST(rows_kept_by_a_key_of_the_wrong_type_exit_3_naming_the_key)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();

	freeReplyObject(h_cmd(r, "SET queue:b not-a-list"));
	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args) VALUES ('a', 'A', '[1]'), ('b', 'B', '[1]'),"
		 " ('a', 'A', '[2]'), ('b', 'B', '[2]')");
	ck_assert_int_eq(h_relay_run("wrongtype", (const char *const[]){ "--once", NULL }), EXIT_LEFT);
	assert_left_line("wrongtype", "2 rows kept staged by key queue:b", "rows_kept=2");
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:a"), 2);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs WHERE queue = 'b'"), 2);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 2);

	freeReplyObject(h_cmd(r, "DEL queue:b"));
	ck_assert_int_eq(h_relay_run("fixed", (const char *const[]){ "--once", NULL }), 0);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:b"), 2);
	assert_drained(c);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* Another session holds the leader lock: --once waits a bounded time, not
 * forever, and names the holder. */
START_TEST(another_leader_exits_3_within_the_bound_naming_it)
{
	PGconn *c = h_pg(), *holder = h_pg();
	struct relay_proc p;
	long long pid, t0;
	char want[64];
	int st;

	h_sql(holder, "SET application_name = 'the-other-relay'");
	pid = h_sql(holder, "SELECT pg_backend_pid()");
	h_sql(holder, "SELECT pg_advisory_lock(%lld)", KEYS_LOCK_DEFAULT);
	h_stage(c, "default", 1, 3);
	t0 = mono_ms();
	h_relay_start(&p, "standby", (const char *const[]){ "--once", "--poll-interval", "50ms", NULL });
	st = h_relay_wait(&p, 30000);
	RELAY_CHECK(&p, st >= 0, "--once still waits for the lock after 30 s; see %s", p.log);
	ck_assert_msg(st == EXIT_LEFT, "exit status %d, not %d; see %s", st, EXIT_LEFT, p.log);
	ck_assert_msg(mono_ms() - t0 < 20000, "--once took %lld ms to give up", mono_ms() - t0);
	snprintf(want, sizeof(want), "pid %lld", pid);
	assert_left_line("standby", "another session holds the leader lock", want);
	assert_left_line("standby", "the-other-relay", NULL);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 3);
	PQfinish(holder); /* the lock goes with the session */
	ck_assert_int_eq(h_relay_run("leader", (const char *const[]){ "--once", NULL }), 0);
	assert_drained(c);
	PQfinish(c);
}
END_TEST

/*
 * A job committed after the relay's first read passed its id sits in an old
 * gap, which later batches read only on a timer. --once must read it before
 * it says the table is drained. The relay's second delete waits behind a row
 * lock while the late transaction commits, so the read after it comes soon
 * after a read of every gap: a young read, which does not look there.
 */
START_TEST(a_late_commit_in_an_old_gap_is_relayed_before_exit)
{
	PGconn *c = h_pg(), *late = h_pg(), *lock = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;
	int st;

	h_sql(late, "BEGIN");
	h_stage(late, "default", 1000, 1); /* id 1, not committed yet */
	h_stage(c, "default", 1, 20);      /* ids 2..21 */
	h_sql(lock, "BEGIN");
	h_sql(lock, "SELECT id FROM staged_jobs WHERE id = 15 FOR UPDATE"); /* in the second batch */
	h_relay_start(&p, "late", (const char *const[]){ "--once", "--batch-size", "10", NULL });
	RELAY_CHECK(&p, h_wait_blocked(c, 20000), "the relay's delete never waited on the row lock; see %s", p.log);
	h_sql(late, "COMMIT");
	h_sql(lock, "COMMIT");
	st = h_relay_wait(&p, 30000);
	RELAY_CHECK(&p, st >= 0, "--once did not exit; see %s", p.log);
	ck_assert_msg(st == 0, "exit status %d; see %s", st, p.log);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 21);
	assert_drained(c);
	PQfinish(c);
	PQfinish(late);
	PQfinish(lock);
	redisFree(r);
}
END_TEST

/* A routed target that is down holds its rows: --once names the target and
 * the queue they wait on, apart from the jobs a cap holds, each cause with
 * its count. */
START_TEST(jobs_held_for_a_target_that_is_down_name_the_target_and_the_queue)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	const char *args[] = {
		"--once",        "--route",           "shard2 reports,bq --redis-url redis://127.0.0.1:1/0",
		"--queue-limit", "default=1,other=1", NULL
	};

	h_stage(c, "reports", 1, 1);
	h_stage(c, "bq", 1, 2);
	h_stage(c, "default", 1, 3);
	h_stage(c, "other", 1, 4);
	ck_assert_int_eq(h_relay_run("held-down", args), EXIT_LEFT);
	assert_left_line("held-down", "3 jobs held for target shard2 (down): ", "jobs_held=8");
	assert_left_line("held-down", "1 on queue reports", "2 on queue bq");
	assert_left_line("held-down", "5 jobs held by caps: 2 on queue default, 3 on queue other", NULL);
	assert_left_line("held-down", "jobs_held_for_targets=3", "jobs_held_by_caps=5");
	ck_assert_int_eq(h_log_count(log_of("held-down"), "on queue shard2"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held WHERE target = 'shard2'"), 3);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 1);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:other"), 1);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* The time of the first line of log that contains text (any line, for
 * NULL), in milliseconds of its day; -1 if none. */
static long long line_ms(const char *log, const char *text)
{
	char line[4096];
	int h, m, sec, ms;
	long long at = -1;
	FILE *f = fopen(log, "r");

	ck_assert_ptr_nonnull(f);
	while (at < 0 && fgets(line, sizeof(line), f))
		if ((!text || strstr(line, text)) && sscanf(line, "ts=%*10sT%d:%d:%d.%dZ", &h, &m, &sec, &ms) == 4)
			at = ((h * 60LL + m) * 60 + sec) * 1000 + ms;
	fclose(f);
	return at;
}

/* Pointed at a hot standby, --once retries (it will not lead there) for the
 * 10 s its docs and its last line say, not for as long as its back-off's
 * last wait happens to run past them. */
START_TEST(a_hot_standby_ends_once_after_the_10_s_it_says)
{
	char primary[256], standby[256];
	struct relay_proc p;
	long long took;
	int st;

	h_services("pgfo-start");
	snprintf(primary, sizeof(primary), "postgresql://postgres@127.0.0.1:%d/postgres", h_port_file("pgfo1.port"));
	snprintf(standby, sizeof(standby), "postgresql://postgres@127.0.0.1:%d/postgres", h_port_file("pgfo2.port"));
	ck_assert_int_eq(h_relay_run("standby-migrate", (const char *const[]){ "migrate", "--pg-url", primary, NULL }),
			 0);
	h_relay_start(&p, "standby-once", (const char *const[]){ "--once", "--pg-url", standby, NULL });
	st = h_relay_wait(&p, 40000);
	RELAY_CHECK(&p, st >= 0, "--once still runs after 40 s; see %s", p.log);
	h_services("pgfo-stop");
	ck_assert_msg(st == 1, "exit status %d, not 1; see %s", st, p.log);
	ck_assert(h_log_contains(p.log, "will not lead from a hot standby"));
	ck_assert(logs_count_both(p.log, "--once gave up", "waited_s=10 ") == 1);
	/* Its own clock, from its first line to its last: the machine's load
	 * before the first line (the start) is not the relay's to answer for. */
	took = line_ms(p.log, "--once gave up") - line_ms(p.log, NULL);
	ck_assert_msg(took >= 9500 && took <= 11000, "--once gave up %lld ms after its first line, not 10 s; see %s",
		      took, p.log);
}
END_TEST

Suite *once_suite(void)
{
	Suite *s = suite_create("once");
	TCase *tc = tcase_create("once");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, jobs_held_by_a_cap_exit_3_naming_the_queue);
	tcase_add_test(tc, a_pause_by_the_memory_bound_exits_3_with_the_rows_still_staged);
	tcase_add_test(tc, rows_kept_by_a_key_of_the_wrong_type_exit_3_naming_the_key);
	tcase_add_test(tc, another_leader_exits_3_within_the_bound_naming_it);
	tcase_add_test(tc, a_late_commit_in_an_old_gap_is_relayed_before_exit);
	tcase_add_test(tc, jobs_held_for_a_target_that_is_down_name_the_target_and_the_queue);
	tcase_add_test(tc, a_hot_standby_ends_once_after_the_10_s_it_says);
	suite_add_tcase(s, tc);
	return s;
}
