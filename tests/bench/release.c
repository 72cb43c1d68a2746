/* The release scenario (`--only release`): --jobs jobs held behind a cap on
 * queue default, then released as a consumer frees the list, once with no
 * other session and once with a REPEATABLE READ transaction open: a release
 * must cost the same per batch at the end of the backlog as at its start. */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* What the consumer counted, by each job's args[0] (its row's number), and
 * what the tables held at the end. */
struct tally {
	unsigned char *seen;
	long long n; /* jobs staged, numbered 0..n-1 */
	long long distinct, dup, strange;
	long long longest; /* the longest the list was seen */
	long long left;    /* rows left in staged_jobs and staged_jobs_held */
	long long dead;    /* staged_jobs_held's dead tuples (what a long transaction keeps) */
};

/* Per-batch figures over a slice of the release's batches: medians, so that
 * one batch that met a checkpoint on this shared machine does not decide. */
struct slice {
	long long batches, released;
	double total_us, release_us; /* fetch+push+commit, and the release's share of fetch */
};

/* Nine jobs in ten are tenant big's; the tenth spreads over 100 small tenants,
 * so the first rounds mix 101 tenants and the later ones hold big's alone. */
static void stage_tenants(const struct bench_env *env, long long n)
{
	PGconn *c = pg_connect(env);

	sql(c,
	    "INSERT INTO staged_jobs (queue, job_class, args, tenant)"
	    " SELECT 'default', 'BenchJob', jsonb_build_array(n),"
	    " CASE WHEN n %% 10 <> 0 THEN 'big' ELSE 'small-' || (n / 10 %% 100) END"
	    " FROM generate_series(0, %lld) n",
	    n - 1);
	sql(c, "VACUUM ANALYZE staged_jobs");
	PQfinish(c);
}

/* Waits until the relay has read every staged row: cap jobs in the list, the
 * rest in staged_jobs_held. Then vacuums both tables, so that the release
 * starts from a clean heap and index whatever the hold phase left. */
static void wait_held(const struct bench_env *env, redisContext *r, int cap, const struct relay *rel)
{
	PGconn *c = pg_connect(env);
	long long n = env->opts->jobs, end = mono_us() + (600 + n / 1000) * 1000000LL, held, len;

	while (sql(c, "SELECT count(*) FROM (SELECT 1 FROM staged_jobs LIMIT 1) s") > 0) {
		check_stop();
		if (proc_hwm_kib(rel->proc.pid) < 0)
			die("the relay exited while holding the backlog; see %s", rel->log);
		if (mono_us() > end)
			die("release: the relay did not read the backlog in time; see %s", rel->log);
		sleep_ms(500);
	}
	held = sql(c, "SELECT count(*) FROM staged_jobs_held");
	len = redis_int(r, "LLEN queue:default");
	if (len < cap || held + len != n)
		die("release: after the hold, %lld jobs in queue:default (cap %d) and %lld held, of %lld staged; see %s",
		    len, cap, held, n, rel->log);
	sql(c, "VACUUM ANALYZE staged_jobs");
	sql(c, "VACUUM ANALYZE staged_jobs_held");
	PQfinish(c);
}

/* Pops the whole list and counts each job by the number in its args. */
static void pop_all(redisContext *r, struct tally *t)
{
	redisReply *rep = redis_or(r, die_msg, "RPOP queue:default %lld", t->n);

	for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
		const char *a = strstr(rep->element[i]->str, "\"args\":[");
		long long k = a ? strtoll(a + 8, NULL, 10) : -1;
		if (k < 0 || k >= t->n)
			t->strange++;
		else if (t->seen[k]++ == 0)
			t->distinct++;
		else
			t->dup++;
	}
	freeReplyObject(rep);
}

/* The consumer: empties the list each time the relay has filled it to the cap
 * (or has released the last jobs), until every job arrived or 60 s pass
 * without one. */
static void consume(redisContext *r, struct tally *t, int cap, const struct relay *rel)
{
	long long progress = mono_us(), len;

	while (t->distinct < t->n) {
		check_stop();
		len = redis_int(r, "LLEN queue:default");
		if (len > t->longest)
			t->longest = len;
		if (len > 0 && (len >= cap || len >= t->n - t->distinct)) {
			pop_all(r, t);
			progress = mono_us();
		} else if (mono_us() - progress > 60000000) {
			note("release: no job released for 60 s, %lld of %lld arrived; see %s", t->distinct, t->n,
			     rel->log);
			return;
		} else {
			sleep_ms(1);
		}
	}
}

