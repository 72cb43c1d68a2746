/* The chaos test (`make chaos`): producers stage jobs while two relays run and a
 * killer SIGKILLs leaders, terminates their backends and restarts Redis; then a
 * checker proves every committed job reached Redis exactly once, in order. */
#include "fmacros.h"

#include <errno.h>
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
#include <time.h>
#include <unistd.h>

#include "caps.h"
#include "cluster.h"
#include "common.h"
#include "keys.h"
#include "routes.h"

#define NRELAYS 2
#define MAX_PRODUCERS 32
#define MAX_TX_ROWS 50
#define FAILOVER_TIMEOUT_MS 30000
#define CONNECT_TIMEOUT_MS 15000

/* The fault log the checker joins duplicates to (the checker's own tables: common.c). */
static const char events_sql[] = "CREATE TABLE chaos_events (t_us bigint NOT NULL, kind text NOT NULL);";

/* Counters a producer shares with the orchestrator (one writer each). */
struct producer_stats {
	_Atomic long long staged, committed, rolled_back, txns, held_open;
};

/* Lives in a shared anonymous mapping, so forked producers see the flags. */
struct shared {
	_Atomic int stop;       /* finish the current transaction and exit */
	_Atomic int keep_going; /* the killer still needs a backlog: go past the quota */
	struct producer_stats p[MAX_PRODUCERS];
	struct caps_stats caps; /* --caps: the consumer's */
};

struct opts {
	long long jobs;
	int kills, backend_kills, redis_restarts, producers;
	int seconds; /* how long producers spread their jobs over; 0: derived */
	int caps;    /* --max-queue-length of the relays; 0: uncapped, no consumer */
	int routes;  /* 1: two of the queues go to two more Redis (routes.h) */
	int cluster; /* 1: with --routes, three more queues go to a Redis Cluster (cluster.h) */
	int cluster_kills, slot_moves;
	int timeout; /* the whole run, seconds */
	unsigned seed;
	bool keep;
	const char *bin, *services;
};

enum event_kind { EV_LEADER_KILL, EV_BACKEND_KILL, EV_REDIS_RESTART, EV_CLUSTER_KILL, EV_SLOT_MOVE };

struct chaos {
	struct opts o;
	struct env env;
	struct relay relays[NRELAYS];
	int incarnations;
	struct kids producers, consumer;
	struct routes_chaos routes;   /* --routes */
	struct cluster_chaos cluster; /* --cluster */
	/* --routes: each slot's route set; final: the killer is done, every
	 * start from now on gets the normal set, so everything drains */
	enum routes_set relay_set[NRELAYS];
	bool final_routes;
	int route_changes[ROUTES_NSETS];             /* starts with each set that changed a slot's */
	int handovers;                               /* clean handovers routes_guard made */
	long long r2_held_at_handover, r2_held_kept; /* rows held for r2 then and 0.5 s later */
	char order_detail[1024];                     /* --routes: the first order violations */
	long long held_max;                          /* most rows in staged_jobs_held at one sample (--caps) */
	long long uncapped_held;                     /* most of them in the uncapped queue: must stay 0 */
	long long next_held_ms;
	struct shared *sh;
	unsigned long long rng;
	long long start_ms, deadline_ms, next_progress_ms;
	/* what happened */
	int leader_kills, backend_kills, redis_restarts, skipped_kills;
	int default_redis_kills; /* --routes: restarts of the default target's Redis */
	int unexpected_exits, failover_timeouts, bad_stops;
	long long failover_ms[4096];
	int nfailover;
	FILE *events;
};

/* One line per fault into DIR/events.log, and the fault into chaos_events so
 * the checker can say which fault preceded a duplicate. */
static void note_event(struct chaos *c, const char *kind, const char *fmt, ...) SD_PRINTF(3, 4);
static void note_event(struct chaos *c, const char *kind, const char *fmt, ...)
{
	char sql[200];
	long long t = wall_us();
	va_list ap;

	fprintf(c->events, "%lld.%06lld t+%.3fs %s: ", t / 1000000, t % 1000000,
		(double)(mono_ms() - c->start_ms) / 1000.0, kind);
	va_start(ap, fmt);
	vfprintf(c->events, fmt, ap);
	va_end(ap);
	fputc('\n', c->events);
	fflush(c->events);
	snprintf(sql, sizeof(sql), "INSERT INTO chaos_events VALUES (%lld, '%s')", t, kind);
	PQclear(PQexec(c->env.pg, sql));
}

/* The cluster's faults' events (cluster.h). */
static void note_cluster(void *arg, const char *kind, const char *text)
{
	note_event(arg, kind, "%s", text);
}

static bool should_stop(const struct chaos *c)
{
	return interrupted || mono_ms() > c->deadline_ms;
}

/* The epoch in the fence key (0: none yet), or -1 if Redis did not answer. */
static long long fence_epoch(struct chaos *c)
{
	redisReply *r = env_cmd(&c->env, "GET %s", c->env.fence_key);
	long long e = -1;

	if (r) {
		e = 0;
		if (r->type == REDIS_REPLY_STRING && sscanf(r->str, "epoch=%lld ", &e) != 1)
			e = 0;
		freeReplyObject(r);
	}
	return e;
}

/* The epoch's count (keys.h); -1 if Redis did not answer. */
static long long epoch_counter(struct chaos *c)
{
	redisReply *r = env_cmd(&c->env, "GET %s", c->env.epoch_key);
	long long e = -1;

	if (r) {
		e = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : 0;
		freeReplyObject(r);
	}
	return e;
}

/* ---- relays: real processes of the built binary ---- */

/* The relays' --batch-size: one batch adds at most this many jobs to a list. */
#define BATCH_SIZE 500
#define BATCH_SIZE_TEXT "500"

/* With --caps the relays also get --max-queue-length, and a --queue-limit
 * that leaves one queue uncapped; buf holds those values. */
