/* Redis and Postgres trouble caused for real on real servers: the relay logs
 * the cause, backs off, resumes, and loses nothing. */
#include "fmacros.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suites.h"

#define MAX_LINES 64

static const char *const queues[] = { "queue:default", NULL };
static const char *const relay_args[] = { "--batch-size", "200", "--poll-interval", "20ms", NULL };

/* Stages jobs first..first+n-1 on queue default, recorded as expected. */
static void stage_expected(PGconn *c, int first, int n)
{
	h_stage_expected(c, "default", first, n);
}

static long long staged(PGconn *c)
{
	return h_sql(c, "SELECT count(*) FROM staged_jobs");
}

static void wait_drained(PGconn *c, int timeout_ms)
{
	ck_assert_msg(h_wait_staged_empty(c, timeout_ms), "staged jobs not drained in time");
}

static void wait_first_push(redisContext *r)
{
	long long t0 = mono_ms();

	while (h_cmd_int(r, "LLEN queue:default") == 0) {
		ck_assert_msg(mono_ms() - t0 < 10000, "relay pushed nothing within 10 s");
		sleep_ms(5);
	}
}

/* Every expected jid is in Redis at least once. */
static void assert_nothing_lost(PGconn *c, redisContext *r)
{
	h_load_seen(c, r, queues);
	ck_assert_int_eq(h_missing(c), 0);
}

/* The retry_in_ms of each warn line of the log containing word, in order. */
static int retry_delays(const char *log, const char *word, int *out, int max)
{
	char line[4096];
	int n = 0;
	FILE *f = fopen(log, "r");

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		const char *d = strstr(line, "retry_in_ms=");
		if (!strstr(line, "level=warn") || !strstr(line, word) || !d)
			continue;
		ck_assert_int_lt(n, max);
		out[n++] = atoi(d + strlen("retry_in_ms="));
	}
	fclose(f);
	return n;
}

/*
 * The fault's warn lines show a relay backing off, not spinning: between
 * min_lines and max_lines of them (a fixed 100 ms retry would log ten a
 * second), each with a wait, at least as long as the one before, and, given
 * three, the wait grew. Holds while no batch succeeds in between (that resets it).
 */
static void assert_backs_off(const char *log, const char *word, int min_lines, int max_lines)
{
	int d[MAX_LINES];
	int n = retry_delays(log, word, d, MAX_LINES);

	ck_assert_msg(n >= min_lines, "%d warn lines with %s, expected at least %d; see %s", n, word, min_lines, log);
	ck_assert_msg(n <= max_lines, "%d warn lines with %s: the relay does not back off; see %s", n, word, log);
	for (int i = 0; i < n; i++)
		ck_assert_msg(d[i] > 0, "retry_in_ms=%d: the relay retries at once (%s)", d[i], word);
	for (int i = 1; i < n; i++)
		ck_assert_msg(d[i] >= d[i - 1], "retry_in_ms shrank from %d to %d (%s)", d[i - 1], d[i], word);
	if (n >= 3)
		ck_assert_msg(d[n - 1] > d[0], "retry_in_ms did not grow: %d then %d (%s)", d[0], d[n - 1], word);
}

/* The relay is still running (it did not exit on the fault), and stops cleanly. */
static void stop_relay(struct relay_proc *p)
{
	ck_assert_msg(h_relay_wait(p, 0) == -1, "the relay exited; see %s", p->log);
	h_relay_kill(p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(p, 10000), 0);
}

/* Starts the relay, drains a first lot, and leaves an empty `expected` to add to. */
static void start_draining(PGconn *c, struct relay_proc *p, const char *name, const char *const *args)
{
	h_snapshot_expected(c);
	h_relay_start(p, name, args);
	stage_expected(c, 1, 500);
	wait_drained(c, 20000);
}

/* Sends a command whose reply does not matter (the server may refuse it). */
static void try_cmd(redisContext *r, const char *cmd)
{
	freeReplyObject(redisCommand(r, cmd));
}

static bool info_has(redisContext *r, const char *section, const char *text)
{
	redisReply *rep = h_cmd(r, "INFO %s", section);
	bool found = rep->type == REDIS_REPLY_STRING && strstr(rep->str, text) != NULL;

	freeReplyObject(rep);
	return found;
}

static void wait_info(redisContext *r, const char *section, const char *text)
{
	long long t0 = mono_ms();

	while (!info_has(r, section, text)) {
		ck_assert_msg(mono_ms() - t0 < 20000, "redis INFO %s never showed %s", section, text);
		sleep_ms(20);
	}
}

