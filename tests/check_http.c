/* The HTTP endpoint against real servers, scraped with curl: every metric after
 * a known drain, /readyz across a Redis outage, the long-transaction warning,
 * the endpoint under abuse (slow and many clients), and the compose example's
 * services run as compose would run them. */
#include "fmacros.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "http.h"
#include "keys.h"
#include "suites.h"

#define WAIT_MS 30000

/* Reads a whole file (caller frees); "" if it is missing. */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *s = NULL;
	size_t n = 0;

	if (f) {
		FILE *out = open_memstream(&s, &n);
		int c;
		while ((c = fgetc(f)) != EOF)
			fputc(c, out);
		fclose(out);
		fclose(f);
	}
	return s ? s : strdup("");
}

static int count_lines(const char *path, const char *a, const char *b)
{
	char *log = slurp(path), *save = NULL;
	int n = 0;

	for (char *line = strtok_r(log, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		n += strstr(line, a) && strstr(line, b);
	free(log);
	return n;
}

/* The port on the relay's "serving http" line (key=value or JSON). */
static int logged_port(const char *path)
{
	char *log = slurp(path), *line = strstr(log, "serving http"), *at;
	int port;

	ck_assert_msg(line && (at = strstr(line, "127.0.0.1:")), "no address logged in %s", path);
	port = atoi(at + strlen("127.0.0.1:"));
	free(log);
	ck_assert_int_gt(port, 0);
	return port;
}

/* Starts the relay with the endpoint on a free port and returns that port,
 * read from its "serving http" log line. */
static int start_http_relay(struct relay_proc *p, const char *name, const char *const *args)
{
	const char *argv[32] = { "--http-addr", "127.0.0.1:0", "--watch-interval", "200ms" };
	int n = 4;

	for (; args && *args && n < 31; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	h_relay_start(p, name, argv);
	ck_assert_msg(h_log_wait(p, "serving http", WAIT_MS), "no \"serving http\" line in %s", p->log);
	return logged_port(p->log);
}

/* GET (or another method) with curl; returns the status, the body in *body. */
static int curl(int port, const char *method, const char *path, char **body)
{
	char cmd[PATH_MAX + 256], out[PATH_MAX], code[16] = "";
	FILE *f;

	snprintf(out, sizeof(out), "%s/curl.out", h_env("TEST_DIR"));
	snprintf(cmd, sizeof(cmd), "curl -sS --max-time 10 -X %s -o '%s' -w '%%{http_code}' http://127.0.0.1:%d%s",
		 method, out, port, path);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	if (!fgets(code, sizeof(code), f))
		code[0] = '\0';
	ck_assert_msg(pclose(f) == 0, "%s failed", cmd);
	if (body)
		*body = slurp(out);
	return atoi(code);
}

static char *scrape(int port)
{
	char *body;

	ck_assert_int_eq(curl(port, "GET", "/metrics", &body), 200);
	return body;
}

static double scrape_one(int port, const char *series)
{
	char *page = scrape(port);
	double v = h_metric_sample(page, series);

	free(page);
	return v;
}

/* Scrapes until series equals want (within tol), or fails after WAIT_MS. */
static void wait_sample(int port, const char *series, double want, double tol)
{
	long long t0 = mono_ms();
	double v;

	while (!((v = scrape_one(port, series)) >= want - tol && v <= want + tol)) {
		if (mono_ms() - t0 > WAIT_MS) {
			char *page = scrape(port);
			ck_abort_msg("%s is %g, not %g, after %d ms:\n%s", series, v, want, WAIT_MS, page);
		}
		sleep_ms(100);
	}
}

/* The first page on which series has no sample (NAN), which the caller frees. */
static char *scrape_until_nan(int port, const char *series)
{
	long long t0 = mono_ms();
	char *page;

	while (!isnan(h_metric_sample(page = scrape(port), series))) {
		ck_assert_msg(mono_ms() - t0 < WAIT_MS, "%s still has a sample after %d ms:\n%s", series, WAIT_MS,
			      page);
		free(page);
		sleep_ms(100);
	}
	return page;
}

static void wait_ready(int port, int want_status, const char *want_body)
{
	long long t0 = mono_ms();
	char *body = NULL;
	int st;

	while ((st = curl(port, "GET", "/readyz", &body)) != want_status || !strstr(body, want_body)) {
		ck_assert_msg(mono_ms() - t0 < WAIT_MS, "/readyz is %d \"%s\", not %d \"%s\"", st, body, want_status,
			      want_body);
		free(body);
		sleep_ms(100);
	}
	free(body);
}

static void stop_relay(struct relay_proc *p)
{
	h_relay_kill(p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(p, 15000), 0);
}

/* Every metric of the issue, on a standby and then on the leader it becomes. */
START_TEST(metrics_after_a_known_drain)
{
	PGconn *lock = h_pg(), *app = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;
	char *page, *body;
	int port;

	/* Hold the leader lock so the relay waits as a standby, with a backlog. */
	h_sql(lock, "SELECT pg_advisory_lock(%lld)", KEYS_LOCK_DEFAULT); /* the default --lock-key */
	port = start_http_relay(&p, "known-drain", (const char *const[]){ "--batch-size", "100", NULL });
	ck_assert(h_log_wait(&p, "waiting as standby", WAIT_MS));
	h_stage(app, "a", 1, 250);
	h_stage(app, "b", 1, 100);
	h_sql(app, "INSERT INTO staged_jobs (job_class, args) VALUES ('Bad', '{\"x\": 1}'), ('Bad', '\"s\"')");
	PQfinish(app); /* a session reports its statistics when it ends */

	wait_ready(port, 200, "ready standby\n");
	wait_sample(port, "stagedrain_backlog_jobs", 352, 0);
	page = scrape(port);
	ck_assert(h_metric_sample(page, "stagedrain_is_leader") == 0);
	ck_assert(h_metric_sample(page, "stagedrain_leader_epoch") == 0);
	ck_assert(h_metric_sample(page, "stagedrain_batches_total") == 0);
	/* Only the leader knows where its cursor is. */
	ck_assert(isnan(h_metric_sample(page, "stagedrain_oldest_staged_job_age_seconds")));
	ck_assert(strstr(page, "# TYPE stagedrain_batch_duration_seconds histogram\n"));
	free(page);

	ck_assert_int_eq(curl(port, "GET", "/healthz", &body), 200);
	ck_assert_str_eq(body, "ok\n");
	free(body);
	ck_assert_int_eq(curl(port, "GET", "/nothing", NULL), 404);
	ck_assert_int_eq(curl(port, "POST", "/metrics", NULL), 405);

	/* Release the lock: the standby takes over and drains 352 rows, 100 a batch. */
	h_sql(lock, "SELECT pg_advisory_unlock(%lld)", KEYS_LOCK_DEFAULT);
	wait_sample(port, "stagedrain_batches_total", 4, 0);
	page = scrape(port);
	ck_assert(h_metric_sample(page, "stagedrain_jobs_relayed_total{queue=\"a\"}") == 250);
	ck_assert(h_metric_sample(page, "stagedrain_jobs_relayed_total{queue=\"b\"}") == 100);
	ck_assert(h_metric_sample(page, "stagedrain_dead_letter_jobs_total") == 2);
	ck_assert(h_metric_sample(page, "stagedrain_batch_duration_seconds_count") == 4);
	ck_assert(h_metric_sample(page, "stagedrain_batch_duration_seconds_bucket{le=\"+Inf\"}") == 4);
	ck_assert(h_metric_sample(page, "stagedrain_batch_duration_seconds_sum") > 0);
	ck_assert(h_metric_sample(page, "stagedrain_is_leader") == 1);
	ck_assert(h_metric_sample(page, "stagedrain_leader_epoch") == 1); /* Redis was flushed: the first epoch */
	ck_assert(h_metric_sample(page, "stagedrain_reconnects_total{server=\"postgres\"}") == 0);
	ck_assert(h_metric_sample(page, "stagedrain_reconnects_total{server=\"redis\"}") == 0);
	ck_assert(h_metric_sample(page, "stagedrain_ready") == 1);
	free(page);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:a"), 250);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:b"), 100);
	wait_ready(port, 200, "ready leader\n");
	wait_sample(port, "stagedrain_oldest_staged_job_age_seconds", 0, 0);
	wait_sample(port, "stagedrain_backlog_jobs", 0, 0);
	ck_assert(scrape_one(port, "stagedrain_staged_dead_tuples") >= 0);
	stop_relay(&p);
	PQfinish(lock);
	redisFree(r);
}
END_TEST

START_TEST(readyz_flips_when_redis_stops_and_back)
{
	PGconn *c = h_pg();
	redisContext *r;
	struct relay_proc p;
	char *body;
	bool ok;
	int port = start_http_relay(&p, "redis-outage", (const char *const[]){ "--redis-timeout", "1s", NULL });

	wait_ready(port, 200, "ready leader\n");
	h_services("redis-stop");
	wait_ready(port, 503, "not ready leader");
	/* The cause is in the log; /readyz, which answers anyone, names no address
	 * and quotes no error. (A failure starts Redis again for the tests after.) */
	ok = h_log_wait(&p, "/readyz reports not ready\" server=redis error=", WAIT_MS) &&
	     count_lines(p.log, "server=redis error=", "redis at 127.0.0.1:") > 0;
	for (int i = 0; ok && i < 10; i++) {
		ok = curl(port, "GET", "/readyz", &body) == 503 &&
		     (strcmp(body, "not ready leader; redis: unreachable\n") == 0 ||
		      strcmp(body, "not ready leader; redis: not connected\n") == 0);
		if (!ok)
			h_services("redis-start");
		RELAY_CHECK(&p, ok, "/readyz says more than a short reason: %s", body);
		free(body);
		sleep_ms(100);
	}
	if (!ok)
		h_services("redis-start");
	RELAY_CHECK(&p, ok, "the watcher did not log the cause in %s", p.log);
	ck_assert(scrape_one(port, "stagedrain_ready") == 0);
	/* Alive all along: /healthz is for the process, not its servers. */
	ck_assert_int_eq(curl(port, "GET", "/healthz", NULL), 200);

	/* A job staged an hour ago waits while Redis is down: its age shows. */
	h_sql(c, "INSERT INTO staged_jobs (job_class, created_at) VALUES ('Late', now() - interval '1 hour')");
	{
		long long t0 = mono_ms();
		while (!(scrape_one(port, "stagedrain_oldest_staged_job_age_seconds") >= 3600)) {
			ck_assert_msg(mono_ms() - t0 < WAIT_MS, "oldest staged job age did not reach an hour");
			sleep_ms(100);
		}
	}
	h_services("redis-start");
	wait_ready(port, 200, "ready leader\n");
	wait_sample(port, "stagedrain_oldest_staged_job_age_seconds", 0, 0);
	r = h_redis();
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 1);
	ck_assert(scrape_one(port, "stagedrain_reconnects_total{server=\"redis\"}") >= 1);
	stop_relay(&p);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* True once the Redis list holds n entries, within WAIT_MS. */
static bool wait_len(redisContext *r, const char *key, long long n)
{
	long long t0 = mono_ms();

	while (h_cmd_int(r, "LLEN %s", key) < n && mono_ms() - t0 < WAIT_MS)
		sleep_ms(50);
	return h_cmd_int(r, "LLEN %s", key) == n;
}

/* A committed row below the leader's cursor that no gap covers is never read
 * again (here an id chosen by hand, which only a superuser may still do): the
 * oldest staged job's age must show it while later jobs flow past it. */
START_TEST(stuck_row_below_the_cursor_shows_its_age)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;
	long long t0, stuck_id, staged = 100;
	double age = NAN, limit;
	int port = start_http_relay(&p, "stuck-row", NULL);

	h_stage(c, "default", 1, 100);
	ck_assert_msg(wait_len(r, "queue:default", 100), "the first jobs did not arrive; see %s", p.log);
	/* Their delete commits after the push: the stuck row takes one of their ids. */
	ck_assert_msg(h_wait_staged_empty(c, WAIT_MS), "the first jobs stayed staged; see %s", p.log);
	stuck_id = h_sql(c, "SELECT last_value - 50 FROM staged_jobs_id_seq");
	t0 = mono_ms();
	h_sql(c,
	      "INSERT INTO staged_jobs (id, job_class, created_at) VALUES (%lld, 'Stuck', now() - interval '1 minute')",
	      stuck_id);
	/* One job after another above it, each relayed within moments. */
	while (!(age >= 59.5)) {
		ck_assert_msg(mono_ms() - t0 < WAIT_MS,
			      "oldest staged job age is %g after %d ms, not the stuck row's 60 s; see %s", age, WAIT_MS,
			      p.log);
		h_stage(c, "default", (int)++staged, 1);
		sleep_ms(100);
		age = scrape_one(port, "stagedrain_oldest_staged_job_age_seconds");
	}
	limit = 60 + (double)(mono_ms() - t0) / 1000 + 2;
	ck_assert_msg(age <= limit, "oldest staged job age %g, more than %g", age, limit);
	ck_assert_msg(wait_len(r, "queue:default", staged), "the later jobs did not all arrive; see %s", p.log);
	/* Still there, still shown: the jobs above it being drained changes nothing. */
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs WHERE id = %lld", stuck_id), 1);
	ck_assert(scrape_one(port, "stagedrain_oldest_staged_job_age_seconds") >= 59.5);
	stop_relay(&p);
	redisFree(r);
	PQfinish(c);
}
END_TEST

