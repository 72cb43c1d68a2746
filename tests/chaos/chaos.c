/* The chaos test (`make chaos`): producers stage jobs while two relays run and a
 * killer SIGKILLs leaders, terminates their backends and restarts Redis; then a
 * checker proves every committed job reached Redis exactly once, in order. */
#include "fmacros.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The relays' default --lock-key 0x73746764726e, in decimal as their Redis keys spell it. */
#define LOCK_KEY "126943985087086"
#define FENCE_KEY "stagedrain:" LOCK_KEY ":fence"
#define EPOCH_KEY "stagedrain:" LOCK_KEY ":epoch"

#define NRELAYS 2
#define MAX_PRODUCERS 32
#define MAX_TX_ROWS 50
#define NQUEUES 4
#define FAILOVER_TIMEOUT_MS 30000
#define CONNECT_TIMEOUT_MS 15000

static const char *const queues[NQUEUES] = { "chaos_a", "chaos_b", "chaos_c", "chaos_d" };

/* Producer-only tables: chaos_committed gets each job in the job's own transaction,
 * so it holds exactly the committed jobs; rolled-back jids are recorded after the
 * ROLLBACK. The rest is filled by the orchestrator and the checker. */
static const char setup_sql[] =
	"CREATE TABLE chaos_committed (jid text PRIMARY KEY, id bigint NOT NULL, queue text NOT NULL,"
	" args jsonb NOT NULL, scheduled bool NOT NULL);"
	"CREATE TABLE chaos_rolledback (jid text PRIMARY KEY);"
	"CREATE TABLE chaos_events (t_us bigint NOT NULL, kind text NOT NULL);"
	"CREATE TABLE chaos_seen (src text NOT NULL, list text, pos int NOT NULL, jid text,"
	" queue text, class text, args text, enq text, enq_us bigint);";

/* Counters a producer shares with the orchestrator (one writer each). */
struct producer_stats {
	_Atomic long long staged, committed, rolled_back, txns, held_open;
};

/* Lives in a shared anonymous mapping, so forked producers see the flags. */
struct shared {
	_Atomic int stop;       /* finish the current transaction and exit */
	_Atomic int keep_going; /* the killer still needs a backlog: go past the quota */
	struct producer_stats p[MAX_PRODUCERS];
};

struct opts {
	long long jobs;
	int kills, backend_kills, redis_restarts, producers;
	int seconds; /* how long producers spread their jobs over; 0: derived */
	int timeout; /* the whole run, seconds */
	unsigned seed;
	bool keep;
	const char *bin, *services;
};

struct relay {
	pid_t pid;
	char log[PATH_MAX];
};

enum event_kind { EV_LEADER_KILL, EV_BACKEND_KILL, EV_REDIS_RESTART };

struct chaos {
	struct opts o;
	char dir[512];
	char pg_url[1024];
	int redis_port;
	PGconn *pg;
	redisContext *redis;
	struct relay relays[NRELAYS];
	int incarnations;
	pid_t producers[MAX_PRODUCERS];
	int producer_failures;
	struct shared *sh;
	unsigned long long rng;
	long long start_ms, deadline_ms, next_progress_ms;
	bool services_up;
	/* what happened */
	int leader_kills, backend_kills, redis_restarts, skipped_kills;
	int unexpected_exits, failover_timeouts, bad_stops;
	long long failover_ms[4096];
	int nfailover;
	FILE *events;
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* ---- time, randomness, small helpers ---- */

static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The relay stamps enqueued_at with CLOCK_REALTIME; events use the same clock. */
static long long real_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_ms(long long ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	if (ms > 0)
		nanosleep(&ts, NULL);
}

/* splitmix64: seeded, so a failing run can be repeated with --seed. */
static unsigned long long rnd(unsigned long long *s)
{
	unsigned long long z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static long long rnd_range(unsigned long long *s, long long lo, long long hi)
{
	return lo + (long long)(rnd(s) % (unsigned long long)(hi - lo + 1));
}

static void say(const char *fmt, ...) SD_PRINTF(1, 2);
static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("chaos: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* One line per fault into DIR/events.log, and the fault into chaos_events so
 * the checker can say which fault preceded a duplicate. */
static void note_event(struct chaos *c, const char *kind, const char *fmt, ...) SD_PRINTF(3, 4);
static void note_event(struct chaos *c, const char *kind, const char *fmt, ...)
{
	char sql[200];
	long long t = real_us();
	va_list ap;

	fprintf(c->events, "%lld.%06lld t+%.3fs %s: ", t / 1000000, t % 1000000,
		(double)(mono_ms() - c->start_ms) / 1000.0, kind);
	va_start(ap, fmt);
	vfprintf(c->events, fmt, ap);
	va_end(ap);
	fputc('\n', c->events);
	fflush(c->events);
	snprintf(sql, sizeof(sql), "INSERT INTO chaos_events VALUES (%lld, '%s')", t, kind);
	PQclear(PQexec(c->pg, sql));
}

static bool should_stop(const struct chaos *c)
{
	return interrupted || mono_ms() > c->deadline_ms;
}

/* ---- the throwaway servers ---- */

/* Runs `bash services.sh CMD DIR` and returns its exit status. */
static int services(struct chaos *c, const char *cmd)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		execlp("bash", "bash", c->o.services, cmd, c->dir, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Reads TEST_PG_URL and TEST_REDIS_PORT from the env file services.sh wrote. */
static int read_env(struct chaos *c)
{
	char path[PATH_MAX + 8], line[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/env", c->dir);
	if (!(f = fopen(path, "r")))
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "export TEST_PG_URL=", 19) == 0)
			snprintf(c->pg_url, sizeof(c->pg_url), "%s", line + 19);
		else if (strncmp(line, "export TEST_REDIS_PORT=", 23) == 0)
			c->redis_port = atoi(line + 23);
	}
	fclose(f);
	return *c->pg_url && c->redis_port > 0 ? 0 : -EINVAL;
}

/* Our sockets must not leak into the relays we exec. */
static void cloexec(int fd)
{
	if (fd >= 0)
		(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/* A connection to the test Postgres, named so the killer never picks it. */
static PGconn *pg_connect(const struct chaos *c, const char *name)
{
	char url[1200];
	PGconn *conn;

	snprintf(url, sizeof(url), "%s?application_name=%s&connect_timeout=10", c->pg_url, name);
	conn = PQconnectdb(url);
	if (PQstatus(conn) != CONNECTION_OK) {
		say("could not connect to postgres: %s", PQerrorMessage(conn));
		PQfinish(conn);
		return NULL;
	}
	cloexec(PQsocket(conn));
	PQclear(PQexec(conn, "SET client_min_messages = warning; SET statement_timeout = '120s'"));
	return conn;
}

/* Runs SQL on the orchestrator's session; the first value as a number, or -1. */
static long long sql_val(struct chaos *c, const char *sql)
{
	PGresult *res = PQexec(c->pg, sql);
	ExecStatusType st = PQresultStatus(res);
	long long v = 0;

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		say("query failed: %s: %s", sql, PQerrorMessage(c->pg));
		v = -1;
	} else if (st == PGRES_TUPLES_OK && PQntuples(res) > 0 && !PQgetisnull(res, 0, 0)) {
		v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	}
	PQclear(res);
	return v;
}

/* A Redis command on the orchestrator's connection, reconnecting once if Redis
 * was restarted under it. NULL (and no reconnect storm) while Redis is down. */
static redisReply *rcmd(struct chaos *c, const char *fmt, ...)
{
	struct timeval tv = { 2, 0 };
	redisReply *r = NULL;
	va_list ap;

	for (int attempt = 0; attempt < 2 && !r; attempt++) {
		if (!c->redis || c->redis->err) {
			if (c->redis)
				redisFree(c->redis);
			c->redis = redisConnectWithTimeout("127.0.0.1", c->redis_port, tv);
			if (!c->redis || c->redis->err)
				continue;
			redisSetTimeout(c->redis, tv);
			cloexec(c->redis->fd);
		}
		va_start(ap, fmt);
		r = redisvCommand(c->redis, fmt, ap);
		va_end(ap);
	}
	if (r && r->type == REDIS_REPLY_ERROR) {
		say("redis %s: %s", fmt, r->str);
		freeReplyObject(r);
		r = NULL;
	}
	return r;
}

/* The epoch in the fence key (0: none yet), or -1 if Redis did not answer. */
static long long fence_epoch(struct chaos *c)
{
	redisReply *r = rcmd(c, "GET %s", FENCE_KEY);
	long long e = -1;

	if (r) {
		e = 0;
		if (r->type == REDIS_REPLY_STRING && sscanf(r->str, "epoch=%lld ", &e) != 1)
			e = 0;
		freeReplyObject(r);
	}
	return e;
}

static long long epoch_counter(struct chaos *c)
{
	redisReply *r = rcmd(c, "GET %s", EPOCH_KEY);
	long long e = -1;

	if (r) {
		e = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : 0;
		freeReplyObject(r);
	}
	return e;
}

/* ---- relays: real processes of the built binary ---- */

static bool file_contains(const char *path, const char *text)
{
	char line[4096];
	bool found = false;
	FILE *f = fopen(path, "r");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, text) != NULL;
	fclose(f);
	return found;
}

/* The child names its Postgres session after its own pid, so the killer can
 * map the backend holding the advisory lock to the process to SIGKILL. */
static void exec_relay(const struct chaos *c, const char *log)
{
	char url[1200], redis_url[64];
	int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd >= 0) {
		dup2(fd, STDERR_FILENO);
		dup2(fd, STDOUT_FILENO);
		close(fd);
	}
	snprintf(url, sizeof(url), "%s?application_name=stagedrain-%ld", c->pg_url, (long)getpid());
	snprintf(redis_url, sizeof(redis_url), "redis://127.0.0.1:%d/0", c->redis_port);
	execl(c->o.bin, c->o.bin, "--pg-url", url, "--redis-url", redis_url, "--batch-size", "500",
	      "--poll-interval", "10ms", "--lock-key", LOCK_KEY, (char *)NULL);
	_exit(127);
}

/* Starts a relay in slot i and waits until it is connected to both servers, so
 * no fault lands while it is still starting (start-up errors are fatal by design). */
static int relay_start(struct chaos *c, int i)
{
	struct relay *r = &c->relays[i];
	long long until = mono_ms() + CONNECT_TIMEOUT_MS;
	pid_t pid;

	snprintf(r->log, sizeof(r->log), "%s/relay-%03d.log", c->dir, ++c->incarnations);
	if ((pid = fork()) < 0)
		return -errno;
	if (pid == 0)
		exec_relay(c, r->log);
	r->pid = pid;
	while (!file_contains(r->log, "msg=connected")) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			say("a relay exited while starting; see %s", r->log);
			r->pid = 0;
			c->unexpected_exits++;
			return -ECHILD;
		}
		if (mono_ms() > until || interrupted) {
			say("relay did not connect within %d ms; see %s", CONNECT_TIMEOUT_MS, r->log);
			return -ETIMEDOUT;
		}
		sleep_ms(5);
	}
	return 0;
}

