/* The relay as a sidecar starts: servers that are not up yet are waited for,
 * settings that can never work end it at once, and the process keeps its
 * secrets (no core dump, a warning for a password in ps) and its head on
 * SIGHUP. Real servers, stopped and started by the harness. */
#include "fmacros.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "suites.h"

#define WAIT_MS 30000
/* What nobody's uid is on Debian: the relay runs as it when the test is root. */
#define NOBODY 65534

/* A test that failed with a server stopped must not leave it so for the next. */
static void restart_servers(void)
{
	redisContext *r = redisConnect("127.0.0.1", h_port("redis"));
	bool down = !r || r->err;

	redisFree(r);
	h_services("pg-start");
	if (down)
		h_services("redis-start");
}

/* Before each test, since Check runs no teardown after a failed one. */
static void setup(void)
{
	restart_servers();
	h_reset();
}

/* A loopback port nothing listens on (the kernel just handed it out). */
static int closed_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static void start_http_relay(struct relay_proc *p, const char *name)
{
	static const char *const args[] = { "--http-addr", "127.0.0.1:0", "--poll-interval", "20ms", "--watch-interval",
					    "200ms",       NULL };

	h_relay_start(p, name, args);
}

/* /readyz answers 503, its text holds want, and by default no address. */
static void assert_not_ready(struct relay_proc *p, int port, const char *want, bool detail)
{
	int status = 0;
	char *body = h_http_get(port, "/readyz", &status);

	RELAY_CHECK(p, status == 503 && strstr(body, want), "/readyz: %d %s (want 503 and \"%s\")", status, body, want);
	RELAY_CHECK(p, detail || !strstr(body, "127.0.0.1"), "/readyz shows an address: %s", body);
	free(body);
}

/* A job staged now arrives in Redis within WAIT_MS. */
static void assert_relays(struct relay_proc *p)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	long long t0 = mono_ms();

	h_stage(c, "default", 1, 1);
	while (h_cmd_int(r, "LLEN queue:default") == 0) {
		RELAY_CHECK(p, mono_ms() - t0 < WAIT_MS, "the job did not arrive; see %s", p->log);
		sleep_ms(20);
	}
	PQfinish(c);
	redisFree(r);
}

static void stop_relay(struct relay_proc *p)
{
	h_relay_kill(p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(p, 15000), 0);
}

/* With server (its services.sh name: svc) stopped, the relay starts, says it
 * waits, answers /readyz 503 naming it, and relays once it is started. */
static void assert_waits_for(const char *server, const char *svc)
{
	char cmd[64], line[128], reason[64];
	struct relay_proc p;
	int port;

	snprintf(cmd, sizeof(cmd), "%s-stop", svc);
	h_services(cmd);
	start_http_relay(&p, server);
	port = h_http_port(&p);
	snprintf(line, sizeof(line), "could not reach %s to start; will retry", server);
	RELAY_CHECK(&p, h_log_wait(&p, line, WAIT_MS), "no \"%s\" in %s", line, p.log);
	snprintf(reason, sizeof(reason), "%s: not connected", server);
	assert_not_ready(&p, port, reason, false);
	RELAY_CHECK(&p, !proc_exited(&p.proc), "the relay exited with %s down; see %s", server, p.log);
	snprintf(cmd, sizeof(cmd), "%s-start", svc);
	h_services(cmd);
	RELAY_CHECK(&p, h_log_wait(&p, "became leader", WAIT_MS), "did not lead once %s was up; see %s", server, p.log);
	assert_relays(&p);
	stop_relay(&p);
}

START_TEST(postgres_down_at_start_is_waited_for)
{
	assert_waits_for("postgres", "pg");
}
END_TEST

START_TEST(redis_down_at_start_is_waited_for)
{
	assert_waits_for("redis", "redis");
}
END_TEST

/* With --readyz-detail /readyz says why the server is not there yet; a
 * stop signal while it is waited for ends the relay cleanly. */
START_TEST(sigterm_while_waiting_for_a_server_stops_cleanly)
{
	char url[128];
	struct relay_proc p;
	int port;

	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", closed_port());
	h_relay_start(&p, "waiting",
		      (const char *const[]){ "--redis-url", url, "--http-addr", "127.0.0.1:0", "--readyz-detail",
					     NULL });
	port = h_http_port(&p);
	RELAY_CHECK(&p, h_log_wait(&p, "could not reach redis to start; will retry", WAIT_MS), "no retry line in %s",
		    p.log);
	assert_not_ready(&p, port, "Connection refused", true);
	stop_relay(&p);
	ck_assert(h_log_contains(p.log, "stopped on signal while waiting for a server"));
}
END_TEST

/* Runs the relay with one setting replaced; it must exit 1 within 10 s,
 * naming setting and want in one "cannot start" line. */