/* The oldest job's reading is the one that walks staged_jobs; when it outlasts
 * the watcher's statement timeout (here: waiting on a lock), only its sample
 * goes, with a warning, and Postgres still counts as reachable. */
START_TEST(slow_oldest_reading_leaves_only_its_sample_out)
{
	PGconn *locker = h_pg();
	struct relay_proc p;
	char *page;
	int port = start_http_relay(&p, "slow-oldest", NULL);

	wait_ready(port, 200, "ready leader\n");
	wait_sample(port, "stagedrain_oldest_staged_job_age_seconds", 0, 0);
	h_sql(locker, "BEGIN");
	h_sql(locker, "LOCK staged_jobs IN ACCESS EXCLUSIVE MODE");
	ck_assert_msg(h_log_wait(&p, "outlasted the watcher's statement timeout", WAIT_MS), "no warning in %s", p.log);
	/* The warning comes first; the reading is published once the round ends. */
	page = scrape_until_nan(port, "stagedrain_oldest_staged_job_age_seconds");
	ck_assert_msg(h_metric_sample(page, "stagedrain_backlog_jobs") >= 0, "%s", page);
	ck_assert_msg(h_metric_sample(page, "stagedrain_ready") == 1, "%s", page);
	free(page);
	h_sql(locker, "COMMIT");
	wait_sample(port, "stagedrain_oldest_staged_job_age_seconds", 0, 0);
	ck_assert(h_log_wait(&p, "the oldest staged job's age is read again", WAIT_MS));
	ck_assert_int_eq(count_lines(p.log, "outlasted the watcher's statement timeout", ""), 1);
	stop_relay(&p);
	PQfinish(locker);
}
END_TEST