/* Reaps relays that exited without being killed by us (a bug: only start-up
 * may exit) and starts a relay in every empty slot. */
static int tend_relays(struct chaos *c)
{
	for (int i = 0; i < NRELAYS; i++) {
		struct relay *r = &c->relays[i];
		int st;
		if (r->pid > 0 && waitpid(r->pid, &st, WNOHANG) == r->pid) {
			say("relay %d exited on its own (status %d); see %s", (int)r->pid,
			    WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), r->log);
			c->unexpected_exits++;
			r->pid = 0;
		}
		if (r->pid <= 0 && relay_start(c, i) < 0)
			return -1;
	}
	return 0;
}

static int relay_slot(const struct chaos *c, pid_t pid)
{
	for (int i = 0; i < NRELAYS; i++)
		if (c->relays[i].pid == pid && pid > 0)
			return i;
	return -1;
}

/* The relay whose backend holds the advisory lock: its pid and its backend's. */
static int find_leader(struct chaos *c, pid_t *relay_pid, long long *backend_pid)
{
	PGresult *res = PQexec(c->pg, "SELECT a.application_name, a.pid FROM pg_locks l"
				      " JOIN pg_stat_activity a ON a.pid = l.pid"
				      " WHERE l.locktype = 'advisory' AND l.granted"
				      " AND a.application_name LIKE 'stagedrain-%'");
	int rc = -1;

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
		*relay_pid = (pid_t)strtol(PQgetvalue(res, 0, 0) + strlen("stagedrain-"), NULL, 10);
		*backend_pid = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
		rc = relay_slot(c, *relay_pid);
	}
	PQclear(res);
	return rc;
}

/* ---- producers ---- */

struct producer {
	int idx;
	PGconn *conn;
	unsigned long long rng;
	unsigned seq;
	long long quota;
	struct producer_stats *st;
	char sql[MAX_TX_ROWS * 160 + 512];
	char rolled[MAX_TX_ROWS * 30 + 128];
};

static int producer_exec(struct producer *p, const char *sql, const char *want_status)
{
	PGresult *res = PQexec(p->conn, sql);
	int ok = PQresultStatus(res) == PGRES_COMMAND_OK &&
		 (!want_status || strcmp(PQcmdStatus(res), want_status) == 0);

	if (!ok)
		fprintf(stderr, "chaos: producer %d: %s failed: %s %s\n", p->idx, want_status ? want_status : "statement",
			PQcmdStatus(res), PQerrorMessage(p->conn));
	PQclear(res);
	return ok ? 0 : -1;
}

/* One transaction of 1..50 jobs over the queues; its fate is decided here, so
 * the producer knows exactly which jids committed and which rolled back. */
