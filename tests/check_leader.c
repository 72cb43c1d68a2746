/* Leader election: one relay pushes, a second waits and takes over without a restart. */
#include "fmacros.h"

#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "keys.h"
#include "suites.h"

static const char *const continuous[] = { "--poll-interval", "20ms", "--batch-size", "100", NULL };

/* Stages n jobs and waits until the table is empty; returns how long it took. */
static long long stage_and_wait_drained(PGconn *c, int first, int n)
{
	long long t0 = mono_ms();

	h_stage(c, "default", first, n);
	while (h_sql(c, "SELECT count(*) FROM staged_jobs") > 0) {
		ck_assert_msg(mono_ms() - t0 < 30000, "jobs not drained within 30 s");
		sleep_ms(20);
	}
	return mono_ms() - t0;
}

START_TEST(one_leader_and_standby_takes_over)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc a, b;

	h_relay_start(&a, "relay-a", continuous);
	ck_assert(h_log_wait(&a, "became leader", 10000));
	h_relay_start(&b, "relay-b", continuous);
	ck_assert(h_log_wait(&b, "waiting as standby", 10000));

	stage_and_wait_drained(c, 1, 500);
	ck_assert(!h_log_contains(b.log, "became leader"));
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 500);

	/* The leader dies without a goodbye; its session ends and frees the lock. */
	h_relay_kill(&a, SIGKILL);
	ck_assert_int_eq(h_relay_wait(&a, 5000), 128 + SIGKILL);
	ck_assert(h_log_wait(&b, "became leader", 10000));
	stage_and_wait_drained(c, 501, 500);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 1000);

	/* A standby stopped while it waits exits cleanly too. */
	h_relay_start(&a, "relay-a2", continuous);
	ck_assert(h_log_wait(&a, "waiting as standby", 10000));
	h_relay_kill(&a, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&a, 5000), 0);
	h_relay_kill(&b, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&b, 5000), 0);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* A leader whose push times out (Redis paused) while its session is cut
 * finds the session gone only when it rolls back: it must then take the lock
 * again like anyone else, and stand by, not carry on as leader. */
START_TEST(a_leader_that_lost_its_session_mid_batch_stands_by)
{
	static const char *const a_args[] = {
		"--poll-interval", "20ms", "--batch-size", "100", "--redis-timeout", "1s", NULL
	};
	static const char *const queues[] = { "queue:default", NULL };
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc a, b;

	for (int i = 0; i < 10; i++)
		h_stage(c, "default", i * 2000, 2000);
	h_snapshot_expected(c);
	h_relay_start(&a, "relay-a", a_args);
	ck_assert(h_log_wait(&a, "leading", 10000));
	h_relay_start(&b, "relay-b", continuous);
	ck_assert(h_log_wait(&b, "waiting as standby", 10000));
	while (h_cmd_int(r, "LLEN queue:default") < 1000)
		sleep_ms(5);

	/* A's next push waits on the pause with its transaction open; its
	 * session dies meanwhile, and the push then times out. */
	freeReplyObject(h_cmd(r, "CLIENT PAUSE 3000 WRITE"));
	sleep_ms(200);
	h_sql(c, "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted"
		 " AND objsubid = 1 AND pid IN (SELECT pid FROM pg_stat_activity WHERE state <> 'active')");
	ck_assert(h_log_wait(&a, "could not push a batch", 5000));
	ck_assert(h_log_wait(&a, "waiting as standby", 10000));
	ck_assert(h_log_wait(&b, "leading", 10000));

	while (h_sql(c, "SELECT count(*) FROM staged_jobs") > 0)
		sleep_ms(20);
	h_load_seen(c, r, queues);
	ck_assert_int_eq(h_missing(c), 0);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 20000);
	h_relay_kill(&a, SIGTERM);
	h_relay_kill(&b, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&a, 5000), 0);
	ck_assert_int_eq(h_relay_wait(&b, 5000), 0);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* A waiting standby must not pin the xmin horizon: a statement blocked on the
 * lock would hold its snapshot for as long as the leader lives. */
START_TEST(a_waiting_standby_holds_no_snapshot)
{
	PGconn *c = h_pg();
	struct relay_proc a, b;
	int pinned = 0;

	h_relay_start(&a, "relay-a", continuous);
	ck_assert(h_log_wait(&a, "leading", 10000));
	h_relay_start(&b, "relay-b", continuous);
	ck_assert(h_log_wait(&b, "waiting as standby", 10000));
	for (int i = 0; i < 20; i++) {
		pinned += h_sql(c, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'stagedrain'"
				   " AND backend_xmin IS NOT NULL AND pid <> pg_backend_pid()") > 0;
		sleep_ms(50);
	}
	ck_assert_int_lt(pinned, 10);
	h_relay_kill(&a, SIGTERM);
	h_relay_kill(&b, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&a, 5000), 0);
	ck_assert_int_eq(h_relay_wait(&b, 5000), 0);
	PQfinish(c);
}
END_TEST

