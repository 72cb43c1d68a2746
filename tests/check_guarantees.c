/* The guarantees under the cases that once broke them: a late commit whose xid
 * no snapshot showed, timestamps no job can carry, a push whose reply came
 * late, a Redis key of the wrong type, a dead-letter move that fails, writers
 * that hold an xid for a long time, and a Postgres that is a hot standby. */
#include "fmacros.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "suites.h"

static void stop_relay(struct relay_proc *p)
{
	h_relay_kill(p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(p, 10000), 0);
}

/* How many jobs of class cls the list holds. */
static int count_class(redisContext *r, const char *key, const char *cls)
{
	json_t *jobs = h_list_jobs(r, key), *j;
	size_t i;
	int n = 0;

	json_array_foreach(jobs, i, j) n += strcmp(json_string_value(json_object_get(j, "class")), cls) == 0;
	json_decref(jobs);
	return n;
}

#define FAST_RELAY "--batch-size", "50", "--poll-interval", "20ms", "--log-level", "debug"

/* ---- defect 1: a filler whose xid is at or above the reading snapshot's xmax ---- */

/*
 * N takes its xid first; M then stages (the lower id) and N stages and
 * commits. The relay's snapshot sees N's row, not M's, and M's xid is at or
 * above that snapshot's xmax (the latest completed xid + 1), so it shows up
 * nowhere in the snapshot. With `other`, a third writer takes an xid between
 * N and M and commits before M, moving the xmin past that xmax while M is
 * still open. M's job must arrive once M commits, without a restart.
 */
static void late_filler(bool other)
{
	static const char *const args[] = { FAST_RELAY, NULL };
	PGconn *c = h_pg(), *n = h_pg(), *m = h_pg(), *w = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;

	h_relay_start(&p, "relay", args);
	RELAY_CHECK(&p, h_log_wait(&p, "leading", 10000), "relay did not lead");
	h_sql(n, "BEGIN");
	h_sql(n, "SELECT pg_current_xact_id()::text::int8");
	if (other) {
		h_sql(w, "BEGIN");
		h_sql(w, "SELECT pg_current_xact_id()::text::int8");
	}
	h_sql(m, "BEGIN");
	h_sql(m, "INSERT INTO staged_jobs (job_class, args) VALUES ('M', '[1]')");
	h_sql(n, "INSERT INTO staged_jobs (job_class, args) VALUES ('N', '[2]')");
	h_sql(n, "COMMIT");
	RELAY_CHECK(&p, h_wait_len(r, "queue:default", 1, 10000), "N's job did not arrive");
	if (other)
		h_sql(w, "COMMIT");
	/* More batches, so any premature retirement has happened. */
	h_stage(c, "default", 3, 1);
	RELAY_CHECK(&p, h_wait_len(r, "queue:default", 2, 10000), "a later job did not arrive");
	sleep_ms(300);
	h_sql(m, "COMMIT");
	RELAY_CHECK(&p, h_wait_len(r, "queue:default", 3, 3000), "M's late commit was never pushed");
	ck_assert_int_eq(count_class(r, "queue:default", "M"), 1);
	ck_assert(h_wait_staged_empty(c, 5000));
	stop_relay(&p);
	PQfinish(c);
	PQfinish(n);
	PQfinish(m);
	PQfinish(w);
	redisFree(r);
}

START_TEST(a_late_commit_whose_xid_the_snapshot_did_not_show_arrives)
{
	late_filler(false);
}
END_TEST

START_TEST(a_late_commit_whose_xid_is_above_the_snapshot_xmax_arrives)
{
	late_filler(true);
}
END_TEST

/* ---- defect 2: times no job can carry ---- */

START_TEST(rows_with_infinite_or_unrepresentable_times_are_dead_lettered)
{
	static const char *const once[] = { "--once", NULL };
	PGconn *c = h_pg();
	redisContext *r = h_redis();

	h_stage(c, "default", 1, 2);
	h_sql(c, "INSERT INTO staged_jobs (job_class, run_at) VALUES ('RunInf', 'infinity'),"
		 " ('RunMinusInf', '-infinity'), ('RunFar', '294270-01-01 00:00:00+00')");
	h_sql(c, "INSERT INTO staged_jobs (job_class, created_at) VALUES ('MadeInf', 'infinity'),"
		 " ('MadeMinusInf', '-infinity')");
	h_stage(c, "default", 3, 2);
	ck_assert_int_eq(h_relay_run("relay", once), 0);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 4);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 5);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE reason LIKE 'run_at%%'"
				  " AND job_class LIKE 'Run%%'"),
			 3);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE reason LIKE 'created_at%%'"
				  " AND job_class LIKE 'Made%%'"),
			 2);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE run_at = 'infinity'"
				  " AND reason LIKE '%%infinity%%'"),
			 1);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* ---- defect 3: a push whose reply came late ---- */