static int producer_tx(struct producer *p)
{
	int n = (int)rnd_range(&p->rng, 1, MAX_TX_ROWS);
	bool rollback = rnd(&p->rng) % 100 < 5;
	bool hold = rnd(&p->rng) % 150 == 0;
	size_t len, rlen;
	char *s = p->sql;
	const char *end_sql = s;

	len = (size_t)snprintf(s, sizeof(p->sql),
			       "BEGIN; WITH s AS (INSERT INTO staged_jobs (queue, job_class, args, run_at, jid) VALUES ");
	rlen = (size_t)snprintf(p->rolled, sizeof(p->rolled), "INSERT INTO chaos_rolledback (jid) VALUES ");
	for (int i = 0; i < n; i++) {
		char jid[32];
		bool scheduled = rnd(&p->rng) % 100 == 0;
		/* Unique by construction: producer, sequence, then random bits. */
		snprintf(jid, sizeof(jid), "%02x%08x%014llx", (unsigned)p->idx, p->seq,
			 rnd(&p->rng) & 0xffffffffffffffULL);
		len += (size_t)snprintf(s + len, sizeof(p->sql) - len, "%s('%s', 'ChaosJob', '[%d, %u]', %s, '%s')",
					i ? "," : "", queues[rnd(&p->rng) % NQUEUES], p->idx, p->seq,
					scheduled ? "now() + interval '1 day'" : "NULL", jid);
		rlen += (size_t)snprintf(p->rolled + rlen, sizeof(p->rolled) - rlen, "%s('%s')", i ? "," : "", jid);
		p->seq++;
	}
	len += (size_t)snprintf(s + len, sizeof(p->sql) - len,
				" RETURNING id, jid, queue, args, run_at IS NOT NULL AS scheduled)"
				" INSERT INTO chaos_committed (id, jid, queue, args, scheduled)"
				" SELECT id, jid, queue, args, scheduled FROM s;%s",
				hold ? "" : rollback ? "ROLLBACK" : "COMMIT");
	atomic_fetch_add(&p->st->staged, n);
	atomic_fetch_add(&p->st->txns, 1);
	if (hold) {
		/* Open for seconds: later ids commit and are drained before these. */
		if (producer_exec(p, s, NULL) < 0)
			return -1;
		atomic_fetch_add(&p->st->held_open, 1);
		sleep_ms(rnd_range(&p->rng, 1000, 3000));
		end_sql = rollback ? "ROLLBACK" : "COMMIT";
	}
	if (producer_exec(p, end_sql, rollback ? "ROLLBACK" : "COMMIT") < 0)
		return -1;
	if (rollback) {
		if (producer_exec(p, p->rolled, NULL) < 0)
			return -1;
		atomic_fetch_add(&p->st->rolled_back, n);
	} else {
		atomic_fetch_add(&p->st->committed, n);
	}
	return 0;
}

/* A producer process: paced so its quota spreads over the planned duration,
 * going on past it while the killer still needs a backlog (at most 3x). */
static void producer_main(struct chaos *c, int idx, long long quota, int seconds)
{
	struct producer *p = calloc(1, sizeof(*p));
	double rate = (double)quota / (seconds > 0 ? seconds : 1); /* jobs per second */
	long long start = mono_ms();
	int status = 0;

	if (!p)
		_exit(3);
	p->idx = idx;
	p->rng = c->o.seed * 1000003ULL + (unsigned)idx;
	p->quota = quota;
	p->st = &c->sh->p[idx];
	snprintf(p->sql, sizeof(p->sql), "chaos-producer-%d", idx);
	if (!(p->conn = pg_connect(c, p->sql)))
		_exit(3);
	for (;;) {
		long long staged = atomic_load(&p->st->staged);
		double due = rate * (double)(mono_ms() - start) / 1000.0;
		if (atomic_load(&c->sh->stop) || staged >= 3 * quota ||
		    (staged >= quota && !atomic_load(&c->sh->keep_going)))
			break;
		if ((double)staged > due + MAX_TX_ROWS) {
			sleep_ms(5);
			continue;
		}
		if (producer_tx(p) < 0) {
			status = 3;
			break;
		}
	}
	PQfinish(p->conn);
	free(p);
	_exit(status);
}

static int start_producers(struct chaos *c)
{
	long long quota = (c->o.jobs + c->o.producers - 1) / c->o.producers;

	for (int i = 0; i < c->o.producers; i++) {
		pid_t pid = fork();
		if (pid < 0)
			return -errno;
		if (pid == 0) {
			/* The parent's connections belong to the parent: leave them alone. */
			c->pg = NULL;
			c->redis = NULL;
			producer_main(c, i, quota, c->o.seconds);
		}
		c->producers[i] = pid;
	}
	return 0;
}

/* Reaps producers that finished; returns how many are still running. */
static int reap_producers(struct chaos *c)
{
	int running = 0;

	for (int i = 0; i < c->o.producers; i++) {
		int st;
		if (c->producers[i] <= 0)
			continue;
		if (waitpid(c->producers[i], &st, WNOHANG) == c->producers[i]) {
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				say("producer %d failed (status %d)", i, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
				c->producer_failures++;
			}
			c->producers[i] = 0;
		} else {
			running++;
		}
	}
	return running;
}

static long long total(const struct chaos *c, size_t field)
{
	long long sum = 0;

	for (int i = 0; i < c->o.producers; i++)
		sum += atomic_load((_Atomic long long *)((char *)&c->sh->p[i] + field));
	return sum;
}

#define TOTAL(c, f) total((c), offsetof(struct producer_stats, f))

/* ---- the killer ---- */

/* SIGKILLs the leader once it has pushed in its own epoch, then measures how
 * long until a push of a newer epoch: the standby's first batch. */
static int kill_leader(struct chaos *c)
{
	long long until = mono_ms() + 20000, epoch = -1, backend = 0, t0, fo;
	bool busy = rnd(&c->rng) % 2 == 0;
	pid_t pid = 0;
	int slot = -1, st;

	while (mono_ms() < until && !should_stop(c)) {
		slot = find_leader(c, &pid, &backend);
		epoch = slot >= 0 ? epoch_counter(c) : -1;
		/* Fence epoch == counter: the lock holder has taken its epoch and
		 * pushed in it, so whatever pushes with a newer epoch is its successor. */
		if (epoch > 0 && fence_epoch(c) == epoch)
			break;
		slot = -1;
		sleep_ms(10);
	}
	if (slot < 0) {
		c->skipped_kills++;
		note_event(c, "skipped", "no leader that had pushed in its epoch within 20 s");
		return 0;
	}
	if (busy) {
		/* A pause (think GC or a swapped-out page) lets a backlog build up, so
		 * the kill lands mid-batch, often between Redis' EXEC and the delete's
		 * COMMIT: the moment the fence is for. */
		kill(pid, SIGSTOP);
		sleep_ms(rnd_range(&c->rng, 100, 300));
		kill(pid, SIGCONT);
		sleep_ms(rnd_range(&c->rng, 0, 25));
	}
	t0 = mono_ms();
	kill(pid, SIGKILL);
	note_event(c, "leader SIGKILL", "relay pid %d (backend %lld) epoch %lld%s", (int)pid, backend, epoch,
		   busy ? ", while draining a backlog" : "");
	c->leader_kills++;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	c->relays[slot].pid = 0;
	for (;;) {
		long long e = fence_epoch(c);
		fo = mono_ms() - t0;
		if (e > epoch)
			break;
		if (fo > FAILOVER_TIMEOUT_MS || should_stop(c)) {
			c->failover_timeouts++;
			note_event(c, "failover timeout", "no push with an epoch above %lld within %lld ms", epoch, fo);
			return relay_start(c, slot) < 0 ? -1 : 0;
		}
		sleep_ms(1);
	}
	if (c->nfailover < (int)(sizeof(c->failover_ms) / sizeof(c->failover_ms[0])))
		c->failover_ms[c->nfailover++] = fo;
	fprintf(c->events, "  failover %lld ms\n", fo);
	return relay_start(c, slot) < 0 ? -1 : 0;
}