/* stagedrain_leader_lock_foreign on the relay's /metrics page (NAN if absent). */
static double lock_foreign(int port)
{
	int status = 0;
	char *page = h_http_get(port, "/metrics", &status);
	double v = status == 200 ? h_metric_sample(page, "stagedrain_leader_lock_foreign") : NAN;

	free(page);
	return v;
}

/* True once the gauge reads want, within 10 s. */
static bool lock_foreign_is(int port, double want)
{
	for (long long t0 = mono_ms(); mono_ms() - t0 < 10000; sleep_ms(50))
		if (lock_foreign(port) == want)
			return true;
	return false;
}

/*
 * Any role may take the relay's advisory lock: here the application's role,
 * from a console, as a mistake would. The standby (running as the relay's own
 * role, which may not see another role's address) names the session as a
 * foreign one and says how to end it, and the gauge says so until it goes.
 */
START_TEST(a_foreign_session_holding_the_lock_is_named_and_counted)
{
	static const char *const queues[] = { "queue:default", NULL };
	PGconn *c = h_pg(), *app;
	redisContext *r = h_redis();
	struct relay_proc p;
	char url[256], app_url[256], want[300];
	long long pid;
	int port;

	h_relay_role(c, "sd_lock_relay", url, sizeof(url));
	h_sql(c, "DROP ROLE IF EXISTS sd_lock_app");
	h_sql(c, "CREATE ROLE sd_lock_app LOGIN IN ROLE stagedrain_app");
	snprintf(app_url, sizeof(app_url),
		 "host=127.0.0.1 port=%s dbname=postgres user=sd_lock_app"
		 " application_name=rails-console",
		 PQport(c));
	app = PQconnectdb(app_url);
	ck_assert_msg(PQstatus(app) == CONNECTION_OK, "connect as sd_lock_app: %s", PQerrorMessage(app));
	pid = h_sql(app, "SELECT pg_backend_pid()");
	h_sql(app, "SELECT pg_advisory_lock(%lld)", KEYS_LOCK_DEFAULT);

	h_relay_start(&p, "behind-foreign",
		      (const char *const[]){ "--pg-url", url, "--poll-interval", "20ms", "--http-addr", "127.0.0.1:0",
					     "--watch-interval", "200ms", NULL });
	port = h_http_port(&p);
	RELAY_CHECK(&p, h_log_wait(&p, "a session that is not a relay holds the leader lock", 10000),
		    "no line naming a foreign holder; see %s", p.log);
	snprintf(want, sizeof(want),
		 "holder=foreign pid=%lld user=sd_lock_app application_name=rails-console"
		 " client_addr=\"not visible to this role\" session_start=\"not visible to this role\"",
		 pid);
	RELAY_CHECK(&p, h_log_contains(p.log, want), "no \"%s\" in %s", want, p.log);
	snprintf(want, sizeof(want), "pg_terminate_backend(%lld)", pid);
	RELAY_CHECK(&p, h_log_contains(p.log, want), "no \"%s\" in %s", want, p.log);
	RELAY_CHECK(&p, !h_log_contains(p.log, "another relay is the leader"), "a foreign session named a relay");
	RELAY_CHECK(&p, lock_foreign_is(port, 1), "stagedrain_leader_lock_foreign is %g, not 1", lock_foreign(port));

	h_snapshot_expected(c);
	h_stage_expected(c, "default", 1, 1);
	h_sql(app, "SELECT pg_advisory_unlock(%lld)", KEYS_LOCK_DEFAULT);
	RELAY_CHECK(&p, h_log_wait(&p, "became leader", 10000), "no lead after the unlock; see %s", p.log);
	for (long long t0 = mono_ms(); h_sql(c, "SELECT count(*) FROM staged_jobs") > 0; sleep_ms(20))
		RELAY_CHECK(&p, mono_ms() - t0 < 10000, "the job was not relayed within 10 s; see %s", p.log);
	h_assert_each_once(c, r, queues, "queue:default", 1);
	RELAY_CHECK(&p, lock_foreign_is(port, 0), "stagedrain_leader_lock_foreign is %g on the leader",
		    lock_foreign(port));
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 5000), 0);
	PQfinish(app);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* Behind another relay, a standby says so (with what Postgres shows of it)
 * and the foreign-holder gauge stays 0. */
