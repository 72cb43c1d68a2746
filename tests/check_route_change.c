/*
 * Routes that change between restarts while rows wait held (docs/
 * topologies.md): a row held for a target that still exists goes where
 * today's rules send it once that target's fence is settled; a row whose
 * route column names a route that is gone is dead-lettered, held or not;
 * rows held for a target that is gone (removed, or renamed: targets are
 * known by name) stay held, counted and warned about, even when a late
 * push of theirs reached the old Redis, until `stagedrain held` moves them.
 */
#include "fmacros.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suites.h"

/* --once's status when jobs are left (held). */
#define EXIT_LEFT 3
/* A route b whose Redis never answers: its rows are held for b. */
#define ROUTE_B_DOWN "b reports --redis-url redis://127.0.0.1:1/0"

static const char *log_of(const char *name)
{
	static char path[512];

	snprintf(path, sizeof(path), "%s/%s.log", h_env("TEST_DIR"), name);
	return path;
}

/* `stagedrain held ARGS... --pg-url` (and the settings given): its status;
 * its output in TEST_DIR/name.log. */
static int held_cmd(const char *name, const char *const *args, struct relay_proc *p)
{
	const char *argv[16];
	int n = 0, st;

	argv[n++] = "held";
	for (; *args && n < 13; args++)
		argv[n++] = *args;
	argv[n++] = "--pg-url";
	argv[n++] = h_env("TEST_PG_URL");
	argv[n] = NULL;
	h_relay_start_bare(p, name, argv);
	st = h_relay_wait(p, 30000);
	ck_assert_msg(st >= 0, "held %s did not end; see %s", args[0], p->log);
	return st;
}

#define HELD(p, name, ...) held_cmd((name), (const char *const[]){ __VA_ARGS__, NULL }, (p))

static int once(const char *name, const char *route)
{
	const char *with[] = { "--once", "--route", route, NULL }, *without[] = { "--once", NULL };

	return h_relay_run(name, route ? with : without);
}

/* Three rows of queue reports and one whose route column names b, held
 * for b, whose Redis is down. */
static void hold_for_b(PGconn *c)
{
	h_stage(c, "reports", 1, 3);
	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args, route) VALUES ('misc', 'W', '[100]', 'b')");
	ck_assert_int_eq(once("hold-for-b", ROUTE_B_DOWN), EXIT_LEFT);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held WHERE target = 'b'"), 4);
}

/* Route b removed: its queue's held rows stay held (b's Redis may hold a
 * late copy of theirs), the route-column row is dead with the reason; a
 * new row of the queue goes where today's rules say; `held release`
 * stages the held ones again, in order, and the relay sends them there. */
START_TEST(a_removed_route_s_rows_stay_held_until_an_operator_releases_them)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;
	char got[256];

	hold_for_b(c);
	h_stage(c, "reports", 10, 1);
	ck_assert_int_eq(once("b-removed", NULL), EXIT_LEFT);
	h_list_args(r, "queue:reports", got, sizeof(got));
	ck_assert_str_eq(got, "10");
	ck_assert_int_eq(h_cmd_int(r, "EXISTS queue:misc"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held WHERE target = 'b' AND queue = 'reports'"), 3);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE route = 'b' AND queue = 'misc'"
				  " AND reason LIKE 'route \"b\" is not a route of this relay%%held for target b'"),
			 1);
	ck_assert(h_log_contains(log_of("b-removed"), "jobs wait held for a target this relay no longer has"));
	ck_assert(h_log_contains(log_of("b-removed"), "3 jobs held for a target no longer configured"));
	/* Still held at the next start: nothing moves them unasked. */
	ck_assert_int_eq(once("b-removed-again", NULL), EXIT_LEFT);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held WHERE target = 'b'"), 3);

	ck_assert_int_eq(HELD(&p, "held-list", "list"), 0);
	ck_assert(h_log_contains(p.log, "no route of this name"));
	ck_assert(h_log_contains(p.log, "reports"));
	/* b configured: the relay's own to release. */
	ck_assert_int_eq(HELD(&p, "held-configured", "release", "--target", "b", "--route", ROUTE_B_DOWN), 2);
	ck_assert(h_log_contains(p.log, "target \"b\" is configured"));
	ck_assert_int_eq(HELD(&p, "held-no-target", "release"), 2);
	/* A stray word is never echoed if it may hold a password. */
	ck_assert_int_eq(HELD(&p, "held-url", "redis://u:SEKRIT@h/0"), 2);
	ck_assert(h_log_contains(p.log, "no command \"held redis://...@h/0\""));
	ck_assert(!h_log_contains(p.log, "SEKRIT"));
	ck_assert_int_eq(HELD(&p, "held-dry", "release", "--target", "b", "--dry-run"), 0);
	ck_assert(h_log_contains(p.log, "would release 3 jobs held for target b"));
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held"), 3);
	ck_assert_int_eq(HELD(&p, "held-release", "release", "--target", "b"), 0);
	ck_assert(h_log_contains(p.log, "released 3 jobs held for target b"));
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held"), 0);
	ck_assert_int_eq(once("b-released", NULL), 0);
	h_list_args(r, "queue:reports", got, sizeof(got));
	ck_assert_str_eq(got, "10,1,2,3");
	redisFree(r);
	PQfinish(c);
}
END_TEST

