/* --once: when the run is over, and the one line saying what it leaves behind (once.h). */
#include "fmacros.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "drain.h"
#include "lock_holder.h"
#include "log.h"
#include "once.h"

/* Queues and keys named in the line at most; the rest are counted. */
#define ONCE_NAMES 5

bool once_over(struct drain *d, long long cursor_before)
{
	struct once *o = &d->once;

	if (d->release.paused_ms)
		return true;
	if (o->moved > 0 || d->gaps.cursor != cursor_before)
		return false;
	if (o->all_read)
		return true;
	o->read_all = true;
	return false;
}

/* The lock's holder as Postgres shows it, into o->leader. */
static void name_leader(struct drain *d)
{
	struct lock_holder h;

	if (lock_holder_read(&d->pg, &h) < 0)
		snprintf(d->once.leader, sizeof(d->once.leader), "who holds it could not be read: %s", d->pg.errstr);
	else
		lock_holder_describe(&h, d->once.leader, sizeof(d->once.leader));
}

bool once_stop_waiting(struct drain *d, long long since_ms)
{
	if (!d->cfg->once || clock_mono_ms() - since_ms < ONCE_LOCK_WAIT_MS)
		return false;
	d->once.gave_up = true;
	name_leader(d);
	return true;
}

bool once_trouble_over(struct drain *d, bool failed)
{
	struct once *o = &d->once;
	long long now = clock_mono_ms();

	if (!d->cfg->once || !failed) {
		o->trouble_ms = 0;
		return false;
	}
	if (!o->trouble_ms)
		o->trouble_ms = now;
	if (now - o->trouble_ms < ONCE_SERVER_WAIT_MS)
		return false;
	log_error("--once gave up: the servers could not be used; the last fault is logged above",
		  LOGF(F_INT("waited_s", ONCE_SERVER_WAIT_MS / 1000), F_INT("jobs_relayed", d->relayed)));
	return true;
}

/* Appends to out, a string of size len, cutting what does not fit. */
__attribute__((format(printf, 3, 4))) static void append(char *out, size_t len, const char *fmt, ...)
{
	size_t at = strlen(out);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(out + at, len - at, fmt, ap);
	va_end(ap);
}

/* Rows still in staged_jobs, or -1 if Postgres cannot say now. */
static long long count_staged(struct drain *d)
{
	PGresult *res = pg_source_broken(&d->pg) ? NULL : PQexec(d->pg.conn, "SELECT count(*) FROM staged_jobs");
	long long n = -1;

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
		n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return n;
}

/* Paused, nothing was pushed since: every staged row is left. */
static void say_paused(struct drain *d, char *out, size_t len)
{
	long long staged = count_staged(d);

	append(out, len, "paused by --max-redis-memory: ");
	if (staged >= 0)
		append(out, len, "%lld ", staged);
	append(out, len, "rows still staged");
}

/* "N jobs held by a cap on queue a, M on queue b ...": each queue holding jobs. */
static void say_held(struct drain *d, char *out, size_t len)
{
	const struct rounds *r = &d->release.rounds;
	size_t queues = 0;

	for (size_t i = 0; i < r->nq; i++) {
		const struct rounds_queue *q = &r->q[i];
		int qlen = (int)(q->len < 100 ? q->len : 100);
		if (q->now.held == 0 || ++queues > ONCE_NAMES)
			continue;
		if (queues == 1)
			append(out, len, "%s%lld jobs held by a cap on queue %.*s", *out ? "; " : "", q->now.held, qlen,
			       q->name);
		else
			append(out, len, ", %lld on queue %.*s", q->now.held, qlen, q->name);
	}
	if (queues > ONCE_NAMES)
		append(out, len, " and %zu more queues", queues - ONCE_NAMES);
	if (queues)
		append(out, len, " (in staged_jobs_held: they leave as workers pop)");
}

/* "N rows kept staged by key k (a string)": the keys of the wrong type
 * the last push found, or else the dead-letter move that failed. */
static void say_kept(struct drain *d, char *out, size_t len, size_t kept)
{
	const char *type, *key, *sep = *out ? "; " : "";
	const struct target *t = NULL;

	for (size_t i = 0; !t && i < d->nt; i++)
		if (d->t[i].wrongtype_log_ms && d->t[i].redis.nbad)
			t = &d->t[i];
	if (!t) {
		append(out, len, "%s%zu rows kept staged: their move to staged_jobs_dead failed", sep, kept);
		return;
	}
	key = redis_sink_bad_key(&t->redis, 0, &type);
	append(out, len, "%s%zu rows kept staged by key %.200s (a %.20s, not what the format writes)", sep, kept, key,
	       type);
	if (t->redis.nbad > 1)
		append(out, len, " and %zu more keys", t->redis.nbad - 1);
}

int once_report(struct drain *d)
{
	char left[1024] = "";
	size_t kept = gaps_kept(&d->gaps);
	long long held = rounds_held(&d->release.rounds);

	/* Not leading, it knows nothing of the tables but that: what an earlier
	 * leadership of its own saw may be stale. */
	if (d->once.gave_up) {
		append(left, sizeof(left), "another session holds the leader lock (lock_key %lld, %s); waited %d s",
		       d->cfg->lock_key, d->once.leader, ONCE_LOCK_WAIT_MS / 1000);
		held = 0;
		kept = 0;
	} else if (d->release.paused_ms) {
		say_paused(d, left, sizeof(left));
	}
	if (held > 0)
		say_held(d, left, sizeof(left));
	if (kept > 0)
		say_kept(d, left, sizeof(left), kept);
	if (!*left) {
		log_info("stopped", LOGF(F_INT("jobs_relayed", d->relayed), F_INT("jobs_dead", d->dead)));
		return 0;
	}
	log_warn("--once stopped with jobs left",
		 LOGF(F_STR("left", left), F_INT("jobs_relayed", d->relayed), F_INT("jobs_dead", d->dead),
		      F_INT("jobs_held", held), F_INT("rows_kept", kept)));
	return DRAIN_LEFT;
}
