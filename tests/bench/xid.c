/* The long transaction that holds an xid: an idle transaction that wrote
 * something, or a prepared one, pins every snapshot's xmin while producers
 * stage and roll back; halfway through, the relay is killed and a new one
 * starts under the same holder. The relay's own per-batch figures must stay
 * flat, and nothing may be lost or pushed that rolled back. */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HOLDER_GID "stagedrain_bench_holder"
/* The reference: the same load with no holder yet, this long. */
#define BEFORE_SECONDS 10

enum holder { HOLDER_IDLE, HOLDER_PREPARED };

static const char *const holder_names[] = { "idle", "prepared" };

/* Seconds since the load began, [from, to). */
struct span {
	int from, to;
};

/* One run's measurements, turned into table rows by report(). */
struct xid_result {
	const char *name;
	struct batch_rec *b; /* both relays' batches, times since the load began */
	size_t nb, capb;
	struct batch_rec *pre; /* the first relay's, since the reference load began */
	size_t npre, cappre;
	int seconds, restart_at; /* restart_at: the new relay's first second leading */
	double lead_wait_s;      /* from the new relay's start to its leading */
	long long drained_at_restart, dead_at_restart, backlog_max[2];
	double rolled_back_pct;
	long long lost, dup, pushed_rolled_back, left;
};

/* The batches the relay ran during a window, whole: one that began before it
 * or ended after it counts too, so a window inside one long batch is not empty. */
struct window {
	long long batches, timed, jobs, gaps_max;
	double fetch_us, total_us;
};

/* Prepared transactions need max_prepared_transactions > 0, which only a
 * server start reads: set it with ALTER SYSTEM and restart the bench's Postgres. */
void xid_setup_servers(const struct bench_env *env)
{
	PGconn *c = pg_connect(env);
	char log[600];

	if (sql(c, "SELECT current_setting('max_prepared_transactions')::int") > 0) {
		PQfinish(c);
		return;
	}
	note("xid-holder: restarting postgres with max_prepared_transactions = 2");
	sql(c, "ALTER SYSTEM SET max_prepared_transactions = 2");
	PQfinish(c);
	snprintf(log, sizeof(log), "%s/pg-restart.log", env->srv.dir);
	if (services_run(&env->srv, "pg-restart", log) != 0)
		die("could not restart postgres; see %s", log);
	c = pg_connect(env);
	if (sql(c, "SELECT current_setting('max_prepared_transactions')::int") < 1)
		die("max_prepared_transactions is still 0 after the restart");
	PQfinish(c);
}

/*
 * Takes an xid and keeps it. The idle holder writes to a side table and stays
 * idle in transaction. The prepared holder stages a job (its id is a gap that
 * must stay open, and the job must never be pushed: it rolls back at the end)
 * and prepares, which frees its session but not its xid. Returns the xid.
 */
static long long holder_begin(PGconn *h, enum holder kind)
{
	long long xid;

	sql(h, "BEGIN");
	if (kind == HOLDER_IDLE)
		sql(h, "INSERT INTO bench_holder_side (note) VALUES ('held')");
	else
		sql(h, "INSERT INTO staged_jobs (queue, job_class) VALUES ('holder', 'HeldJob')");
	xid = sql(h, "SELECT pg_current_xact_id()::text::int8");
	if (kind == HOLDER_PREPARED)
		sql(h, "PREPARE TRANSACTION '" HOLDER_GID "'");
	return xid;
}

static void holder_end(PGconn *h, enum holder kind)
{
	sql(h, kind == HOLDER_IDLE ? "ROLLBACK" : "ROLLBACK PREPARED '" HOLDER_GID "'");
}

/* The k-th fifth of a span. */
static struct span fifth(struct span s, int k)
{
	int len = s.to - s.from;

	return (struct span){ s.from + len * k / 5, s.from + len * (k + 1) / 5 };
}

/* The windows compared: the first and last minute of a phase of five minutes
 * or more, else its first and last fifth. */
static const char *window_word(struct span s)
{
	return s.to - s.from >= 300 ? "minute" : "fifth";
}

static struct span first_window(struct span s)
{
	return s.to - s.from >= 300 ? (struct span){ s.from, s.from + 60 } : fifth(s, 0);
}

static struct span last_window(struct span s)
{
	return s.to - s.from >= 300 ? (struct span){ s.to - 60, s.to } : fifth(s, 4);
}

static struct window batches_in(const struct batch_rec *v, size_t n, struct span s)
{
	struct window w = { 0, 0, 0, -1, 0, 0 };
	long long from = (long long)s.from * 1000000, to = (long long)s.to * 1000000;