/*
 * A TCP proxy in front of Redis that, when armed, holds the next bytes a
 * client sends for hold_ms and then delivers them anyway, even if that client
 * has gone: what a retransmission or a TLS tunnel does to a command whose
 * sender timed out.
 */
struct proxy {
	int listen_fd;
	int port;
	int redis_port;
	atomic_int hold_ms;
	atomic_int held;    /* how many commands it held */
	atomic_int gate;    /* 1: hold the next push script until set back to 0 */
	atomic_int gated;   /* pushes the gate held */
	atomic_int replies; /* reads from Redis passed on to a client */
};

struct pipe_pair {
	struct proxy *px;
	int client, server;
};

/* True if the bytes hold the push script's text. */
static bool holds_push(const char *buf, size_t n)
{
	static const char mark[] = "is not current";

	for (size_t i = 0; i + sizeof(mark) - 1 <= n; i++)
		if (memcmp(buf + i, mark, sizeof(mark) - 1) == 0)
			return true;
	return false;
}

static void *proxy_conn(void *arg)
{
	struct pipe_pair *pp = arg;
	char buf[65536];
	bool client_open = true;
	long long linger_until = 0;

	for (;;) {
		struct pollfd fds[2] = { { .fd = client_open ? pp->client : -1, .events = POLLIN },
					 { .fd = pp->server, .events = POLLIN } };
		ssize_t n;

		if (!client_open && mono_ms() > linger_until)
			break;
		if (poll(fds, 2, 50) < 0 && errno != EINTR)
			break;
		if (fds[0].revents) {
			n = read(pp->client, buf, sizeof(buf));
			if (n <= 0) {
				client_open = false;
				linger_until = mono_ms() + 3000;
			} else {
				int hold = atomic_exchange(&pp->px->hold_ms, 0);
				if (hold > 0) {
					atomic_fetch_add(&pp->px->held, 1);
					sleep_ms(hold);
				}
				if (atomic_load(&pp->px->gate) && holds_push(buf, (size_t)n)) {
					atomic_fetch_add(&pp->px->gated, 1);
					while (atomic_load(&pp->px->gate))
						sleep_ms(5);
				}
				if (write(pp->server, buf, (size_t)n) != n)
					break;
			}
		}
		if (fds[1].revents) {
			n = read(pp->server, buf, sizeof(buf));
			if (n <= 0)
				break;
			atomic_fetch_add(&pp->px->replies, 1);
			if (client_open && write(pp->client, buf, (size_t)n) != n)
				client_open = false, linger_until = mono_ms() + 3000;
		}
	}
	close(pp->client);
	close(pp->server);
	free(pp);
	return NULL;
}

static void *proxy_accept(void *arg)
{
	struct proxy *px = arg;

	for (;;) {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)px->redis_port) };
		struct pipe_pair *pp;
		pthread_t t;
		int client = accept(px->listen_fd, NULL, NULL);

		if (client < 0)
			return NULL;
		pp = malloc(sizeof(*pp));
		pp->px = px;
		pp->client = client;
		pp->server = socket(AF_INET, SOCK_STREAM, 0);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (connect(pp->server, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			close(client);
			close(pp->server);
			free(pp);
			continue;
		}
		pthread_create(&t, NULL, proxy_conn, pp);
		pthread_detach(t);
	}
}

static void proxy_start(struct proxy *px)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = 0 };
	socklen_t len = sizeof(sa);
	pthread_t t;

	px->redis_port = atoi(h_env("TEST_REDIS_PORT"));
	atomic_init(&px->hold_ms, 0);
	atomic_init(&px->held, 0);
	atomic_init(&px->gate, 0);
	atomic_init(&px->gated, 0);
	atomic_init(&px->replies, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	px->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(px->listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(px->listen_fd, 16), 0);
	ck_assert_int_eq(getsockname(px->listen_fd, (struct sockaddr *)&sa, &len), 0);
	px->port = ntohs(sa.sin_port);
	pthread_create(&t, NULL, proxy_accept, px);
	pthread_detach(t);
}