START_TEST(long_transaction_is_named_and_measured)
{
	PGconn *x = h_pg(), *app = h_pg();
	struct relay_proc p;
	char pid_field[32];
	long long pid, t0;
	int port;

	/* A transaction with a snapshot: vacuum cannot remove rows deleted after it began. */
	h_sql(x, "SET application_name = 'report-job'");
	h_sql(x, "BEGIN ISOLATION LEVEL REPEATABLE READ");
	h_sql(x, "SELECT count(*) FROM staged_jobs");
	pid = h_sql(x, "SELECT pg_backend_pid()");
	snprintf(pid_field, sizeof(pid_field), "pid=%lld ", pid);
	h_stage(app, "default", 1, 300);
	PQfinish(app);

	port = start_http_relay(&p, "long-xact", (const char *const[]){ "--warn-xact-age", "1s", NULL });
	ck_assert_msg(h_log_wait(&p, pid_field, WAIT_MS), "no warning naming %s in %s", pid_field, p.log);
	ck_assert_int_eq(count_lines(p.log, pid_field, "open longer than --warn-xact-age"), 1);
	ck_assert_int_eq(count_lines(p.log, pid_field, "user=postgres application=report-job"), 1);
	ck_assert(scrape_one(port, "stagedrain_oldest_transaction_age_seconds") >= 1);
	/* The drained rows stay behind as dead tuples while it is open. */
	t0 = mono_ms();
	while (!(scrape_one(port, "stagedrain_staged_dead_tuples") >= 300)) {
		ck_assert_msg(mono_ms() - t0 < WAIT_MS, "dead tuples not reported");
		sleep_ms(100);
	}
	/* Warned again as its age doubles, not at every reading (5 a second here). */
	sleep_ms(3000);
	ck_assert_int_le(count_lines(p.log, pid_field, "open longer than"), 4);

	h_sql(x, "COMMIT");
	wait_sample(port, "stagedrain_oldest_transaction_age_seconds", 0, 0.9);
	stop_relay(&p);
	PQfinish(x);
}
END_TEST