static void assert_cannot_start(const char *name, const char *flag, const char *value, const char *want)
{
	struct relay_proc p;
	char line[256];

	h_relay_start(&p, name, (const char *const[]){ flag, value, NULL });
	RELAY_CHECK(&p, h_relay_wait(&p, 10000) == 1, "%s: the relay did not exit 1 at once; see %s", name, p.log);
	snprintf(line, sizeof(line), "msg=\"cannot start\" setting=%s", flag);
	ck_assert_msg(h_log_contains(p.log, line), "%s: no \"%s\" in %s", name, line, p.log);
	ck_assert_msg(h_log_contains(p.log, want), "%s: no \"%s\" in %s", name, want, p.log);
	ck_assert_msg(!h_log_contains(p.log, "will retry"), "%s: retried a setting that cannot work", name);
}

START_TEST(settings_that_can_never_work_end_the_start_at_once)
{
	char url[512], redis[128];
	PGconn *c = h_pg();

	snprintf(url, sizeof(url), "postgresql://postgres@127.0.0.1:%d/stagedrain_no_such_db", h_port("pg"));
	assert_cannot_start("no-db", "--pg-url", url, "does not exist");
	snprintf(url, sizeof(url), "postgresql://stagedrain_no_such_role@127.0.0.1:%d/postgres", h_port("pg"));
	assert_cannot_start("no-role", "--pg-url", url, "does not exist");
	/* A database without the tables: the migration is missing. */
	h_sql(c, "DROP DATABASE IF EXISTS stagedrain_startup_empty");
	h_sql(c, "CREATE DATABASE stagedrain_startup_empty");
	snprintf(url, sizeof(url), "postgresql://postgres@127.0.0.1:%d/stagedrain_startup_empty", h_port("pg"));
	assert_cannot_start("unmigrated", "--pg-url", url, "stagedrain migrate");
	h_sql(c, "DROP DATABASE stagedrain_startup_empty");
	/* A password the server does not take (it has none). */
	snprintf(redis, sizeof(redis), "redis://:wrong@127.0.0.1:%d/0", h_port("redis"));
	assert_cannot_start("redis-auth", "--redis-url", redis, "AUTH");
	/* A database number the server does not have. */
	snprintf(redis, sizeof(redis), "redis://127.0.0.1:%d/999", h_port("redis"));
	assert_cannot_start("redis-db", "--redis-url", redis, "SELECT");
	PQfinish(c);
}
END_TEST

/* --once cannot wait forever for a server: a cron job or a deploy step
 * must end, with an error. */
START_TEST(once_gives_up_on_a_server_it_cannot_reach)
{
	char url[128];
	struct relay_proc p;
	long long t0 = mono_ms();

	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", closed_port());
	h_relay_start(&p, "once-unreachable", (const char *const[]){ "--once", "--redis-url", url, NULL });
	RELAY_CHECK(&p, h_relay_wait(&p, 40000) == 1, "--once did not exit 1; see %s", p.log);
	ck_assert_msg(mono_ms() - t0 >= 9000, "--once gave up before waiting for the server");
	ck_assert(h_log_contains(p.log, "could not reach redis to start; will retry"));
	ck_assert(h_log_contains(p.log, "--once gave up"));
}
END_TEST

START_TEST(sighup_is_logged_and_the_relay_carries_on)
{
	struct relay_proc p;

	start_http_relay(&p, "hup");
	RELAY_CHECK(&p, h_log_wait(&p, "became leader", WAIT_MS), "did not lead; see %s", p.log);
	h_relay_kill(&p, SIGHUP);
	RELAY_CHECK(&p, h_log_wait(&p, "received SIGHUP", WAIT_MS), "SIGHUP was not logged; see %s", p.log);
	h_relay_kill(&p, SIGHUP);
	RELAY_CHECK(&p, h_log_wait_count(&p, "received SIGHUP", 2, WAIT_MS), "the second SIGHUP was not logged");
	RELAY_CHECK(&p, !proc_exited(&p.proc), "SIGHUP ended the relay; see %s", p.log);
	assert_relays(&p);
	stop_relay(&p);
}
END_TEST

/*
 * A SIGHUP that arrives while the relay is still starting (here while it
 * reads its --route-file from a pipe, which waits on the writer: anything
 * slow at start, a file on a slow mount) is handled as any other: noted,
 * never fatal. The pipe is the event waited for: the writer's open returns
 * once the relay has opened it for reading.
 */