START_TEST(a_standby_behind_a_relay_names_it_as_a_relay)
{
	PGconn *c = h_pg();
	struct relay_proc a, b;
	char want[200];
	long long pid;
	int port;

	h_relay_start(&a, "relay-a", continuous);
	ck_assert(h_log_wait(&a, "became leader", 10000));
	pid = h_sql(c, "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1");
	h_relay_start(&b, "relay-b",
		      (const char *const[]){ "--poll-interval", "20ms", "--http-addr", "127.0.0.1:0",
					     "--watch-interval", "200ms", NULL });
	port = h_http_port(&b);
	RELAY_CHECK(&b, h_log_wait(&b, "another relay is the leader; waiting as standby", 10000),
		    "no standby line; see %s", b.log);
	/* The tests' role is a superuser: it sees the relay's address and start. */
	snprintf(want, sizeof(want),
		 "holder=relay pid=%lld user=postgres application_name=stagedrain"
		 " client_addr=127.0.0.1 session_start=20",
		 pid);
	RELAY_CHECK(&b, h_log_contains(b.log, want), "no \"%s\" in %s", want, b.log);
	RELAY_CHECK(&b, !h_log_contains(b.log, "not a relay"), "a relay was named foreign; see %s", b.log);
	RELAY_CHECK(&b, lock_foreign_is(port, 0), "stagedrain_leader_lock_foreign is %g, not 0", lock_foreign(port));
	h_relay_kill(&a, SIGTERM);
	h_relay_kill(&b, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&a, 5000), 0);
	ck_assert_int_eq(h_relay_wait(&b, 5000), 0);
	PQfinish(c);
}
END_TEST

#define GRANT_LOCK "GRANT EXECUTE ON FUNCTION pg_try_advisory_lock(bigint) TO PUBLIC"

/* Every function that takes an advisory lock, for a DO block's loop. */
#define LOCK_FUNCTIONS                                                                                                 \
	"SELECT oid::regprocedure FROM pg_proc WHERE pronamespace = 'pg_catalog'::regnamespace"                        \
	" AND proname ~ '^pg_(try_)?advisory_(xact_)?lock(_shared)?$'"

/* README "Security", as written there: they are revoked from PUBLIC... */
#define REVOKE_LOCKS                                                                                                   \
	"DO $$ DECLARE f regprocedure; BEGIN FOR f IN " LOCK_FUNCTIONS " LOOP"                                         \
	" EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f); END LOOP; END $$"
/* ...and the relay's group gets back the two it uses. */
#define GRANT_RELAY_LOCKS                                                                                              \
	"GRANT EXECUTE ON FUNCTION pg_try_advisory_lock(bigint), pg_try_advisory_lock(int, int) TO stagedrain_relay"
/* What a test that revoked them leaves for the next: the default again. */
#define RESTORE_LOCKS                                                                                                  \
	"DO $$ DECLARE f regprocedure; BEGIN FOR f IN " LOCK_FUNCTIONS " LOOP"                                         \
	" EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO PUBLIC', f);"                                                \
	" IF to_regrole('stagedrain_relay') IS NOT NULL THEN"                                                          \
	" EXECUTE format('REVOKE ALL ON FUNCTION %s FROM stagedrain_relay', f); END IF; END LOOP; END $$"

/* The README's way to keep other roles from the lock works: the app's role
 * may no longer take it, and relays still lead (companion included) and
 * still know each other. */