	for (size_t i = 0; i < n; i++) {
		const struct batch_rec *b = &v[i];
		double total = b->timed ? b->fetch_us + b->push_us + b->commit_us : 0;
		if (b->end_us < from || (double)b->end_us - total >= (double)to)
			continue;
		w.batches++;
		w.jobs += b->jobs;
		if (b->gaps > w.gaps_max)
			w.gaps_max = b->gaps;
		if (b->timed) {
			w.timed++;
			w.fetch_us += b->fetch_us;
			w.total_us += total;
		}
	}
	return w;
}

static struct window in_span(const struct xid_result *x, struct span s)
{
	return batches_in(x->b, x->nb, s);
}

/*
 * Per batch, in ms: the fetch alone, or fetch+push+commit. Infinite when the
 * relay ran no batch at all in the window: the producers commit all along, so
 * it was stuck (failing reads, or waiting for the lock).
 */
static double fetch_ms(const struct window *w)
{
	return !w->batches ? INFINITY : w->timed ? w->fetch_us / (double)w->timed / 1000 : NAN;
}

static double batch_ms(const struct window *w)
{
	return !w->batches ? INFINITY : w->timed ? w->total_us / (double)w->timed / 1000 : NAN;
}

static double jobs_per_batch(const struct window *w)
{
	return w->batches ? (double)w->jobs / (double)w->batches : NAN;
}

static void add(const struct xid_result *x, const char *what, int decimals, double v)
{
	char fig[96];

	snprintf(fig, sizeof(fig), "%s: %s", x->name, what);
	table_add("xid-holder", fig, decimals, v);
}

/* A row judged against its target; "flat" for the ratios, "0" for losses. */
static void judged(const struct xid_result *x, const char *what, int decimals, double v, double target,
		   const char *text)
{
	char fig[96];

	snprintf(fig, sizeof(fig), "%s: %s", x->name, what);
	table_add("xid-holder", fig, decimals, v);
	table_target("xid-holder", fig, CMP_LE, target, text);
	if (target > 0)
		table_words("xid-holder", fig, "PASS (flat)", "MISS (not flat)");
}

/* Over time: fetch per batch and the relay's gap count, per fifth of each phase. */
static void report_fifths(const struct xid_result *x, struct span phase, const char *label)
{
	char what[80];

	for (int k = 0; k < 5; k++) {
		struct window b = in_span(x, fifth(phase, k));
		snprintf(what, sizeof(what), "fetch per batch, %s %d/5 (ms)", label, k + 1);
		add(x, what, 2, fetch_ms(&b));
		snprintf(what, sizeof(what), "gaps, %s %d/5 (max)", label, k + 1);
		add(x, what, 0, b.gaps_max < 0 ? NAN : (double)b.gaps_max);
	}
}

static void report(const struct xid_result *x, int held_seconds)
{
	struct span held = { 0, held_seconds }, restarted = { x->restart_at, x->seconds };
	struct window first = in_span(x, first_window(held)), last_held = in_span(x, last_window(held)),
		      last_re = in_span(x, last_window(restarted)),
		      before = batches_in(x->pre, x->npre, (struct span){ 0, BEFORE_SECONDS });
	const char *w = window_word(held), *wr = window_word(restarted);
	char what[80];

	report_fifths(x, held, "held");
	report_fifths(x, restarted, "restarted");
	/* Not judged: what a batch costs with no holder, for scale (the first
	 * window may already be slow). */
	add(x, "fetch per batch, no holder yet (ms)", 2, fetch_ms(&before));
	add(x, "batch time, no holder yet (ms)", 2, batch_ms(&before));
	snprintf(what, sizeof(what), "fetch per batch, first %s (ms)", w);
	add(x, what, 2, fetch_ms(&first));
	snprintf(what, sizeof(what), "fetch per batch, last %s held (ms)", w);
	add(x, what, 2, fetch_ms(&last_held));
	snprintf(what, sizeof(what), "fetch per batch, last %s restarted (ms)", wr);
	add(x, what, 2, fetch_ms(&last_re));
	snprintf(what, sizeof(what), "batch time, first %s (ms)", w);
	add(x, what, 2, batch_ms(&first));
	snprintf(what, sizeof(what), "batch time, last %s held (ms)", w);
	add(x, what, 2, batch_ms(&last_held));
	snprintf(what, sizeof(what), "batch time, last %s restarted (ms)", wr);
	add(x, what, 2, batch_ms(&last_re));
	snprintf(what, sizeof(what), "jobs per batch, first %s", w);
	add(x, what, 1, jobs_per_batch(&first));
	snprintf(what, sizeof(what), "jobs per batch, last %s held", w);
	add(x, what, 1, jobs_per_batch(&last_held));
	snprintf(what, sizeof(what), "jobs per batch, last %s restarted", wr);
	add(x, what, 1, jobs_per_batch(&last_re));

	/* The judged figures: each last window against the holder's first. */
	snprintf(what, sizeof(what), "fetch, last %s held / first", w);
	judged(x, what, 2, fetch_ms(&last_held) / fetch_ms(&first), 1.5, "<= 1.50");
	snprintf(what, sizeof(what), "batch time, last %s held / first", w);
	judged(x, what, 2, batch_ms(&last_held) / batch_ms(&first), 1.5, "<= 1.50");
	snprintf(what, sizeof(what), "fetch, last %s restarted / first", wr);
	judged(x, what, 2, fetch_ms(&last_re) / fetch_ms(&first), 1.5, "<= 1.50");
	snprintf(what, sizeof(what), "batch time, last %s restarted / first", wr);
	judged(x, what, 2, batch_ms(&last_re) / batch_ms(&first), 1.5, "<= 1.50");

	add(x, "rows drained under the holder, at restart", 0, (double)x->drained_at_restart);
	add(x, "dead tuples at restart", 0, (double)x->dead_at_restart);
	add(x, "restarted relay: wait for the lock (s)", 1, x->lead_wait_s);
	add(x, "backlog max, held (jobs)", 0, (double)x->backlog_max[0]);
	add(x, "backlog max, restarted (jobs)", 0, (double)x->backlog_max[1]);
	add(x, "staging transactions rolled back (%)", 1, x->rolled_back_pct);
	judged(x, "committed jobs not delivered", 0, (double)x->lost, 0, "0");
	judged(x, "committed jobs duplicated", 0, (double)x->dup, 0, "0");
	judged(x, "rolled-back jobs pushed", 0, (double)x->pushed_rolled_back, 0, "0");
	judged(x, "rows left in staged_jobs", 0, (double)x->left, 0, "0");
}

