/*
 * The steady chaos test (`make chaos-steady`): one relay, never killed or
 * restarted, under producers that interleave xid assignment and staging across
 * sessions, roll back, use savepoints and hold transactions open. No faults:
 * whatever goes wrong is the relay's own doing. Checks that every committed job
 * reached Redis exactly once and within a bound of its commit, that nothing
 * rolled back did, and that staged_jobs empties.
 *
 * `make chaos`, whose leader kills reset the relay's cursor every few seconds,
 * hides a job skipped by the cursor until the next leader change; this one runs
 * a single leader for the whole load, so such a job stays staged and is late.
 */
#include "fmacros.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "keys.h"

#define MAX_WORKERS 32
#define CONNECT_TIMEOUT_MS 15000
#define MAX_MULTI_ROWS 40

/* Commit times (client side) and the side table a transaction writes to take
 * its xid early, as an application's earlier writes would. */
static const char steady_sql[] =
	"CREATE TABLE chaos_tx (tx bigint PRIMARY KEY, commit_us bigint NOT NULL, kind text NOT NULL);"
	"CREATE UNLOGGED TABLE chaos_side (worker int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());";

/* What a transaction did, for the report of late and stuck jobs. */
enum tx_kind {
	TX_SINGLE,    /* BEGIN; one row; COMMIT in one message, as pgbench would */
	TX_MULTI,     /* 2..40 rows in one statement */
	TX_EARLY,     /* writes to a side table first, then stages */
	TX_SPLIT,     /* stages in several statements with pauses between */
	TX_SAVEPOINT, /* stages inside a savepoint, then rolls back to it or releases it */
	TX_HELD,      /* takes its xid, stages, stays open 100-400 ms */
	TX_PAIR_N,    /* the interleaving (pair_scenario): N, which commits first */
	TX_PAIR_M,    /* ... M, lower id, later xid, commits after the relay read N's row */
	TX_PAIR_M3,   /* ... M in the variant: a third writer holds an xid between N's and M's */
	TX_PAIR_MQ,   /* ... M, in a quiet moment */
	TX_PAIR_M3Q,  /* ... M in the variant, in a quiet moment */
	NKINDS
};

static const char *const kind_names[NKINDS] = { "single", "multi",  "early-xid", "split",    "savepoint", "held",
						"pair-N", "pair-M", "pair-M3",   "pair-M/q", "pair-M3/q" };

/* Counters a worker shares with the orchestrator (one writer each). */
struct stats {
	_Atomic long long staged, committed, rolled_back, txns, scenarios, variants, quiet;
};

/* Lives in a shared anonymous mapping, so forked workers see the flag. */
struct shared {
	_Atomic int stop;  /* finish the current transaction, record, exit */
	_Atomic int quiet; /* producers start no transaction while above 0 */
	struct stats w[MAX_WORKERS];
};

struct opts {
	int seconds;   /* load duration */
	int rate;      /* jobs per second, all producers together */
	int producers; /* sessions with mixed transactions */
	int pairs;     /* processes running the interleaving, three sessions each */
	int grace;     /* seconds after the load for staged_jobs to empty */
	int bound_ms;  /* every committed job in Redis within this of its commit */
	unsigned seed;
	bool keep;
	const char *bin, *services;
};

struct steady {
	struct opts o;
	struct env env;
	struct shared *sh;
	struct relay relay;
	struct kids workers;
	long long start_ms, load_ms, drained_ms, left_after_grace;
	/* the relay: did it run throughout, alone, as the one leader? */
	bool relay_exited, relay_bad_stop, lock_ours;
	int leader_lines;
	char stuck_ids[256];
};

/* The latency of every committed job, and where the late ones came from. */
struct latency {
	long long jobs, max_us, p99_us, p50_us, over, never, negative, untimed;
	char over_by_kind[1024]; /* one line per kind of transaction */
};

/* ---- a worker: one or three sessions staging jobs ---- */

/* One session and the transaction open on it. */
struct session {
	PGconn *conn;
	long long tx; /* the transaction's number: worker << 40 | sequence */
	enum tx_kind kind;
	struct strbuf jids;    /* its jobs so far, as ('jid'),('jid') */
	struct strbuf sp_jids; /* those staged since the savepoint */
	int n, sp_n;
};