START_TEST(sighup_while_starting_is_handled)
{
	struct relay_proc p;
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/hup-routes.fifo", h_env("TEST_DIR"));
	unlink(path);
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	signal(SIGPIPE, SIG_IGN); /* a relay the signal ended must fail the test, not kill it */
	h_relay_start(&p, "hup-start", (const char *const[]){ "--route-file", path, "--poll-interval", "20ms", NULL });
	f = fopen(path, "w");
	RELAY_CHECK(&p, f != NULL, "could not open %s", path);
	h_relay_kill(&p, SIGHUP);
	/* The relay holds the pipe open for reading until the writer closes it:
	 * still there, and reading, when the signal was sent. */
	fputs("# no routes\n", f);
	fclose(f);
	RELAY_CHECK(&p, h_log_wait(&p, "became leader", WAIT_MS), "did not lead after an early SIGHUP; see %s", p.log);
	RELAY_CHECK(&p, h_log_wait(&p, "received SIGHUP", WAIT_MS), "the early SIGHUP was not logged; see %s", p.log);
	assert_relays(&p);
	stop_relay(&p);
	unlink(path);
}
END_TEST

static void become_nobody(void *arg)
{
	(void)arg;
	if (getuid() == 0 && (setgid(NOBODY) != 0 || setuid(NOBODY) != 0))
		_exit(125);
}

/* The uid owning /proc/<pid>/environ: the process's own while it may be dumped,
 * root's once it may not. */
static uid_t proc_owner(pid_t pid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	ck_assert_int_eq(stat(path, &st), 0);
	return st.st_uid;
}

/* A process holding passwords dumps no core and lets no process of its
 * user read its memory. Run as another user when the test is root, so
 * that the owner tells the two apart. */
START_TEST(the_process_is_not_dumpable)
{
	char url[128];
	const char *argv[] = { h_env("STAGEDRAIN_BIN"), "--redis-url", url, "--pg-url", h_env("TEST_PG_URL"), NULL };
	struct proc_opts o = { .argv = argv, .child_setup = become_nobody };
	struct relay_proc p;
	uid_t uid = getuid() == 0 ? NOBODY : getuid();

	/* Waiting for a Redis that is not there keeps it running. */
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", closed_port());
	h_proc_start(&p, "dumpable", &o);
	RELAY_CHECK(&p, h_log_wait(&p, "could not reach redis to start", WAIT_MS), "the relay did not start; see %s",
		    p.log);
	RELAY_CHECK(&p, proc_owner(p.proc.pid) == 0,
		    "/proc/%d/environ is owned by uid %d: the relay (uid %d) is dumpable", (int)p.proc.pid,
		    (int)proc_owner(p.proc.pid), (int)uid);
	stop_relay(&p);
}
END_TEST

/* A password inside a URL flag is in ps for every user: one warning, which
 * never repeats the password; none when the URL comes from the environment. */
START_TEST(a_password_on_the_command_line_is_warned_about)
{
	char url[512], redis[128];
	struct relay_proc p;

	snprintf(url, sizeof(url), "postgresql://postgres:pg-sekrit@127.0.0.1:%d/postgres", h_port("pg"));
	snprintf(redis, sizeof(redis), "redis://:redis-sekrit@127.0.0.1:%d/0", h_port("redis"));
	h_relay_start(&p, "argv-password", (const char *const[]){ "--pg-url", url, "--redis-url", redis, NULL });
	/* The Redis has no password: AUTH is refused, so it ends at once. */
	RELAY_CHECK(&p, h_relay_wait(&p, 10000) == 1, "the relay did not exit 1; see %s", p.log);
	ck_assert_int_eq(h_log_count(p.log, "a password is given inside --pg-url on the command line"), 1);
	ck_assert_int_eq(h_log_count(p.log, "a password is given inside --redis-url on the command line"), 1);
	ck_assert_msg(!h_log_contains(p.log, "sekrit"), "a password is in %s", p.log);

	setenv("STAGEDRAIN_PG_URL", url, 1);
	h_relay_start_bare(&p, "env-password",
			   (const char *const[]){ "--redis-url", h_env("TEST_REDIS_URL"), "--once", NULL });
	unsetenv("STAGEDRAIN_PG_URL");
	RELAY_CHECK(&p, h_relay_wait(&p, 30000) == 0, "the relay failed; see %s", p.log);
	ck_assert(!h_log_contains(p.log, "a password is given"));
}
END_TEST

Suite *startup_suite(void)
{
	Suite *s = suite_create("startup");
	TCase *tc = tcase_create("startup");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, postgres_down_at_start_is_waited_for);
	tcase_add_test(tc, redis_down_at_start_is_waited_for);
	tcase_add_test(tc, sigterm_while_waiting_for_a_server_stops_cleanly);
	tcase_add_test(tc, settings_that_can_never_work_end_the_start_at_once);
	tcase_add_test(tc, once_gives_up_on_a_server_it_cannot_reach);
	tcase_add_test(tc, sighup_is_logged_and_the_relay_carries_on);
	tcase_add_test(tc, sighup_while_starting_is_handled);
	tcase_add_test(tc, the_process_is_not_dumpable);
	tcase_add_test(tc, a_password_on_the_command_line_is_warned_about);
	suite_add_tcase(s, tc);
	return s;
}