static long long dead_tuples(PGconn *c)
{
	return sql(c, "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'staged_jobs'");
}

/* Once the holder has ended every row can go: waits up to 60 s more for the table to empty. */
static long long wait_table_empty(PGconn *c)
{
	long long end = mono_us() + 60000000, left;

	while ((left = sql(c, "SELECT count(*) FROM staged_jobs")) > 0 && mono_us() < end) {
		check_stop();
		sleep_ms(100);
	}
	return left;
}

/* Jobs the consumer saw that no COMMIT returned for: rolled back, yet pushed. */
static long long pushed_uncommitted(const struct load *l)
{
	long long n = 0;

	for (long long s = 0; s < l->nseq; s++)
		n += l->seen[s] && !l->commit_us[s];
	return n;
}

/* The same load for a few seconds before the holder begins, on its own queue;
 * returns when it began (wall clock), and counts what it lost. */
static long long before_holder(const struct load *main_load, struct xid_result *x)
{
	struct load l = *main_load;
	long long t0_wall;
	struct lat lat;

	l.queue = "before";
	l.seconds = BEFORE_SECONDS;
	load_start(&l);
	t0_wall = wall_us() - (mono_us() - l.start_us);
	load_finish(&l, 60);
	check_stop();
	if (l.failed)
		die("xid-holder load: %s", l.err);
	lat = latencies(&l, 0, mono_us() + 1);
	x->lost += lat.lost;
	x->dup += lat.dup;
	x->pushed_rolled_back += pushed_uncommitted(&l);
	load_free(&l);
	return t0_wall;
}

/*
 * Drives the load for both phases: samples the backlog, and at held seconds
 * kills the relay (as a crash would) and starts a new one under the same
 * holder, whose first reads find every row drained so far dead below them.
 */
static void run_phases(const struct bench_env *env, struct load *l, struct relay *rel, struct xid_result *x, int held,
		       PGconn *stats)
{
	int phase = 0;
	long long t;
	char name[64];

	while (!interrupted && !l->failed) {
		long long el = mono_us() - l->start_us, backlog = load_committed(l) - load_consumed(l);
		if (el >= (long long)x->seconds * 1000000)
			break;
		if (backlog > x->backlog_max[phase])
			x->backlog_max[phase] = backlog;
		if (phase == 0 && el >= (long long)held * 1000000) {
			x->drained_at_restart = env->opts->xid_backlog + load_consumed(l);
			x->dead_at_restart = dead_tuples(stats);
			note("xid-holder %s: killing the relay and starting another; %lld rows drained under "
			     "the "
			     "holder, %lld dead tuples",
			     x->name, x->drained_at_restart, x->dead_at_restart);
			relay_kill(rel);
			snprintf(name, sizeof(name), "xid-%s-restarted", x->name);
			relay_start(rel, env, name, "debug");
			t = mono_us();
			/* Not a probe job: under a slow relay it would wait behind the backlog.
			 * The killed relay's backend keeps the lock until its statement ends. */
			if (relay_wait_log(rel, "\"leading\"", 120000) < 0)
				die("the restarted relay did not lead within 120 s; see %s", rel->log);
			x->lead_wait_s = (double)(mono_us() - t) / 1e6;
			x->restart_at = (int)((mono_us() - l->start_us + 999999) / 1000000);
			phase = 1;
		}
		sleep_ms(200);
	}
}