START_TEST(a_push_whose_reply_came_late_is_not_pushed_twice)
{
	static struct proxy px;
	char url[128];
	const char *const args[] = { "--redis-url", url, "--redis-timeout", "300ms", FAST_RELAY, NULL };
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;

	proxy_start(&px);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", px.port);
	h_relay_start(&p, "relay", args);
	RELAY_CHECK(&p, h_log_wait(&p, "leading", 10000), "relay did not lead");
	/* The next thing the relay sends Redis is the batch's push: hold it past the timeout. */
	atomic_store(&px.hold_ms, 1500);
	h_stage(c, "default", 1, 3);
	RELAY_CHECK(&p, h_wait_len(r, "queue:default", 3, 10000), "the batch never arrived");
	RELAY_CHECK(&p, h_wait_staged_empty(c, 10000), "the batch was never deleted");
	sleep_ms(2500); /* the held push has reached Redis by now */
	ck_assert_int_eq(atomic_load(&px.held), 1);
	ck_assert(h_log_contains(p.log, "timeout"));
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 3);
	stop_relay(&p);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* ---- issue 20: a Redis that forgot its data ---- */

/* True once the atomic reaches n, within timeout_ms. */
static bool wait_atomic(atomic_int *v, int n, int timeout_ms)
{
	long long t0 = mono_ms();

	while (atomic_load(v) < n) {
		if (mono_ms() - t0 > timeout_ms)
			return false;
		sleep_ms(5);
	}
	return true;
}

/*
 * Leader A's push is held in flight (a proxy between A and Redis); Redis then
 * loses its data (FLUSHALL: a restart without persistence, a failover to a
 * replica that never saw the epoch), A's session is ended, and B leads from
 * the empty Redis, taking the first epoch again, and relays the jobs. A's
 * push, released, must be refused: after such a loss the epoch's number
 * starts again at 1, so only a token never reused tells A's epoch from B's.
 */
START_TEST(a_push_held_across_a_redis_that_forgot_is_not_pushed_twice)
{
	static const char *const queues[] = { "queue:default", NULL };
	static const char *const b_args[] = { FAST_RELAY, NULL };
	static struct proxy px;
	char url[128];
	const char *const a_args[] = { "--redis-url", url, "--redis-timeout", "60s", FAST_RELAY, NULL };
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc a, b;
	int replies;

	proxy_start(&px);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", px.port);
	h_snapshot_expected(c);
	h_relay_start(&a, "a", a_args);
	RELAY_CHECK(&a, h_log_wait(&a, "leading", 10000), "a did not lead");
	atomic_store(&px.gate, 1);
	h_stage_expected(c, "default", 1, 10);
	RELAY_CHECK(&a, wait_atomic(&px.gated, 1, 10000), "a's push never reached the proxy");
	freeReplyObject(h_cmd(r, "FLUSHALL"));
	h_sql(c, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'stagedrain'");
	h_relay_start(&b, "b", b_args);
	RELAY_CHECK(&b, h_wait_len(r, "queue:default", 10, 20000), "b did not relay the jobs");
	RELAY_CHECK(&b, h_wait_staged_empty(c, 10000), "b did not delete the rows");
	ck_assert_int_eq(atomic_load(&px.gated), 1);

	/* A's push reaches Redis now; its answer, passed back, says it ran. */
	replies = atomic_load(&px.replies);
	atomic_store(&px.gate, 0);
	RELAY_CHECK(&a, wait_atomic(&px.replies, replies + 1, 10000), "redis never answered a's held push");
	ck_assert_msg(h_cmd_int(r, "LLEN queue:default") == 10, "10 jobs staged, %lld in queue:default; see %s",
		      h_cmd_int(r, "LLEN queue:default"), a.log);
	h_assert_each_once(c, r, queues, "queue:default", 10);
	RELAY_CHECK(&a, h_log_wait(&a, "STALE", 10000), "a was not told its epoch is not current");
	stop_relay(&b);
	h_relay_kill(&a, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&a, 10000), 0);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* ---- defect 4: a Redis key of the wrong type ---- */

START_TEST(a_key_of_the_wrong_type_holds_its_jobs_and_pushes_nothing_twice)
{
	static const char *const args[] = { FAST_RELAY, NULL };
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;

	freeReplyObject(h_cmd(r, "SET queue:b not-a-list"));
	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args) VALUES ('a', 'A', '[1]'), ('b', 'B', '[1]'),"
		 " ('a', 'A', '[2]'), ('b', 'B', '[2]')");
	h_relay_start(&p, "relay", args);
	RELAY_CHECK(&p, h_wait_len(r, "queue:a", 2, 10000), "queue a's jobs did not arrive");
	RELAY_CHECK(&p, h_log_wait(&p, "queue:b", 5000), "the log does not name the key");
	/* Other queues keep flowing while b's jobs wait. */
	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args) VALUES ('a', 'A', '[3]'), ('b', 'B', '[3]')");
	RELAY_CHECK(&p, h_wait_len(r, "queue:a", 3, 10000), "queue a stalled behind queue b");
	sleep_ms(2000);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:a"), 3);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs WHERE queue = 'b'"), 3);
	freeReplyObject(h_cmd(r, "DEL queue:b"));
	RELAY_CHECK(&p, h_wait_len(r, "queue:b", 3, 10000), "queue b's jobs did not arrive once the key was fixed");
	RELAY_CHECK(&p, h_wait_staged_empty(c, 5000), "rows left behind");
	sleep_ms(1000);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:a"), 3);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:b"), 3);
	/* b's jobs in id order: LPUSH, so the oldest is at the tail. */
	{
		json_t *jobs = h_list_jobs(r, "queue:b");
		for (int i = 0; i < 3; i++)
			ck_assert_int_eq(json_integer_value(
						 json_array_get(json_object_get(json_array_get(jobs, (size_t)i),
										"args"),
								0)),
					 3 - i);
		json_decref(jobs);
	}
	stop_relay(&p);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/*
 * More rows kept by a bad key than one batch reads: the reads of the old gaps
 * and kept rows, in id order, must not take only those rows again and again
 * (a read cut short by its limit used to start over at the lowest kept id in
 * every batch, so nothing above them was read again: the drain stalled).
 */