static void relay_args(const struct chaos *c, enum routes_set set, struct relay_argv *a, char buf[2][64])
{
	(void)relay_argv_add(a, "--batch-size", BATCH_SIZE_TEXT);
	(void)relay_argv_add(a, "--poll-interval", "10ms");
	(void)relay_argv_add(a, "--lock-key", KEYS_LOCK_DEFAULT_TEXT);
	if (c->o.caps > 0) {
		snprintf(buf[0], 64, "%d", c->o.caps);
		snprintf(buf[1], 64, "%s=0", queues[CAPS_UNCAPPED]);
		(void)relay_argv_add(a, "--max-queue-length", buf[0]);
		(void)relay_argv_add(a, "--queue-limit", buf[1]);
	}
	if (c->o.routes)
		routes_args(&c->routes, set, a);
	if (c->o.cluster)
		cluster_args(&c->cluster, a);
}

/* --routes: the route set of a relay's start. Route changes between
 * restarts: every third restart (seeded) of the run's faults starts its relay
 * with r2 removed or with r3 added, in turn; the next start of that slot has
 * the normal set again, as does every start once the killer is done. */
static enum routes_set pick_routes(struct chaos *c)
{
	int restart = c->incarnations + 1 - NRELAYS,
	    changes = c->route_changes[ROUTES_NO_R2] + c->route_changes[ROUTES_EXTRA_R3];

	if (!c->o.routes || c->final_routes || restart < 1 || (restart + (int)(c->o.seed % 3)) % 3 != 0)
		return ROUTES_NORMAL;
	return (changes + (int)(c->o.seed % 2)) % 2 == 0 ? ROUTES_NO_R2 : ROUTES_EXTRA_R3;
}

/* Starts a relay in slot i and waits until it is connected to both servers, so
 * no fault lands while it is still starting (start-up errors are fatal by design). */
static int relay_start(struct chaos *c, int i)
{
	struct relay *r = &c->relays[i];
	enum routes_set set = pick_routes(c);
	struct relay_argv a;
	char buf[2][64];
	int rc;

	if (set != c->relay_set[i]) {
		/* Noted before the start: the relay may push at once. */
		c->route_changes[set]++;
		note_event(c, routes_set_kind(set), "relay slot %d starts with %s", i, routes_set_text(set));
		if (set == ROUTES_NO_R2 && routes_note_removed(&c->env) < 0)
			return -1;
	}
	c->relay_set[i] = set;
	env_relay_argv(&c->env, r, &a);
	relay_args(c, set, &a, buf);
	snprintf(r->log, sizeof(r->log), "%s/relay-%03d.log", c->env.srv.dir, ++c->incarnations);
	rc = env_relay_start(&c->env, r, &a, "msg=connected", CONNECT_TIMEOUT_MS);
	relay_argv_free(&a);
	if (rc == -ECHILD)
		c->unexpected_exits++;
	return rc;
}

/* Reaps relays that exited without being killed by us (a bug: only start-up
 * may exit) and starts a relay in every empty slot. */
static int tend_relays(struct chaos *c)
{
	for (int i = 0; i < NRELAYS; i++) {
		struct relay *r = &c->relays[i];
		if (proc_exited(&r->proc)) {
			pid_t pid = r->proc.pid;
			say("relay %d exited on its own (status %d); see %s", (int)pid, proc_wait(&r->proc, 0), r->log);
			c->unexpected_exits++;
		}
		if (r->proc.pid <= 0 && relay_start(c, i) < 0)
			return -1;
	}
	return 0;
}

static int relay_slot(const struct chaos *c, pid_t pid)
{
	for (int i = 0; i < NRELAYS; i++)
		if (c->relays[i].proc.pid == pid && pid > 0)
			return i;
	return -1;
}