START_TEST(redis_oom_backs_off_and_resumes)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;

	start_draining(c, &p, "oom", relay_args);
	/* Every write is refused while used memory exceeds maxmemory. */
	freeReplyObject(h_cmd(r, "CONFIG SET maxmemory-policy noeviction"));
	freeReplyObject(h_cmd(r, "CONFIG SET maxmemory 1"));
	stage_expected(c, 501, 500);
	ck_assert(h_log_wait(&p, "OOM", 10000));
	sleep_ms(1500);
	ck_assert_int_eq(staged(c), 500); /* nothing deleted that Redis did not take */
	freeReplyObject(h_cmd(r, "CONFIG SET maxmemory 0"));
	wait_drained(c, 20000);
	assert_nothing_lost(c, r);
	assert_backs_off(p.log, "OOM", 3, 10);
	stop_relay(&p);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/*
 * A failover demotes the relay's Redis to a replica (writes: READONLY), then
 * promotes it again. Becoming a replica replaces a Redis's data with its
 * primary's, so the primary must first hold a copy: the second Redis
 * replicates ours while the relay is idle (table empty, so nothing is pushed
 * meanwhile), is promoted, and ours becomes its replica, ending with the same
 * data, fence and epoch included. Jobs staged now must wait out READONLY and
 * arrive after ours is promoted; the first lot must still be there.
 */
START_TEST(redis_readonly_replica_backs_off_until_promoted)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis(), *r2;
	struct relay_proc p;
	char port[16];

	h_services("redis2-start");
	r2 = redisConnect("127.0.0.1", h_port("redis2"));
	ck_assert(r2 && !r2->err);
	start_draining(c, &p, "readonly", relay_args);

	snprintf(port, sizeof(port), "%s", h_env("TEST_REDIS_PORT"));
	/* A full sync otherwise waits 5 s for more replicas to join. */
	freeReplyObject(h_cmd(r, "CONFIG SET repl-diskless-sync-delay 0"));
	freeReplyObject(h_cmd(r2, "CONFIG SET repl-diskless-sync-delay 0"));
	freeReplyObject(h_cmd(r2, "REPLICAOF 127.0.0.1 %s", port));
	wait_info(r2, "replication", "master_link_status:up");
	freeReplyObject(h_cmd(r2, "REPLICAOF NO ONE"));
	freeReplyObject(h_cmd(r, "REPLICAOF 127.0.0.1 %d", h_port("redis2")));
	wait_info(r, "replication", "master_link_status:up");

	stage_expected(c, 501, 500);
	ck_assert(h_log_wait(&p, "READONLY", 10000));
	sleep_ms(1500);
	ck_assert_int_eq(staged(c), 500);
	freeReplyObject(h_cmd(r, "REPLICAOF NO ONE"));
	wait_drained(c, 20000);
	assert_nothing_lost(c, r);
	assert_backs_off(p.log, "READONLY", 3, 10);
	stop_relay(&p);
	redisFree(r2);
	h_services("redis2-stop");
	PQfinish(c);
	redisFree(r);
}
END_TEST

/*
 * A restarted Redis answers -LOADING until it has read its AOF. The AOF is
 * first rewritten (so earlier tests' history does not count), then padded
 * with 10000 writes that key-load-delay (100 us each, more in practice) turns
 * into seconds of loading: longer than the relay's back-off after a short
 * outage. Loading Redis answers clients only every 1024 commands, so many
 * cheap commands, not few slow ones, let the relay see LOADING often.
 */
START_TEST(redis_loading_after_restart_backs_off_and_resumes)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;

	start_draining(c, &p, "loading", relay_args);
	freeReplyObject(h_cmd(r, "BGREWRITEAOF"));
	sleep_ms(50);
	wait_info(r, "persistence", "aof_rewrite_in_progress:0");
	wait_info(r, "persistence", "aof_rewrite_scheduled:0");
	freeReplyObject(h_cmd(r, "EVAL %s 0 %d",
			      "for i = 1, tonumber(ARGV[1]) do redis.call('SET', 'pad:' .. i, 'x') end", 10000));
	redisFree(r);

	h_services("redis-stop");
	stage_expected(c, 501, 500);
	h_services("redis-start-loading");
	ck_assert(h_log_wait(&p, "LOADING", 10000));
	wait_drained(c, 30000);
	r = h_redis();
	assert_nothing_lost(c, r);
	ck_assert(h_log_contains(p.log, "reconnected to redis"));
	/* Refused while down, then LOADING: one back-off throughout. */
	assert_backs_off(p.log, "could not reconnect to redis", 2, 12);
	stop_relay(&p);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* The longest-open transaction of the relay's sessions, in ms (0: none). */