START_TEST(more_kept_rows_than_a_batch_do_not_stall_the_drain)
{
	/* FAST_RELAY's settings but a smaller batch: the relay takes each flag once. */
	static const char *const args[] = { "--batch-size", "10", "--poll-interval", "20ms", "--log-level",
					    "debug",        NULL };
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;

	freeReplyObject(h_cmd(r, "SET queue:b not-a-list"));
	h_stage(c, "b", 1, 35);
	h_snapshot_expected(c);
	h_relay_start(&p, "relay", args);
	RELAY_CHECK(&p, h_log_wait(&p, "queue:b", 10000), "the log does not name the key");
	/* Past several reads of the kept rows (twice a second at most). */
	sleep_ms(2500);
	h_stage_expected(c, "a", 1, 5);
	RELAY_CHECK(&p, h_wait_len(r, "queue:a", 5, 15000), "queue a stalled behind more kept rows than a batch");
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs WHERE queue = 'b'"), 35);
	freeReplyObject(h_cmd(r, "DEL queue:b"));
	RELAY_CHECK(&p, h_wait_len(r, "queue:b", 35, 15000), "queue b's jobs did not arrive once the key was fixed");
	RELAY_CHECK(&p, h_wait_staged_empty(c, 5000), "rows left behind");
	h_assert_each_once(c, r, (const char *const[]){ "queue:a", "queue:b", NULL }, "queue:b", 35);
	stop_relay(&p);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* ---- defect 5: a dead-letter move that fails ---- */

START_TEST(a_dead_row_whose_id_is_dead_already_is_still_moved)
{
	static const char *const once[] = { "--once", NULL };
	PGconn *c = h_pg();
	redisContext *r = h_redis();

	/* As after TRUNCATE staged_jobs RESTART IDENTITY: id 2 is in the dead table already. */
	h_sql(c, "INSERT INTO staged_jobs_dead (id, job_class, reason) VALUES (2, 'Earlier', 'earlier')");
	h_stage(c, "default", 1, 1);
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('Bad', '{}')");
	h_stage(c, "default", 2, 3);
	ck_assert_int_eq(h_relay_run("relay", once), 0);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 4);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE id = 2"), 2);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE job_class = 'Bad'"), 1);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* The test server's URL with another user. */