/*
 * A leader that stalls mid-batch (a long GC pause, a frozen VM) while its session
 * is cut: the standby takes over and pushes; then the old leader wakes up with
 * a batch in hand and its Redis connection intact. Nothing but a check at Redis
 * can keep it from pushing that batch a second time.
 */
static int kill_paused_leader_backend(struct chaos *c)
{
	long long until = mono_ms() + 10000, backend = 0, epoch, n;
	char sql[80];
	pid_t pid = 0;
	int slot = -1;

	while (slot < 0 && mono_ms() < until && !should_stop(c)) {
		if ((slot = find_leader(c, &pid, &backend)) < 0)
			sleep_ms(10);
	}
	if (slot < 0) {
		note_event(c, "skipped", "no leader to pause within 10 s");
		return 0;
	}
	/* Let a backlog build, resume, and freeze it again in the middle of a batch. */
	kill(pid, SIGSTOP);
	sleep_ms(rnd_range(&c->rng, 100, 300));
	kill(pid, SIGCONT);
	sleep_ms(rnd_range(&c->rng, 0, 25));
	kill(pid, SIGSTOP);
	epoch = epoch_counter(c);
	snprintf(sql, sizeof(sql), "SELECT count(pg_terminate_backend(%lld))", backend);
	n = sql_val(c, sql);
	c->backend_kills++;
	note_event(c, "backend kill (paused leader)", "relay pid %d paused, backend %lld terminated (%lld)",
		   (int)pid, backend, n);
	/* Resume it only once the standby has pushed in its new epoch. */
	until = mono_ms() + 5000;
	while (fence_epoch(c) <= epoch && mono_ms() < until && !should_stop(c))
		sleep_ms(5);
	kill(pid, SIGCONT);
	return n < 0 ? -1 : 0;
}

/* pg_terminate_backend of the leader's session, of every relay session, or of a
 * paused leader's. Never a producer's: their commit outcomes must stay known. */
static int kill_backends(struct chaos *c)
{
	int mode = (int)(rnd(&c->rng) % 3);
	long long n;

	if (mode == 2)
		return kill_paused_leader_backend(c);
	n = sql_val(c, mode == 0 ? "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
				   " WHERE application_name LIKE 'stagedrain-%'"
				 : "SELECT count(pg_terminate_backend(a.pid)) FROM pg_locks l"
				   " JOIN pg_stat_activity a ON a.pid = l.pid"
				   " WHERE l.locktype = 'advisory' AND l.granted"
				   " AND a.application_name LIKE 'stagedrain-%'");
	if (n < 0)
		return -1;
	c->backend_kills++;
	note_event(c, mode == 0 ? "backend kill (all relays)" : "backend kill (leader)", "%lld backend(s) terminated",
		   n);
	return 0;
}

/* Stops Redis (it keeps its AOF, appendfsync always), leaves it down up to a
 * second, starts it again on the same port. */
static int restart_redis(struct chaos *c)
{
	note_event(c, "redis restart", "stopping");
	if (services(c, "redis-stop") != 0)
		return -1;
	sleep_ms(rnd_range(&c->rng, 0, 1000));
	if (services(c, "redis-start") != 0)
		return -1;
	c->redis_restarts++;
	note_event(c, "redis restart", "started again");
	return 0;
}

static void progress(struct chaos *c)
{
	say("t=%llds staged=%lld committed=%lld leader-kills=%d backend-kills=%d redis-restarts=%d",
	    (mono_ms() - c->start_ms) / 1000, TOTAL(c, staged), TOTAL(c, committed), c->leader_kills,
	    c->backend_kills, c->redis_restarts);
}

/* Waits until `when` (monotonic ms), keeping both relays alive meanwhile. */
static int wait_until(struct chaos *c, long long when)
{
	while (mono_ms() < when) {
		if (should_stop(c) || tend_relays(c) < 0)
			return -1;
		(void)reap_producers(c);
		if (mono_ms() >= c->next_progress_ms) {
			progress(c);
			c->next_progress_ms = mono_ms() + 10000;
		}
		sleep_ms(when - mono_ms() < 20 ? when - mono_ms() : 20);
	}
	return 0;
}

/* The faults in a random order, spread over the producers' planned duration. */
static int run_killer(struct chaos *c)
{
	int n = c->o.kills + c->o.backend_kills + c->o.redis_restarts;
	enum event_kind *plan = calloc((size_t)(n > 0 ? n : 1), sizeof(*plan));
	long long span = (long long)c->o.seconds * 1000, t_start = mono_ms();
	int rc = 0;

	if (!plan)
		return -1;
	for (int i = 0; i < n; i++)
		plan[i] = i < c->o.kills ? EV_LEADER_KILL
			  : i < c->o.kills + c->o.backend_kills ? EV_BACKEND_KILL
								 : EV_REDIS_RESTART;
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(rnd(&c->rng) % (unsigned)(i + 1));
		enum event_kind t = plan[i];
		plan[i] = plan[j];
		plan[j] = t;
	}
	for (int i = 0; rc == 0 && i < n; i++) {
		/* Slot i of n over the span, at a random point inside it. */
		long long slot = span / n;
		long long when = t_start + slot * i + rnd_range(&c->rng, slot / 4, slot * 3 / 4);
		if (wait_until(c, when) < 0) {
			rc = -1;
			break;
		}
		if (plan[i] == EV_LEADER_KILL)
			rc = kill_leader(c);
		else if (plan[i] == EV_BACKEND_KILL)
			rc = kill_backends(c);
		else
			rc = restart_redis(c);
	}
	free(plan);
	return rc;
}

/* ---- the end: drain, stop, check ---- */

static int wait_drained(struct chaos *c)
{
	long long until = mono_ms() + 180000;

	while (mono_ms() < until && !should_stop(c)) {
		long long n = sql_val(c, "SELECT count(*) FROM staged_jobs");
		if (n == 0)
			return 0;
		if (tend_relays(c) < 0)
			return -1;
		sleep_ms(100);
	}
	say("staged_jobs was not drained within 180 s");
	return -1;
}

/* SIGTERM: each relay must finish its batch and exit 0. */
static void stop_relays(struct chaos *c, bool graceful)
{
	for (int i = 0; i < NRELAYS; i++)
		if (c->relays[i].pid > 0)
			kill(c->relays[i].pid, graceful ? SIGTERM : SIGKILL);
	for (int i = 0; i < NRELAYS; i++) {
		struct relay *r = &c->relays[i];
		long long until = mono_ms() + 20000;
		int st = 0;
		pid_t got = 0;
		if (r->pid <= 0)
			continue;
		while ((got = waitpid(r->pid, &st, WNOHANG)) == 0 && mono_ms() < until)
			sleep_ms(20);
		if (got != r->pid) {
			kill(r->pid, SIGKILL);
			waitpid(r->pid, &st, 0);
		}
		if (graceful && (got != r->pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)) {
			say("relay %d did not exit 0 on SIGTERM within 20 s; see %s", (int)r->pid, r->log);
			c->bad_stops++;
		}
		r->pid = 0;
	}
}