static long long relay_xact_age_ms(PGconn *c)
{
	return h_sql(c, "SELECT coalesce(max(extract(epoch FROM clock_timestamp() - xact_start)"
			" * 1000), 0)::int8 FROM pg_stat_activity WHERE application_name = 'stagedrain'");
}

/*
 * CLIENT PAUSE WRITE holds every write for 3 s; the relay waits 300 ms for a
 * reply, rolls back and retries. Its transaction never stays open for the
 * pause: it ends within a few --redis-timeouts.
 */
START_TEST(redis_timeout_rolls_back_and_retries)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;
	const char *const args[] = {
		"--batch-size", "200", "--poll-interval", "20ms", "--redis-timeout", "300ms", NULL
	};
	long long t0, oldest = 0;

	start_draining(c, &p, "timeout", args);
	freeReplyObject(h_cmd(r, "CLIENT PAUSE 3000 WRITE"));
	t0 = mono_ms();
	stage_expected(c, 501, 500);
	while (mono_ms() - t0 < 2900) {
		long long age = relay_xact_age_ms(c);
		oldest = age > oldest ? age : oldest;
		sleep_ms(20);
	}
	wait_drained(c, 20000);
	assert_nothing_lost(c, r);
	ck_assert_msg(oldest < 2000, "the relay kept a transaction open %lld ms during a 3 s pause", oldest);
	assert_backs_off(p.log, "timeout", 3, 10);
	stop_relay(&p);
	PQfinish(c);
	redisFree(r);
}
END_TEST

START_TEST(postgres_restart_backs_off_and_resumes)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;

	h_snapshot_expected(c);
	for (int i = 0; i < 8; i++)
		stage_expected(c, i * 1000, 1000);
	h_relay_start(&p, "pg-restart", relay_args);
	wait_first_push(r);
	PQfinish(c);
	h_services("pg-restart");
	c = h_pg();
	wait_drained(c, 60000);
	assert_nothing_lost(c, r);
	ck_assert(h_log_contains(p.log, "reconnected to postgres"));
	/* Every Postgres fault's line carries sqlstate= (empty while the server is
	 * down): however quickly the server came back, the fault that cut the
	 * session off was logged, with a wait, before the reconnect. */
	assert_backs_off(p.log, "sqlstate=", 1, 12);
	stop_relay(&p);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* The relay's sessions in a state (a LIKE pattern), and how many of them hold the leader lock. */
static long long relay_sessions(PGconn *c, const char *state)
{
	return h_sql(c,
		     "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'stagedrain'"
		     " AND coalesce(state, '') LIKE '%s'",
		     state);
}

static long long relay_lock_holders(PGconn *c)
{
	return h_sql(c, "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
			" WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
			" AND a.application_name = 'stagedrain'");
}

/*
 * Stops the relay while its session is idle: between reads, so frozen it
 * cannot start one. A relay caught inside a read is let go and tried again.
 */
static void freeze_between_reads(PGconn *c, struct relay_proc *p)
{
	for (int i = 0; i < 50; i++) {
		h_relay_kill(p, SIGSTOP);
		sleep_ms(50); /* the stop lands, and the activity view catches up */
		if (relay_sessions(c, "idle") == 1 && relay_lock_holders(c) == 1)
			return;
		h_relay_kill(p, SIGCONT);
		sleep_ms(37);
	}
	ck_abort_msg("the relay's session was never idle between reads; see %s", p->log);
}

/*
 * The relay's session ends while it waits with nothing to do. The wait
 * notices, says so, backs off, reconnects, takes the lock again, and jobs
 * staged afterwards arrive. A wait in its last poll slice may hand the loss
 * to the next read instead ("could not read a batch"): then the session is
 * ended again, up to five times, until the wait is the one to notice.
 */