static void url_as(char *out, size_t len, const char *user)
{
	const char *url = h_env("TEST_PG_URL"), *at = strchr(url, '@');

	ck_assert_ptr_nonnull(at);
	snprintf(out, len, "postgresql://%s%s", user, at);
}

START_TEST(a_dead_row_that_cannot_be_moved_does_not_slow_the_good_ones)
{
	char url[256];
	const char *const args[] = { "--pg-url", url, FAST_RELAY, NULL };
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;

	h_sql(c, "DROP ROLE IF EXISTS sd_nodead");
	h_sql(c, "CREATE ROLE sd_nodead LOGIN");
	h_sql(c, "GRANT SELECT, DELETE ON staged_jobs TO sd_nodead");
	h_sql(c, "GRANT SELECT, INSERT, DELETE ON staged_jobs_held TO sd_nodead");
	url_as(url, sizeof(url), "sd_nodead");
	h_stage(c, "default", 1, 2);
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('Bad', '{}')");
	h_stage(c, "default", 3, 2);
	h_relay_start(&p, "relay", args);
	RELAY_CHECK(&p, h_wait_len(r, "queue:default", 4, 10000), "the good rows did not arrive");
	RELAY_CHECK(&p, h_log_wait(&p, "permission denied", 5000), "the log does not say why");
	/* Good rows staged after the failure go through at once, not after a back-off. */
	for (int i = 0; i < 5; i++) {
		long long t0 = mono_ms();
		h_stage(c, "default", 10 + i, 1);
		RELAY_CHECK(&p, h_wait_len(r, "queue:default", 5 + i, 10000), "a good row did not arrive");
		ck_assert_int_lt(mono_ms() - t0, 3000);
	}
	sleep_ms(1500);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 9);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs WHERE job_class = 'Bad'"), 1);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 1);
	h_sql(c, "GRANT INSERT ON staged_jobs_dead TO sd_nodead");
	RELAY_CHECK(&p, h_wait_staged_empty(c, 10000), "the bad row was not moved once it could be");
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE job_class = 'Bad'"), 1);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 9);
	stop_relay(&p);
	h_sql(c, "DROP OWNED BY sd_nodead");
	h_sql(c, "DROP ROLE sd_nodead");
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* ---- memory: a batch's byte bound ---- */

/* Jobs in batches of the relay's debug log, at most. */
static int largest_batch(const char *log)
{
	FILE *f = fopen(log, "r");
	char line[2048];
	int most = 0, n;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "batch relayed");
		if (p && (p = strstr(p, " jobs=")) && sscanf(p, " jobs=%d", &n) == 1 && n > most)
			most = n;
	}
	fclose(f);
	return most;
}

START_TEST(a_batch_stops_at_its_byte_bound_and_loses_nothing)
{
	static const char *const args[] = { "--batch-max-bytes", "8k", "--max-job-bytes", "4k", FAST_RELAY, NULL };
	PGconn *c = h_pg(), *late = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;

	/* Six late rows of 3,000 bytes in one gap, twenty new ones after them. */
	h_sql(late, "BEGIN");
	h_sql(late, "INSERT INTO staged_jobs (job_class, args) SELECT 'Late', jsonb_build_array(i, repeat('x', 3000))"
		    " FROM generate_series(1, 6) i");
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('First', '[0]')");
	h_relay_start(&p, "relay", args);
	RELAY_CHECK(&p, h_wait_len(r, "queue:default", 1, 10000), "the first job did not arrive");
	h_sql(late, "COMMIT");
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) SELECT 'New', jsonb_build_array(i, repeat('y', 3000))"
		 " FROM generate_series(1, 20) i");
	/* Over --max-job-bytes: only its length is read, and it is dead-lettered. */
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('Huge', jsonb_build_array(repeat('z', 100000)))");
	RELAY_CHECK(&p, h_wait_len(r, "queue:default", 27, 10000), "jobs did not arrive");
	RELAY_CHECK(&p, h_wait_staged_empty(c, 10000), "rows left behind");
	stop_relay(&p);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 27);
	ck_assert_int_eq(count_class(r, "queue:default", "Late"), 6);
	ck_assert_int_eq(count_class(r, "queue:default", "New"), 20);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE job_class = 'Huge'"
				  " AND reason LIKE 'args are larger than --max-job-bytes%%'"),
			 1);
	/* Rows of about 3 kB under an 8 kB bound: three at most (the third starts under it). */
	ck_assert_int_le(largest_batch(p.log), 3);
	ck_assert_int_ge(largest_batch(p.log), 2);
	PQfinish(late);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* ---- defect 6: writers that hold an xid ---- */