START_TEST(the_readme_revoke_keeps_other_roles_from_the_lock)
{
	PGconn *c = h_pg(), *app;
	PGresult *res;
	struct relay_proc a, b;
	char url[256], app_url[256], want[200];
	const char *const b_args[] = { "--pg-url",    url,           "--poll-interval",  "20ms",
				       "--http-addr", "127.0.0.1:0", "--watch-interval", "200ms",
				       NULL };
	int port;

	h_relay_role(c, "sd_lock_relay", url, sizeof(url));
	h_sql(c, "DROP ROLE IF EXISTS sd_lock_app");
	h_sql(c, "CREATE ROLE sd_lock_app LOGIN IN ROLE stagedrain_app");
	h_sql(c, "%s", REVOKE_LOCKS);
	h_sql(c, "%s", GRANT_RELAY_LOCKS);
	snprintf(app_url, sizeof(app_url), "host=127.0.0.1 port=%s dbname=postgres user=sd_lock_app", PQport(c));
	app = PQconnectdb(app_url);
	ck_assert_msg(PQstatus(app) == CONNECTION_OK, "connect as sd_lock_app: %s", PQerrorMessage(app));
	for (int i = 0; i < 2; i++) {
		res = PQexec(app, i ? "SELECT pg_try_advisory_xact_lock(1)" : "SELECT pg_advisory_lock(1)");
		ck_assert_str_eq(PQresultErrorField(res, PG_DIAG_SQLSTATE), "42501");
		PQclear(res);
	}
	PQfinish(app);

	h_relay_start(&a, "granted-a", (const char *const[]){ "--pg-url", url, "--poll-interval", "20ms", NULL });
	RELAY_CHECK(&a, h_log_wait(&a, "became leader", 10000), "no lead with the grant; see %s", a.log);
	h_relay_start(&b, "granted-b", b_args);
	port = h_http_port(&b);
	RELAY_CHECK(&b, h_log_wait(&b, "another relay is the leader", 10000), "no relay named; see %s", b.log);
	/* The same role: it sees the other relay's address. */
	snprintf(want, sizeof(want),
		 "holder=relay pid=%lld user=sd_lock_relay application_name=stagedrain"
		 " client_addr=127.0.0.1",
		 h_sql(c, "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"));
	RELAY_CHECK(&b, h_log_contains(b.log, want), "no \"%s\" in %s", want, b.log);
	RELAY_CHECK(&b, lock_foreign_is(port, 0), "stagedrain_leader_lock_foreign is %g", lock_foreign(port));
	ck_assert(!h_log_contains(a.log, "companion"));
	h_relay_kill(&a, SIGTERM);
	h_relay_kill(&b, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&a, 5000), 0);
	ck_assert_int_eq(h_relay_wait(&b, 5000), 0);
	h_sql(c, "%s", RESTORE_LOCKS);
	PQfinish(c);
}
END_TEST

/*
 * The lock query itself fails: the relay's role may not execute
 * pg_try_advisory_lock (an admin revoked it from PUBLIC). The relay warns,
 * backs off, and pushes nothing while it holds no lock; once the grant is
 * back it leads and drains.
 */
START_TEST(a_failing_lock_query_is_retried_and_nothing_is_pushed_without_the_lock)
{
	static const char *const queues[] = { "queue:default", NULL };
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;
	char url[256];
	bool retried;

	h_relay_role(c, "sd_lockless", url, sizeof(url));
	h_sql(c, "REVOKE EXECUTE ON FUNCTION pg_try_advisory_lock(bigint) FROM PUBLIC");
	h_snapshot_expected(c);
	h_stage_expected(c, "default", 1, 50);
	h_relay_start(&p, "lockless", (const char *const[]){ "--poll-interval", "20ms", "--pg-url", url, NULL });
	retried = h_log_wait_count(&p, "could not take the leader lock", 3, 20000);
	ck_assert_msg(h_cmd_int(r, "LLEN queue:default") == 0, "pushed without the lock; see %s", p.log);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 50);
	ck_assert_msg(retried, "no retried lock failure; see %s", p.log);
	ck_assert(h_log_contains(p.log, "sqlstate=42501"));
	ck_assert(!h_log_contains(p.log, "became leader"));
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"), 0);

	h_sql(c, GRANT_LOCK);
	ck_assert_msg(h_log_wait(&p, "became leader", 20000), "no lead after the grant; see %s", p.log);
	for (long long t0 = mono_ms(); h_sql(c, "SELECT count(*) FROM staged_jobs") > 0;) {
		ck_assert_msg(mono_ms() - t0 < 20000, "jobs not drained within 20 s; see %s", p.log);
		sleep_ms(20);
	}
	h_load_seen(c, r, queues);
	ck_assert_int_eq(h_missing(c), 0);
	ck_assert_int_eq(h_duplicates(c), 0);
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 5000), 0);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* Whatever a failed test left revoked, the next one starts with the default grant. */
static void grant_lock(void)
{
	PGconn *c = h_pg();

	h_sql(c, GRANT_LOCK);
	h_sql(c, "%s", RESTORE_LOCKS);
	PQfinish(c);
}

static void setup(void)
{
	grant_lock();
	h_reset();
}

Suite *leader_suite(void)
{
	Suite *s = suite_create("leader");
	TCase *tc = tcase_create("election");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_unchecked_fixture(tc, NULL, grant_lock);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, one_leader_and_standby_takes_over);
	tcase_add_test(tc, a_leader_that_lost_its_session_mid_batch_stands_by);
	tcase_add_test(tc, a_waiting_standby_holds_no_snapshot);
	tcase_add_test(tc, a_failing_lock_query_is_retried_and_nothing_is_pushed_without_the_lock);
	tcase_add_test(tc, a_foreign_session_holding_the_lock_is_named_and_counted);
	tcase_add_test(tc, a_standby_behind_a_relay_names_it_as_a_relay);
	tcase_add_test(tc, the_readme_revoke_keeps_other_roles_from_the_lock);
	suite_add_tcase(s, tc);
	return s;
}
