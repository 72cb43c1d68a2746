/* Every kind of xmin holder, made for real on a primary and its streaming
 * standby (services.sh pgxm-start), named by the relay's warning and gauges,
 * and cleared when it ends; and the dead-letter gauges. */
#include "fmacros.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suites.h"

#define WAIT_MS 30000
#define WATCH_MS 300

static char primary_url[256], standby_url[256];

/* The servers every case shares: starting them (two base backups) is most of the suite's time. */
static void servers_up(void)
{
	h_services("pgxm-start");
	snprintf(primary_url, sizeof(primary_url), "postgresql://postgres@127.0.0.1:%d/postgres", h_port("pgxm1"));
	snprintf(standby_url, sizeof(standby_url), "postgresql://postgres@127.0.0.1:%d/postgres", h_port("pgxm2"));
}

static void servers_down(void)
{
	h_services("pgxm-stop");
}

static PGconn *pg_at(const char *url)
{
	PGconn *c = PQconnectdb(url);

	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s: %s", url, PQerrorMessage(c));
	return c;
}

/* Redis flushed, the primary migrated and its tables empty. */
static PGconn *fresh_primary(void)
{
	const char *const migrate[] = { "migrate", "--pg-url", primary_url, NULL };
	PGconn *c;

	h_reset();
	ck_assert_int_eq(h_relay_run("migrate-xmin", migrate), 0);
	c = pg_at(primary_url);
	h_sql(c, "TRUNCATE staged_jobs, staged_jobs_dead, staged_jobs_held RESTART IDENTITY");
	return c;
}

/* Transactions begun after a holder's xmin: what makes it hold anything back. */
static void burn_xids(PGconn *c, int n)
{
	for (int i = 0; i < n; i++)
		h_sql(c, "SELECT txid_current()");
}

/* The relay on the primary, watching every WATCH_MS, warning past 100 ms; its HTTP port. */
static int start_relay(struct relay_proc *p, const char *name)
{
	const char *const args[] = { "--pg-url", primary_url,       "--http-addr", "127.0.0.1:0", "--watch-interval",
				     "300ms",    "--warn-xact-age", "100ms",       NULL };

	h_relay_start(p, name, args);
	return h_http_port(p);
}

static void stop_relay(struct relay_proc *p)
{
	h_relay_kill(p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(p, WAIT_MS), 0);
}

static double sample(int port, const char *series)
{
	int status;
	char *page = h_http_get(port, "/metrics", &status);
	double v = h_metric_sample(page, series);

	ck_assert_int_eq(status, 200);
	free(page);
	return v;
}

/* Waits for series to be above lo and at most hi; both NAN: for it to be absent. */
static void wait_sample(struct relay_proc *p, int port, const char *series, double lo, double hi)
{
	long long t0 = mono_ms();
	double v;

	for (;;) {
		v = sample(port, series);
		if (isnan(lo) ? isnan(v) : v > lo && v <= hi)
			return;
		RELAY_CHECK(p, mono_ms() - t0 < WAIT_MS, "%s is %g after %d ms", series, v, WAIT_MS);
		sleep_ms(50);
	}
}

#define ABOVE(x) (x), INFINITY
#define EQUALS(x) ((x)-0.5), (x)
#define ABSENT NAN, NAN

/* Waits for a line of the log holding both a and b; returns how long it took. */
static long long wait_line(struct relay_proc *p, const char *a, const char *b)
{
	long long t0 = mono_ms();

	while (logs_count_both(p->log, a, b) <= 0) {
		RELAY_CHECK(p, mono_ms() - t0 < WAIT_MS, "no line with \"%s\" and \"%s\" in %s", a, b, p->log);
		sleep_ms(20);
	}
	return mono_ms() - t0;
}

/*
 * Seed 000's holder: a REPEATABLE READ transaction on a hot_standby_feedback
 * standby, invisible in the primary's pg_stat_activity. The relay names the
 * standby by its application_name and address once the primary knows its
 * xmin (feedback comes each second), and says when the query ends. An idle
 * standby's feedback lags the primary too (the relay's own reads take an xid
 * each), so what is asserted is this transaction's xmin, not any standby line.
 */