/* Index scans and entries the relay's reads of staged_jobs made so far. */
static void index_reads(PGconn *c, long long *scans, long long *entries)
{
	sleep_ms(1200); /* backends report their counts at most once a second */
	h_sql(c, "SELECT pg_stat_clear_snapshot()");
	*scans = h_sql(c, "SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'staged_jobs_pkey'");
	*entries = h_sql(c, "SELECT idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = 'staged_jobs_pkey'");
}

/* Rounds of rolled-back and committed staging: the rolled-back ids are gaps
 * that cannot retire while the holder runs. */
static void stage_rounds(PGconn *c, redisContext *r, struct relay_proc *p, int rounds, long long *pushed)
{
	for (int i = 0; i < rounds; i++) {
		h_sql(c, "BEGIN");
		h_stage(c, "default", 0, 1);
		h_sql(c, "ROLLBACK");
		h_stage(c, "default", 0, 10);
		*pushed += 10;
		RELAY_CHECK(p, h_wait_len(r, "queue:default", *pushed, 10000), "jobs did not arrive");
		sleep_ms(20);
	}
}

START_TEST(a_writer_holding_an_xid_does_not_make_every_read_walk_old_gaps)
{
	enum { ROUNDS = 150, AFTER = 40 };
	static const char *const args[] = { "--batch-size", "50", "--poll-interval", "50ms", NULL };
	PGconn *c = h_pg(), *holder = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;
	long long scans0, entries0, scans1, entries1, scans2, entries2, pushed = 0;

	h_sql(holder, "BEGIN");
	h_sql(holder, "SELECT pg_current_xact_id()::text::int8");
	h_relay_start(&p, "relay", args);
	RELAY_CHECK(&p, h_log_wait(&p, "leading", 10000), "relay did not lead");
	index_reads(c, &scans0, &entries0);
	stage_rounds(c, r, &p, ROUNDS, &pushed);
	index_reads(c, &scans1, &entries1);
	/* Re-reading every gap on every read costs about ROUNDS^2 / 2 x reads per
	 * round = 11,000 x 3 index scans; reading old gaps on a timer far fewer. */
	RELAY_CHECK(&p, scans1 - scans0 < 12000, "%lld index scans for %d rounds", scans1 - scans0, ROUNDS);

	/* A new leader while the holder still runs: the rows drained since it
	 * began are dead entries no read may walk again and again. */
	h_relay_kill(&p, SIGKILL);
	(void)h_relay_wait(&p, 5000);
	h_relay_start(&p, "relay2", args);
	RELAY_CHECK(&p, h_log_wait(&p, "leading", 10000), "relay did not lead");
	sleep_ms(1000); /* idle reads, with nothing to find */
	stage_rounds(c, r, &p, AFTER, &pushed);
	index_reads(c, &scans2, &entries2);
	/* Each read from the head would walk all ROUNDS x 10 drained rows: about
	 * 1,500 x 3 reads per round x AFTER = 180,000 entries. */
	RELAY_CHECK(&p, entries2 - entries1 < 60000, "%lld index entries read after the restart", entries2 - entries1);
	h_sql(holder, "ROLLBACK");
	ck_assert(h_wait_staged_empty(c, 10000));
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), pushed);
	stop_relay(&p);
	PQfinish(holder);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* The latest xid any transaction took, without taking one. */
static long long xid_high(PGconn *c)
{
	char v[32];

	h_sql_text(c, "SELECT pg_snapshot_xmax(pg_current_snapshot())::text", v, sizeof(v));
	return atoll(v);
}

/*
 * A relay that reads and finds nothing takes no xid: on a quiet database
 * its polls would otherwise spend one each (ten a second at the default
 * interval), bringing the wraparound vacuum closer. Also with a gap open
 * (a rolled-back row) that its reads keep covering, and after a drain.
 */
