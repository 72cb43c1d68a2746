/* TLS to Redis, against real TLS-only servers (services.sh tls-start): the
 * certificate is verified by default, a client certificate is sent when asked
 * for, and every failure to verify stops the relay at start with the setting
 * to fix, deleting nothing. */
#include "fmacros.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suites.h"

#define JOBS 300
#define WAIT_MS 30000

static void tls_up(void)
{
	h_reset();
	h_services("tls-start");
}

/* Stopped here too, so no TLS Redis outlives the case; `services.sh stop` is the backstop. */
static void tls_down(void)
{
	h_services("tls-stop");
}

/* TEST_DIR/tls/NAME: the CA, certificates and keys tls-start made. */
static const char *tls_file(const char *name)
{
	static char paths[8][600];
	static int next;
	char *p = paths[next++ % 8];

	snprintf(p, sizeof(paths[0]), "%s/tls/%s", h_env("TEST_DIR"), name);
	return p;
}

/* rediss://HOST:PORT/0 for the server whose port is in TEST_DIR/port_name.port. */
static const char *tls_url(const char *host, const char *port_name)
{
	static char urls[4][256];
	static int next;
	char *u = urls[next++ % 4];

	snprintf(u, sizeof(urls[0]), "rediss://%s:%d/0", host, h_port(port_name));
	return u;
}