START_TEST(standby_query_is_named_and_cleared)
{
	PGconn *c = fresh_primary(), *s = pg_at(standby_url);
	struct relay_proc p;
	char xmin[32], held[64];
	long long t0, took;
	int port = start_relay(&p, "xmin-standby");

	h_sql(s, "BEGIN ISOLATION LEVEL REPEATABLE READ");
	h_sql_text(s, "SELECT txid_snapshot_xmin(txid_current_snapshot()) % 4294967296", xmin, sizeof(xmin));
	snprintf(held, sizeof(held), "xmin=%s ", xmin);
	burn_xids(c, 60);
	/* The primary holds it once the standby's feedback says so. */
	t0 = mono_ms();
	while (h_sql(c,
		     "SELECT count(*) FROM pg_stat_replication WHERE application_name = 'pgxm-standby'"
		     " AND backend_xmin::text = '%s'",
		     xmin) == 0) {
		RELAY_CHECK(&p, mono_ms() - t0 < WAIT_MS, "the standby's feedback did not reach the primary");
		sleep_ms(20);
	}
	took = wait_line(&p, "kind=standby application=pgxm-standby client_addr=127.0.0.1", held);
	fprintf(stderr, "xmin: standby named %lld ms after the primary held its xmin (watch interval %d ms)\n", took,
		WATCH_MS);
	ck_assert(logs_count_both(p.log, held,
				  "end its long query or transaction, or turn hot_standby_feedback "
				  "off there") > 0);
	wait_sample(&p, port, "stagedrain_xmin_holder_xids{kind=\"standby\"}", ABOVE(60));
	wait_sample(&p, port, "stagedrain_xmin_holder_age_seconds{kind=\"standby\"}", ABOVE(0));
	ck_assert_int_eq(logs_count_both(p.log, "cleared", held), 0);

	h_sql(s, "COMMIT");
	wait_line(&p, "cleared", held);
	/* What lags now is the idle standby's feedback: far fewer xids. */
	wait_sample(&p, port, "stagedrain_xmin_holder_xids{kind=\"standby\"}", -1, 59);
	stop_relay(&p);
	PQfinish(s);
	PQfinish(c);
}
END_TEST

/* A logical slot nobody reads: it holds the catalogs' horizon for ever. */
/* `stagedrain status` picks an inactive slot first (it holds until dropped) and needs a person. */
static void status_names_the_slot(void)
{
	const char *const argv[] = { "status", "--pg-url", primary_url, "--redis-url", h_env("TEST_REDIS_URL"), NULL };
	struct relay_proc st;

	h_relay_start_bare(&st, "xmin-status", argv);
	ck_assert_int_eq(h_relay_wait(&st, WAIT_MS), 1);
	ck_assert_msg(h_log_contains(st.log, "by a slot (logical slot \"xmin_test\", inactive)"), "see %s", st.log);
	ck_assert_msg(h_log_contains(st.log, "SELECT pg_drop_replication_slot('xmin_test')"), "see %s", st.log);
	ck_assert_msg(h_log_contains(st.log, "an inactive replication slot"), "see %s", st.log);
}