START_TEST(an_idle_relay_takes_no_xid)
{
	static const char *const args[] = { "--poll-interval", "10ms", NULL };
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;
	long long before;

	h_relay_start(&p, "relay", args);
	RELAY_CHECK(&p, h_log_wait(&p, "leading", 10000), "relay did not lead");
	h_sql(c, "BEGIN");
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('Gone', '[0]')");
	h_sql(c, "ROLLBACK");
	h_stage(c, "default", 1, 3);
	RELAY_CHECK(&p, h_wait_len(r, "queue:default", 3, 10000), "jobs did not arrive");
	ck_assert(h_wait_staged_empty(c, 5000));
	before = xid_high(c);
	sleep_ms(1000); /* a hundred idle polls */
	RELAY_CHECK(&p, xid_high(c) - before <= 1, "idle reads took %lld xids in a second", xid_high(c) - before);
	stop_relay(&p);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/* ---- a hot standby ---- */

START_TEST(a_hot_standby_is_never_led)
{
	char url1[256], url2[256];
	const char *const migrate[] = { "migrate", "--pg-url", url1, NULL };
	const char *args[] = { "--pg-url", url2, "--poll-interval", "20ms", NULL };
	redisContext *r = h_redis();
	struct relay_proc p;
	PGconn *c1, *c2;

	h_services("pgfo-start");
	snprintf(url1, sizeof(url1), "postgresql://postgres@127.0.0.1:%d/postgres", h_port_file("pgfo1.port"));
	snprintf(url2, sizeof(url2), "postgresql://postgres@127.0.0.1:%d/postgres", h_port_file("pgfo2.port"));
	ck_assert_int_eq(h_relay_run("migrate-standby", migrate), 0);
	c1 = PQconnectdb(url1);
	ck_assert_int_eq(PQstatus(c1), CONNECTION_OK);
	h_stage(c1, "default", 1, 5);
	c2 = PQconnectdb(url2);
	ck_assert_int_eq(PQstatus(c2), CONNECTION_OK);
	for (long long t0 = mono_ms(); h_sql(c2, "SELECT count(*) FROM staged_jobs") < 5;) {
		ck_assert_msg(mono_ms() - t0 < 20000, "standby did not replay the rows");
		sleep_ms(20);
	}
	h_relay_start(&p, "standby", args);
	RELAY_CHECK(&p, h_log_wait(&p, "hot standby", 10000), "the log does not say the server is a standby");
	sleep_ms(1000);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 0);
	ck_assert(!h_log_contains(p.log, "leading"));
	stop_relay(&p);
	PQfinish(c1);
	PQfinish(c2);
	redisFree(r);
	h_services("pgfo-stop");
}
END_TEST

/* ---- issue 25: a transaction of several batches, overlapped ---- */

/* A COMMIT that waits, at its deferred trigger, for the lock `hold` takes. */
/* How many jobs the fence names. */
static long long fence_jobs(redisContext *r)
{
	redisReply *f = h_cmd(r, "GET %s", h_fence_key());
	long long n = 0;

	if (f->type == REDIS_REPLY_STRING)
		for (size_t i = 0; i < f->len; i++)
			n += f->str[i] == ':';
	freeReplyObject(f);
	return n;
}

/*
 * A backlog drains in transactions of several batches, each pushed while the
 * next is read. Leader A's COMMIT is held (a deferred trigger waits for a
 * lock the test holds) after Redis acknowledged several batches of its
 * transaction; A is killed there and its session ended, so nothing it deleted
 * commits. The fence must name every batch A pushed, not only the last: B
 * deletes them all and pushes the rest, and every job arrives exactly once.
 */