/* The relay whose backend holds the advisory lock: its pid and its backend's. */
static int find_leader(struct chaos *c, pid_t *relay_pid, long long *backend_pid)
{
	PGresult *res = PQexec(c->env.pg, "SELECT a.application_name, a.pid FROM pg_locks l"
					  " JOIN pg_stat_activity a ON a.pid = l.pid"
					  " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
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
	bool caps;    /* stage a tenant per row */
	bool cluster; /* some rows go to cluster_queues, with the uuid their BullMQ id is */
	long long quota;
	struct producer_stats *st;
	char sql[MAX_TX_ROWS * 224 + 512];
	char rolled[MAX_TX_ROWS * 30 + 128];
};

static int producer_exec(struct producer *p, const char *sql, const char *want_status)
{
	PGresult *res = PQexec(p->conn, sql);
	int ok =
		PQresultStatus(res) == PGRES_COMMAND_OK && (!want_status || strcmp(PQcmdStatus(res), want_status) == 0);

	if (!ok)
		fprintf(stderr, "chaos: producer %d: %s failed: %s %s\n", p->idx,
			want_status ? want_status : "statement", PQcmdStatus(res), PQerrorMessage(p->conn));
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

	len = (size_t)
		snprintf(s, sizeof(p->sql),
			 "BEGIN; WITH s AS (INSERT INTO staged_jobs (queue, job_class, args, run_at, jid%s%s) VALUES ",
			 p->caps ? ", tenant" : "", p->cluster ? ", uuid" : "");
	rlen = (size_t)snprintf(p->rolled, sizeof(p->rolled), "INSERT INTO chaos_rolledback (jid) VALUES ");
	for (int i = 0; i < n; i++) {
		char jid[32], id[37], uuid[48] = "";
		bool scheduled = rnd(&p->rng) % 100 == 0, bullmq;
		unsigned q;
		/* Unique by construction: producer, sequence, then random bits. */
		snprintf(jid, sizeof(jid), "%02x%08x%014llx", (unsigned)p->idx, p->seq,
			 rnd(&p->rng) & 0xffffffffffffffULL);
		q = (unsigned)(rnd(&p->rng) % (NQUEUES + (p->cluster ? CLUSTER_NQUEUES : 0)));
		/* A BullMQ job's data is args[0]: [producer, sequence] for the checker too. */
		if ((bullmq = q >= NQUEUES)) {
			cluster_uuid(jid, id);
			snprintf(uuid, sizeof(uuid), ", '%s'", id);
		} else if (p->cluster)
			snprintf(uuid, sizeof(uuid), ", DEFAULT");
		len += (size_t)snprintf(s + len, sizeof(p->sql) - len,
					"%s('%s', 'ChaosJob', '%s%d, %u%s', %s, '%s'%s%s%s)", i ? "," : "",
					bullmq ? cluster_queues[q - NQUEUES] : queues[q], bullmq ? "[[" : "[", p->idx,
					p->seq, bullmq ? "]]" : "]", scheduled ? "now() + interval '1 day'" : "NULL",
					jid, p->caps ? ", " : "", p->caps ? caps_tenant(&p->rng) : "", uuid);
		rlen += (size_t)snprintf(p->rolled + rlen, sizeof(p->rolled) - rlen, "%s('%s')", i ? "," : "", jid);
		p->seq++;
	}
	len += (size_t)snprintf(s + len, sizeof(p->sql) - len,
				" RETURNING id, jid, queue, args, run_at IS NOT NULL AS scheduled)"
				" INSERT INTO chaos_committed (id, jid, queue, args, scheduled)"
				" SELECT id, jid, queue, %s, scheduled FROM s;%s",
				/* What the job carries: a BullMQ job's data is args[0]. */
				p->cluster ? "CASE WHEN queue LIKE '{%' THEN (args->0)::jsonb ELSE args::jsonb END"
					   : "args",
				hold       ? ""
				: rollback ? "ROLLBACK"
					   : "COMMIT");
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
static int producer_main(void *arg, int idx)
{
	struct chaos *c = arg;
	struct producer *p = calloc(1, sizeof(*p));
	long long quota = (c->o.jobs + c->o.producers - 1) / c->o.producers;
	double rate = (double)quota / (c->o.seconds > 0 ? c->o.seconds : 1); /* jobs per second */
	long long start = mono_ms();
	int status = 0;

	if (!p)
		return 3;
	p->idx = idx;
	p->rng = c->o.seed * 1000003ULL + (unsigned)idx;
	p->quota = quota;
	p->caps = c->o.caps > 0;
	p->cluster = c->o.cluster > 0;
	p->st = &c->sh->p[idx];
	snprintf(p->sql, sizeof(p->sql), "chaos-producer-%d", idx);
	if (!(p->conn = env_pg_connect(&c->env, p->sql)))
		return 3;
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
	return status;
}

#define TOTAL(c, f)                                                                                                    \
	sum_field((c)->sh->p, sizeof(struct producer_stats), (c)->o.producers, offsetof(struct producer_stats, f))

/* ---- the killer ---- */

/* SIGTERM: the relay must finish its batch and exit 0 within 20 s. */
static void stop_relay(struct chaos *c, int i)
{
	struct relay *r = &c->relays[i];
	pid_t pid = r->proc.pid;

	if (pid > 0 && (proc_signal(&r->proc, SIGTERM), proc_reap(&r->proc, 20000) != 0)) {
		say("relay %d did not exit 0 on SIGTERM within 20 s; see %s", (int)pid, r->log);
		c->bad_stops++;
	}
}

/* SIGKILLs the leader once it has pushed in its own epoch, then measures how
 * long until a push of a newer epoch: the standby's first batch. */
static int kill_leader(struct chaos *c)
{
	long long until = mono_ms() + 20000, epoch = -1, backend = 0, t0, fo;
	bool busy = rnd(&c->rng) % 2 == 0;
	pid_t pid = 0;
	int slot = -1;

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
	(void)proc_wait(&c->relays[slot].proc, -1);
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
	n = env_val(&c->env, sql);
	c->backend_kills++;
	note_event(c, "backend kill (paused leader)", "relay pid %d paused, backend %lld terminated (%lld)", (int)pid,
		   backend, n);
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
	n = env_val(&c->env, mode == 0 ? "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
					 " WHERE application_name LIKE 'stagedrain-%'"
				       : "SELECT count(pg_terminate_backend(a.pid)) FROM pg_locks l"
					 " JOIN pg_stat_activity a ON a.pid = l.pid"
					 " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
					 " AND a.application_name LIKE 'stagedrain-%'");
	if (n < 0)
		return -1;
	c->backend_kills++;
	note_event(c, mode == 0 ? "backend kill (all relays)" : "backend kill (leader)", "%lld backend(s) terminated",
		   n);
	return 0;
}

/* Stops Redis (it keeps its AOF, appendfsync always; --routes: SIGKILLs one
 * target's), leaves it down up to a second, starts it again on the same port. */
static int restart_redis(struct chaos *c)
{
	/* --routes: one target's Redis, SIGKILLed (a crash; its AOF keeps what
	 * it acknowledged), while the other two flow on; the three in turn from
	 * one the seed picks, so three restarts kill each once. */
	int k = c->o.routes ? (int)((c->o.seed + (unsigned)c->redis_restarts) % (ROUTES_EXTRA + 1)) : -1;

	if (k >= 0 && k < ROUTES_EXTRA) {
		note_event(c, "redis restart", "SIGKILL of route r%d's redis, then started again", k + 1);
		if (routes_restart(&c->routes, k, &c->rng) < 0)
			return -1;
		c->redis_restarts++;
		return 0;
	}
	if (k == ROUTES_EXTRA) {
		note_event(c, "redis restart", "SIGKILL of the default target's redis");
		if (services_run(&c->env.srv, "redis-kill", NULL) != 0)
			return -1;
		c->default_redis_kills++;
	} else {
		note_event(c, "redis restart", "stopping");
		if (services_run(&c->env.srv, "redis-stop", NULL) != 0)
			return -1;
	}
	sleep_ms(rnd_range(&c->rng, 0, 1000));
	if (services_run(&c->env.srv, "redis-start", NULL) != 0)
		return -1;
	c->redis_restarts++;
	note_event(c, "redis restart", "started again");
	return 0;
}

static void progress(struct chaos *c)
{
	say("t=%llds staged=%lld committed=%lld leader-kills=%d backend-kills=%d redis-restarts=%d",
	    (mono_ms() - c->start_ms) / 1000, TOTAL(c, staged), TOTAL(c, committed), c->leader_kills, c->backend_kills,
	    c->redis_restarts);
	if (c->o.caps > 0)
		say("  popped=%lld held-max=%lld longest-list=%lld", atomic_load(&c->sh->caps.popped), c->held_max,
		    atomic_load(&c->sh->caps.longest));
}

/* With --caps, the held backlog once a second: the run must have held jobs,
 * and none of the uncapped queue's. */
static void sample_held(struct chaos *c)
{
	char sql[128];
	long long n;

	if (c->o.caps <= 0 || mono_ms() < c->next_held_ms)
		return;
	c->next_held_ms = mono_ms() + 1000;
	if ((n = env_val(&c->env, "SELECT count(*) FROM staged_jobs_held")) > c->held_max)
		c->held_max = n;
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM staged_jobs_held WHERE queue = '%s'", queues[CAPS_UNCAPPED]);
	if ((n = env_val(&c->env, sql)) > c->uncapped_held)
		c->uncapped_held = n;
}

/* Waits until `when` (monotonic ms), keeping both relays alive meanwhile. */
static int wait_until(struct chaos *c, long long when)
{
	while (mono_ms() < when) {
		if (should_stop(c) || tend_relays(c) < 0)
			return -1;
		(void)kids_reap(&c->producers, false, "producer");
		sample_held(c);
		if (mono_ms() >= c->next_progress_ms) {
			progress(c);
			c->next_progress_ms = mono_ms() + 10000;
		}
		sleep_ms(when - mono_ms() < 20 ? when - mono_ms() : 20);
	}
	return 0;
}

/* The slot of the relay holding the lock, waiting up to 5 s for one; -1: none. */
static int wait_leader(struct chaos *c, pid_t *pid, long long *backend)
{
	long long until = mono_ms() + 5000;
	int slot;

	while ((slot = find_leader(c, pid, backend)) < 0 && mono_ms() < until && !should_stop(c))
		sleep_ms(10);
	return slot;
}

/* Rows held for r2 now (staged_jobs_held.target), or -1. */
static long long held_for_r2(struct chaos *c)
{
	return env_val(&c->env, "SELECT count(*) FROM staged_jobs_held WHERE target = 'r2'");
}

/*
 * The handover from the leader (slot, with r2) to the standby without r2. r2's
 * Redis is SIGKILLed first, until the leader holds rows for it, so the new
 * leader starts with rows held for a target it does not have: by the relay's
 * rule they stay held (not pushed anywhere) until a relay with r2 leads, which
 * settles r2's fence first (a push the SIGKILL cut may have landed). r2's
 * Redis starts again half a second into the new leadership; the rows held for
 * r2 then and at the handover are counted for the report.
 */
static int routes_handover(struct chaos *c, int slot, pid_t pid)
{
	int other = 1 - slot;
	long long until = mono_ms() + 2000, held, kept;

	note_event(c, "redis restart", "SIGKILL of route r2's redis before a handover to a relay without r2");
	routes_kill(&c->routes, 1);
	while ((held = held_for_r2(c)) == 0 && mono_ms() < until && !should_stop(c))
		sleep_ms(10);
	c->handovers++;
	note_event(c, "clean handover",
		   "SIGTERM of leader pid %d (with r2, %lld rows held for r2) so that pid %d"
		   " (without r2) leads",
		   (int)pid, held, (int)c->relays[other].proc.pid);
	stop_relay(c, slot);
	until = mono_ms() + 10000;
	while (find_leader(c, &pid, &(long long){ 0 }) != other && mono_ms() < until && !should_stop(c))
		sleep_ms(10);
	if (relay_start(c, slot) < 0 || wait_until(c, mono_ms() + 500) < 0 || (kept = held_for_r2(c)) < 0)
		return -1;
	c->r2_held_at_handover += held > 0 ? held : 0;
	c->r2_held_kept += kept;
	note_event(c, "redis restart", "r2's redis started again; %lld rows held for r2 after 0.5 s without r2", kept);
	return routes_revive(&c->routes, 1);
}

/*
 * --routes: a relay without r2 must not succeed a leader with r2 by a crash.
 * That leader's last batch may be in r2's Redis and named by r2's fence,
 * which only a relay with r2 reads: a successor without r2 would push its
 * rows of r2's queue to the default target as well, and no relay can tell
 * (docs/guarantees.md, chaos). So after each fault, and before each that ends
 * a leadership uncleanly, a leader with r2 whose standby lacks it hands over
 * cleanly (routes_handover): relays without r2 lead from then to the next fault.
 */
static int routes_guard(struct chaos *c)
{
	for (int tries = 0; c->o.routes && tries < 3; tries++) {
		long long backend = 0;
		pid_t pid = 0;
		int slot = wait_leader(c, &pid, &backend);
		if (slot < 0 || !routes_set_has_r2(c->relay_set[slot]) || routes_set_has_r2(c->relay_set[1 - slot]) ||
		    c->relays[1 - slot].proc.pid <= 0)
			return 0;
		if (routes_handover(c, slot, pid) < 0)
			return -1;
	}
	return 0;
}

/* --routes, once the killer is done: every relay started with a changed set
 * starts again with the normal one (SIGTERM first), so r2's held rows drain. */
static int routes_restore(struct chaos *c)
{
	c->final_routes = true;
	for (int i = 0; i < NRELAYS; i++) {
		if (c->relay_set[i] == ROUTES_NORMAL || c->relays[i].proc.pid <= 0)
			continue;
		stop_relay(c, i);
		if (relay_start(c, i) < 0)
			return -1;
	}
	return 0;
}

/* --cluster: a master SIGKILLed, its replica promoted, and the master revived
 * 0.3-1.5 s later (with WAIT 1 its slots' jobs wait held meanwhile: the
 * promoted master has no replica), or a slot moved while jobs flow. */
static int cluster_fault(struct chaos *c, enum event_kind kind)
{
	if (kind == EV_SLOT_MOVE)
		return cluster_move(&c->cluster, &c->rng);
	if (cluster_kill(&c->cluster, &c->rng) < 0 || wait_until(c, mono_ms() + rnd_range(&c->rng, 300, 1500)) < 0)
		return -1;
	return cluster_revive(&c->cluster);
}

/* The faults in a random order, spread over the producers' planned duration. */
static int run_killer(struct chaos *c)
{
	int relay_faults = c->o.kills + c->o.backend_kills,
	    n = relay_faults + c->o.redis_restarts + c->o.cluster_kills + c->o.slot_moves;
	enum event_kind *plan = calloc((size_t)(n > 0 ? n : 1), sizeof(*plan));
	long long span = (long long)c->o.seconds * 1000, t_start = mono_ms();
	int rc = 0;

	if (!plan)
		return -1;
	for (int i = 0; i < n; i++)
		plan[i] = i < c->o.kills                           ? EV_LEADER_KILL
			  : i < relay_faults                       ? EV_BACKEND_KILL
			  : i < relay_faults + c->o.redis_restarts ? EV_REDIS_RESTART
			  : i < n - c->o.slot_moves                ? EV_CLUSTER_KILL
								   : EV_SLOT_MOVE;
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
		/* The last fault's restart is the final drain's: the normal set. */
		c->final_routes = i == n - 1;
		if ((plan[i] == EV_LEADER_KILL || plan[i] == EV_BACKEND_KILL) && routes_guard(c) < 0)
			rc = -1;
		else if (plan[i] == EV_LEADER_KILL)
			rc = kill_leader(c);
		else if (plan[i] == EV_BACKEND_KILL)
			rc = kill_backends(c);
		else if (plan[i] == EV_REDIS_RESTART)
			rc = restart_redis(c);
		else
			rc = cluster_fault(c, plan[i]);
		if (rc == 0 && !c->final_routes)
			rc = routes_guard(c);
	}
	free(plan);
	return rc;
}

/* ---- the end: drain, stop, check ---- */

static int wait_drained(struct chaos *c)
{
	long long until = mono_ms() + 180000;

	while (mono_ms() < until && !should_stop(c)) {
		long long n =
			env_val(&c->env, c->o.caps > 0 || c->o.routes ? "SELECT (SELECT count(*) FROM staged_jobs)"
									" + (SELECT count(*) FROM staged_jobs_held)"
								      : "SELECT count(*) FROM staged_jobs");
		if (n == 0)
			return 0;
		if (tend_relays(c) < 0)
			return -1;
		sleep_ms(100);
	}
	say("staged_jobs%s was not drained within 180 s", c->o.caps > 0 ? " (or staged_jobs_held)" : "");
	return -1;
}

/* SIGTERM: each relay must finish its batch and exit 0. */
static void stop_relays(struct chaos *c, bool graceful)
{
	for (int i = 0; i < NRELAYS; i++)
		(void)proc_signal(&c->relays[i].proc, graceful ? SIGTERM : SIGKILL);
	for (int i = 0; i < NRELAYS; i++) {
		struct relay *r = &c->relays[i];
		pid_t pid = r->proc.pid;
		if (pid > 0 && proc_reap(&r->proc, 20000) != 0 && graceful) {
			say("relay %d did not exit 0 on SIGTERM within 20 s; see %s", (int)pid, r->log);
			c->bad_stops++;
		}
	}
}

/* Which fault came last before each extra copy was pushed, as report lines. */
static void duplicate_causes(struct chaos *c, struct results *r)
{
	PGresult *res;
	size_t len;

	fault_causes(&c->env,
		     "SELECT enq_us AS t_us FROM (SELECT enq_us, row_number() OVER (PARTITION BY jid ORDER BY enq_us)"
		     " AS rn FROM chaos_seen WHERE jid IS NOT NULL) s WHERE rn > 1",
		     r->causes, sizeof(r->causes));
	if (!c->o.routes)
		return;
	len = strlen(r->causes);
	/* --routes: where the copies were (default+r2: both r2 and the default
	 * target got r2's queue's job), by the jobs' queues. */
	res = PQexec(c->env.pg,
		     "SELECT t, q, count(*) FROM (SELECT string_agg(target, '+' ORDER BY target) AS t,"
		     "  min(queue) AS q FROM chaos_seen WHERE jid IS NOT NULL GROUP BY jid HAVING count(*) > 1) d"
		     " GROUP BY 1, 2 ORDER BY 3 DESC");
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		for (int i = 0; i < PQntuples(res) && len < sizeof(r->causes); i++)
			len += (size_t)snprintf(r->causes + len, sizeof(r->causes) - len,
						"    on %-16s (queue %s)   %s jobs\n", PQgetvalue(res, i, 0),
						PQgetvalue(res, i, 1), PQgetvalue(res, i, 2));
	PQclear(res);
}

/* --routes: the first order violations, as report lines (where, which
 * producer, the sequence and row id that came first and the one after). */
static void order_detail(struct chaos *c, const struct results *r)
{
	PGresult *res;
	size_t len = 0;

	c->order_detail[0] = '\0';
	if (!c->o.routes || r->order_violations == 0)
		return;
	res = PQexec(c->env.pg,
		     "WITH j AS (SELECT s.target, s.list, s.pos, s.enq, s.args::jsonb->>0 AS producer,"
		     "   (s.args::jsonb->>1)::int8 AS seq, c.id FROM chaos_seen s JOIN chaos_committed c USING (jid)"
		     "   WHERE s.src = 'queue'),"
		     " o AS (SELECT *, lag(seq) OVER w AS pseq, lag(id) OVER w AS pid, lag(enq) OVER w AS penq FROM j"
		     "   WINDOW w AS (PARTITION BY target, list, producer ORDER BY pos))"
		     " SELECT target, list, producer, pseq, pid, penq, seq, id, enq FROM o WHERE pseq >= seq"
		     " ORDER BY target, list, pos LIMIT 5");
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		for (int i = 0; i < PQntuples(res) && len < sizeof(c->order_detail); i++)
			len += (size_t)snprintf(c->order_detail + len, sizeof(c->order_detail) - len,
						"    %s %s producer %s: seq %s (id %s, enq %s) before seq %s (id %s,"
						" enq %s)\n",
						PQgetvalue(res, i, 0), PQgetvalue(res, i, 1), PQgetvalue(res, i, 2),
						PQgetvalue(res, i, 3), PQgetvalue(res, i, 4), PQgetvalue(res, i, 5),
						PQgetvalue(res, i, 6), PQgetvalue(res, i, 7), PQgetvalue(res, i, 8));
	PQclear(res);
}

/* Over the relays' logs, the lines whose msg starts with msg: how many, and
 * the sum and the largest of their field (" name="). */
static int log_field(const struct chaos *c, const char *msg, const char *field, long long *sum, long long *max)
{
	char path[PATH_MAX + 32], line[4096], key[64];
	int lines = 0;

	snprintf(key, sizeof(key), " %s=", field);
	*sum = *max = 0;
	for (int i = 1; i <= c->incarnations; i++) {
		FILE *f;
		snprintf(path, sizeof(path), "%s/relay-%03d.log", c->env.srv.dir, i);
		if (!(f = fopen(path, "r")))
			continue;
		while (fgets(line, sizeof(line), f)) {
			const char *p = strstr(line, msg);
			long long v;
			if (!p || !(p = strstr(p, key)))
				continue;
			v = strtoll(p + strlen(key), NULL, 10);
			lines++;
			*sum += v;
			*max = v > *max ? v : *max;
		}
		fclose(f);
	}
	return lines;
}

/* Rows the fence let a new leader delete instead of pushing again, from the relays' logs. */
static long long fence_deletes(const struct chaos *c)
{
	long long rows, max;

	(void)log_field(c, "msg=\"deleted rows the last batch pushed", "rows", &rows, &max);
	return rows;
}

/* The caps' lines of the report; whether they pass: no capped list past its
 * cap by more than one batch, none of the uncapped queue's jobs held, and
 * jobs held at all (a run that never filled a list would test nothing). */
static bool report_caps(const struct chaos *c)
{
	long long longest = atomic_load(&c->sh->caps.longest);

	if (c->o.caps <= 0)
		return true;
	printf("  --max-queue-length           %d: longest list seen %lld (allowed %d), most jobs held %lld\n",
	       c->o.caps, longest, c->o.caps + BATCH_SIZE, c->held_max);
	printf("  held of uncapped %-11s %lld\n", queues[CAPS_UNCAPPED], c->uncapped_held);
	printf("  popped by the consumer       %lld (failures %d)\n", atomic_load(&c->sh->caps.popped),
	       c->consumer.failures);
	return longest <= c->o.caps + BATCH_SIZE && c->held_max > 0 && c->uncapped_held == 0 &&
	       c->consumer.failures == 0;
}

/* --routes: with 6 or more leader kills (9 and more restarts) the run must
 * have started relays both without r2 and with r3, or it tested no change;
 * and every row held for r2 at a handover to a relay without r2 must still
 * have been held 0.5 s later (the relay's rule: not pushed anywhere). */
static bool route_changes_ok(const struct chaos *c)
{
	return !c->o.routes ||
	       ((c->o.kills < 6 || (c->route_changes[ROUTES_NO_R2] > 0 && c->route_changes[ROUTES_EXTRA_R3] > 0)) &&
		c->r2_held_kept >= c->r2_held_at_handover);
}

static bool report(struct chaos *c, const struct results *r, const struct results *t, int self_rc)
{
	long long staged = TOTAL(c, staged), committed = TOTAL(c, committed), rolled = TOTAL(c, rolled_back);
	long long med = 0, max = 0;
	char self_test[400];
	bool ok;

	if (c->nfailover > 0) {
		qsort(c->failover_ms, (size_t)c->nfailover, sizeof(long long), cmp_ll);
		med = c->failover_ms[c->nfailover / 2];
		max = c->failover_ms[c->nfailover - 1];
	}
	ok = r->missing == 0 && r->duplicates == 0 && r->rolled_back == 0 && r->phantoms == 0 && r->mismatched == 0 &&
	     r->order_violations == 0 && r->misrouted == 0 && r->dead == 0 && r->left_staged == 0 &&
	     r->left_held == 0 && r->unregistered == 0 && r->present == committed && r->committed_rows == committed &&
	     staged >= c->o.jobs && c->leader_kills >= c->o.kills && c->backend_kills >= c->o.backend_kills &&
	     c->redis_restarts >= c->o.redis_restarts && c->unexpected_exits == 0 && c->failover_timeouts == 0 &&
	     c->bad_stops == 0 && c->producers.failures == 0 && self_rc == 0 && route_changes_ok(c);
	printf("\nstagedrain chaos run (seed %u, %d producers, 2 relays, --batch-size %d%s%s%s)\n", c->o.seed,
	       c->o.producers, BATCH_SIZE, c->o.caps > 0 ? ", caps" : "", c->o.routes ? ", 3 targets by route" : "",
	       c->o.cluster ? " and a redis cluster" : "");
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
	printf("  misrouted                    %lld (on a target its queue never went to)\n", r->misrouted);
	printf("  order violations             %lld%s\n", r->order_violations,
	       c->o.caps > 0 ? " (in the uncapped queue; held jobs leave round-robin across tenants)"
	       : c->o.routes ? " (each producer's commit order, in every list of every target)"
			     : "");
	fputs(c->order_detail, stdout);
	printf("  dead / left staged / held    %lld / %lld / %lld\n", r->dead, r->left_staged, r->left_held);
	/* The rest of the verdict's own checks, shown when they fail. */
	if (r->unregistered)
		printf("  not in the queues set        %lld queues (Sidekiq's API finds queues there)\n",
		       r->unregistered);
	if (r->committed_rows != committed)
		printf("  chaos_committed rows         %lld, where the producers counted %lld\n", r->committed_rows,
		       committed);
	printf("  leader SIGKILLs              %d (skipped: %d)\n", c->leader_kills, c->skipped_kills);
	printf("  relay backends terminated    %d times\n", c->backend_kills);
	if (c->o.routes) {
		char sql[160];
		long long sum, max;
		int n = log_field(c, "msg=\"jobs wait in staged_jobs_held", "jobs_held", &sum, &max);
		printf("  redis restarts               %d (SIGKILLs: default %d, r1 %d, r2 %d)\n", c->redis_restarts,
		       c->default_redis_kills, c->routes.restarts[0], c->routes.restarts[1]);
		/* Holds the order check went through (none: it checked no hold). */
		printf("  holds released               %d (relay log lines), up to %lld jobs held\n", n, max);
		printf("  route changes                %d at relay starts (r2 removed %d, r3 added %d), normal set"
		       " again %d, clean handovers %d\n",
		       c->route_changes[ROUTES_NO_R2] + c->route_changes[ROUTES_EXTRA_R3],
		       c->route_changes[ROUTES_NO_R2], c->route_changes[ROUTES_EXTRA_R3],
		       c->route_changes[ROUTES_NORMAL], c->handovers);
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM chaos_seen WHERE target = 'default' AND queue = '%s'",
			 queues[ROUTES_FIRST_QUEUE + 1]);
		printf("  r2's queue on the default    %lld jobs (pushed while r2 was removed)\n",
		       env_val(&c->env, sql));
		/* The relay's rule: every row held for r2 at a handover to a relay
		 * without r2 is still held 0.5 s later (route_changes_ok). */
		printf("  held for r2 without r2       %lld rows at the handovers, %lld still held 0.5 s later"
		       " (must be all)\n",
		       c->r2_held_at_handover, c->r2_held_kept);
	} else
		printf("  redis restarts               %d\n", c->redis_restarts);
	printf("  rows deleted by the fence    %lld\n", fence_deletes(c));
	printf("  failover (SIGKILL -> first push of the next epoch)  median %lld ms, max %lld ms (n=%d, timeouts %d)\n",
	       med, max, c->nfailover, c->failover_timeouts);
	printf("  relay exits not caused by us %d, bad stops %d, producer failures %d\n", c->unexpected_exits,
	       c->bad_stops, c->producers.failures);
	ok = report_caps(c) && ok;
	if (c->o.cluster)
		ok = cluster_report(&c->cluster, c->o.cluster_kills, c->o.slot_moves, c->incarnations) && ok;
	if (self_rc >= 0)
		snprintf(self_test, sizeof(self_test),
			 "injected 5 faults; counts moved: missing %+lld, duplicates %+lld,\n"
			 "                               rolled back %+lld, phantoms %+lld, order %+lld,\n"
			 "                               misrouted %+lld: %s",
			 t->missing - r->missing, t->duplicates - r->duplicates, t->rolled_back - r->rolled_back,
			 t->phantoms - r->phantoms, t->order_violations - r->order_violations,
			 t->misrouted - r->misrouted, self_rc == 0 ? "all caught" : "NOT ALL CAUGHT");
	return report_end(ok, self_rc >= 0 ? self_test : NULL, c->start_ms);
}