/* `held dead` moves a gone target's rows to the dead table with the reason. */
START_TEST(held_dead_dead_letters_a_gone_target_s_rows)
{
	PGconn *c = h_pg();
	struct relay_proc p;

	hold_for_b(c);
	ck_assert_int_eq(HELD(&p, "held-dead", "dead", "--target", "b"), 0);
	ck_assert(h_log_contains(p.log, "moved 4 jobs held for target b to staged_jobs_dead"));
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE reason LIKE 'held for target \"b\"%%'"),
			 4);
	ck_assert_int_eq(HELD(&p, "held-dead-again", "dead", "--target", "b"), 0);
	ck_assert(h_log_contains(p.log, "moved 0 jobs"));
	PQfinish(c);
}
END_TEST

/* Route b's rule changes (b now takes queue other, not reports) while
 * reports' rows wait held for it. While b stays down, a new reports row
 * waits behind them, and so does every row staged before that start (the
 * routes changed, and b's fence, unread, might name any of them); once b
 * answers and its fence is settled, they all go where today's rules send
 * them, the default Redis, in their order; the route-column row still goes
 * to b. */
START_TEST(a_changed_rule_sends_held_rows_to_today_s_target_in_order)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct h_second b;
	char got[256];

	hold_for_b(c);
	h_stage(c, "reports", 10, 1);
	h_stage(c, "default", 20, 1);
	ck_assert_int_eq(once("b-changed-down", "b other --redis-url redis://127.0.0.1:1/0"), EXIT_LEFT);
	ck_assert_int_eq(h_cmd_int(r, "EXISTS queue:reports"), 0);
	ck_assert_int_eq(h_cmd_int(r, "EXISTS queue:default"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held WHERE target = 'b'"), 5);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held WHERE target IS NULL AND queue = 'default'"),
			 1);
	ck_assert(h_log_contains(log_of("b-changed-down"), "the last leader routed otherwise"));

	h_second_start(&b, "other", "");
	h_stage(c, "reports", 11, 1);
	ck_assert_int_eq(once("b-changed", b.route), 0);
	h_list_args(r, "queue:reports", got, sizeof(got));
	ck_assert_str_eq(got, "1,2,3,10,11");
	h_list_args(r, "queue:default", got, sizeof(got));
	ck_assert_str_eq(got, "20");
	ck_assert_int_eq(h_cmd_int(b.r, "EXISTS queue:reports"), 0);
	h_list_args(b.r, "queue:misc", got, sizeof(got));
	ck_assert_str_eq(got, "100");
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 0);
	h_second_stop(&b);
	redisFree(r);
	PQfinish(c);
}
END_TEST

/*
 * b's Redis hangs (SIGSTOP) while a push to it is in flight: the push times
 * out and rolls back, the row is held for b, and after SIGCONT the late
 * script still lands in b's Redis. The route is renamed (c, the same Redis)
 * and, at another start, removed: the held row is pushed nowhere, while new
 * rows go where each start's rules say. With b back, its fence names the
 * late push, so the held row is deleted, not pushed again: every job once.
 */