START_TEST(postgres_lost_while_idle_reconnects_and_leads_again)
{
	static const char *const args[] = { "--batch-size", "200", "--poll-interval", "1s", NULL };
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;

	start_draining(c, &p, "pg-idle", args);
	ck_assert(h_log_wait(&p, "became leader", 10000));
	/* Idle long enough that each wait lasts the full second, in 50 ms slices:
	 * it can notice the loss itself, not leave it to the next read. */
	sleep_ms(2500);
	for (int kill = 0; !h_log_contains(p.log, "lost postgres while idle"); kill++) {
		ck_assert_msg(kill < 5, "5 sessions lost while idle, none reported by the idle wait; see %s", p.log);
		freeze_between_reads(c, &p);
		ck_assert_int_eq(h_sql(c, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
					  " WHERE application_name = 'stagedrain'"),
				 1);
		while (relay_sessions(c, "%") > 0)
			sleep_ms(10);
		h_relay_kill(&p, SIGCONT);
		ck_assert_msg(h_log_wait_count(&p, "became leader", kill + 2, 20000),
			      "the relay did not take the lock again; see %s", p.log);
	}
	ck_assert(h_log_contains(p.log, "reconnected to postgres"));
	ck_assert_int_eq(relay_lock_holders(c), 1);
	assert_backs_off(p.log, "sqlstate=", 1, 12);
	stage_expected(c, 501, 500);
	wait_drained(c, 10000);
	assert_nothing_lost(c, r);
	stop_relay(&p);
	PQfinish(c);
	redisFree(r);
}
END_TEST

static PGconn *pg_at(const char *url)
{
	PGconn *c = PQconnectdb(url);

	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s: %s", url, PQerrorMessage(c));
	PQclear(PQexec(c, "SET client_min_messages = warning"));
	return c;
}

/*
 * The relay lists a primary and its streaming standby with
 * target_session_attrs=read-write; the primary stops, the standby is promoted,
 * and the relay carries on against it. Separate servers, so later tests keep
 * the shared one.
 */