START_TEST(address_in_use_fails_at_start)
{
	struct relay_proc a, b;
	char addr[32];
	int port = start_http_relay(&a, "first", NULL);

	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	h_relay_start(&b, "second", (const char *const[]){ "--http-addr", addr, NULL });
	ck_assert_int_eq(h_relay_wait(&b, WAIT_MS), 1);
	ck_assert(h_log_contains(b.log, "level=error msg=\"cannot start\" setting=--http-addr"));
	ck_assert(h_log_contains(b.log, "Address already in use"));
	stop_relay(&a);
}
END_TEST

/* ---- abuse: slow clients, many clients, and what /readyz tells anyone ---- */

/* A connection to the endpoint from loopback address from (all of 127/8 is
 * loopback on Linux, so one test can be several clients); -1 if it failed.
 * Connecting gives up after timeout_ms. */
static int dial_from(const char *from, int port, int timeout_ms)
{
	struct sockaddr_in src = { .sin_family = AF_INET }, dst = { .sin_family = AF_INET };
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(inet_pton(AF_INET, from, &src.sin_addr), 1);
	ck_assert_int_eq(inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr), 1);
	dst.sin_port = htons((uint16_t)port);
	ck_assert_msg(bind(fd, (struct sockaddr *)&src, sizeof(src)) == 0, "bind %s: %s", from, strerror(errno));
	ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)), 0); /* bounds connect too */
	if (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Sends text without waiting; false once the server has closed the connection. */
static bool send_text(int fd, const char *text)
{
	return send(fd, text, strlen(text), MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)strlen(text);
}

/* True once the server has closed or reset the connection (anything it sent is read and dropped). */
static bool peer_closed(int fd)
{
	char buf[4096];
	ssize_t n;

	while ((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		;
	return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
}

/* GET path from address from, on a connection of its own, with timeout_ms for
 * all of it: the status, or 0 if the whole answer did not come in time; the
 * body into body. */
static int probe_from(const char *from, int port, const char *path, int timeout_ms, char *body, size_t len)
{
	char req[256], resp[16384], *at;
	long long until = mono_ms() + timeout_ms;
	size_t n = 0;
	bool done = false;
	int fd = dial_from(from, port, timeout_ms), status = 0;

	*body = '\0';
	if (fd < 0)
		return 0;
	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
	if (!send_text(fd, req)) {
		close(fd);
		return 0;
	}
	while (!done) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		long long left = until - mono_ms();
		ssize_t got;

		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
			break;
		got = recv(fd, resp + n, sizeof(resp) - 1 - n, 0);
		if (got <= 0 || (n += (size_t)got) == sizeof(resp) - 1)
			done = true;
	}
	close(fd);
	resp[n] = '\0';
	if (done && sscanf(resp, "HTTP/1.%*d %d", &status) == 1 && (at = strstr(resp, "\r\n\r\n")))
		snprintf(body, len, "%s", at + 4);
	return done ? status : 0;
}

static int probe(int port, const char *path, char *body, size_t len)
{
	return probe_from("127.0.0.1", port, path, 2000, body, len);
}

/* Slowloris: 64 connections from 127.0.0.2, each dribbling a header line every
 * second (so libmicrohttpd's idle timeout never fires) and opened again as soon
 * as the server drops it, for 12 s. Meanwhile /healthz and /readyz from
 * 127.0.0.1 answer within 2 s every time, and the server closes every
 * attacking connection once it outlives the whole-request deadline. */
#define ATTACKERS 64
#define ATTACK_MS 12000
#define CLOSE_MARGIN_MS 2500
START_TEST(slowloris_leaves_the_probes_answering)
{
	struct relay_proc p;
	struct {
		int fd;
		long long opened, dribbled;
	} a[ATTACKERS];
	char body[4096];
	long long t0, longest = 0, now;
	int port = start_http_relay(&p, "slowloris", NULL), probes = 0, st, open;

	wait_ready(port, 200, "ready leader\n");
	for (int i = 0; i < ATTACKERS; i++)
		a[i].fd = -1;
	t0 = mono_ms();
	do {
		now = mono_ms();
		open = 0;
		for (int i = 0; i < ATTACKERS; i++) {
			if (a[i].fd >= 0 && peer_closed(a[i].fd)) {
				long long life = now - a[i].opened;
				longest = life > longest ? life : longest;
				close(a[i].fd);
				a[i].fd = -1;
			}
			RELAY_CHECK(&p, a[i].fd < 0 || now - a[i].opened <= HTTP_REQUEST_DEADLINE_MS + CLOSE_MARGIN_MS,
				    "an attacking connection is still open after %lld ms; see %s", now - a[i].opened,
				    p.log);
			if (a[i].fd < 0 && now - t0 < ATTACK_MS &&
			    (a[i].fd = dial_from("127.0.0.2", port, 1000)) >= 0) {
				a[i].opened = a[i].dribbled = now;
				send_text(a[i].fd, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n");
			} else if (a[i].fd >= 0 && now - a[i].dribbled >= 1000) {
				send_text(a[i].fd, "X-Slow: 1\r\n");
				a[i].dribbled = now;
			}
			open += a[i].fd >= 0;
		}
		if (now - t0 < ATTACK_MS) {
			st = probe(port, "/healthz", body, sizeof(body));
			RELAY_CHECK(&p, st == 200 && strcmp(body, "ok\n") == 0,
				    "/healthz answered %d \"%s\" after %lld ms of attack (probe %d); see %s", st, body,
				    now - t0, probes, p.log);
			st = probe(port, "/readyz", body, sizeof(body));
			RELAY_CHECK(&p, st == 200 && strcmp(body, "ready leader\n") == 0,
				    "/readyz answered %d \"%s\" after %lld ms of attack (probe %d); see %s", st, body,
				    now - t0, probes, p.log);
			probes++;
		}
		sleep_ms(200);
	} while (open > 0 || mono_ms() - t0 < ATTACK_MS);
	/* The attack was real: the server kept its connections until the deadline. */
	RELAY_CHECK(&p, longest >= HTTP_REQUEST_DEADLINE_MS - 1000, "no attacking connection lasted long (%lld ms)",
		    longest);
	ck_assert_int_ge(probes, 20);
	stop_relay(&p);
}
END_TEST

/* One address gets HTTP_MAX_PER_ADDRESS connections, and others are served meanwhile. */
START_TEST(one_address_holds_at_most_the_cap)
{
	struct relay_proc p;
	int fds[3 * HTTP_MAX_PER_ADDRESS], held = 0, st;
	char body[4096];
	int port = start_http_relay(&p, "per-address", NULL);

	for (int i = 0; i < 3 * HTTP_MAX_PER_ADDRESS; i++)
		if ((fds[i] = dial_from("127.0.0.3", port, 1000)) >= 0)
			send_text(fds[i], "GET /healthz HTTP/1.1\r\n");
	sleep_ms(1000);
	for (int i = 0; i < 3 * HTTP_MAX_PER_ADDRESS; i++)
		held += fds[i] >= 0 && !peer_closed(fds[i]);
	RELAY_CHECK(&p, held == HTTP_MAX_PER_ADDRESS, "127.0.0.3 holds %d connections, not %d", held,
		    HTTP_MAX_PER_ADDRESS);
	st = probe(port, "/healthz", body, sizeof(body));
	RELAY_CHECK(&p, st == 200, "/healthz from 127.0.0.1 answered %d while 127.0.0.3 is at its cap", st);
	for (int i = 0; i < 3 * HTTP_MAX_PER_ADDRESS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	/* Its connections gone, the address is served again. */
	sleep_ms(300);
	st = probe_from("127.0.0.3", port, "/healthz", 2000, body, sizeof(body));
	RELAY_CHECK(&p, st == 200, "/healthz from 127.0.0.3 answered %d after it let go", st);
	stop_relay(&p);
}
END_TEST

/* 300 requests sent by half and dropped: the endpoint's warnings stay within
 * HTTP_LOG_LINES_PER_MINUTE, and one line counts the ones left out. */
START_TEST(abuse_logs_a_bounded_number_of_lines)
{
	struct relay_proc p;
	char body[4096];
	int port = start_http_relay(&p, "http-log", NULL), lines;

	for (int round = 0; round < 75; round++) {
		int fds[4];

		for (int i = 0; i < 4; i++)
			if ((fds[i] = dial_from("127.0.0.4", port, 1000)) >= 0)
				send_text(fds[i], "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n");
		sleep_ms(40); /* the server has read the half it got */
		for (int i = 0; i < 4; i++)
			if (fds[i] >= 0)
				close(fds[i]);
	}
	ck_assert_int_eq(probe(port, "/healthz", body, sizeof(body)), 200);
	stop_relay(&p);
	lines = count_lines(p.log, "level=warn", "msg=\"http");
	ck_assert_msg(lines <= HTTP_LOG_LINES_PER_MINUTE + 1, "%d warnings from the endpoint in %s", lines, p.log);
	ck_assert_msg(count_lines(p.log, "msg=\"http server messages suppressed\"", "suppressed=") == 1,
		      "no line counts the suppressed warnings in %s", p.log);
}
END_TEST

/* With --readyz-detail, /readyz says what the watcher saw (here Redis's address). */
START_TEST(readyz_detail_shows_the_cause)
{
	struct relay_proc p;
	int port = start_http_relay(&p, "readyz-detail",
				    (const char *const[]){ "--readyz-detail", "--redis-timeout", "1s", NULL });

	wait_ready(port, 200, "ready leader\n");
	h_services("redis-stop");
	wait_ready(port, 503, "redis at 127.0.0.1:");
	h_services("redis-start");
	wait_ready(port, 200, "ready leader\n");
	stop_relay(&p);
}
END_TEST

/* ---- the compose example ---- */

/* One service of docker/docker-compose.yml, as tests/docker_check.py reads it. */
static json_t *compose_service(const char *name)
{
	char cmd[512];
	const char *py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
	char *out = NULL;
	size_t n = 0;
	json_error_t err;
	json_t *j;
	FILE *f, *o = open_memstream(&out, &n);
	int c;

	snprintf(cmd, sizeof(cmd), "%s tests/docker_check.py --service %s docker/docker-compose.yml", py, name);
	ck_assert_ptr_nonnull(f = popen(cmd, "r"));
	while ((c = fgetc(f)) != EOF)
		fputc(c, o);
	fclose(o);
	ck_assert_msg(pclose(f) == 0, "%s failed", cmd);
	j = json_loads(out, 0, &err);
	ck_assert_msg(j != NULL, "%s: %s", cmd, err.text);
	free(out);
	return j;
}

static int pg_port(void)
{
	return atoi(strrchr(h_env("TEST_PG_URL"), ':') + 1);
}

/* "NAME=VALUE", malloc'd. */
static char *env_pair(const char *name, const char *value)
{
	size_t n = strlen(name) + strlen(value) + 2;
	char *s = malloc(n);

	ck_assert_ptr_nonnull(s);
	snprintf(s, n, "%s=%s", name, value);
	return s;
}

/* Points the compose network's host names in value at this run's servers,
 * and the certs volume's CA at services.sh tls-start's. */
static char *local(const char *value)
{
	char *out = malloc(1024);
	const char *p = value;
	size_t n = 0;

	ck_assert_ptr_nonnull(out);
	while (*p && n < 400) {
		if (strncmp(p, "@postgres:5432/", 15) == 0) {
			n += (size_t)snprintf(out + n, 64, "@127.0.0.1:%d/", pg_port());
			p += 15;
		} else if (strncmp(p, "rediss://redis:6379/", 20) == 0) {
			n += (size_t)snprintf(out + n, 64, "rediss://127.0.0.1:%d/", h_port("tls"));
			p += 20;
		} else if (strncmp(p, "/certs/ca.crt", 13) == 0) {
			n += (size_t)snprintf(out + n, 600, "%s/tls/ca.crt", h_env("TEST_DIR"));
			p += 13;
		} else {
			out[n++] = *p++;
		}
	}
	ck_assert_msg(!*p, "value too long: %s", value);
	out[n] = '\0';
	return out;
}

/* Runs argv with exactly the service's environment (host names made local),
 * PATH, and extra NAME=VALUE pairs; output to TEST_DIR/<name>.log. */
static void run_service(struct relay_proc *p, const char *name, const char *const *argv, json_t *svc,
			const char *const *extra)
{
	static char *envp[64];
	json_t *env = json_object_get(svc, "environment"), *v;
	struct proc_opts o = { .argv = argv, .envp = envp };
	const char *k;
	int n = 0;

	for (int i = 0; envp[i]; i++) {
		free(envp[i]);
		envp[i] = NULL;
	}
	envp[n++] = env_pair("PATH", getenv("PATH"));
	json_object_foreach(env, k, v)
	{
		char *val = local(json_string_value(v));
		envp[n++] = env_pair(k, val);
		free(val);
	}
	for (; extra && *extra; extra++)
		envp[n++] = strdup(*extra);
	envp[n] = NULL;
	o.cwd = h_env("TEST_DIR"); /* Sidekiq would read ./config/sidekiq.yml */
	h_proc_start(p, name, &o);
}

/* argv: prefix, then the service's entrypoint, then its command. */
static const char **service_argv(const char *const *prefix, json_t *svc)
{
	static const char *argv[64];
	int n = 0;
	size_t i;
	json_t *a;

	for (; *prefix; prefix++)
		argv[n++] = *prefix;
	json_array_foreach(json_object_get(svc, "entrypoint"), i, a) argv[n++] = json_string_value(a);
	json_array_foreach(json_object_get(svc, "command"), i, a) argv[n++] = json_string_value(a);
	argv[n] = NULL;
	return argv;
}

static int wait_pid(struct relay_proc *p, int timeout_ms)
{
	return proc_reap(&p->proc, timeout_ms);
}

/* The compose file's migrate, relay, app and worker services, with their
 * exact command lines and environments, against this run's servers: only
 * host names become 127.0.0.1 and its ports (Redis: the TLS-only test server,
 * its CA for the certs volume's), and the relay's metrics port 0.
 * The app stages 5 transactions (one rolls back); Sidekiq runs the 8 jobs. */
START_TEST(compose_services_run_against_local_servers)
{
	json_t *migrate = compose_service("migrate"), *relay = compose_service("relay");
	json_t *app = compose_service("app"), *worker = compose_service("worker");
	char bin[PATH_MAX], pgport[32], worker_rb[PATH_MAX];
	struct relay_proc mig, rp, app_log, sk_log;
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	long long t0;
	int port;

	ck_assert_ptr_nonnull(realpath(h_env("STAGEDRAIN_BIN"), bin)); /* the services run in TEST_DIR */
	h_services("tls-start");                                       /* the example's Redis speaks TLS only */
	/* What the postgres image makes of POSTGRES_USER, _PASSWORD and _DB. */
	h_sql(c, "DROP DATABASE IF EXISTS app");
	h_sql(c, "DROP ROLE IF EXISTS app");
	h_sql(c, "CREATE ROLE app SUPERUSER LOGIN PASSWORD 'app'");
	h_sql(c, "CREATE DATABASE app OWNER app");

	run_service(&mig, "migrate", service_argv((const char *[]){ bin, NULL }, migrate), migrate, NULL);
	ck_assert_int_eq(wait_pid(&mig, WAIT_MS), 0);
	json_object_set_new(json_object_get(relay, "environment"), "STAGEDRAIN_HTTP_ADDR", json_string("127.0.0.1:0"));
	run_service(&rp, "compose-relay", service_argv((const char *[]){ bin, NULL }, relay), relay, NULL);
	ck_assert_msg(h_log_wait(&rp, "\"serving http\"", WAIT_MS), "relay did not serve http: %s", rp.log);
	ck_assert(h_log_contains(rp.log, "{\"ts\":")); /* --log-format json, from the command */
	port = logged_port(rp.log);

	/* The app: its own script, 5 transactions without pauses. */
	snprintf(pgport, sizeof(pgport), "PGPORT=%d", pg_port());
	json_object_set_new(json_object_get(app, "environment"), "PGHOST", json_string("127.0.0.1"));
	json_object_set_new(json_object_get(app, "environment"), "STAGE_COUNT", json_string("5"));
	json_object_set_new(json_object_get(app, "environment"), "STAGE_EVERY", json_string("0"));
	run_service(&app_log, "app", service_argv((const char *[]){ "/usr/bin/env", NULL }, app), app,
		    (const char *[]){ pgport, NULL });
	ck_assert_int_eq(wait_pid(&app_log, WAIT_MS), 0);
	ck_assert_msg(h_log_contains(app_log.log, "transaction 5: ROLLBACK"), "see %s", app_log.log);

	wait_sample(port, "stagedrain_jobs_relayed_total{queue=\"default\"}", 4, 0);
	wait_sample(port, "stagedrain_jobs_relayed_total{queue=\"critical\"}", 4, 0);
	wait_ready(port, 200, "ready leader\n");

	/* The worker: stock Sidekiq with the example's job classes and queues. */
	ck_assert_ptr_nonnull(realpath("docker/worker/worker.rb", worker_rb));
	run_service(&sk_log, "worker",
		    service_argv((const char *[]){ "/usr/bin/sidekiq", "-r", worker_rb, NULL }, worker), worker,
		    (const char *[]){ "HOME=/nonexistent", NULL });
	t0 = mono_ms();
	while (count_lines(sk_log.log, "welcome mail to user", "@example.com>") < 4 ||
	       count_lines(sk_log.log, "charged user", "1999 cents") < 4) {
		ck_assert_msg(mono_ms() - t0 < 60000, "sidekiq did not run the 8 jobs; see %s", sk_log.log);
		sleep_ms(200);
	}
	h_relay_kill(&sk_log, SIGTERM);
	ck_assert_int_eq(wait_pid(&sk_log, 20000), 0);
	ck_assert_int_eq(count_lines(sk_log.log, "welcome mail to user", "@example.com>"), 4);
	ck_assert_int_eq(h_tls_cli_int("tls", "ZCARD retry"), 0);
	ck_assert_int_eq(h_tls_cli_int("tls", "LLEN queue:default") + h_tls_cli_int("tls", "LLEN queue:critical"), 0);
	ck_assert_int_eq(h_cmd_int(r, "DBSIZE"), 0); /* nothing went to the plain server */
	stop_relay(&rp);
	h_services("tls-stop");

	json_decref(migrate);
	json_decref(relay);
	json_decref(app);
	json_decref(worker);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* promtool (Debian's prometheus package, tests/deps.sh) checks a scrape as
 * Prometheus would read it: types, names, help, duplicates. */
static void assert_promtool_passes(const char *page)
{
	char in[PATH_MAX], out[PATH_MAX], cmd[3 * PATH_MAX];
	FILE *f;
	int st;

	snprintf(in, sizeof(in), "%s/promtool.in", h_env("TEST_DIR"));
	snprintf(out, sizeof(out), "%s/promtool.out", h_env("TEST_DIR"));
	ck_assert_ptr_nonnull(f = fopen(in, "w"));
	fputs(page, f);
	fclose(f);
	ck_assert_msg(system("command -v promtool >/dev/null") == 0, "no promtool: run make deps (package prometheus)");
	snprintf(cmd, sizeof(cmd), "promtool check metrics < '%s' > '%s' 2>&1", in, out);
	st = system(cmd);
	if (st != 0) {
		char *said = slurp(out);
		fprintf(stderr, "promtool check metrics on a scrape:\n%s\npromtool said:\n%s\n", page, said);
		ck_abort_msg("promtool check metrics failed (%d):\n%.3000s", st, said);
	}
}

/* Scrapes until series is at least least, or fails after WAIT_MS. */
static double wait_at_least(struct relay_proc *p, int port, const char *series, double least)
{
	long long t0 = mono_ms();
	double v;

	while (!((v = scrape_one(port, series)) >= least))
		RELAY_CHECK(p, mono_ms() - t0 < WAIT_MS, "%s is %g, not %g or more, after %d ms", series, v, least,
			    WAIT_MS);
	return v;
}

/* A route's Redis is stopped: its rows wait in staged_jobs_held, and they are
 * what the oldest job's age, the held gauges by queue and target, and the
 * target's oldest held age show (staged_jobs is empty). The whole page, with
 * every family a route and a cap add, passes promtool. */
START_TEST(a_stopped_target_s_held_rows_show_in_the_metrics)
{
	PGconn *c = h_pg();
	struct relay_proc p;
	char route[256], *page;
	long long t0;
	double age;
	int port;

	h_services("redis2-start");
	snprintf(route, sizeof(route), "b bq --redis-url redis://127.0.0.1:%d/0", h_port("redis2"));
	port = start_http_relay(&p, "held-metrics",
				(const char *const[]){ "--route", route, "--queue-limit", "capped=1", "--redis-timeout",
						       "300", "--poll-interval", "50", NULL });
	RELAY_CHECK(&p, h_log_wait_count(&p, "msg=leading", 2, WAIT_MS), "the relay never led on both targets");
	h_services("redis2-stop");
	t0 = mono_ms();
	h_stage(c, "bq", 1, 2);
	h_stage(c, "capped", 1, 3);
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('Bad', '{\"x\": 1}')");
	while (h_sql(c, "SELECT count(*) FROM staged_jobs_held WHERE target = 'b'") != 2 ||
	       h_sql(c, "SELECT count(*) FROM staged_jobs") != 0)
		RELAY_CHECK(&p, mono_ms() - t0 < WAIT_MS, "b's rows were not held; see %s", p.log);
	age = wait_at_least(&p, port, "stagedrain_oldest_staged_job_age_seconds", 1.5);
	RELAY_CHECK(&p, age <= (double)(mono_ms() - t0) / 1000 + 1, "oldest job age %g", age);
	wait_at_least(&p, port, "stagedrain_target_oldest_held_age_seconds{target=\"b\"}", 1.5);
	page = scrape(port);
	RELAY_CHECK(&p, h_metric_sample(page, "stagedrain_held_jobs{queue=\"bq\",target=\"b\"}") == 2, "bq held:\n%s",
		    page);
	RELAY_CHECK(&p, h_metric_sample(page, "stagedrain_held_jobs{queue=\"capped\",target=\"default\"}") == 2,
		    "capped held:\n%s", page);
	RELAY_CHECK(&p, h_metric_sample(page, "stagedrain_target_up{target=\"b\"}") == 0, "b up:\n%s", page);
	RELAY_CHECK(&p, h_metric_sample(page, "stagedrain_backlog_jobs") >= 0, "no backlog:\n%s", page);
	assert_promtool_passes(page);
	free(page);
	stop_relay(&p);
	PQfinish(c);
}
END_TEST

Suite *http_suite(void)
{
	Suite *s = suite_create("http");
	TCase *tc = tcase_create("endpoint");
	TCase *compose = tcase_create("compose");
	TCase *held = tcase_create("held");

	tcase_add_checked_fixture(tc, h_reset, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, metrics_after_a_known_drain);
	tcase_add_test(tc, readyz_flips_when_redis_stops_and_back);
	tcase_add_test(tc, stuck_row_below_the_cursor_shows_its_age);
	tcase_add_test(tc, slow_oldest_reading_leaves_only_its_sample_out);
	tcase_add_test(tc, long_transaction_is_named_and_measured);
	tcase_add_test(tc, address_in_use_fails_at_start);
	tcase_add_test(tc, slowloris_leaves_the_probes_answering);
	tcase_add_test(tc, one_address_holds_at_most_the_cap);
	tcase_add_test(tc, abuse_logs_a_bounded_number_of_lines);
	tcase_add_test(tc, readyz_detail_shows_the_cause);
	tcase_add_checked_fixture(compose, h_reset, NULL);
	tcase_set_timeout(compose, 120);
	tcase_add_test(compose, compose_services_run_against_local_servers);
	tcase_add_checked_fixture(held, h_reset, NULL);
	tcase_set_timeout(held, 120);
	tcase_add_test(held, a_stopped_target_s_held_rows_show_in_the_metrics);
	suite_add_tcase(s, tc);
	suite_add_tcase(s, compose);
	suite_add_tcase(s, held);
	return s;
}