/* Starts the relay against url with args (NULL-terminated) after them. */
static void start_relay(struct relay_proc *p, const char *name, const char *url, const char *const *args)
{
	const char *argv[40] = { "--pg-url", h_env("TEST_PG_URL"), "--redis-url", url, "--poll-interval", "20ms" };
	int n = 6;

	for (; args && *args && n < 39; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	h_relay_start_bare(p, name, argv);
}

static long long staged(PGconn *c)
{
	return h_sql(c, "SELECT count(*) FROM staged_jobs");
}

/* The relay drains JOBS jobs into the TLS Redis on port_name with --once and
 * exits 0, having logged a connection with tls=true. */
static void assert_drains(const char *name, const char *port_name, const char *url, const char *const *args)
{
	PGconn *c = h_pg();
	struct relay_proc p;
	const char *argv[40] = { "--once" };
	int n = 1, st;

	for (; args && *args && n < 39; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	h_stage(c, "default", 0, JOBS);
	start_relay(&p, name, url, argv);
	st = h_relay_wait(&p, WAIT_MS);
	RELAY_CHECK(&p, st == 0, "relay %s: exit status %d; see %s", name, st, p.log);
	ck_assert_int_eq(staged(c), 0);
	ck_assert_int_eq(h_tls_cli_int(port_name, "LLEN queue:default"), JOBS);
	ck_assert_msg(h_log_contains(p.log, "tls=true"), "no tls=true in %s", p.log);
	PQfinish(c);
}

START_TEST(verify_full_with_the_ca_file)
{
	assert_drains("tls-ca", "tls", tls_url("127.0.0.1", "tls"),
		      (const char *const[]){ "--redis-tls-ca-file", tls_file("ca.crt"), NULL });
}
END_TEST

/* The name the certificate must carry need not be the host connected to. */
START_TEST(verify_full_with_a_server_name)
{
	assert_drains("tls-name", "tls", tls_url("127.0.0.1", "tls"),
		      (const char *const[]){ "--redis-tls-ca-file", tls_file("ca.crt"), "--redis-tls-server-name",
					     "redis.test", NULL });
}
END_TEST

START_TEST(client_certificate_accepted)
{
	assert_drains("tls-client-cert", "tlsauth", tls_url("127.0.0.1", "tlsauth"),
		      (const char *const[]){ "--redis-tls-ca-file", tls_file("ca.crt"), "--redis-tls-cert-file",
					     tls_file("client.crt"), "--redis-tls-key-file", tls_file("client.key"),
					     NULL });
}
END_TEST

/* A start-up failure: the relay exits non-zero with one "cannot start" line
 * naming setting and containing cause, and every staged row is still there. */
struct refusal {
	const char *name, *host, *port_name;
	const char *args[8];
	const char *setting, *cause; /* for a missing file, its name */
};

static const struct refusal refusals[] = {
	{ "tls-wrong-ca",
	  "127.0.0.1",
	  "tls",
	  { "--redis-tls-ca-file", "other-ca.crt" },
	  "--redis-tls-ca-file",
	  "certificate verify failed" },
	{ "tls-system-cas", "127.0.0.1", "tls", { NULL }, "--redis-tls-ca-file", "certificate verify failed" },
	{ "tls-wrong-host",
	  "localhost",
	  "tls",
	  { "--redis-tls-ca-file", "ca.crt" },
	  "--redis-tls-server-name",
	  "hostname mismatch" },
	{ "tls-wrong-name",
	  "127.0.0.1",
	  "tls",
	  { "--redis-tls-ca-file", "ca.crt", "--redis-tls-server-name", "wrong.test" },
	  "--redis-tls-server-name",
	  "hostname mismatch" },
	{ "tls-no-client-cert",
	  "127.0.0.1",
	  "tlsauth",
	  { "--redis-tls-ca-file", "ca.crt" },
	  "--redis-tls-cert-file",
	  "client certificate" },
	{ "tls-missing-ca",
	  "127.0.0.1",
	  "tls",
	  { "--redis-tls-ca-file", "missing-ca.crt" },
	  "--redis-tls-ca-file",
	  "missing-ca.crt" },
	{ "tls-missing-key",
	  "127.0.0.1",
	  "tlsauth",
	  { "--redis-tls-ca-file", "ca.crt", "--redis-tls-cert-file", "client.crt", "--redis-tls-key-file",
	    "missing.key" },
	  "--redis-tls-key-file",
	  "missing.key" },
};

/* The refusal's args with each file name made a path under TEST_DIR/tls. */
static void refusal_argv(const struct refusal *t, const char **argv)
{
	int n = 0;

	for (const char *const *a = t->args; *a; a += 2) {
		argv[n++] = a[0];
		argv[n++] = strstr(a[0], "-file") ? tls_file(a[1]) : a[1];
	}
	argv[n] = NULL;
}

START_TEST(refused_at_start)
{
	const struct refusal *t = &refusals[_i];
	PGconn *c = h_pg();
	struct relay_proc p;
	const char *argv[10];
	char want[128];
	int st;

	h_stage(c, "default", 0, 50);
	refusal_argv(t, argv);
	start_relay(&p, t->name, tls_url(t->host, t->port_name), argv);
	st = h_relay_wait(&p, WAIT_MS);
	RELAY_CHECK(&p, st > 0, "relay %s: still running or exit 0 (%d); see %s", t->name, st, p.log);
	snprintf(want, sizeof(want), "msg=\"cannot start\" setting=%s ", t->setting);
	ck_assert_msg(h_log_count(p.log, want) == 1, "no one line with %s in %s", want, p.log);
	ck_assert_msg(h_log_contains(p.log, t->cause), "%s: the cause (%s) is not in %s", t->name, t->cause, p.log);
	ck_assert_int_eq(staged(c), 50);
	ck_assert_int_eq(h_tls_cli_int(t->port_name, "DBSIZE"), 0);
	PQfinish(c);
}
END_TEST

/* --redis-tls-insecure connects to a server whose certificate neither the
 * system CAs vouch for nor names localhost, and says so at start. */
START_TEST(insecure_skips_verification_with_a_warning)
{
	char log[600];

	assert_drains("tls-insecure", "tls", tls_url("localhost", "tls"),
		      (const char *const[]){ "--redis-tls-insecure", NULL });
	snprintf(log, sizeof(log), "%s/tls-insecure.log", h_env("TEST_DIR"));
	ck_assert_msg(logs_count_both(log, "level=warn", "insecure") > 0, "no warning about --redis-tls-insecure in %s",
		      log);
}
END_TEST

START_TEST(tls_flag_with_a_plain_url_is_a_config_error)
{
	static const char *const flags[][2] = {
		{ "--redis-tls-insecure", NULL },
		{ "--redis-tls-ca-file", "ca.crt" },
		{ "--redis-tls-server-name", "redis.test" },
	};
	const char *urls[] = { h_env("TEST_REDIS_URL"), "unix:///nonexistent/redis.sock" };

	for (size_t f = 0; f < sizeof(flags) / sizeof(flags[0]); f++)
		for (size_t u = 0; u < 2; u++) {
			struct relay_proc p;
			const char *argv[] = { flags[f][0], flags[f][1] ? tls_file(flags[f][1]) : NULL, NULL };
			int st;

			start_relay(&p, "tls-plain-url", urls[u], argv);
			st = h_relay_wait(&p, WAIT_MS);
			RELAY_CHECK(&p, st == 2, "%s with %s: exit status %d, not 2; see %s", flags[f][0], urls[u], st,
				    p.log);
			ck_assert_msg(h_log_count(p.log, "") == 1, "not one line in %s", p.log);
			ck_assert_msg(h_log_contains(p.log, flags[f][0]), "%s is not named in %s", flags[f][0], p.log);
		}
}
END_TEST

/* /readyz answers 200 once the relay leads over TLS, and /metrics names the server. */
START_TEST(metrics_and_readiness_over_tls)
{
	struct relay_proc p;
	char info[256];
	char *body = NULL;
	long long t0 = mono_ms();
	int port, st = 0;

	start_relay(&p, "tls-http", tls_url("127.0.0.1", "tls"),
		    (const char *const[]){ "--redis-tls-ca-file", tls_file("ca.crt"), "--http-addr", "127.0.0.1:0",
					   "--watch-interval", "200ms", NULL });
	port = h_http_port(&p);
	for (;;) {
		free(body);
		body = h_http_get(port, "/readyz", &st);
		if (st == 200 || mono_ms() - t0 > WAIT_MS)
			break;
		sleep_ms(100);
	}
	RELAY_CHECK(&p, st == 200 && strstr(body, "ready leader"), "/readyz: %d %s", st, body);
	free(body);
	body = h_http_get(port, "/metrics", &st);
	RELAY_CHECK(&p, st == 200, "/metrics: %d", st);
	/* HOST:PORT/DB, as the README says (spec11.md wrote HOST:PORT). */
	snprintf(info, sizeof(info),
		 "stagedrain_redis_master_info{address=\"127.0.0.1:%d/0\",master_name=\"\",tls=\"true\"} 1\n",
		 h_port("tls"));
	/* spec11 names stagedrain_up{server="redis"}, which no relay has: its readiness gauge instead. */
	RELAY_CHECK(&p, strstr(body, "\nstagedrain_ready 1\n"), "/metrics: not ready");
	RELAY_CHECK(&p, st == 200 && strstr(body, info), "/metrics (%d) lacks %s", st, info);
	free(body);
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, WAIT_MS), 0);
}
END_TEST

Suite *tls_suite(void)
{
	Suite *s = suite_create("tls");
	TCase *tc = tcase_create("tls");

	tcase_add_checked_fixture(tc, tls_up, tls_down);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, verify_full_with_the_ca_file);
	tcase_add_test(tc, verify_full_with_a_server_name);
	tcase_add_test(tc, client_certificate_accepted);
	tcase_add_loop_test(tc, refused_at_start, 0, sizeof(refusals) / sizeof(refusals[0]));
	tcase_add_test(tc, insecure_skips_verification_with_a_warning);
	tcase_add_test(tc, tls_flag_with_a_plain_url_is_a_config_error);
	tcase_add_test(tc, metrics_and_readiness_over_tls);
	suite_add_tcase(s, tc);
	return s;
}