/* A growing line for COPY. */
struct buf_line {
	char *data;
	size_t len, cap;
};

static void line_put(struct buf_line *l, const char *s, size_t n)
{
	if (l->len + n + 1 > l->cap) {
		size_t cap = l->cap ? l->cap : 256;
		char *d;
		while (cap < l->len + n + 1)
			cap *= 2;
		if (!(d = realloc(l->data, cap)))
			abort();
		l->data = d;
		l->cap = cap;
	}
	memcpy(l->data + l->len, s, n);
	l->len += n;
	l->data[l->len] = '\0';
}

/* COPY text format: backslash, tab, newline and carriage return are escaped. */
static void copy_field(struct buf_line *l, const char *s)
{
	if (l->len)
		line_put(l, "\t", 1);
	if (!s) {
		line_put(l, "\\N", 2);
		return;
	}
	for (; *s; s++) {
		const char *esc = *s == '\\' ? "\\\\" : *s == '\t' ? "\\t" : *s == '\n' ? "\\n" : *s == '\r' ? "\\r" : NULL;
		line_put(l, esc ? esc : s, esc ? 2 : 1);
	}
}

/* enqueued_at exactly as written: a JSON number parsed to double would lose
 * microseconds, and microseconds are what tell batches apart. */
static bool raw_enqueued_at(const char *payload, size_t len, char *out, size_t outlen, long long *us)
{
	const char *p = strstr(payload, "\"enqueued_at\":"), *end = payload + len;
	size_t n = 0;
	long long sec = 0, frac = 0;
	int digits = 0;

	if (!p)
		return false;
	p += strlen("\"enqueued_at\":");
	while (p + n < end && n + 1 < outlen && strchr("0123456789.", p[n]))
		n++;
	memcpy(out, p, n);
	out[n] = '\0';
	p = out;
	while (*p >= '0' && *p <= '9')
		sec = sec * 10 + (*p++ - '0');
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9' && digits < 6; p++, digits++)
			frac = frac * 10 + (*p - '0');
	for (; digits < 6; digits++)
		frac *= 10;
	*us = sec * 1000000 + frac;
	return n > 0;
}

/* One Redis entry as a chaos_seen row: where it was, and what it says. */
static void seen_row(struct buf_line *l, const char *src, const char *list, long long pos, const char *payload,
		     size_t len)
{
	json_t *job = json_loadb(payload, len, 0, NULL);
	char posbuf[32], enq[64], enq_us[32], *args = NULL;
	long long us = 0;
	bool has_enq = raw_enqueued_at(payload, len, enq, sizeof(enq), &us);

	snprintf(posbuf, sizeof(posbuf), "%lld", pos);
	snprintf(enq_us, sizeof(enq_us), "%lld", us);
	if (job && json_object_get(job, "args"))
		args = json_dumps(json_object_get(job, "args"), JSON_COMPACT | JSON_ENCODE_ANY);
	l->len = 0;
	copy_field(l, src);
	copy_field(l, list);
	copy_field(l, posbuf);
	copy_field(l, json_string_value(json_object_get(job, "jid")));
	copy_field(l, json_string_value(json_object_get(job, "queue")));
	copy_field(l, json_string_value(json_object_get(job, "class")));
	copy_field(l, args);
	copy_field(l, has_enq ? enq : NULL);
	copy_field(l, has_enq ? enq_us : NULL);
	line_put(l, "\n", 1);
	free(args);
	json_decref(job);
}

static int copy_reply(struct chaos *c, struct buf_line *l, const char *src, const char *list, long long base,
		      long long llen, const redisReply *r)
{
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *e = r->element[i];
		/* LPUSH puts the newest at index 0: position in push order counts from the tail. */
		long long pos = list ? llen - 1 - (base + (long long)i) : base + (long long)i;
		if (e->type != REDIS_REPLY_STRING)
			continue;
		seen_row(l, src, list, pos, e->str, e->len);
		if (PQputCopyData(c->pg, l->data, (int)l->len) != 1)
			return -1;
	}
	return 0;
}

/* Loads every job in Redis (queue:* lists and the schedule zset) into chaos_seen. */
static int load_seen(struct chaos *c, long long *entries)
{
	struct buf_line l = { 0 };
	char cursor[32] = "0";
	PGresult *res;
	int rc = 0;

	res = PQexec(c->pg, "COPY chaos_seen (src, list, pos, jid, queue, class, args, enq, enq_us) FROM STDIN");
	if (PQresultStatus(res) != PGRES_COPY_IN) {
		say("copy failed: %s", PQerrorMessage(c->pg));
		PQclear(res);
		return -1;
	}
	PQclear(res);
	*entries = 0;
	do {
		redisReply *scan = rcmd(c, "SCAN %s MATCH queue:* COUNT 1000", cursor);
		if (!scan || scan->type != REDIS_REPLY_ARRAY || scan->elements != 2) {
			rc = -1;
			freeReplyObject(scan);
			break;
		}
		snprintf(cursor, sizeof(cursor), "%s", scan->element[0]->str);
		for (size_t k = 0; rc == 0 && k < scan->element[1]->elements; k++) {
			const char *key = scan->element[1]->element[k]->str;
			redisReply *len = rcmd(c, "LLEN %s", key);
			long long llen = len && len->type == REDIS_REPLY_INTEGER ? len->integer : 0;
			freeReplyObject(len);
			for (long long from = 0; rc == 0 && from < llen; from += 10000) {
				redisReply *r = rcmd(c, "LRANGE %s %lld %lld", key, from, from + 9999);
				rc = r && r->type == REDIS_REPLY_ARRAY ? copy_reply(c, &l, "queue", key + 6, from, llen, r)
								       : -1;
				*entries += r ? (long long)r->elements : 0;
				freeReplyObject(r);
			}
		}
		freeReplyObject(scan);
	} while (rc == 0 && strcmp(cursor, "0") != 0);
	if (rc == 0) {
		redisReply *z = rcmd(c, "ZRANGE schedule 0 -1");
		rc = z && z->type == REDIS_REPLY_ARRAY ? copy_reply(c, &l, "schedule", NULL, 0, 0, z) : -1;
		*entries += z ? (long long)z->elements : 0;
		freeReplyObject(z);
	}
	free(l.data);
	if (PQputCopyEnd(c->pg, rc == 0 ? NULL : "reading redis failed") != 1)
		rc = -1;
	while ((res = PQgetResult(c->pg)) != NULL) {
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			say("copy failed: %s", PQerrorMessage(c->pg));
			rc = -1;
		}
		PQclear(res);
	}
	return rc;
}