struct worker {
	int idx;
	unsigned long long rng;
	unsigned seq; /* jobs staged: makes jids unique */
	long long ntx;
	struct stats *st;
	struct session s[3];
	struct strbuf sql;
	struct strbuf times;  /* chaos_tx rows not yet written */
	struct strbuf rolled; /* chaos_rolledback rows not yet written */
	int ntimes;
};

static int run_sql(struct worker *w, struct session *s, const char *sql, const char *want)
{
	PGresult *res = PQexec(s->conn, sql);
	ExecStatusType st = PQresultStatus(res);
	int ok = (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) && (!want || strcmp(PQcmdStatus(res), want) == 0);

	if (!ok)
		fprintf(stderr, "chaos: worker %d: %.60s... failed: %s %s\n", w->idx, sql, PQcmdStatus(res),
			PQerrorMessage(s->conn));
	PQclear(res);
	return ok ? 0 : -1;
}

static void tx_open(struct worker *w, struct session *s, enum tx_kind kind)
{
	s->tx = ((long long)w->idx << 40) | w->ntx++;
	s->kind = kind;
	s->n = s->sp_n = 0;
	strbuf_reset(&s->jids);
	strbuf_reset(&s->sp_jids);
	atomic_fetch_add(&w->st->txns, 1);
}

/* The statement that stages n jobs of s's transaction and records them in
 * chaos_committed in the same transaction; pre and post wrap it (BEGIN, COMMIT). */
static void stage_sql(struct worker *w, struct session *s, int n, bool in_savepoint, const char *pre, const char *post)
{
	struct strbuf *jids = in_savepoint ? &s->sp_jids : &s->jids;

	strbuf_reset(&w->sql);
	strbuf_printf(&w->sql, "%sWITH s AS (INSERT INTO staged_jobs (queue, job_class, args, jid) VALUES ", pre);
	for (int i = 0; i < n; i++) {
		char jid[32];
		/* Unique by construction: worker, sequence, then random bits. */
		snprintf(jid, sizeof(jid), "%02x%08x%014llx", (unsigned)w->idx, w->seq,
			 rnd(&w->rng) & 0xffffffffffffffULL);
		strbuf_printf(&w->sql, "%s('%s', 'ChaosJob', '[%d, %u]', '%s')", i ? "," : "",
			      queues[rnd(&w->rng) % NQUEUES], w->idx, w->seq, jid);
		strbuf_printf(jids, "%s('%s')", jids->len ? "," : "", jid);
		w->seq++;
	}
	strbuf_printf(&w->sql,
		      " RETURNING id, jid, queue, args)"
		      " INSERT INTO chaos_committed (id, jid, queue, args, scheduled, tx)"
		      " SELECT id, jid, queue, args, false, %lld FROM s%s",
		      s->tx, post);
	if (in_savepoint)
		s->sp_n += n;
	else
		s->n += n;
	atomic_fetch_add(&w->st->staged, n);
}

static int stage(struct worker *w, struct session *s, int n, bool in_savepoint)
{
	stage_sql(w, s, n, in_savepoint, "", "");
	return run_sql(w, s, w->sql.data, NULL);
}

/* Jobs staged in the savepoint share the transaction's fate (RELEASE) or are
 * rolled back now, whatever the transaction does later (ROLLBACK TO). */
static int savepoint_end(struct worker *w, struct session *s, bool rollback)
{
	struct strbuf *to = rollback ? &w->rolled : &s->jids;

	if (run_sql(w, s, rollback ? "ROLLBACK TO SAVEPOINT sp" : "RELEASE SAVEPOINT sp",
		    rollback ? "ROLLBACK" : "RELEASE") < 0)
		return -1;
	if (s->sp_n) {
		strbuf_printf(to, "%s%s", to->len ? "," : "", s->sp_jids.data);
		if (rollback)
			atomic_fetch_add(&w->st->rolled_back, s->sp_n);
		else
			s->n += s->sp_n;
	}
	s->sp_n = 0;
	strbuf_reset(&s->sp_jids);
	return 0;
}

/* Writes what the worker knows but Postgres does not yet: commit times and
 * rolled-back jids. Only after the transactions ended, so it costs them nothing. */
static int flush_records(struct worker *w)
{
	int rc = 0;

	if (w->ntimes) {
		strbuf_reset(&w->sql);
		strbuf_printf(&w->sql, "INSERT INTO chaos_tx (tx, commit_us, kind) VALUES %s", w->times.data);
		rc = run_sql(w, &w->s[0], w->sql.data, NULL);
	}
	if (rc == 0 && w->rolled.len) {
		strbuf_reset(&w->sql);
		strbuf_printf(&w->sql, "INSERT INTO chaos_rolledback (jid) VALUES %s", w->rolled.data);
		rc = run_sql(w, &w->s[0], w->sql.data, NULL);
	}
	strbuf_reset(&w->times);
	strbuf_reset(&w->rolled);
	w->ntimes = 0;
	return rc;
}