START_TEST(inactive_logical_slot_is_named_and_cleared)
{
	PGconn *c = fresh_primary();
	struct relay_proc p;
	int port;

	h_sql(c, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'xmin_test'");
	h_sql(c, "SELECT pg_create_logical_replication_slot('xmin_test', 'test_decoding')");
	port = start_relay(&p, "xmin-slot");
	burn_xids(c, 3); /* from here it holds something back */
	fprintf(stderr, "xmin: slot named %lld ms after it began to hold (watch interval %d ms)\n",
		wait_line(&p, "kind=slot slot=xmin_test type=logical active=no",
			  "SELECT pg_drop_replication_slot('xmin_test')"),
		WATCH_MS);
	ck_assert(logs_count_both(p.log, "system catalogs' xmin horizon", "kind=slot") > 0);
	wait_sample(&p, port, "stagedrain_xmin_holder_age_seconds{kind=\"slot\"}", ABOVE(0));
	wait_sample(&p, port, "stagedrain_xmin_holder_xids{kind=\"slot\"}", ABOVE(2));
	status_names_the_slot();

	h_sql(c, "SELECT pg_drop_replication_slot('xmin_test')");
	wait_line(&p, "cleared", "name=xmin_test");
	wait_sample(&p, port, "stagedrain_xmin_holder_xids{kind=\"slot\"}", EQUALS(0));
	stop_relay(&p);
	PQfinish(c);
}
END_TEST

/* A prepared transaction outlives its session; only its gid ends it. */
START_TEST(prepared_transaction_is_named_and_cleared)
{
	PGconn *c = fresh_primary(), *x = pg_at(primary_url);
	struct relay_proc p;
	int port;

	h_sql(x, "BEGIN");
	h_sql(x, "SELECT txid_current()");
	h_sql(x, "PREPARE TRANSACTION 'xmin''s test'");
	PQfinish(x);
	port = start_relay(&p, "xmin-prepared");
	burn_xids(c, 3);
	fprintf(stderr, "xmin: prepared transaction named %lld ms after the relay started (watch interval %d ms)\n",
		wait_line(&p, "kind=prepared gid=\"xmin's test\" owner=postgres", "ROLLBACK PREPARED 'xmin''s test'"),
		WATCH_MS);
	wait_sample(&p, port, "stagedrain_xmin_holder_age_seconds{kind=\"prepared\"}", ABOVE(0));

	h_sql(c, "ROLLBACK PREPARED 'xmin''s test'");
	wait_line(&p, "cleared", "kind=prepared");
	wait_sample(&p, port, "stagedrain_xmin_holder_xids{kind=\"prepared\"}", EQUALS(0));
	stop_relay(&p);
	PQfinish(c);
}
END_TEST

/* A backend, as before, now with what ends it and a line when it has ended. */
START_TEST(backend_is_named_and_cleared)
{
	PGconn *c = fresh_primary(), *x = pg_at(primary_url);
	struct relay_proc p;
	char pid_field[48], remedy[64];
	long long pid = h_sql(x, "SELECT pg_backend_pid()");
	int port;

	snprintf(pid_field, sizeof(pid_field), "kind=backend pid=%lld ", pid);
	snprintf(remedy, sizeof(remedy), "SELECT pg_terminate_backend(%lld)", pid);
	h_sql(x, "BEGIN ISOLATION LEVEL REPEATABLE READ");
	h_sql(x, "SELECT count(*) FROM staged_jobs");
	port = start_relay(&p, "xmin-backend");
	wait_line(&p, pid_field, remedy);
	wait_sample(&p, port, "stagedrain_xmin_holder_age_seconds{kind=\"backend\"}", ABOVE(0));
	ck_assert(sample(port, "stagedrain_oldest_transaction_age_seconds") > 0);

	h_sql(x, "COMMIT");
	snprintf(pid_field, sizeof(pid_field), "kind=backend pid=%lld ", pid);
	wait_line(&p, "cleared", pid_field);
	wait_sample(&p, port, "stagedrain_xmin_holder_age_seconds{kind=\"backend\"}", EQUALS(0));
	stop_relay(&p);
	PQfinish(x);
	PQfinish(c);
}
END_TEST

/* Rows the relay dead-letters show up by queue, with the oldest's age. */
START_TEST(dead_rows_are_gauged_by_queue)
{
	PGconn *c = fresh_primary();
	struct relay_proc p;
	int port;

	/* args must be a JSON array: these cannot be jobs. */
	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args) VALUES"
		 " ('dq1', 'Bad', '{\"x\": 1}'), ('dq1', 'Bad', '\"s\"'), ('dq\"2', 'Bad', '1')");
	h_stage(c, "fine", 1, 3);
	port = start_relay(&p, "xmin-dead");
	wait_sample(&p, port, "stagedrain_dead_jobs{queue=\"dq1\"}", EQUALS(2));
	ck_assert(sample(port, "stagedrain_dead_jobs{queue=\"dq\\\"2\"}") == 1);
	ck_assert(isnan(sample(port, "stagedrain_dead_jobs{queue=\"fine\"}")));
	wait_sample(&p, port, "stagedrain_dead_oldest_age_seconds", ABOVE(0));
	ck_assert(sample(port, "stagedrain_dead_letter_jobs_total") == 3);

	/* Replayed or purged: the gauges follow the table. */
	h_sql(c, "DELETE FROM staged_jobs_dead WHERE queue = 'dq1'");
	wait_sample(&p, port, "stagedrain_dead_jobs{queue=\"dq1\"}", ABSENT);
	h_sql(c, "DELETE FROM staged_jobs_dead");
	wait_sample(&p, port, "stagedrain_dead_oldest_age_seconds", EQUALS(0));
	stop_relay(&p);
	PQfinish(c);
}
END_TEST