struct results {
	long long entries, present, missing, duplicates, rolled_back, phantoms, mismatched, order_violations;
	long long batches, dead, left_staged, unregistered, committed_rows;
	char causes[512]; /* duplicates by the fault that preceded them */
};

/* Each check is one query; the comments say what each proves. */
static int check(struct chaos *c, struct results *res)
{
	const struct {
		long long *out;
		const char *sql;
	} q[] = {
		/* Committed jobs found in Redis. */
		{ &res->present, "SELECT count(DISTINCT jid) FROM chaos_seen JOIN chaos_committed USING (jid)" },
		/* Committed jobs not in Redis. */
		{ &res->missing, "SELECT count(*) FROM chaos_committed c"
				 " WHERE NOT EXISTS (SELECT 1 FROM chaos_seen s WHERE s.jid = c.jid)" },
		/* Extra copies of a jid, anywhere in Redis. */
		{ &res->duplicates, "SELECT coalesce(sum(n - 1), 0) FROM"
				    " (SELECT count(*) AS n FROM chaos_seen GROUP BY jid HAVING count(*) > 1) d" },
		/* Jobs whose transaction rolled back. */
		{ &res->rolled_back, "SELECT count(*) FROM chaos_seen JOIN chaos_rolledback USING (jid)" },
		/* Entries that are no job we staged (unparseable, no jid, unknown jid). */
		{ &res->phantoms, "SELECT count(*) FROM chaos_seen s WHERE s.jid IS NULL"
				  " OR (NOT EXISTS (SELECT 1 FROM chaos_committed c WHERE c.jid = s.jid)"
				  " AND NOT EXISTS (SELECT 1 FROM chaos_rolledback r WHERE r.jid = s.jid))" },
		/* A committed job in the wrong place or with other content than staged:
		 * another list, the zset although not scheduled (or the reverse), a queue,
		 * class or args different from the row, or a queued job without enqueued_at. */
		{ &res->mismatched, "SELECT count(*) FROM chaos_seen s JOIN chaos_committed c USING (jid)"
				    " WHERE s.queue IS DISTINCT FROM c.queue OR s.class IS DISTINCT FROM 'ChaosJob'"
				    " OR s.args IS NULL OR s.args::jsonb <> c.args"
				    " OR (s.src = 'queue') = c.scheduled"
				    " OR (s.src = 'queue' AND (s.list IS DISTINCT FROM c.queue OR s.enq IS NULL))"
				    " OR (s.src = 'schedule' AND s.enq IS NOT NULL)" },
		/*
		 * Order: the jobs of one batch share enqueued_at (one clock reading per
		 * batch) and sit together in their queue's list, one LPUSH per queue.
		 * Within each such run, push order must be id order. Runs are split by
		 * position too (gaps and islands), so even two batches that formatted
		 * the same microsecond count as one only if they are adjacent in the list.
		 */
		{ &res->order_violations,
		  "WITH j AS (SELECT s.list, s.enq, s.pos, c.id,"
		  "   s.pos - row_number() OVER (PARTITION BY s.list, s.enq ORDER BY s.pos) AS island"
		  "   FROM chaos_seen s LEFT JOIN chaos_committed c USING (jid) WHERE s.src = 'queue'),"
		  " o AS (SELECT id, lag(id) OVER (PARTITION BY list, enq, island ORDER BY pos) AS prev"
		  "   FROM j WHERE id IS NOT NULL)"
		  " SELECT count(*) FROM o WHERE prev >= id" },
		{ &res->committed_rows, "SELECT count(*) FROM chaos_committed" },
		{ &res->batches, "SELECT count(DISTINCT enq) FROM chaos_seen WHERE src = 'queue'" },
		{ &res->dead, "SELECT count(*) FROM staged_jobs_dead" },
		{ &res->left_staged, "SELECT count(*) FROM staged_jobs" },
	};

	for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++)
		if ((*q[i].out = sql_val(c, q[i].sql)) < 0)
			return -1;
	/* Sidekiq's web UI and API find queues through the `queues` set. */
	res->unregistered = 0;
	for (int i = 0; i < NQUEUES; i++) {
		redisReply *r = rcmd(c, "SISMEMBER queues %s", queues[i]);
		if (!r || r->type != REDIS_REPLY_INTEGER || r->integer != 1)
			res->unregistered++;
		freeReplyObject(r);
	}
	return 0;
}

/* The first value of a query's first row as text, or "" if none. */
static void sql_text(struct chaos *c, const char *sql, char *out, size_t outlen)
{
	PGresult *res = PQexec(c->pg, sql);

	*out = '\0';
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) > 0)
		snprintf(out, outlen, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
}

/* LSETs the entries at two indexes of a list to each other's value. */
static int swap_entries(struct chaos *c, const char *key, long long i, long long j)
{
	redisReply *a = rcmd(c, "LINDEX %s %lld", key, i), *b = rcmd(c, "LINDEX %s %lld", key, j), *r1 = NULL,
		   *r2 = NULL;
	int rc = -1;

	if (a && b && a->type == REDIS_REPLY_STRING && b->type == REDIS_REPLY_STRING) {
		r1 = rcmd(c, "LSET %s %lld %b", key, i, b->str, b->len);
		r2 = rcmd(c, "LSET %s %lld %b", key, j, a->str, a->len);
		rc = r1 && r2 ? 0 : -1;
	}
	freeReplyObject(a);
	freeReplyObject(b);
	freeReplyObject(r1);
	freeReplyObject(r2);
	return rc;
}

/*
 * Proves the checker is not vacuous: after the real check, breaks Redis in five
 * known ways (drop the oldest job of a queue, copy a job, push a rolled-back job
 * and a non-job, swap two jobs of one batch), checks again, and requires each
 * count to have grown; the order count must change (a swap inside an already
 * reversed batch mends one violation). Costs a second load of Redis, a second or so.
 */