/* Notes a transaction's outcome; t_us: the client's clock just before it sent
 * the message that carried COMMIT. */
static void tx_close(struct worker *w, struct session *s, bool committed, long long t_us)
{
	if (committed) {
		strbuf_printf(&w->times, "%s(%lld, %lld, '%s')", w->ntimes ? "," : "", s->tx, t_us,
			      kind_names[s->kind]);
		w->ntimes++;
		atomic_fetch_add(&w->st->committed, s->n);
	} else if (s->n) {
		strbuf_printf(&w->rolled, "%s%s", w->rolled.len ? "," : "", s->jids.data);
		atomic_fetch_add(&w->st->rolled_back, s->n);
	}
}

/* Between transactions only: a flush commits a transaction of its own, and
 * one committed inside a pair scenario would hide the defect it provokes. */
static int maybe_flush(struct worker *w)
{
	return w->ntimes >= 200 || w->rolled.len > 16384 ? flush_records(w) : 0;
}

/* Takes the transaction's xid without staging: a write, or asking for it. */
static int take_xid(struct worker *w, struct session *s)
{
	char sql[80];

	if (rnd(&w->rng) % 2)
		return run_sql(w, s, "SELECT pg_current_xact_id()", NULL);
	snprintf(sql, sizeof(sql), "INSERT INTO chaos_side (worker) VALUES (%d)", w->idx);
	return run_sql(w, s, sql, NULL);
}

/* A savepoint, sometimes before anything else so its subtransaction is what
 * assigns the xid; most are rolled back to. */
static int savepoint_body(struct worker *w, struct session *s)
{
	bool first = rnd(&w->rng) % 3 == 0;

	if (!first && stage(w, s, (int)rnd_range(&w->rng, 1, 3), false) < 0)
		return -1;
	if (run_sql(w, s, "SAVEPOINT sp", "SAVEPOINT") < 0 || stage(w, s, (int)rnd_range(&w->rng, 1, 5), true) < 0 ||
	    savepoint_end(w, s, rnd(&w->rng) % 100 < 60) < 0)
		return -1;
	return rnd(&w->rng) % 2 ? stage(w, s, (int)rnd_range(&w->rng, 1, 3), false) : 0;
}

/* The statements between BEGIN and the end of a multi-statement transaction. */
static int tx_body(struct worker *w, struct session *s)
{
	switch (s->kind) {
	case TX_EARLY:
		if (take_xid(w, s) < 0)
			return -1;
		sleep_ms(rnd_range(&w->rng, 0, 20));
		return stage(w, s, (int)rnd_range(&w->rng, 1, 5), false);
	case TX_SPLIT:
		if (stage(w, s, 1, false) < 0)
			return -1;
		sleep_ms(rnd_range(&w->rng, 0, 10));
		if (stage(w, s, (int)rnd_range(&w->rng, 1, 3), false) < 0)
			return -1;
		sleep_ms(rnd_range(&w->rng, 0, 10));
		return stage(w, s, 1, false);
	case TX_SAVEPOINT:
		return savepoint_body(w, s);
	case TX_HELD:
		if (take_xid(w, s) < 0 || stage(w, s, (int)rnd_range(&w->rng, 1, 5), false) < 0)
			return -1;
		sleep_ms(rnd_range(&w->rng, 100, 400));
		return 0;
	default:
		return -1;
	}
}

/* A producer's mix, in percent: mostly single rows, as the report's pgbench ran. */
static enum tx_kind pick_kind(struct worker *w)
{
	static const int weight[] = {
		[TX_SINGLE] = 40, [TX_MULTI] = 15, [TX_EARLY] = 15, [TX_SPLIT] = 12, [TX_SAVEPOINT] = 15, [TX_HELD] = 3
	};
	int p = (int)(rnd(&w->rng) % 100), k = TX_SINGLE;

	while (k < TX_HELD && (p -= weight[k]) >= 0)
		k++;
	return (enum tx_kind)k;
}