/* The median of v (sorted in place); NAN when empty. */
static double median(double *v, size_t n)
{
	if (n == 0)
		return NAN;
	qsort(v, n, sizeof(*v), cmp_dbl);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The slice of batches from index `from` (inclusive) to `to`. */
static struct slice slice_of(const struct batch_rec *v, size_t from, size_t to)
{
	struct slice s = { (long long)(to - from), 0, NAN, NAN };
	double *tot = malloc(sizeof(double) * (to > from ? to - from : 1));
	double *rel = malloc(sizeof(double) * (to > from ? to - from : 1));

	if (!tot || !rel)
		die("out of memory");
	for (size_t i = from; i < to; i++) {
		s.released += v[i].released;
		tot[i - from] = v[i].fetch_us + v[i].push_us + v[i].commit_us;
		rel[i - from] = v[i].release_us;
	}
	s.total_us = median(tot, to - from);
	s.release_us = median(rel, to - from);
	free(tot);
	free(rel);
	return s;
}

/* Every batch of the relay's log (the caller frees them); their number. */
static size_t log_batches(const struct relay *rel, struct batch_rec **out)
{
	size_t n = 0, cap = 0;

	*out = NULL;
	if (relay_log_list(rel->log, 0, out, &n, &cap) < 0)
		die("could not read %s", rel->log);
	return n;
}

/* The median time of the batches that only moved rows to the held table. */
static double hold_median(const struct batch_rec *v, size_t n)
{
	double *t = malloc(sizeof(*t) * (n ? n : 1)), m;
	size_t k = 0;

	if (!t)
		die("out of memory");
	for (size_t i = 0; i < n; i++)
		if (v[i].timed && v[i].held > 0 && v[i].released <= 0)
			t[k++] = v[i].fetch_us + v[i].push_us + v[i].commit_us;
	m = median(t, k);
	free(t);
	return m;
}

/* Keeps, in order, the batches that released held jobs; their number. */
static size_t releasing(struct batch_rec *v, size_t n, const struct relay *rel)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (v[i].timed && v[i].released > 0 && !isnan(v[i].release_us))
			v[k++] = v[i];
	if (k == 0)
		note("release: %s has no batch relayed line with released > 0 and release_us", rel->log);
	return k;
}

/* One side's rows: medians of the first and last tenth, their ratios, losses. */
static void report(const char *who, const struct slice *a, const struct slice *z, double hold_us, const struct tally *t,
		   int cap)
{
	char fig[96], target[48];

	snprintf(fig, sizeof(fig), "%s: hold, fetch+push+commit per batch (ms)", who);
	table_add("release", fig, 2, hold_us / 1000);
	snprintf(fig, sizeof(fig), "%s: fetch+push+commit, first 10%% (ms)", who);
	table_add("release", fig, 2, a->total_us / 1000);
	snprintf(fig, sizeof(fig), "%s: fetch+push+commit, last 10%% (ms)", who);
	table_add("release", fig, 2, z->total_us / 1000);
	snprintf(fig, sizeof(fig), "%s: release_us, first 10%% (ms)", who);
	table_add("release", fig, 2, a->release_us / 1000);
	snprintf(fig, sizeof(fig), "%s: release_us, last 10%% (ms)", who);
	table_add("release", fig, 2, z->release_us / 1000);
	snprintf(fig, sizeof(fig), "%s: jobs released per batch, first 10%%", who);
	table_add("release", fig, 0, a->batches ? (double)a->released / (double)a->batches : NAN);
	snprintf(fig, sizeof(fig), "%s: jobs released per batch, last 10%%", who);
	table_add("release", fig, 0, z->batches ? (double)z->released / (double)z->batches : NAN);
	snprintf(fig, sizeof(fig), "%s: batch time last / first 10%%", who);
	table_add("release", fig, 2, z->total_us / a->total_us);
	table_target("release", fig, CMP_LE, 1.5, "<= 1.50");
	snprintf(fig, sizeof(fig), "%s: release_us last / first 10%%", who);
	table_add("release", fig, 2, z->release_us / a->release_us);
	table_target("release", fig, CMP_LE, 1.5, "<= 1.50");
	snprintf(fig, sizeof(fig), "%s: lost jobs", who);
	table_add("release", fig, 0, (double)(t->n - t->distinct));
	table_target("release", fig, CMP_LE, 0, "0");
	snprintf(fig, sizeof(fig), "%s: duplicated or unknown jobs", who);
	table_add("release", fig, 0, (double)(t->dup + t->strange));
	table_target("release", fig, CMP_LE, 0, "0");
	/* The cap may be overshot by what one batch carries. */
	snprintf(fig, sizeof(fig), "%s: longest queue:default seen (jobs)", who);
	snprintf(target, sizeof(target), "<= %d (cap + batch)", 2 * cap);
	table_add("release", fig, 0, (double)t->longest);
	table_target("release", fig, CMP_LE, 2 * cap, target);
	snprintf(fig, sizeof(fig), "%s: staged_jobs_held dead tuples at the end", who);
	table_add("release", fig, 0, (double)t->dead);
	snprintf(fig, sizeof(fig), "%s: rows left staged or held", who);
	table_add("release", fig, 0, (double)t->left);
	table_target("release", fig, CMP_LE, 0, "0");
}