static int self_test(struct chaos *c, const struct results *before, struct results *after)
{
	char list[128], pos[32], jid[64], key[160], other[160], payload[400];
	redisReply *r[5] = { 0 };
	long long llen;
	int rc = 0;

	sql_text(c, "SELECT a.list FROM chaos_seen a JOIN chaos_seen b ON b.src = 'queue' AND b.list = a.list"
		    " AND b.pos = a.pos + 1 AND b.enq = a.enq WHERE a.src = 'queue' ORDER BY a.pos LIMIT 1",
		 list, sizeof(list));
	sql_text(c, "SELECT a.pos FROM chaos_seen a JOIN chaos_seen b ON b.src = 'queue' AND b.list = a.list"
		    " AND b.pos = a.pos + 1 AND b.enq = a.enq WHERE a.src = 'queue' ORDER BY a.pos LIMIT 1",
		 pos, sizeof(pos));
	sql_text(c, "SELECT jid FROM chaos_rolledback LIMIT 1", jid, sizeof(jid));
	if (!*list || !*jid) {
		say("self-test: no batch with two jobs in one queue, or no rolled-back job");
		return -1;
	}
	snprintf(key, sizeof(key), "queue:%s", list);
	snprintf(other, sizeof(other), "queue:%s", strcmp(list, queues[0]) ? queues[0] : queues[1]);
	r[0] = rcmd(c, "LLEN %s", key);
	llen = r[0] && r[0]->type == REDIS_REPLY_INTEGER ? r[0]->integer : 0;
	/* Position p is index llen-1-p (LPUSH): p and p+1 are indexes i and i-1. */
	if (swap_entries(c, key, llen - 1 - atoll(pos), llen - 2 - atoll(pos)) < 0)
		rc = -1;
	r[1] = rcmd(c, "RPOP %s", other);
	r[2] = rcmd(c, "LINDEX %s 0", other);
	if (r[2] && r[2]->type == REDIS_REPLY_STRING)
		freeReplyObject(rcmd(c, "RPUSH %s %b", other, r[2]->str, r[2]->len));
	snprintf(payload, sizeof(payload),
		 "{\"class\":\"ChaosJob\",\"args\":[0,0],\"queue\":\"%s\",\"jid\":\"%s\",\"enqueued_at\":1.5}",
		 other + 6, jid);
	r[3] = rcmd(c, "LPUSH %s %s", other, payload);
	r[4] = rcmd(c, "LPUSH %s not-a-job", other);
	for (int i = 0; i < 5; i++) {
		if (!r[i])
			rc = -1;
		freeReplyObject(r[i]);
	}
	if (rc < 0 || sql_val(c, "TRUNCATE chaos_seen") < 0 || load_seen(c, &after->entries) < 0 ||
	    check(c, after) < 0)
		return -1;
	return after->missing > before->missing && after->duplicates > before->duplicates &&
			       after->rolled_back > before->rolled_back && after->phantoms > before->phantoms &&
			       after->order_violations != before->order_violations
		       ? 0
		       : 1;
}

/* Which fault came last before each extra copy was pushed, as report lines. */
static void duplicate_causes(struct chaos *c, struct results *r)
{
	PGresult *res = PQexec(c->pg, "SELECT coalesce(e.kind, 'none'), count(*) FROM"
				      " (SELECT enq_us, row_number() OVER (PARTITION BY jid ORDER BY enq_us) AS rn"
				      "  FROM chaos_seen WHERE jid IS NOT NULL) d"
				      " LEFT JOIN LATERAL (SELECT kind FROM chaos_events"
				      "  WHERE t_us <= d.enq_us ORDER BY t_us DESC LIMIT 1) e ON true"
				      " WHERE d.rn > 1 GROUP BY 1 ORDER BY 2 DESC");
	size_t len = 0;

	r->causes[0] = '\0';
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		for (int i = 0; i < PQntuples(res) && len < sizeof(r->causes); i++)
			len += (size_t)snprintf(r->causes + len, sizeof(r->causes) - len, "    after %-26s %s\n",
						PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
	PQclear(res);
}

/* Rows the fence let a new leader delete instead of pushing again, from the relays' logs. */
static long long fence_deletes(const struct chaos *c)
{
	char path[PATH_MAX + 32], line[4096];
	long long rows = 0;

	for (int i = 1; i <= c->incarnations; i++) {
		FILE *f;
		snprintf(path, sizeof(path), "%s/relay-%03d.log", c->dir, i);
		if (!(f = fopen(path, "r")))
			continue;
		while (fgets(line, sizeof(line), f)) {
			const char *p = strstr(line, "msg=\"deleted rows the last batch pushed");
			if (p && (p = strstr(p, " rows=")))
				rows += strtoll(p + 6, NULL, 10);
		}
		fclose(f);
	}
	return rows;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

static bool report(struct chaos *c, const struct results *r, const struct results *t, int self_rc)
{
	long long staged = TOTAL(c, staged), committed = TOTAL(c, committed), rolled = TOTAL(c, rolled_back);
	long long med = 0, max = 0;
	bool ok;

	if (c->nfailover > 0) {
		qsort(c->failover_ms, (size_t)c->nfailover, sizeof(long long), cmp_ll);
		med = c->failover_ms[c->nfailover / 2];
		max = c->failover_ms[c->nfailover - 1];
	}
	ok = r->missing == 0 && r->duplicates == 0 && r->rolled_back == 0 && r->phantoms == 0 &&
	     r->mismatched == 0 && r->order_violations == 0 && r->dead == 0 && r->left_staged == 0 &&
	     r->unregistered == 0 && r->present == committed && r->committed_rows == committed && staged >= c->o.jobs &&
	     c->leader_kills >= c->o.kills && c->backend_kills >= c->o.backend_kills &&
	     c->redis_restarts >= c->o.redis_restarts && c->unexpected_exits == 0 && c->failover_timeouts == 0 &&
	     c->bad_stops == 0 && c->producer_failures == 0 && self_rc == 0;
	printf("\nstagedrain chaos run (seed %u, %d producers, 2 relays, --batch-size 500)\n", c->o.seed,
	       c->o.producers);
	printf("  jobs staged                  %lld (in %lld transactions, %lld held open 1-3 s)\n", staged,
	       TOTAL(c, txns), TOTAL(c, held_open));
	printf("  jobs committed               %lld\n", committed);
	printf("  jobs rolled back             %lld\n", rolled);
	printf("  entries in redis             %lld (in %lld batches)\n", r->entries, r->batches);
	printf("  committed jobs present       %lld\n", r->present);
	printf("  missing                      %lld\n", r->missing);
	printf("  duplicates                   %lld\n", r->duplicates);
	fputs(r->causes, stdout);
	printf("  rolled-back jobs pushed      %lld\n", r->rolled_back);
	printf("  phantoms (unknown entries)   %lld\n", r->phantoms);
	printf("  wrong queue/content          %lld\n", r->mismatched);
	printf("  order violations             %lld\n", r->order_violations);
	printf("  dead-lettered / left staged  %lld / %lld\n", r->dead, r->left_staged);
	printf("  leader SIGKILLs              %d (skipped: %d)\n", c->leader_kills, c->skipped_kills);
	printf("  relay backends terminated    %d times\n", c->backend_kills);
	printf("  redis restarts               %d\n", c->redis_restarts);
	printf("  rows deleted by the fence    %lld\n", fence_deletes(c));
	printf("  failover (SIGKILL -> first push of the next epoch)  median %lld ms, max %lld ms (n=%d, timeouts %d)\n",
	       med, max, c->nfailover, c->failover_timeouts);
	printf("  relay exits not caused by us %d, bad stops %d, producer failures %d\n", c->unexpected_exits,
	       c->bad_stops, c->producer_failures);
	if (self_rc >= 0)
		printf("  checker self-test            injected 5 faults; counts moved: missing %+lld, duplicates %+lld,\n"
		       "                               rolled back %+lld, phantoms %+lld, order %+lld: %s\n",
		       t->missing - r->missing, t->duplicates - r->duplicates, t->rolled_back - r->rolled_back,
		       t->phantoms - r->phantoms, t->order_violations - r->order_violations,
		       self_rc == 0 ? "all caught" : "NOT ALL CAUGHT");
	else
		printf("  checker self-test            could not run\n");
	printf("  total time                   %.1f s\n", (double)(mono_ms() - c->start_ms) / 1000.0);
	printf("%s\n", ok ? "PASS" : "FAIL");
	return ok;
}

/* ---- set-up, the run, clean-up ---- */

static int usage(void)
{
	fprintf(stderr, "usage: chaos --bin PATH --services PATH [--jobs N] [--kills N] [--backend-kills N]\n"
			"             [--redis-restarts N] [--producers N] [--seconds N] [--timeout S] [--seed N] [--keep]\n");
	return 2;
}

static int parse_args(struct opts *o, int argc, char **argv)
{
	*o = (struct opts){ .jobs = 200000, .kills = 50, .backend_kills = -1, .redis_restarts = 3,
			    .producers = 6, .timeout = 900, .seed = (unsigned)time(NULL) };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--keep") == 0) {
			o->keep = true;
			continue;
		}
		if (!v)
			return usage();
		i++;
		if (strcmp(a, "--bin") == 0)
			o->bin = v;
		else if (strcmp(a, "--services") == 0)
			o->services = v;
		else if (strcmp(a, "--jobs") == 0)
			o->jobs = atoll(v);
		else if (strcmp(a, "--kills") == 0)
			o->kills = atoi(v);
		else if (strcmp(a, "--backend-kills") == 0)
			o->backend_kills = atoi(v);
		else if (strcmp(a, "--redis-restarts") == 0)
			o->redis_restarts = atoi(v);
		else if (strcmp(a, "--producers") == 0)
			o->producers = atoi(v);
		else if (strcmp(a, "--seconds") == 0)
			o->seconds = atoi(v);
		else if (strcmp(a, "--timeout") == 0)
			o->timeout = atoi(v);
		else if (strcmp(a, "--seed") == 0)
			o->seed = (unsigned)strtoul(v, NULL, 10);
		else
			return usage();
	}
	if (!o->bin || !o->services || o->jobs < 1 || o->kills < 0 || o->redis_restarts < 0 ||
	    o->producers < 1 || o->producers > MAX_PRODUCERS || o->timeout < 10)
		return usage();
	if (o->backend_kills < 0)
		o->backend_kills = o->kills / 5;
	if (o->seconds <= 0) {
		/* Room for every fault (a failover, a relay start and a pause each) and
		 * a producer rate the relays on a small machine keep up with. */
		long long need = (o->kills * 700LL + o->backend_kills * 300LL + o->redis_restarts * 2500LL) / 1000;
		long long by_rate = o->jobs / 6000;
		o->seconds = (int)(need > by_rate ? need : by_rate);
		if (o->seconds < 5)
			o->seconds = 5;
	}
	return 0;
}