/* One producer transaction; one in ten rolls back. */
static int producer_tx(struct worker *w)
{
	struct session *s = &w->s[0];
	bool rollback = rnd(&w->rng) % 100 < 10;
	const char *end = rollback ? "ROLLBACK" : "COMMIT";
	long long t;

	tx_open(w, s, pick_kind(w));
	if (s->kind == TX_SINGLE || s->kind == TX_MULTI) {
		/* One message, as an application's single INSERT would send. */
		stage_sql(w, s, s->kind == TX_SINGLE ? 1 : (int)rnd_range(&w->rng, 2, MAX_MULTI_ROWS), false, "BEGIN;",
			  rollback ? ";ROLLBACK" : ";COMMIT");
		t = wall_us();
		if (run_sql(w, s, w->sql.data, end) < 0)
			return -1;
		tx_close(w, s, !rollback, t);
		return maybe_flush(w);
	}
	if (run_sql(w, s, "BEGIN", "BEGIN") < 0 || tx_body(w, s) < 0)
		return -1;
	t = wall_us();
	if (run_sql(w, s, end, end) < 0)
		return -1;
	tx_close(w, s, !rollback, t);
	return maybe_flush(w);
}

/*
 * The interleaving that loses a job to a relay that bounds a gap by its
 * snapshot's xmax: N takes an xid; M, with a later xid, stages and so holds a
 * lower id than N's; N stages and commits; the relay reads N's row and passes
 * M's id as a gap, its snapshot's xmax at or below M's xid; M commits only after
 * that. In the variant a third writer X takes an xid between N's and M's and
 * stays open across the read, so M's xid is above the snapshot's xmax.
 *
 * Timing: any transaction with an xid above M's that commits between M's
 * staging and the relay's read (a producer's, or the relay's own batch delete)
 * raises the read's xmax past M's xid and hides the defect. So M's staging and
 * N's commit go back to back, and one scenario in three runs in a quiet moment:
 * producers start nothing new from 4 ms before (the relay finishes its batch
 * and polls at short intervals) to 10 ms after. The gap retires only once every
 * transaction below the read's xmax has ended, a held one (up to 400 ms)
 * included, so M then stays open 15-60 or 100-500 ms, 400-700 ms after a quiet
 * moment. Against the relay with the defect, 35 s runs lost M's job in about a
 * third of the quiet scenarios and one in sixteen of the others. One M in ten
 * rolls back.
 */
static int pair_scenario(struct worker *w, _Atomic int *quiet_flag)
{
	struct session *n = &w->s[0], *m = &w->s[1], *x = &w->s[2];
	bool variant = rnd(&w->rng) % 2, m_commits = rnd(&w->rng) % 10 != 0, quiet = rnd(&w->rng) % 3 == 0;
	long long t;

	tx_open(w, n, TX_PAIR_N);
	tx_open(w, m, quiet ? (variant ? TX_PAIR_M3Q : TX_PAIR_MQ) : variant ? TX_PAIR_M3 : TX_PAIR_M);
	if (run_sql(w, n, "BEGIN", "BEGIN") < 0 || take_xid(w, n) < 0)
		return -1;
	if (variant && (run_sql(w, x, "BEGIN", "BEGIN") < 0 || take_xid(w, x) < 0))
		return -1;
	if (run_sql(w, m, "BEGIN", "BEGIN") < 0)
		return -1;
	if (quiet) {
		atomic_fetch_add(quiet_flag, 1);
		atomic_fetch_add(&w->st->quiet, 1);
		sleep_ms(4);
	}
	if (stage(w, m, 1, false) < 0)
		return -1;
	stage_sql(w, n, 1, false, "", ";COMMIT");
	t = wall_us();
	if (run_sql(w, n, w->sql.data, "COMMIT") < 0)
		return -1;
	tx_close(w, n, true, t);
	if (quiet) {
		sleep_ms(10);
		atomic_fetch_sub(quiet_flag, 1);
	}
	sleep_ms(quiet              ? rnd_range(&w->rng, 400, 700)
		 : rnd(&w->rng) % 2 ? rnd_range(&w->rng, 15, 60)
				    : rnd_range(&w->rng, 100, 500));
	if (variant) {
		if (run_sql(w, x, "COMMIT", "COMMIT") < 0)
			return -1;
		sleep_ms(rnd_range(&w->rng, 5, 20));
		atomic_fetch_add(&w->st->variants, 1);
	}
	t = wall_us();
	if (run_sql(w, m, m_commits ? "COMMIT" : "ROLLBACK", m_commits ? "COMMIT" : "ROLLBACK") < 0)
		return -1;
	atomic_fetch_add(&w->st->scenarios, 1);
	tx_close(w, m, m_commits, t);
	return maybe_flush(w);
}