/* ---- set-up, the run, clean-up ---- */

static const char usage_text[] =
	"usage: chaos --bin PATH --services PATH [--jobs N] [--kills N] [--backend-kills N]\n"
	"             [--redis-restarts N] [--producers N] [--seconds N] [--timeout S] [--seed N] [--keep]\n"
	"             [--caps N] [--routes 1]\n"
	"  --caps N   relays run with --max-queue-length N, rows carry skewed tenants, and a\n"
	"             consumer pops the queues (at half the staging rate while producers run)\n"
	"  --routes 1 two more Redis; the relays route two of the four queues to them, each Redis\n"
	"             restart SIGKILLs one of the three targets' Redis, and order is each producer's\n"
	"             commit order in each list of each target; every third relay restart starts\n"
	"             its relay with route r2 removed or an unused route r3 added (the next start\n"
	"             and the final drain: the normal routes)\n"
	"  --cluster 1 with --routes: three more queues go to a redis cluster (bullmq); the faults\n"
	"             add --cluster-kills N masters SIGKILLed, promoted, revived (default kills/25,\n"
	"             at least 1) and --slot-moves N slots moved while jobs flow (the same)\n";

static int parse_args(struct opts *o, int argc, char **argv)
{
	const struct flag flags[] = {
		{ "bin", FLAG_STR, &o->bin },
		{ "services", FLAG_STR, &o->services },
		{ "jobs", FLAG_LL, &o->jobs },
		{ "kills", FLAG_INT, &o->kills },
		{ "backend-kills", FLAG_INT, &o->backend_kills },
		{ "redis-restarts", FLAG_INT, &o->redis_restarts },
		{ "producers", FLAG_INT, &o->producers },
		{ "seconds", FLAG_INT, &o->seconds },
		{ "timeout", FLAG_INT, &o->timeout },
		{ "seed", FLAG_UINT, &o->seed },
		{ "caps", FLAG_INT, &o->caps },
		{ "routes", FLAG_INT, &o->routes },
		{ "cluster", FLAG_INT, &o->cluster },
		{ "cluster-kills", FLAG_INT, &o->cluster_kills },
		{ "slot-moves", FLAG_INT, &o->slot_moves },
	};

	*o = (struct opts){ .jobs = 200000,
			    .kills = 50,
			    .backend_kills = -1,
			    .redis_restarts = 3,
			    .producers = 6,
			    .cluster_kills = -1,
			    .slot_moves = -1,
			    .timeout = 900,
			    .seed = (unsigned)time(NULL) };
	if (parse_flags(argc, argv, flags, sizeof(flags) / sizeof(flags[0]), &o->keep) < 0)
		return usage(usage_text);
	if (!o->bin || !o->services || o->jobs < 1 || o->kills < 0 || o->redis_restarts < 0 || o->producers < 1 ||
	    o->producers > MAX_PRODUCERS || o->timeout < 10 || o->caps < 0 || o->routes < 0 || o->routes > 1 ||
	    o->cluster < 0 || o->cluster > 1 || (o->cluster && !o->routes))
		return usage(usage_text);
	if (o->backend_kills < 0)
		o->backend_kills = o->kills / 5;
	if (o->cluster_kills < 0)
		o->cluster_kills = o->cluster ? (o->kills / 25 > 1 ? o->kills / 25 : 1) : 0;
	if (o->slot_moves < 0)
		o->slot_moves = o->cluster ? (o->kills / 25 > 1 ? o->kills / 25 : 1) : 0;
	if (o->seconds <= 0) {
		/* Room for every fault (a failover, a relay start and a pause each) and
		 * a producer rate the relays on a small machine keep up with. */
		long long need = (o->kills * 700LL + o->backend_kills * 300LL + o->redis_restarts * 2500LL +
				  o->cluster_kills * 4000LL + o->slot_moves * 3000LL) /
				 1000;
		long long by_rate = o->jobs / 6000;
		o->seconds = (int)(need > by_rate ? need : by_rate);
		if (o->seconds < 5)
			o->seconds = 5;
	}
	return 0;
}