START_TEST(a_late_push_to_a_renamed_route_is_never_pushed_again)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct h_second b;
	struct relay_proc p;
	char got[256], renamed[300];

	/* A version given: no probe of b's Sidekiq processes goes before the push. */
	h_second_start(&b, "reports", " --sidekiq-version 7");
	h_relay_start(&p, "late-push",
		      (const char *const[]){ "--route", b.route, "--redis-timeout", "300", "--poll-interval", "50ms",
					     "--sidekiq-version", "7", NULL });
	RELAY_CHECK(&p, h_log_wait_count(&p, "msg=leading", 2, 10000), "the relay never led on both targets");
	kill(b.pid, SIGSTOP);
	h_stage(c, "reports", 1, 1);
	for (long long t0 = mono_ms(); h_sql(c, "SELECT count(*) FROM staged_jobs_held WHERE target = 'b'") != 1;)
		RELAY_CHECK(&p, mono_ms() - t0 < 15000, "b's row was not held; see %s", p.log);
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 15000), 0);
	kill(b.pid, SIGCONT);
	ck_assert_msg(h_wait_len(b.r, "queue:reports", 1, 5000), "the late push never landed in b's redis");

	snprintf(renamed, sizeof(renamed), "c%s", b.route + 1);
	h_stage(c, "reports", 2, 1);
	ck_assert_int_eq(once("renamed", renamed), EXIT_LEFT);
	h_list_args(b.r, "queue:reports", got, sizeof(got));
	ck_assert_str_eq(got, "1,2");
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held WHERE target = 'b'"), 1);

	h_stage(c, "reports", 3, 1);
	ck_assert_int_eq(once("removed", NULL), EXIT_LEFT);
	h_list_args(r, "queue:reports", got, sizeof(got));
	ck_assert_str_eq(got, "3");
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held WHERE target = 'b'"), 1);

	ck_assert_int_eq(once("b-back", b.route), 0);
	ck_assert(h_log_contains(log_of("b-back"), "not pushing them again"));
	h_list_args(b.r, "queue:reports", got, sizeof(got));
	ck_assert_str_eq(got, "1,2");
	h_list_args(r, "queue:reports", got, sizeof(got));
	ck_assert_str_eq(got, "3");
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	h_second_stop(&b);
	redisFree(r);
	PQfinish(c);
}
END_TEST

/* A leader (started with args) pushes queue:reports' three rows to r and
 * is killed while its commit waits: they stay staged, named by r's fence. */
static void push_reports_then_crash(PGconn *c, const char *name, const char *const *args, redisContext *r)
{
	PGconn *lock = h_pg();
	struct relay_proc a;

	h_block_commits(c);
	h_sql(lock, "SELECT pg_advisory_lock(42425)");
	h_relay_start(&a, name, args);
	RELAY_CHECK(&a, h_wait_len(r, "queue:reports", 3, 10000), "%s did not push", name);
	RELAY_CHECK(&a, h_wait_blocked(c, 10000), "%s's commit is not waiting", name);
	h_relay_crash(&a, c);
	h_sql(lock, "SELECT pg_advisory_unlock(42425)");
	h_unblock_commits(c);
	PQfinish(lock);
}

/*
 * A leader without route b pushed reports' rows to the default Redis and was
 * killed before its commit; its successor has b, which takes reports now.
 * While the default Redis is down its fence, which names those rows, cannot
 * be read: the successor pushes none of the rows staged before it led
 * anywhere (rows staged since, of other queues, go), and once the default
 * Redis answers, the fence deletes them and the rest go to b in order.
 */
START_TEST(a_crash_before_a_route_was_added_pushes_nothing_twice)
{
	static const char *const without[] = { "--sidekiq-version", "7", "--poll-interval", "20ms", NULL };
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct h_second b;
	struct relay_proc p;
	char got[256];

	h_second_start(&b, "reports,fresh", " --sidekiq-version 7");
	h_stage(c, "reports", 1, 3);
	push_reports_then_crash(c, "without-b", without, r);
	redisFree(r);
	h_services("redis-stop");
	h_stage(c, "reports", 4, 1);
	h_relay_start(&p, "with-b",
		      (const char *const[]){ "--route", b.route, "--sidekiq-version", "7", "--poll-interval", "20ms",
					     NULL });
	RELAY_CHECK(&p, h_log_wait(&p, "msg=leading epoch=1 target=b", 10000), "the relay never led on b; see %s",
		    p.log);
	h_stage(c, "fresh", 1, 1);
	RELAY_CHECK(&p, h_wait_len(b.r, "queue:fresh", 1, 10000), "a row staged since did not go; see %s", p.log);
	for (long long t0 = mono_ms(); h_sql(c, "SELECT count(*) FROM staged_jobs") > 0;)
		RELAY_CHECK(&p, mono_ms() - t0 < 10000, "rows stay staged; see %s", p.log);
	ck_assert_int_eq(h_cmd_int(b.r, "LLEN queue:reports"), 0);
	h_services("redis-start");
	for (long long t0 = mono_ms(); h_sql(c, "SELECT count(*) FROM staged_jobs_held") > 0;)
		RELAY_CHECK(&p, mono_ms() - t0 < 15000, "rows stay held; see %s", p.log);
	ck_assert_msg(h_wait_len(b.r, "queue:reports", 1, 5000), "row 4 did not reach b");
	h_list_args(b.r, "queue:reports", got, sizeof(got));
	ck_assert_str_eq(got, "4");
	r = h_redis();
	h_list_args(r, "queue:reports", got, sizeof(got));
	ck_assert_str_eq(got, "1,2,3");
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 15000), 0);
	h_second_stop(&b);
	redisFree(r);
	PQfinish(c);
}
END_TEST