/* A worker process: producers pace themselves to their share of --rate;
 * pairs run their scenario back to back. */
static int worker_main(void *arg, int idx)
{
	struct steady *c = arg;
	bool pair = idx >= c->o.producers;
	struct worker *w = calloc(1, sizeof(*w));
	double rate = (double)c->o.rate / c->o.producers;
	long long start = mono_ms();
	char name[64];
	int status = 0;

	if (!w)
		return 3;
	w->idx = idx;
	w->rng = c->o.seed * 1000003ULL + (unsigned)idx;
	w->st = &c->sh->w[idx];
	for (int i = 0; i < (pair ? 3 : 1); i++) {
		snprintf(name, sizeof(name), "chaos-%s-%d-%c", pair ? "pair" : "producer", idx, "NMX"[i]);
		if (!(w->s[i].conn = env_pg_connect(&c->env, name)))
			return 3;
	}
	while (!atomic_load(&c->sh->stop) && status == 0) {
		double due = rate * (double)(mono_ms() - start) / 1000.0;
		if (!pair &&
		    ((double)atomic_load(&w->st->staged) > due + MAX_MULTI_ROWS || atomic_load(&c->sh->quiet) > 0)) {
			sleep_ms(1);
			continue;
		}
		if ((pair ? pair_scenario(w, &c->sh->quiet) : producer_tx(w)) < 0)
			status = 3;
	}
	if (status == 0 && flush_records(w) < 0)
		status = 3;
	for (int i = 0; i < 3; i++) {
		if (w->s[i].conn)
			PQfinish(w->s[i].conn);
		strbuf_free(&w->s[i].jids);
		strbuf_free(&w->s[i].sp_jids);
	}
	strbuf_free(&w->sql);
	strbuf_free(&w->times);
	strbuf_free(&w->rolled);
	free(w);
	return status;
}

#define TOTAL(c, f) sum_field((c)->sh->w, sizeof(struct stats), (c)->workers.n, offsetof(struct stats, f))

/* ---- the relay: one process for the whole run ---- */

static int relay_start(struct steady *c)
{
	struct relay_argv a;
	int rc;

	snprintf(c->relay.log, sizeof(c->relay.log), "%s/relay.log", c->env.srv.dir);
	env_relay_argv(&c->env, &c->relay, &a);
	(void)relay_argv_add(&a, "--lock-key", KEYS_LOCK_DEFAULT_TEXT);
	rc = env_relay_start(&c->env, &c->relay, &a, "msg=\"became leader\"", CONNECT_TIMEOUT_MS);
	relay_argv_free(&a);
	return rc;
}

/* False once the relay has exited: only start-up may exit, and this run
 * never stops it before the end. */
static bool relay_alive(struct steady *c)
{
	if (proc_exited(&c->relay.proc)) {
		say("the relay exited on its own (status %d); see %s", proc_wait(&c->relay.proc, 0), c->relay.log);
		c->relay_exited = true;
	}
	return c->relay.proc.pid > 0;
}

/* The same relay holds the lock and took it once: no leader change reset its
 * cursor, which would hide a skipped job until then. */
static void relay_verify(struct steady *c)
{
	char want[64], holder[128];

	snprintf(want, sizeof(want), "stagedrain-%ld", (long)c->relay.proc.pid);
	env_text(&c->env,
		 "SELECT string_agg(a.application_name, ',') FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
		 " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1",
		 holder, sizeof(holder));
	c->lock_ours = relay_alive(c) && strcmp(holder, want) == 0;
	c->leader_lines = logs_count(c->relay.log, "msg=\"became leader\"");
}

/* SIGTERM: the relay must finish its batch and exit 0. */
static void relay_stop(struct steady *c, bool graceful)
{
	if (c->relay.proc.pid > 0 && proc_stop(&c->relay.proc, graceful ? SIGTERM : SIGKILL, 20000) != 0 && graceful) {
		say("the relay did not exit 0 on SIGTERM within 20 s; see %s", c->relay.log);
		c->relay_bad_stop = true;
	}
}

/* ---- the run ---- */