/* Reads the relay's log and adds one side's rows to the table. */
static void judge(const char *who, const struct relay *rel, const struct tally *t, int cap)
{
	struct batch_rec *v;
	struct slice a, z;
	size_t n = log_batches(rel, &v), tenth;
	double hold_us = hold_median(v, n);

	n = releasing(v, n, rel);
	tenth = n / 10 ? n / 10 : 1;
	a = slice_of(v, 0, n < tenth ? n : tenth);
	z = slice_of(v, n > tenth ? n - tenth : 0, n);
	report(who, &a, &z, hold_us, t, cap);
	free(v);
}

/* One part: hold the backlog, open the long transaction if asked, release it all. */
static void release_part(const struct bench_env *env, int run, bool long_tx)
{
	const char *who = long_tx ? "long tx" : "no long tx";
	int cap = env->opts->batch_size;
	char limit[64], h[24];
	const char *const flags[] = { "--queue-limit", limit, "--poll-interval", "10ms", NULL };
	struct tally t = { NULL, env->opts->jobs, 0, 0, 0, 0, 0, 0 };
	redisContext *r = redis_connect(env);
	PGconn *c = pg_connect(env), *holder = pg_connect(env);
	struct relay rel;

	note("release run %d, %s: %s jobs held behind --queue-limit default=%d", run + 1, who, human(t.n, h, sizeof(h)),
	     cap);
	if (!(t.seen = calloc((size_t)t.n, 1)))
		die("out of memory");
	snprintf(limit, sizeof(limit), "default=%d", cap);
	bench_reset(env);
	stage_tenants(env, t.n);
	relay_start_with(&rel, env, long_tx ? "release-long" : "release", "debug", flags);
	wait_held(env, r, cap, &rel);
	if (long_tx) {
		sql(holder, "BEGIN ISOLATION LEVEL REPEATABLE READ");
		sql(holder, "SELECT count(*) FROM staged_jobs_held"); /* takes the snapshot that pins xmin */
	}
	note("release run %d, %s: freeing queue:default each time it holds %d jobs", run + 1, who, cap);
	consume(r, &t, cap, &rel);
	sleep_ms(500); /* a duplicate pushed after the last job would land now */
	if (relay_stop(&rel) != 0)
		note("the relay did not exit cleanly; see %s", rel.log);
	pop_all(r, &t);
	/* A session's statistics are sent as it ends, so a moment after the
	 * relay's they are in; the long transaction is still open, so nothing
	 * it keeps has been vacuumed. */
	sleep_ms(200);
	t.left = sql(c, "SELECT (SELECT count(*) FROM staged_jobs) + (SELECT count(*) FROM staged_jobs_held)");
	t.dead = sql(c, "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'staged_jobs_held'");
	if (long_tx)
		sql(holder, "ROLLBACK");
	judge(who, &rel, &t, cap);
	free(t.seen);
	PQfinish(holder);
	PQfinish(c);
	redisFree(r);
}

void scenario_release(const struct bench_env *env, int run)
{
	release_part(env, run, false);
	check_stop();
	release_part(env, run, true);
}