static int setup(struct chaos *c)
{
	char path[PATH_MAX + 16];

	if (env_setup(&c->env, c->o.bin, c->o.services, events_sql) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/events.log", c->env.srv.dir);
	if (!(c->events = fopen(path, "we")))
		return -1;
	say("servers, relay logs and events.log in %s", c->env.srv.dir);
	if (c->o.routes && routes_start(&c->routes, &c->env) < 0)
		return -1;
	/* cluster-require-full-coverage: yes on even seeds (every node answers
	 * CLUSTERDOWN until a promotion), no on odd ones. */
	return c->o.cluster ? cluster_start(&c->cluster, &c->env, c->o.seed % 2 == 0, note_cluster, c) : 0;
}

/* Everything the run started goes, whatever happened: producers, relays, servers. */
static void teardown(struct chaos *c, bool passed)
{
	kids_kill(&c->producers);
	kids_kill(&c->consumer);
	stop_relays(c, false);
	if (c->o.routes)
		routes_stop(&c->routes, &c->env);
	if (c->o.cluster)
		cluster_stop(&c->cluster);
	if (c->events)
		fclose(c->events);
	env_teardown(&c->env, passed && !c->o.keep);
	if (c->sh)
		munmap(c->sh, sizeof(*c->sh));
}

/* --caps: the consumer, a forked child like the producers. */
static int consumer_main(void *arg, int idx)
{
	struct chaos *c = arg;

	(void)idx;
	return caps_consume(&c->env, &c->sh->caps);
}

/* Pops at half the producers' planned rate while they run, so the capped
 * lists fill and held backlogs build under the faults. */
static int consumer_start(struct chaos *c)
{
	long long rate = c->o.jobs / c->o.seconds / 2;

	atomic_store(&c->sh->caps.rate, rate > 0 ? rate : 1);
	atomic_store(&c->sh->caps.pace, 1);
	return kids_start(&c->consumer, &c->env, 1, consumer_main, c);
}

/* Once the relays stopped: the consumer empties the lists and exits, then its
 * lists become the queues' again for the checker. */
static int consumer_finish(struct chaos *c)
{
	atomic_store(&c->sh->caps.finish, 1);
	while (kids_reap(&c->consumer, false, "consumer") > 0) {
		if (should_stop(c))
			return -1;
		sleep_ms(20);
	}
	return c->consumer.failures == 0 ? caps_restore(&c->env) : -1;
}

/* --routes: the routes' Redis (and --cluster's), read into chaos_seen after the default one. */
static int seen_routes(struct env *e, long long *entries, void *arg)
{
	struct chaos *c = arg;

	if (routes_seen_load(&c->routes, e, entries) < 0)
		return -1;
	return c->o.cluster ? cluster_seen_load(&c->cluster, e, entries) : 0;
}

static int run(struct chaos *c, struct results *res, struct results *tampered, int *self_rc)
{
	/* Held jobs leave in the order they were held, late commits after, in
	 * one batch: a batch's id order is checked where nothing is held. */
	c->env.ordered = c->o.caps > 0 ? queues[CAPS_UNCAPPED] : c->o.routes ? queues[0] : NULL;
	c->env.by_producer = c->o.routes;
	if (setup(c) < 0)
		return -1;
	if (c->o.caps > 0 && consumer_start(c) < 0)
		return -1;
	for (int i = 0; i < NRELAYS; i++)
		if (relay_start(c, i) < 0)
			return -1;
	atomic_store(&c->sh->keep_going, 1);
	say("staging >= %lld jobs over ~%d s with %d producers; %d leader kills, %d backend kills, %d redis restarts",
	    c->o.jobs, c->o.seconds, c->o.producers, c->o.kills, c->o.backend_kills, c->o.redis_restarts);
	if (kids_start(&c->producers, &c->env, c->o.producers, producer_main, c) < 0 || run_killer(c) < 0 ||
	    routes_restore(c) < 0)
		return -1;
	atomic_store(&c->sh->keep_going, 0);
	while (kids_reap(&c->producers, false, "producer") > 0) {
		if (should_stop(c) || tend_relays(c) < 0)
			return -1;
		sample_held(c);
		sleep_ms(50);
	}
	atomic_store(&c->sh->caps.pace, 0);
	progress(c);
	say("producers done; waiting for the relays to drain staged_jobs");
	if (wait_drained(c) < 0)
		return -1;
	stop_relays(c, true);
	if (c->o.caps > 0 && consumer_finish(c) < 0)
		return -1;
	say("drained; checking redis");
	if (c->o.routes) {
		c->env.seen_more = seen_routes;
		c->env.seen_more_arg = c;
	}
	if (seen_load(&c->env, &res->entries) < 0 ||
	    (c->env.seen_more && c->env.seen_more(&c->env, &res->entries, c->env.seen_more_arg) < 0) ||
	    check_redis(&c->env, res) < 0)
		return -1;
	duplicate_causes(c, res);
	order_detail(c, res);
	*self_rc = check_self_test(&c->env, res, tampered);
	if (c->o.cluster && *self_rc == 0)
		*self_rc = cluster_self_test(&c->cluster, tampered, &(struct results){ 0 });
	return 0;
}

int main(int argc, char **argv)
{
	static struct chaos c; /* zeroed, and off the stack: it holds every failover time */
	struct results res = { 0 }, tampered = { 0 };
	int self_rc = -1, rc;
	bool passed = false;

	if ((rc = parse_args(&c.o, argc, argv)) != 0)
		return rc;
	if (!(c.sh = chaos_begin(sizeof(*c.sh))))
		return 1;
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