static void progress(struct steady *c)
{
	say("t=%llds staged=%lld committed=%lld rolled-back=%lld interleavings=%lld in-staged_jobs=%lld",
	    (mono_ms() - c->start_ms) / 1000, TOTAL(c, staged), TOTAL(c, committed), TOTAL(c, rolled_back),
	    TOTAL(c, scenarios), env_val(&c->env, "SELECT count(*) FROM staged_jobs"));
}

/* The load: workers stage for --seconds while the relay must stay up. */
static int run_load(struct steady *c)
{
	long long t0 = mono_ms(), end = t0 + c->o.seconds * 1000LL, next = t0 + 10000;

	if (kids_start(&c->workers, &c->env, c->o.producers + c->o.pairs, worker_main, c) < 0)
		return -1;
	while (mono_ms() < end && !interrupted && relay_alive(c)) {
		if (kids_reap(&c->workers, false, "worker") < c->workers.n && c->workers.failures)
			break;
		if (mono_ms() >= next) {
			progress(c);
			next += 10000;
		}
		sleep_ms(100);
	}
	atomic_store(&c->sh->stop, 1);
	c->load_ms = mono_ms() - t0;
	/* Each finishes its transaction (a pair scenario: under a second) and writes its records. */
	end = mono_ms() + 60000;
	while (kids_reap(&c->workers, false, "worker") > 0 && mono_ms() < end && !interrupted)
		sleep_ms(20);
	for (int i = 0; i < c->workers.n; i++)
		if (c->workers.p[i].pid > 0) {
			say("worker %d did not stop within 60 s", i);
			(void)proc_signal(&c->workers.p[i], SIGKILL); /* the reap below counts it as failed */
		}
	(void)kids_reap(&c->workers, true, "worker");
	progress(c);
	return interrupted ? -1 : 0;
}

/* Waits up to --grace for staged_jobs to empty; notes how long it took, or
 * what was left and its first ids. */
static void wait_drained(struct steady *c)
{
	long long t0 = mono_ms(), until = t0 + c->o.grace * 1000LL;

	c->drained_ms = -1;
	while (!interrupted && relay_alive(c)) {
		c->left_after_grace = env_val(&c->env, "SELECT count(*) FROM staged_jobs");
		if (c->left_after_grace == 0) {
			c->drained_ms = mono_ms() - t0;
			return;
		}
		if (mono_ms() > until)
			break;
		sleep_ms(50);
	}
	env_text(&c->env, "SELECT string_agg(id::text, ' ') FROM (SELECT id FROM staged_jobs ORDER BY id LIMIT 12) s",
		 c->stuck_ids, sizeof(c->stuck_ids));
}

/*
 * Latency of every committed job: from the producer's clock just before it
 * sent the message carrying COMMIT (chaos_tx) to the relay's enqueued_at in
 * the job's payload, the relay's clock when it built the batch, just before
 * pushing it (both CLOCK_REALTIME on this machine). The start is a little
 * before the real commit and the end a few ms before the push's reply, so a
 * slow push is not counted; a skipped job, the defect this program is for, is:
 * it never arrives and counts as over the bound.
 */
static int measure_latency(struct steady *c, struct latency *l)
{
	char sql[1200];
	PGresult *res;
	size_t len = 0;
	int rc = 0;

	snprintf(sql, sizeof(sql),
		 "CREATE TEMP TABLE chaos_lat AS"
		 " SELECT c.jid, t.kind, t.tx IS NULL AS untimed, s.enq - t.commit_us AS lat"
		 " FROM chaos_committed c LEFT JOIN chaos_tx t USING (tx) LEFT JOIN"
		 " (SELECT jid, min(enq_us) AS enq FROM chaos_seen WHERE src = 'queue' GROUP BY jid) s USING (jid);"
		 " SELECT count(*), coalesce(max(lat), 0),"
		 " percentile_disc(0.99) WITHIN GROUP (ORDER BY coalesce(lat, %lld)),"
		 " percentile_disc(0.5) WITHIN GROUP (ORDER BY coalesce(lat, %lld)),"
		 " count(*) FILTER (WHERE lat IS NULL OR lat > %lld), count(*) FILTER (WHERE lat IS NULL),"
		 " count(*) FILTER (WHERE lat < 0), count(*) FILTER (WHERE untimed) FROM chaos_lat",
		 LLONG_MAX, LLONG_MAX, c->o.bound_ms * 1000LL);
	res = PQexec(c->env.pg, sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		say("latency query failed: %s", PQerrorMessage(c->env.pg));
		rc = -1;
	} else {
		long long *out[] = { &l->jobs, &l->max_us, &l->p99_us,   &l->p50_us,
				     &l->over, &l->never,  &l->negative, &l->untimed };
		for (int i = 0; i < 8; i++)
			*out[i] = strtoll(PQgetvalue(res, 0, i), NULL, 10);
	}
	PQclear(res);
	if (rc < 0)
		return rc;
	snprintf(sql, sizeof(sql),
		 "SELECT coalesce(kind, '(untimed)'), count(*), count(*) FILTER (WHERE lat IS NULL) FROM chaos_lat"
		 " WHERE lat IS NULL OR lat > %lld GROUP BY 1 ORDER BY 2 DESC",
		 c->o.bound_ms * 1000LL);
	res = PQexec(c->env.pg, sql);
	l->over_by_kind[0] = '\0';
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		for (int i = 0; i < PQntuples(res) && len < sizeof(l->over_by_kind); i++)
			len += (size_t)snprintf(l->over_by_kind + len, sizeof(l->over_by_kind) - len,
						"    %6s jobs of %-10s transactions (%s never arrived)\n",
						PQgetvalue(res, i, 1), PQgetvalue(res, i, 0), PQgetvalue(res, i, 2));
	PQclear(res);
	return 0;
}