static int run_migrate(struct chaos *c)
{
	char log[PATH_MAX + 16];
	pid_t pid = fork();
	int st;

	snprintf(log, sizeof(log), "%s/migrate.log", c->dir);
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			dup2(fd, STDERR_FILENO);
			close(fd);
		}
		execl(c->o.bin, c->o.bin, "migrate", "--pg-url", c->pg_url, (char *)NULL);
		_exit(127);
	}
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int setup(struct chaos *c)
{
	char path[PATH_MAX + 16];

	snprintf(c->dir, sizeof(c->dir), "%s/stagedrain-chaos.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(c->dir)) {
		say("mkdtemp: %s", strerror(errno));
		return -1;
	}
	snprintf(path, sizeof(path), "%s/events.log", c->dir);
	if (!(c->events = fopen(path, "we")))
		return -1;
	say("servers, relay logs and events.log in %s", c->dir);
	c->services_up = true;
	if (services(c, "start") != 0 || read_env(c) < 0) {
		say("could not start the throwaway servers");
		return -1;
	}
	if (run_migrate(c) < 0) {
		say("stagedrain migrate failed; see %s/migrate.log", c->dir);
		return -1;
	}
	if (!(c->pg = pg_connect(c, "chaos")) || sql_val(c, setup_sql) < 0)
		return -1;
	return 0;
}

/* Everything the run started goes, whatever happened: producers, relays, servers. */
static void teardown(struct chaos *c, bool passed)
{
	for (int i = 0; i < c->o.producers; i++)
		if (c->producers[i] > 0) {
			kill(c->producers[i], SIGKILL);
			waitpid(c->producers[i], NULL, 0);
		}
	stop_relays(c, false);
	if (c->pg)
		PQfinish(c->pg);
	if (c->redis)
		redisFree(c->redis);
	if (c->events)
		fclose(c->events);
	if (c->services_up && services(c, "stop") != 0)
		say("could not stop the servers in %s", c->dir);
	if (passed && !c->o.keep && *c->dir) {
		pid_t pid = fork();
		if (pid == 0) {
			execlp("rm", "rm", "-rf", c->dir, (char *)NULL);
			_exit(127);
		}
		if (pid > 0)
			waitpid(pid, NULL, 0);
	} else if (*c->dir) {
		say("kept %s (relay logs, events.log, servers' logs)", c->dir);
	}
	if (c->sh)
		munmap(c->sh, sizeof(*c->sh));
}

static int run(struct chaos *c, struct results *res, struct results *tampered, int *self_rc)
{
	if (setup(c) < 0)
		return -1;
	for (int i = 0; i < NRELAYS; i++)
		if (relay_start(c, i) < 0)
			return -1;
	atomic_store(&c->sh->keep_going, 1);
	say("staging >= %lld jobs over ~%d s with %d producers; %d leader kills, %d backend kills, %d redis restarts",
	    c->o.jobs, c->o.seconds, c->o.producers, c->o.kills, c->o.backend_kills, c->o.redis_restarts);
	if (start_producers(c) < 0 || run_killer(c) < 0)
		return -1;
	atomic_store(&c->sh->keep_going, 0);
	while (reap_producers(c) > 0) {
		if (should_stop(c) || tend_relays(c) < 0)
			return -1;
		sleep_ms(50);
	}
	progress(c);
	say("producers done; waiting for the relays to drain staged_jobs");
	if (wait_drained(c) < 0)
		return -1;
	stop_relays(c, true);
	say("drained; checking redis");
	if (load_seen(c, &res->entries) < 0 || check(c, res) < 0)
		return -1;
	duplicate_causes(c, res);
	*self_rc = self_test(c, res, tampered);
	return 0;
}

int main(int argc, char **argv)
{
	struct chaos c;
	struct results res = { 0 }, tampered = { 0 };
	struct sigaction sa;
	int self_rc = -1;
	bool passed = false;

	memset(&c, 0, sizeof(c));
	if (parse_args(&c.o, argc, argv) != 0)
		return 2;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	c.sh = mmap(NULL, sizeof(*c.sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (c.sh == MAP_FAILED) {
		perror("chaos: mmap");
		return 1;
	}
	c.rng = c.o.seed;
	c.start_ms = mono_ms();
	c.deadline_ms = c.start_ms + c.o.timeout * 1000LL;
	c.next_progress_ms = c.start_ms + 10000;
	if (run(&c, &res, &tampered, &self_rc) == 0)
		passed = report(&c, &res, &tampered, self_rc);
	else if (should_stop(&c))
		say(interrupted ? "interrupted" : "gave up: over the --timeout of %d s", c.o.timeout);
	else
		say("the run could not complete");
	teardown(&c, passed);
	return passed ? 0 : 1;
}