/*
 * Rows of one queue held for two targets: reports' rows wait for b (down),
 * b is removed at a restart while the default Redis is down too, so the
 * queue's next rows wait held for the default target. With b back (and
 * taking reports again), both sets go to b oldest first, b's before the
 * default's, and a row staged since waits behind both: one producer's
 * order in b's list (chaos-routes, seed 102).
 */
START_TEST(rows_of_a_queue_held_for_two_targets_leave_oldest_first)
{
	PGconn *c = h_pg();
	struct h_second b;
	char got[256], other[200];

	h_stage(c, "reports", 1, 3);
	ck_assert_int_eq(once("held-for-b", "b reports --redis-url redis://127.0.0.1:1/0"), EXIT_LEFT);
	/* A relay with one target down still starts (route c is up). */
	h_second_start(&b, "reports", "");
	snprintf(other, sizeof(other), "c misc --redis-url redis://127.0.0.1:%d/0", h_port("redis2"));
	h_services("redis-stop");
	h_stage(c, "reports", 10, 2);
	ck_assert_int_eq(once("default-down", other), EXIT_LEFT);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held WHERE target IS NULL"), 2);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held WHERE target = 'b'"), 3);
	h_services("redis-start");
	h_stage(c, "reports", 20, 1);
	ck_assert_int_eq(once("b-back", b.route), 0);
	h_list_args(b.r, "queue:reports", got, sizeof(got));
	ck_assert_str_eq(got, "1,2,3,10,11,20");
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held"), 0);
	h_second_stop(&b);
	PQfinish(c);
}
END_TEST

/*
 * A route change's hold lasts until every target has settled its fence,
 * whichever leader that takes: a leader routing reports to b pushes rows
 * 1-3 there and is killed before its commit; the next routes reports to the
 * default Redis while b (still configured, for queue other) is down, so the
 * rows wait held; it stops, and the one after it, routing alike, must hold
 * them still (b's fence, unread, names them). With b back, the fence deletes
 * them: each job once, in b.
 */
START_TEST(a_route_change_holds_until_every_fence_is_settled_across_leaders)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct h_second b;
	char got[256], back[300];

	h_second_start(&b, "reports", " --sidekiq-version 7");
	h_stage(c, "reports", 1, 3);
	push_reports_then_crash(c, "to-b",
				(const char *const[]){ "--route", b.route, "--sidekiq-version", "7", "--poll-interval",
						       "20ms", NULL },
				b.r);

	ck_assert_int_eq(once("b-down", "b other --redis-url redis://127.0.0.1:1/0"), EXIT_LEFT);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held"), 3);
	ck_assert_int_eq(once("b-down-again", "b other --redis-url redis://127.0.0.1:1/0"), EXIT_LEFT);
	ck_assert_int_eq(h_cmd_int(r, "EXISTS queue:reports"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held"), 3);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_leader WHERE NOT settled"), 1);

	snprintf(back, sizeof(back), "b other --redis-url redis://127.0.0.1:%d/0", h_port("redis2"));
	ck_assert_int_eq(once("b-back", back), 0);
	ck_assert(h_log_contains(log_of("b-back"), "not pushing them again"));
	h_list_args(b.r, "queue:reports", got, sizeof(got));
	ck_assert_str_eq(got, "1,2,3");
	ck_assert_int_eq(h_cmd_int(r, "EXISTS queue:reports"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_held"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	/* Settled: a successor routing alike holds nothing. */
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_leader WHERE settled"), 1);
	ck_assert_int_eq(once("b-back-again", back), 0);
	ck_assert(!h_log_contains(log_of("b-back-again"), "wait until every target has settled"));
	h_second_stop(&b);
	redisFree(r);
	PQfinish(c);
}
END_TEST

Suite *route_change_suite(void)
{
	Suite *s = suite_create("route_change");
	TCase *tc = tcase_create("route_change");

	tcase_add_checked_fixture(tc, h_reset, NULL);
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, a_removed_route_s_rows_stay_held_until_an_operator_releases_them);
	tcase_add_test(tc, held_dead_dead_letters_a_gone_target_s_rows);
	tcase_add_test(tc, a_changed_rule_sends_held_rows_to_today_s_target_in_order);
	tcase_add_test(tc, a_late_push_to_a_renamed_route_is_never_pushed_again);
	tcase_add_test(tc, a_crash_before_a_route_was_added_pushes_nothing_twice);
	tcase_add_test(tc, rows_of_a_queue_held_for_two_targets_leave_oldest_first);
	tcase_add_test(tc, a_route_change_holds_until_every_fence_is_settled_across_leaders);
	suite_add_tcase(s, tc);
	return s;
}