static void xid_part(const struct bench_env *env, int run, enum holder kind)
{
	const struct bench_opts *o = env->opts;
	int held = o->xid_seconds;
	struct load l = { .env = env,
			  .table = "staged_jobs",
			  .queue = "default",
			  .rate = o->xid_rate,
			  .rows_per_tx = 1,
			  .producers = 2,
			  .seconds = 2 * held,
			  .consume = true,
			  .rollback_pct = o->xid_rollback };
	struct xid_result x = { .name = holder_names[kind], .seconds = 2 * held, .restart_at = 2 * held };
	struct relay rel = { { 0, -1 }, "" };
	PGconn *holder = pg_connect(env), *stats = pg_connect(env);
	redisContext *r = redis_connect(env);
	char name[64], logs[2][1024], h[24];
	long long xid, t0_wall, pre_wall;
	struct lat lat;

	note("xid-holder run %d: %s holder, %d staging tx/s (%d%% rolled back) for %d s, relay killed and "
	     "restarted, %d s more",
	     run + 1, x.name, o->xid_rate, o->xid_rollback, held, held);
	bench_reset(env);
	sql(stats, "CREATE TABLE IF NOT EXISTS bench_holder_side (note text)");
	snprintf(name, sizeof(name), "xid-%s", x.name);
	relay_start(&rel, env, name, "debug");
	snprintf(logs[0], sizeof(logs[0]), "%s", rel.log);
	wait_relay_ready(env, &rel);
	pre_wall = before_holder(&l, &x);
	xid = holder_begin(holder, kind);
	if (o->xid_backlog > 0) {
		note("xid-holder %s: holder xid %lld; draining a backlog of %s under it", x.name, xid,
		     human(o->xid_backlog, h, sizeof(h)));
		stage_backlog(env, "backlog", 0, o->xid_backlog);
		wait_llen(r, "queue:backlog", o->xid_backlog, &rel);
		x.dup += redis_int(r, "LLEN queue:backlog") - o->xid_backlog;
		redis_ok(r, "DEL queue:backlog");
	}
	load_start(&l);
	t0_wall = wall_us() - (mono_us() - l.start_us);
	run_phases(env, &l, &rel, &x, held, stats);
	snprintf(logs[1], sizeof(logs[1]), "%s", rel.log);
	load_join_producers(&l);
	check_stop();
	/* Losses once the holder has ended: while it is open, a slow relay may
	 * only be late, and the check is of what it delivers, not how fast. */
	holder_end(holder, kind);
	note("xid-holder %s: holder ended; waiting for the relay to deliver the rest", x.name);
	load_finish(&l, 180);
	check_stop();
	if (l.failed)
		die("xid-holder load: %s", l.err);
	lat = latencies(&l, 0, mono_us() + 1);
	x.lost += lat.lost;
	x.dup += lat.dup + redis_int(r, "LLEN queue:backlog") + redis_int(r, "LLEN queue:before");
	x.pushed_rolled_back += pushed_uncommitted(&l) + redis_int(r, "LLEN queue:holder");
	x.rolled_back_pct = 100.0 * (double)l.rolled_back / (double)(l.rolled_back + l.committed);
	x.left = wait_table_empty(stats);
	if (relay_stop(&rel) != 0)
		note("the relay did not exit cleanly; see %s", rel.log);

	relay_log_list(logs[0], pre_wall, &x.pre, &x.npre, &x.cappre);
	relay_log_list(logs[0], t0_wall, &x.b, &x.nb, &x.capb);
	relay_log_list(logs[1], t0_wall, &x.b, &x.nb, &x.capb);
	report(&x, held);
	free(x.b);
	free(x.pre);
	load_free(&l);
	redisFree(r);
	PQfinish(holder);
	PQfinish(stats);
}

void scenario_xid_holder(const struct bench_env *env, int run)
{
	if (list_has(env->opts->xid_holders, "idle"))
		xid_part(env, run, HOLDER_IDLE);
	if (list_has(env->opts->xid_holders, "prepared"))
		xid_part(env, run, HOLDER_PREPARED);
}