START_TEST(postgres_failover_to_promoted_standby)
{
	char url1[256], url2[256], both[512], lsn[64], done[64];
	const char *const migrate[] = { "migrate", "--pg-url", url1, NULL };
	const char *args[] = { "--batch-size", "200", "--poll-interval", "20ms", "--pg-url", both, NULL };
	redisContext *r = h_redis();
	struct relay_proc p;
	PGconn *c1, *c2;
	PGresult *res;
	int p1, p2;

	h_services("pgfo-start");
	p1 = h_port("pgfo1");
	p2 = h_port("pgfo2");
	snprintf(url1, sizeof(url1), "postgresql://postgres@127.0.0.1:%d/postgres", p1);
	snprintf(url2, sizeof(url2), "postgresql://postgres@127.0.0.1:%d/postgres", p2);
	snprintf(both, sizeof(both),
		 "postgresql://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?target_session_attrs=read-write", p1, p2);
	ck_assert_int_eq(h_relay_run("migrate-fo", migrate), 0);
	c1 = pg_at(url1);
	h_snapshot_expected(c1);
	for (int i = 0; i < 5; i++)
		stage_expected(c1, i * 1000, 1000);

	/* What was staged before the failover must be on the standby: wait for replay. */
	res = PQexec(c1, "SELECT pg_current_wal_lsn()");
	ck_assert_int_eq(PQresultStatus(res), PGRES_TUPLES_OK);
	snprintf(lsn, sizeof(lsn), "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	c2 = pg_at(url2);
	for (long long t0 = mono_ms(); !h_sql(c2, "SELECT (pg_last_wal_replay_lsn() >= '%s')::int", lsn);) {
		ck_assert_msg(mono_ms() - t0 < 20000, "standby did not replay %s", lsn);
		sleep_ms(20);
	}

	h_relay_start(&p, "failover", args);
	wait_first_push(r);
	PQfinish(c1);
	h_services("pgfo-promote");
	wait_drained(c2, 60000);
	assert_nothing_lost(c2, r);
	snprintf(done, sizeof(done), "postgres=127.0.0.1:%d/", p2);
	ck_assert(h_log_contains(p.log, "reconnected to postgres"));
	ck_assert(h_log_contains(p.log, done));
	assert_backs_off(p.log, "postgres", 1, 12);
	stop_relay(&p);
	PQfinish(c2);
	redisFree(r);
	h_services("pgfo-stop");
}
END_TEST

/* Takes ACCESS EXCLUSIVE on staged_jobs in an open transaction. */
static PGconn *lock_table(void)
{
	PGconn *locker = h_pg();

	h_sql(locker, "BEGIN");
	h_sql(locker, "LOCK TABLE staged_jobs IN ACCESS EXCLUSIVE MODE");
	return locker;
}

static void unlock_table(PGconn *locker)
{
	h_sql(locker, "ROLLBACK");
	PQfinish(locker);
}

/*
 * The user's statement_timeout (300 ms, in the URL) wins over the relay's own
 * bound: a batch blocked by a table lock is cancelled with 57014, logged once
 * per attempt, retried with back-off. It does not cut a standby's wait for the
 * leader lock, and that standby, once leader, has the user's timeout back.
 */
START_TEST(statement_timeout_backs_off_and_spares_the_standby)
{
	PGconn *c = h_pg(), *locker;
	redisContext *r = h_redis();
	char url[600];
	const char *args[] = { "--batch-size", "200", "--poll-interval", "20ms", "--pg-url", url, NULL };
	struct relay_proc a, b;

	snprintf(url, sizeof(url), "%s%coptions=-c%%20statement_timeout%%3D300", h_env("TEST_PG_URL"),
		 strchr(h_env("TEST_PG_URL"), '?') ? '&' : '?');
	start_draining(c, &a, "stmt-user", args);
	h_relay_start(&b, "standby", args);
	ck_assert(h_log_wait(&b, "waiting as standby", 10000));

	locker = lock_table();
	ck_assert(h_log_wait(&a, "57014", 10000));
	sleep_ms(2000);
	unlock_table(locker);
	stage_expected(c, 501, 500);
	wait_drained(c, 20000);
	assert_backs_off(a.log, "57014", 3, 10);
	ck_assert_msg(!h_log_contains(b.log, "level=warn"), "the standby's lock wait was cut; see %s", b.log);

	h_relay_kill(&a, SIGKILL);
	ck_assert_int_eq(h_relay_wait(&a, 5000), 128 + SIGKILL);
	ck_assert(h_log_wait(&b, "became leader", 10000));
	locker = lock_table();
	ck_assert(h_log_wait(&b, "57014", 10000));
	unlock_table(locker);
	stage_expected(c, 1001, 500);
	wait_drained(c, 20000);
	assert_nothing_lost(c, r);
	stop_relay(&b);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/*
 * Nobody set a statement_timeout: the relay bounds its batch's statements
 * itself (4 x --redis-timeout, at least 10 s), so a table lock cannot keep its
 * transaction, and the snapshot it pins, open indefinitely.
 */
START_TEST(relay_bounds_its_own_statements_by_default)
{
	PGconn *c = h_pg(), *locker;
	redisContext *r = h_redis();
	struct relay_proc p;
	const char *const args[] = {
		"--batch-size", "200", "--poll-interval", "20ms", "--redis-timeout", "300ms", NULL
	};

	start_draining(c, &p, "stmt-default", args);
	locker = lock_table();
	ck_assert_msg(h_log_wait(&p, "57014", 20000), "no statement timeout within 20 s; see %s", p.log);
	unlock_table(locker);
	stage_expected(c, 501, 500);
	wait_drained(c, 20000);
	assert_nothing_lost(c, r);
	ck_assert(h_log_contains(p.log, "statement timeout"));
	stop_relay(&p);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/*
 * The application deletes a row of a batch the relay has pushed and is about
 * to delete: under REPEATABLE READ the relay's delete fails with 40001. The
 * fence deletes the rest instead of pushing them again.
 */
START_TEST(row_deleted_under_a_pushed_batch_is_not_pushed_again)
{
	PGconn *c = h_pg(), *app = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;

	h_stage(c, "default", 1, 10);
	h_sql(app, "BEGIN");
	h_sql(app, "DELETE FROM staged_jobs WHERE id = 5");
	h_relay_start(&p, "row-deleted", relay_args);
	ck_assert(h_log_wait(&p, "leading", 10000));
	for (long long t0 = mono_ms(); h_cmd_int(r, "LLEN queue:default") < 10;) {
		ck_assert_msg(mono_ms() - t0 < 10000, "jobs not pushed within 10 s");
		sleep_ms(5);
	}
	sleep_ms(200); /* the relay is now blocked in its delete, on row 5 */
	h_sql(app, "COMMIT");
	PQfinish(app);
	wait_drained(c, 10000);
	ck_assert(h_log_wait(&p, "40001", 5000));
	ck_assert(h_log_wait(&p, "not pushing them again", 5000));
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 10);
	stop_relay(&p);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* Puts the test Redis back the way the other tests expect it, whatever a
 * failed test left behind. */
static void restore_redis(void)
{
	redisContext *r = h_redis();

	try_cmd(r, "CLIENT UNPAUSE");
	try_cmd(r, "REPLICAOF NO ONE");
	try_cmd(r, "CONFIG SET maxmemory 0");
	try_cmd(r, "CONFIG SET proto-max-bulk-len 512mb");
	redisFree(r);
}

static void setup(void)
{
	restore_redis();
	h_reset();
}

/* Runs in the runner after the case: extra servers a failed test left running. */
static void stop_extra_servers(void)
{
	char cmd[1024];
	const char *svc = getenv("TEST_SERVICES"), *dir = getenv("TEST_DIR");

	if (!svc || !dir)
		return;
	snprintf(cmd, sizeof(cmd), "bash '%s' redis2-stop '%s' && bash '%s' pgfo-stop '%s'", svc, dir, svc, dir);
	if (system(cmd) != 0)
		fprintf(stderr, "trouble: %s failed\n", cmd);
}

/*
 * A row Redis itself refuses (here its payload is over proto-max-bulk-len, so
 * Redis answers a protocol error and drops the connection, though PING works)
 * among good ones: the relay narrows the refused batch to that row and
 * dead-letters it with Redis's answer; every other job arrives once, in id
 * order. Before, the batch was rolled back and pushed again forever.
 */
START_TEST(a_row_redis_refuses_is_dead_lettered_and_the_rest_arrive_in_order)
{
	static const char *const args[] = { "--batch-size", "200", "--max-job-bytes", "4M", "--poll-interval",
					    "20ms",         NULL };
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;
	long long t0;
	redisReply *list;

	freeReplyObject(h_cmd(r, "CONFIG SET proto-max-bulk-len 1mb"));
	h_sql(c, "BEGIN");
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) SELECT 'Good', jsonb_build_array(i)"
		 " FROM generate_series(1, 60) i");
	h_sql(c,
	      "INSERT INTO staged_jobs (job_class, args) VALUES ('TooBig', jsonb_build_array(repeat('x', 1100000)))");
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) SELECT 'Good', jsonb_build_array(i)"
		 " FROM generate_series(61, 120) i");
	h_sql(c, "COMMIT");
	h_relay_start(&p, "refused", args);
	t0 = mono_ms();
	while (staged(c) > 0 && mono_ms() - t0 < 60000)
		sleep_ms(50);
	RELAY_CHECK(&p, staged(c) == 0, "rows still staged after 60 s; see %s", p.log);
	stop_relay(&p);
	freeReplyObject(h_cmd(r, "CONFIG SET proto-max-bulk-len 512mb"));
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE job_class = 'TooBig'"
				  " AND reason LIKE 'redis refused it:%%'"),
			 1);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 1);
	/* LPUSH: the newest first. Each good job once, in id order. */
	list = h_cmd(r, "LRANGE queue:default 0 -1");
	ck_assert_uint_eq(list->elements, 120);
	for (size_t i = 0; i < list->elements; i++) {
		json_t *job = json_loads(list->element[list->elements - 1 - i]->str, 0, NULL);
		ck_assert_ptr_nonnull(job);
		ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(job, "args"), 0)), (long long)i + 1);
		json_decref(job);
	}
	freeReplyObject(list);
	PQfinish(c);
	redisFree(r);
}
END_TEST