static void print_us(const char *label, long long us, bool never)
{
	if (never)
		printf("%s never (a job did not arrive)\n", label);
	else
		printf("%s %.1f ms\n", label, (double)us / 1000.0);
}

static bool report(struct steady *c, const struct results *r, const struct latency *l, int self_rc)
{
	char label[32];
	long long committed = TOTAL(c, committed);
	bool relay_ok = !c->relay_exited && !c->relay_bad_stop && c->lock_ours && c->leader_lines == 1;
	bool ok = r->missing == 0 && r->duplicates == 0 && r->rolled_back == 0 && r->phantoms == 0 &&
		  r->mismatched == 0 && r->order_violations == 0 && r->dead == 0 && r->left_staged == 0 &&
		  c->left_after_grace == 0 && r->unregistered == 0 && r->present == committed &&
		  r->committed_rows == committed && l->jobs == committed && l->over == 0 && l->negative == 0 &&
		  l->untimed == 0 && relay_ok && c->workers.failures == 0 && TOTAL(c, scenarios) > 0 &&
		  TOTAL(c, variants) > 0 && self_rc == 0;

	printf("\nstagedrain steady chaos run (seed %u, %d producers at %d jobs/s, %d interleaving processes,"
	       " 1 relay)\n",
	       c->o.seed, c->o.producers, c->o.rate, c->o.pairs);
	printf("  load                         %.1f s\n", (double)c->load_ms / 1000.0);
	printf("  jobs staged                  %lld (in %lld transactions)\n", TOTAL(c, staged), TOTAL(c, txns));
	printf("  jobs committed               %lld\n", committed);
	printf("  jobs rolled back             %lld (whole transactions and savepoints)\n", TOTAL(c, rolled_back));
	printf("  N/M interleavings            %lld (%lld with a third writer between, %lld in a quiet moment)\n",
	       TOTAL(c, scenarios), TOTAL(c, variants), TOTAL(c, quiet));
	printf("  entries in redis             %lld (in %lld batches)\n", r->entries, r->batches);
	printf("  committed jobs present       %lld\n", r->present);
	printf("  missing                      %lld\n", r->missing);
	printf("  duplicates                   %lld\n", r->duplicates);
	printf("  rolled-back jobs pushed      %lld\n", r->rolled_back);
	printf("  phantoms (unknown entries)   %lld\n", r->phantoms);
	printf("  wrong queue/content          %lld\n", r->mismatched);
	printf("  order violations             %lld\n", r->order_violations);
	printf("  dead-lettered                %lld\n", r->dead);
	if (c->drained_ms >= 0)
		printf("  staged_jobs after the load   empty after %lld ms\n", c->drained_ms);
	else
		printf("  staged_jobs after the load   %lld rows left after %d s (ids %s)\n", c->left_after_grace,
		       c->o.grace, c->stuck_ids);
	printf("  commit -> enqueued_at        %lld jobs timed; p50 %.1f ms", l->jobs - l->untimed,
	       (double)l->p50_us / 1000.0);
	print_us(", p99", l->p99_us, l->p99_us == LLONG_MAX);
	print_us("                               max", l->max_us, l->never > 0);
	snprintf(label, sizeof(label), "over %d ms", c->o.bound_ms);
	printf("  %-28s %lld (never arrived %lld, pushed before COMMIT %lld, untimed %lld)\n", label, l->over, l->never,
	       l->negative, l->untimed);
	fputs(l->over_by_kind, stdout);
	printf("  relay                        pid %s, \"became leader\" %d time(s), holds the lock at the end: %s,"
	       " SIGTERM exit: %s\n",
	       c->relay_exited ? "exited during the run" : "unchanged", c->leader_lines, c->lock_ours ? "yes" : "no",
	       c->relay_bad_stop ? "not 0" : "0");
	printf("  worker failures              %d\n", c->workers.failures);
	return report_end(ok,
			  self_rc < 0    ? NULL
			  : self_rc == 0 ? "injected 5 faults: all caught"
					 : "injected 5 faults: NOT ALL CAUGHT",
			  c->start_ms);
}

