/* --once: when the run is over, and the one line saying what it leaves behind (once.h). */
#include "fmacros.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "lock_holder.h"
#include "log.h"
#include "once.h"

/* Queues and keys named in the line at most; the rest are counted. */
#define ONCE_NAMES 5

void once_init(struct once *o, const struct config *cfg, struct pg_source *pg, const struct target *t, size_t nt,
	       const struct release *release, const struct gaps *gaps, const struct tally *tally)
{
	*o = (struct once){ .cfg = cfg, .pg = pg, .t = t, .nt = nt, .release = release, .gaps = gaps, .tally = tally };
}

bool once_over(struct once *o, long long cursor_before)
{

	if (o->release->paused_ms)
		return true;
	if (o->moved > 0 || o->gaps->cursor != cursor_before)
		return false;
	if (o->all_read)
		return true;
	o->read_all = true;
	return false;
}

/* The lock's holder as Postgres shows it, into o->leader. */
static void name_leader(struct once *o)
{
	struct lock_holder h;

	if (lock_holder_read(o->pg, &h) < 0)
		snprintf(o->leader, sizeof(o->leader), "who holds it could not be read: %s", o->pg->errstr);
	else
		lock_holder_describe(&h, o->leader, sizeof(o->leader));
}

bool once_stop_waiting(struct once *o, long long since_ms)
{
	if (!o->cfg->once || clock_mono_ms() - since_ms < ONCE_LOCK_WAIT_MS)
		return false;
	o->gave_up = true;
	name_leader(o);
	return true;
}

bool once_trouble_over(struct once *o, bool failed)
{
	long long now = clock_mono_ms();

	if (!o->cfg->once || !failed) {
		o->trouble_ms = 0;
		return false;
	}
	if (!o->trouble_ms)
		o->trouble_ms = now;
	if (now - o->trouble_ms < ONCE_SERVER_WAIT_MS)
		return false;
	log_error("--once gave up: the servers could not be used; the last fault is logged above",
		  LOGF(F_INT("waited_s", ONCE_SERVER_WAIT_MS / 1000), F_INT("jobs_relayed", o->tally->relayed)));
	return true;
}