Suite *trouble_suite(void)
{
	Suite *s = suite_create("trouble");
	TCase *tc = tcase_create("trouble");
	TCase *refused = tcase_create("refused");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_unchecked_fixture(tc, NULL, stop_extra_servers);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, redis_oom_backs_off_and_resumes);
	tcase_add_test(tc, redis_readonly_replica_backs_off_until_promoted);
	tcase_add_test(tc, redis_loading_after_restart_backs_off_and_resumes);
	tcase_add_test(tc, redis_timeout_rolls_back_and_retries);
	tcase_add_test(tc, postgres_restart_backs_off_and_resumes);
	tcase_add_test(tc, postgres_lost_while_idle_reconnects_and_leads_again);
	tcase_add_test(tc, postgres_failover_to_promoted_standby);
	tcase_add_test(tc, statement_timeout_backs_off_and_spares_the_standby);
	tcase_add_test(tc, relay_bounds_its_own_statements_by_default);
	tcase_add_test(tc, row_deleted_under_a_pushed_batch_is_not_pushed_again);
	tcase_add_checked_fixture(refused, setup, NULL);
	tcase_set_timeout(refused, 120);
	tcase_add_test(refused, a_row_redis_refuses_is_dead_lettered_and_the_rest_arrive_in_order);
	suite_add_tcase(s, tc);
	suite_add_tcase(s, refused);
	return s;
}