static const char usage_text[] =
	"usage: chaos-steady --bin PATH --services PATH [--seconds N] [--rate JOBS_PER_S]\n"
	"             [--producers N] [--pairs N] [--grace S] [--bound-ms MS] [--seed N] [--keep]\n";

static int parse_args(struct opts *o, int argc, char **argv)
{
	const struct flag flags[] = {
		{ "bin", FLAG_STR, &o->bin },
		{ "services", FLAG_STR, &o->services },
		{ "seconds", FLAG_INT, &o->seconds },
		{ "rate", FLAG_INT, &o->rate },
		{ "producers", FLAG_INT, &o->producers },
		{ "pairs", FLAG_INT, &o->pairs },
		{ "grace", FLAG_INT, &o->grace },
		{ "bound-ms", FLAG_INT, &o->bound_ms },
		{ "seed", FLAG_UINT, &o->seed },
	};

	*o = (struct opts){ .seconds = 120,
			    .rate = 1500,
			    .producers = 4,
			    .pairs = 3,
			    .grace = 15,
			    .bound_ms = 2000,
			    .seed = (unsigned)time(NULL) };
	if (parse_flags(argc, argv, flags, sizeof(flags) / sizeof(flags[0]), &o->keep) < 0)
		return usage(usage_text);
	if (!o->bin || !o->services || o->seconds < 1 || o->rate < 1 || o->producers < 1 || o->pairs < 1 ||
	    o->producers + o->pairs > MAX_WORKERS || o->grace < 1 || o->bound_ms < 1)
		return usage(usage_text);
	return 0;
}

static int run(struct steady *c, struct results *res, struct latency *lat, struct results *tampered, int *self_rc)
{
	if (env_setup(&c->env, c->o.bin, c->o.services, steady_sql) < 0)
		return -1;
	say("servers and the relay's log in %s", c->env.srv.dir);
	if (relay_start(c) < 0)
		return -1;
	say("staging for %d s: %d producers at %d jobs/s, %d interleaving processes; one relay, no faults",
	    c->o.seconds, c->o.producers, c->o.rate, c->o.pairs);
	if (run_load(c) < 0)
		return -1;
	say("load done; waiting up to %d s for staged_jobs to empty", c->o.grace);
	wait_drained(c);
	relay_verify(c);
	relay_stop(c, true);
	say("checking redis");
	if (seen_load(&c->env, &res->entries) < 0 || check_redis(&c->env, res) < 0 || measure_latency(c, lat) < 0)
		return -1;
	*self_rc = check_self_test(&c->env, res, tampered);
	return 0;
}

int main(int argc, char **argv)
{
	struct steady c;
	struct results res = { 0 }, tampered = { 0 };
	struct latency lat = { 0 };
	int self_rc = -1;
	bool passed = false;

	memset(&c, 0, sizeof(c));
	if (parse_args(&c.o, argc, argv) != 0)
		return 2;
	if (!(c.sh = chaos_begin(sizeof(*c.sh))))
		return 1;
	c.start_ms = mono_ms();
	if (run(&c, &res, &lat, &tampered, &self_rc) == 0)
		passed = report(&c, &res, &lat, self_rc);
	else
		say(interrupted ? "interrupted" : "the run could not complete");
	atomic_store(&c.sh->stop, 1);
	kids_kill(&c.workers);
	relay_stop(&c, false);
	env_teardown(&c.env, passed && !c.o.keep);
	munmap(c.sh, sizeof(*c.sh));
	return passed ? 0 : 1;
}