int once_nap_ms(const struct once *o, int ms)
{
	long long left;

	if (!o->cfg->once || !o->trouble_ms)
		return ms;
	left = o->trouble_ms + ONCE_SERVER_WAIT_MS - clock_mono_ms();
	return left <= 0 ? 0 : left < ms ? (int)left : ms;
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
static long long count_staged(struct once *o)
{
	PGresult *res = pg_source_broken(o->pg) ? NULL : PQexec(o->pg->conn, "SELECT count(*) FROM staged_jobs");
	long long n = -1;

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
		n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return n;
}

/* Paused, nothing was pushed since: every staged row is left. */
static void say_paused(struct once *o, char *out, size_t len)
{
	long long staged = count_staged(o);

	append(out, len, "paused by --max-redis-memory: ");
	if (staged >= 0)
		append(out, len, "%lld ", staged);
	append(out, len, "rows still staged");
}

/* Why queue q's jobs are held: the index of the target they wait for when
 * it cannot take them now (down, or paused by its memory bound), o->nt when
 * their target is no longer configured, or -1: a cap (their target is up).
 * Its queue's and its target's names (NULL: the default) in the out
 * parameters: q's key in the rounds is "<target>\0<queue>" (rounds.h). */
static long held_cause(const struct once *o, const struct rounds_queue *q, const char **queue, size_t *qlen,
		       const char **target, size_t *tlen)
{
	size_t i;

	rounds_key_split(q->name, q->len, target, tlen, queue, qlen);
	i = *target ? o->nt : 0;
	for (size_t k = 1; *target && k < o->nt; k++)
		if (strlen(o->t[k].name) == *tlen && memcmp(o->t[k].name, *target, *tlen) == 0)
			i = k;
	if (i == o->nt)
		return (long)o->nt;
	return target_up(&o->t[i]) ? -1 : (long)i;
}

/* One cause's part of the line: "N jobs <many>: A on queue a, B on queue b
 * and K more queues", or with one queue "N jobs <one> on queue a"; the
 * queues are those whose held_cause is cause. Returns N. */
static long long say_cause(const struct once *o, char *out, size_t len, long cause, const char *one, const char *many)
{
	const struct rounds *r = &o->release->rounds;
	const char *queue, *target;
	size_t qlen, tlen, queues = 0, named = 0;
	long long n = 0;

	for (size_t i = 0; i < r->nq; i++)
		if (r->q[i].now.held > 0 && held_cause(o, &r->q[i], &queue, &qlen, &target, &tlen) == cause) {
			n += r->q[i].now.held;
			queues++;
		}
	if (!queues)
		return 0;
	append(out, len, "%s%lld jobs %s%s", *out ? "; " : "", n, queues > 1 ? many : one, queues > 1 ? ":" : "");
	for (size_t i = 0; i < r->nq && named < ONCE_NAMES; i++) {
		const struct rounds_queue *q = &r->q[i];
		if (q->now.held == 0 || held_cause(o, q, &queue, &qlen, &target, &tlen) != cause)
			continue;
		append(out, len, "%s", named++ ? ", " : " ");
		if (queues > 1)
			append(out, len, "%lld ", q->now.held);
		append(out, len, "on queue %.*s", (int)(qlen < 100 ? qlen : 100), queue);
		/* Where the target is not the clause's own: a cap's, or one gone. */
		if (target && (cause < 0 || cause == (long)o->nt))
			append(out, len, " of target %.*s", (int)(tlen < 100 ? tlen : 100), target);
	}
	if (queues > named)
		append(out, len, " and %zu more queues", queues - named);
	return n;
}

/* Each cause of held jobs, with its count: a target that cannot take them
 * (named, and why), one no longer configured, a cap. Their sums in the
 * out parameters. */
static void say_held(const struct once *o, char *out, size_t len, long long *for_targets, long long *by_caps)
{
	char what[160];

	*for_targets = 0;
	for (size_t i = 0; i < o->nt; i++) {
		snprintf(what, sizeof(what), "held for target %s (%s)", o->t[i].name,
			 o->t[i].paused ? "paused by --max-redis-memory" : "down");
		*for_targets += say_cause(o, out, len, (long)i, what, what);
	}
	*for_targets += say_cause(o, out, len, (long)o->nt, "held for a target no longer configured",
				  "held for targets no longer configured");
	*by_caps = say_cause(o, out, len, -1, "held by a cap", "held by caps");
	if (*by_caps)
		append(out, len, " (in staged_jobs_held: they leave as workers pop)");
}

/* "N rows kept staged by key k (a string)": the keys of the wrong type
 * the last push found, or else the dead-letter move that failed. */
static void say_kept(struct once *o, char *out, size_t len, size_t kept)
{
	const char *type, *key, *sep = *out ? "; " : "";
	const struct target *t = NULL;

	for (size_t i = 0; !t && i < o->nt; i++)
		if (o->t[i].wrongtype_log_ms && o->t[i].redis.nbad)
			t = &o->t[i];
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

int once_report(struct once *o)
{
	char left[1024] = "";
	size_t kept = gaps_kept(o->gaps);
	long long held = rounds_held(&o->release->rounds), for_targets = 0, by_caps = 0;

	/* Not leading, it knows nothing of the tables but that: what an earlier
	 * leadership of its own saw may be stale. */
	if (o->gave_up) {
		append(left, sizeof(left), "another session holds the leader lock (lock_key %lld, %s); waited %d s",
		       o->cfg->lock_key, o->leader, ONCE_LOCK_WAIT_MS / 1000);
		held = 0;
		kept = 0;
	} else if (o->release->paused_ms) {
		say_paused(o, left, sizeof(left));
	}
	if (held > 0)
		say_held(o, left, sizeof(left), &for_targets, &by_caps);
	if (kept > 0)
		say_kept(o, left, sizeof(left), kept);
	if (!*left) {
		log_info("stopped", LOGF(F_INT("jobs_relayed", o->tally->relayed), F_INT("jobs_dead", o->tally->dead)));
		return 0;
	}
	log_warn("--once stopped with jobs left",
		 LOGF(F_STR("left", left), F_INT("jobs_relayed", o->tally->relayed), F_INT("jobs_dead", o->tally->dead),
		      F_INT("jobs_held", held), F_INT("jobs_held_for_targets", for_targets),
		      F_INT("jobs_held_by_caps", by_caps), F_INT("rows_kept", kept)));
	return ONCE_LEFT;
}