/*
 * A role without pg_read_all_stats, and without SELECT on the dead table
 * (sql/roles.sql's relay role): one line for each, the series it cannot know
 * left out rather than shown as 0, and the relay ready and draining. On the
 * shared server, whose superuser session holds a transaction the role cannot see.
 */
START_TEST(unprivileged_role_degrades_with_one_line_each)
{
	PGconn *c, *x = h_pg();
	struct relay_proc p;
	char conninfo[256];
	const char *args[] = { "--pg-url", conninfo,          "--http-addr", "127.0.0.1:0", "--watch-interval",
			       "100ms",    "--warn-xact-age", "100ms",       NULL };
	int port;

	h_reset();
	c = h_pg();
	h_relay_role(c, "xmin_relay", conninfo, sizeof(conninfo));
	h_sql(x, "BEGIN ISOLATION LEVEL REPEATABLE READ");
	h_sql(x, "SELECT count(*) FROM staged_jobs");
	h_relay_start(&p, "xmin-unprivileged", args);
	port = h_http_port(&p);
	h_stage(c, "default", 1, 5);
	wait_sample(&p, port, "stagedrain_jobs_relayed_total{queue=\"default\"}", EQUALS(5));
	wait_sample(&p, port, "stagedrain_xmin_holder_xids{kind=\"prepared\"}", EQUALS(0));
	sleep_ms(500); /* five readings more */
	ck_assert(sample(port, "stagedrain_ready") == 1);
	ck_assert(sample(port, "stagedrain_xmin_holder_xids{kind=\"slot\"}") == 0);
	ck_assert(isnan(sample(port, "stagedrain_xmin_holder_age_seconds{kind=\"backend\"}")));
	ck_assert(isnan(sample(port, "stagedrain_xmin_holder_age_seconds{kind=\"standby\"}")));
	ck_assert(isnan(sample(port, "stagedrain_oldest_transaction_age_seconds")));
	/* roles.sql lets the relay read the dead rows' queue and failed_at, for these gauges. */
	ck_assert(sample(port, "stagedrain_dead_oldest_age_seconds") == 0);
	ck_assert_int_eq(h_log_count(p.log, "cannot see other roles' transactions or the standbys' feedback"), 1);
	ck_assert_int_eq(h_log_count(p.log, "cannot read staged_jobs_dead"), 0);
	ck_assert_int_eq(h_log_count(p.log, "kind=backend"), 0);
	/* A role granted by an older roles.sql may not: one line, and the series left out. */
	h_sql(c, "REVOKE SELECT (queue, failed_at) ON staged_jobs_dead FROM stagedrain_relay");
	wait_sample(&p, port, "stagedrain_dead_oldest_age_seconds", ABSENT);
	sleep_ms(500);
	ck_assert_int_eq(h_log_count(p.log, "cannot read staged_jobs_dead"), 1);
	ck_assert(sample(port, "stagedrain_ready") == 1);
	stop_relay(&p);
	h_sql(c, "GRANT SELECT (queue, failed_at) ON staged_jobs_dead TO stagedrain_relay");
	h_sql(x, "COMMIT");
	h_sql(c, "DROP OWNED BY xmin_relay");
	h_sql(c, "DROP ROLE xmin_relay");
	PQfinish(x);
	PQfinish(c);
}
END_TEST

Suite *xmin_suite(void)
{
	Suite *s = suite_create("xmin");
	TCase *tc = tcase_create("holders");

	tcase_add_unchecked_fixture(tc, servers_up, servers_down);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, standby_query_is_named_and_cleared);
	tcase_add_test(tc, inactive_logical_slot_is_named_and_cleared);
	tcase_add_test(tc, prepared_transaction_is_named_and_cleared);
	tcase_add_test(tc, backend_is_named_and_cleared);
	tcase_add_test(tc, dead_rows_are_gauged_by_queue);
	tcase_add_test(tc, unprivileged_role_degrades_with_one_line_each);
	suite_add_tcase(s, tc);
	return s;
}