START_TEST(a_leader_killed_with_batches_in_flight_loses_and_duplicates_nothing)
{
	static const char *const args[] = { "--batch-size", "200", "--poll-interval", "20ms", "--log-level",
					    "debug",        NULL };
	PGconn *c = h_pg(), *lock = h_pg();
	redisContext *r = h_redis();
	struct relay_proc a, b;
	long long pushed;

	h_stage(c, "default", 1, 5000);
	h_snapshot_expected(c);
	h_block_commits(c);
	h_sql(lock, "SELECT pg_advisory_lock(42425)");
	h_relay_start(&a, "relay-a", args);
	/* Several batches of one transaction in Redis, none committed. */
	RELAY_CHECK(&a, h_wait_len(r, "queue:default", 600, 20000), "A pushed fewer than three batches");
	RELAY_CHECK(&a, h_wait_blocked(c, 10000), "A's commit is not waiting");
	pushed = h_cmd_int(r, "LLEN queue:default");
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 5000);
	ck_assert_int_ge(pushed, 600);
	ck_assert_int_lt(pushed, 5000);
	ck_assert_int_eq(fence_jobs(r), pushed);
	h_relay_crash(&a, c);
	h_sql(lock, "SELECT pg_advisory_unlock(42425)");
	h_unblock_commits(c);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 5000);
	h_relay_start(&b, "relay-b", args);
	RELAY_CHECK(&b, h_wait_staged_empty(c, 20000), "B left rows behind");
	RELAY_CHECK(&b, h_log_contains(b.log, "fence"), "B did not read A's fence");
	stop_relay(&b);
	h_assert_each_once(c, r, (const char *const[]){ "queue:default", NULL }, "queue:default", 5000);
	PQfinish(lock);
	PQfinish(c);
	redisFree(r);
}
END_TEST

/*
 * A later batch of such a transaction meets a key of the wrong type: the
 * script writes nothing of it, the transaction rolls back, and the batches it
 * pushed before are named by the fence, so they are deleted, not pushed
 * again; the bad queue's jobs wait for the key, the others flow.
 */
START_TEST(a_later_batch_meeting_a_key_of_the_wrong_type_pushes_nothing_twice)
{
	static const char *const args[] = { "--batch-size", "200", "--poll-interval", "20ms", "--log-level",
					    "debug",        NULL };
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p;

	freeReplyObject(h_cmd(r, "SET queue:bad not-a-list"));
	h_stage(c, "default", 1, 1000);
	h_stage(c, "bad", 1001, 10);
	h_stage(c, "default", 1011, 1000);
	h_snapshot_expected(c);
	h_relay_start(&p, "relay", args);
	RELAY_CHECK(&p, h_wait_len(r, "queue:default", 2000, 20000), "queue default stalled behind queue bad");
	RELAY_CHECK(&p, h_log_wait(&p, "queue:bad", 5000), "the log does not name the key");
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs WHERE queue = 'bad'"), 10);
	freeReplyObject(h_cmd(r, "DEL queue:bad"));
	RELAY_CHECK(&p, h_wait_staged_empty(c, 20000), "rows left behind");
	stop_relay(&p);
	h_assert_each_once(c, r, (const char *const[]){ "queue:default", "queue:bad", NULL }, "queue:default", 2000);
	PQfinish(c);
	redisFree(r);
}
END_TEST

Suite *guarantees_suite(void)
{
	Suite *s = suite_create("guarantees");
	TCase *tc = tcase_create("guarantees");

	tcase_add_checked_fixture(tc, h_reset, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, a_late_commit_whose_xid_the_snapshot_did_not_show_arrives);
	tcase_add_test(tc, a_late_commit_whose_xid_is_above_the_snapshot_xmax_arrives);
	tcase_add_test(tc, rows_with_infinite_or_unrepresentable_times_are_dead_lettered);
	tcase_add_test(tc, a_push_whose_reply_came_late_is_not_pushed_twice);
	tcase_add_test(tc, a_push_held_across_a_redis_that_forgot_is_not_pushed_twice);
	tcase_add_test(tc, a_key_of_the_wrong_type_holds_its_jobs_and_pushes_nothing_twice);
	tcase_add_test(tc, more_kept_rows_than_a_batch_do_not_stall_the_drain);
	tcase_add_test(tc, a_dead_row_whose_id_is_dead_already_is_still_moved);
	tcase_add_test(tc, a_dead_row_that_cannot_be_moved_does_not_slow_the_good_ones);
	tcase_add_test(tc, a_batch_stops_at_its_byte_bound_and_loses_nothing);
	tcase_add_test(tc, a_writer_holding_an_xid_does_not_make_every_read_walk_old_gaps);
	tcase_add_test(tc, an_idle_relay_takes_no_xid);
	tcase_add_test(tc, a_hot_standby_is_never_led);
	tcase_add_test(tc, a_leader_killed_with_batches_in_flight_loses_and_duplicates_nothing);
	tcase_add_test(tc, a_later_batch_meeting_a_key_of_the_wrong_type_pushes_nothing_twice);
	suite_add_tcase(s, tc);
	return s;
}
