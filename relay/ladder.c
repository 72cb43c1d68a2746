/* The leader's ladder: climbing to READY, and falling back on faults (ladder.h). */
#include "fmacros.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "format.h"
#include "keys.h"
#include "ladder.h"
#include "lock_holder.h"
#include "log.h"
#include "once.h"
#include "pg_conn.h"
#include "pg_privileges.h"
#include "redis_url.h"
#include "routes.h"
#include "signals.h"

#define BACKOFF_BASE_MS 100
#define BACKOFF_CAP_MS 10000

void ladder_init(struct ladder *l)
{
	l->state = LADDER_STANDBY;
	backoff_init(&l->pg_backoff, BACKOFF_BASE_MS, BACKOFF_CAP_MS, (unsigned)getpid());
}

bool ladder_leads(const struct ladder *l)
{
	return l->state == LADDER_LEADS && !pg_source_broken(l->pg);
}

void ladder_pg_ok(struct ladder *l)
{
	backoff_reset(&l->pg_backoff);
}

void ladder_nap(struct ladder *l, int ms)
{
	ms = once_nap_ms(l->once, ms);
	signals_note_hup();
	while (ms > 0 && !stop_seen(l->stopping)) {
		int slice = ms < 50 ? ms : 50;
		struct timespec ts = { 0, slice * 1000000L };
		nanosleep(&ts, NULL);
		ms -= slice;
	}
}

/* A target's fault, logged: its back-off (retry_in_ms) and, for a server
 * that could not be reached, how often it is probed meanwhile (probe_ms). */
static void say_trouble(struct ladder *l, struct target *t, const char *what, int delay, int probe_ms)
{
	struct log_field f[5] = { F_STR("error", t->redis.errstr), F_INT("retry_in_ms", delay) };
	size_t n = 2;

	if (probe_ms)
		f[n++] = (struct log_field)F_INT("probe_ms", probe_ms);
	if (l->nt > 1)
		f[n++] = (struct log_field)F_STR("target", t->name);
	f[n].type = LOG_F_END;
	log_warn(what, f);
}

/* The state a target's fault leaves in the metrics. */
static void show_down(struct ladder *l, struct target *t)
{
	if (t->index == 0)
		metrics_connected(l->metrics, METRICS_REDIS, redis_sink_connected(&t->redis), false);
	metrics_target_up(l->metrics, t->index, false);
}

/* Any fault rc of a target's Redis: log it, and leave the target alone for
 * its back-off (the others go on; ladder_ensure_ready naps when none is
 * up). -ETIMEDOUT is too few replicas acknowledging
 * (--redis-wait-replicas), which the metrics count apart. */
void ladder_redis_trouble(struct ladder *l, struct target *t, int rc, const char *what)
{
	int delay = backoff_next(&t->backoff);

	if (rc == -ETIMEDOUT)
		metrics_wait_short(l->metrics);
	say_trouble(l, t, what, delay, 0);
	show_down(l, t);
	t->retry_ms = t->quiet_ms = clock_mono_ms() + delay;
}

/*
 * A connect to a target's Redis failed. With a setting to blame (a password,
 * TLS verification) it is ordinary trouble: the back-off. With none, the
 * server is not there (refused, unreachable, timed out) or is starting
 * (LOADING): another connect costs it next to nothing, so the target is
 * probed every TARGET_PROBE_MS (jittered) whatever its back-off, and climbs
 * back within that of the server's return. Only the attempts at the
 * back-off's steps are logged (and grow it): a long outage logs as before.
 */
void ladder_connect_trouble(struct ladder *l, struct target *t, int rc, const char *what)
{
	long long now = clock_mono_ms(), probe = now + backoff_jitter(&t->backoff, TARGET_PROBE_MS);
	int delay;

	if (rc == -ENOMEM || t->redis.conn.blame) {
		ladder_redis_trouble(l, t, rc, what);
		return;
	}
	show_down(l, t);
	if (now >= t->quiet_ms) {
		delay = backoff_next(&t->backoff);
		say_trouble(l, t, what, delay, TARGET_PROBE_MS);
		t->quiet_ms = now + delay;
	}
	t->retry_ms = t->quiet_ms < probe ? t->quiet_ms : probe;
}

void ladder_pg_trouble(struct ladder *l, const char *what)
{
	bool broken = pg_source_broken(l->pg);
	int delay = backoff_next(&l->pg_backoff);

	log_warn(what,
		 LOGF(F_STR("error", l->pg->errstr), F_STR("sqlstate", l->pg->sqlstate), F_INT("retry_in_ms", delay)));
	pg_source_rollback(l->pg);
	if (broken) {
		/* The lock went with the session; whoever holds it next may be another relay. */
		pg_source_close(l->pg);
		l->state = LADDER_STANDBY;
		for (size_t i = 0; i < l->nt; i++)
			metrics_target_up(l->metrics, i, false);
		metrics_connected(l->metrics, METRICS_PG, false, false);
		metrics_leader(l->metrics, false, 0);
	}
	ladder_nap(l, delay);
}

int ladder_next_try_ms(const struct ladder *l)
{
	long long now = clock_mono_ms(), next = LLONG_MAX;

	for (size_t i = 0; i < l->nt; i++) {
		/* A connection attempt running: look again soon. */
		long long at = target_connecting(&l->t[i]) ? now + 10 : l->t[i].retry_ms;
		if (at < next)
			next = at;
	}
	return next <= now ? 1 : next - now > INT_MAX ? INT_MAX : (int)(next - now);
}

/* What a standby last said of the lock's holder, and when it looks again. */
struct standby_look {
	struct lock_holder holder;
	long long next_ms;
	bool failed; /* a read failed, and said so */
};

/* The holder's line: who it is, as far as Postgres shows this role. */
static void log_holder(struct ladder *l, const struct lock_holder *h)
{
	char hint[200];

	if (h->kind == LOCK_HOLDER_RELAY) {
		log_info("another relay is the leader; waiting as standby",
			 LOGF(F_INT("lock_key", l->cfg->lock_key), F_STR("holder", "relay"), F_INT("pid", h->pid),
			      F_STR("user", h->user), F_STR("application_name", h->app), F_STR("client_addr", h->addr),
			      F_STR("session_start", h->since)));
		return;
	}
	if (h->pid == 0)
		snprintf(hint, sizeof(hint),
			 "a prepared transaction holds it: COMMIT PREPARED or ROLLBACK PREPARED it"
			 " (see pg_prepared_xacts)");
	else
		snprintf(
			hint, sizeof(hint),
			"end it with SELECT pg_terminate_backend(%d); README \"Security\" says how to keep other roles "
			"from taking the lock",
			h->pid);
	log_warn("a session that is not a relay holds the leader lock; waiting as standby for as long as it lives",
		 LOGF(F_INT("lock_key", l->cfg->lock_key), F_STR("holder", "foreign"), F_INT("pid", h->pid),
		      F_STR("user", h->user), F_STR("application_name", h->app), F_STR("client_addr", h->addr),
		      F_STR("session_start", h->since), F_STR("hint", hint)));
}

/*
 * Says who holds the leader lock when the wait starts and whenever the holder
 * changes, and sets the gauge an alert fires on: any role may take the lock,
 * and a foreign holder keeps every relay a standby for as long as its session
 * lives. One statement over pg_locks and pg_stat_activity, at most once per
 * --watch-interval.
 */
static void look_at_holder(struct ladder *l, struct standby_look *look)
{
	struct lock_holder h;
	long long now = clock_mono_ms();

	if (now < look->next_ms)
		return;
	look->next_ms = now + l->cfg->watch_interval_ms;
	if (lock_holder_read(l->pg, &h) < 0) {
		if (!look->failed)
			log_warn("could not read who holds the leader lock; waiting as standby",
				 LOGF(F_INT("lock_key", l->cfg->lock_key), F_STR("error", l->pg->errstr)));
		look->failed = true;
		return;
	}
	/* Freed between the try and the look: the next try takes it. */
	if (h.kind == LOCK_HOLDER_NONE || lock_holder_same(&h, &look->holder))
		return;
	look->holder = h;
	metrics_lock_foreign(l->metrics, h.kind == LOCK_HOLDER_FOREIGN);
	log_holder(l, &h);
}

/* Marks the session as a relay's with the companion lock, so standbys can
 * tell it from a foreign holder. Without it the relay still leads (standbys
 * then name it foreign); only a lost session, which took the lock too, fails. */
static int mark_as_relay(struct ladder *l)
{
	bool marked = false;
	int rc = lock_holder_mark(l->pg, &marked);

	if (rc < 0 && pg_source_broken(l->pg))
		return rc;
	if (!marked)
		log_warn("could not take the relay's companion lock; standbys will name this relay a session that is "
			 "not a relay",
			 LOGF(F_STR("error", rc < 0 ? l->pg->errstr : "another session holds it")));
	return 0;
}

/*
 * Takes the leader lock, or waits as a standby while another session holds it
 * (with --once, ONCE_LOCK_WAIT_MS at most: then it names the holder and ends).
 * The standby asks again every --poll-interval instead of blocking in
 * pg_advisory_lock: a statement waiting on a lock holds its snapshot, and with
 * it the xmin horizon, so a blocked standby would itself be the long
 * transaction that keeps every hot table from being vacuumed.
 */
static int become_leader(struct ladder *l)
{
	struct standby_look look = { .next_ms = 0 };
	bool held = false;
	long long since = clock_mono_ms();
	int rc = pg_source_check_primary(l->pg);

	if (rc == 0)
		rc = pg_source_try_lock(l->pg, &held);
	while (rc == 0 && !held && !stop_seen(l->stopping) && !once_stop_waiting(l->once, since)) {
		look_at_holder(l, &look);
		ladder_nap(l, l->cfg->poll_interval_ms);
		rc = pg_source_try_lock(l->pg, &held);
	}
	if (rc == 0 && held)
		rc = mark_as_relay(l);
	if (rc == 0 && held)
		rc = ladder_hold_if_rerouted(l);
	if (rc < 0)
		return rc;
	if (!held)
		return -ECANCELED;
	/* Whatever we knew of the table may be stale: read it from the start. */
	gaps_reset(l->gaps);
	l->state = LADDER_LEADS;
	for (size_t i = 0; i < l->nt; i++) { /* and each fence: the last leader may have died mid-batch */
		l->t[i].state = TARGET_NEED_EPOCH;
		l->t[i].settled = false;
		redis_sink_takeover(&l->t[i].redis);
	}
	log_info("became leader", LOGF(F_INT("lock_key", l->cfg->lock_key)));
	metrics_leader(l->metrics, true, l->gaps->cursor);
	metrics_lock_foreign(l->metrics, false);
	return 0;
}

/* Rows a fence deleted were pushed: they count as relayed. */
static void count_fenced(struct ladder *l, long long deleted)
{
	const char *queue;
	size_t len;
	long long n;

	l->tally->relayed += deleted;
	for (int i = 0; (queue = pg_source_fenced_queue(l->pg, i, &len, &n)) != NULL; i++)
		metrics_fenced(l->metrics, queue, len, (unsigned long long)n);
}

/* The name of one of a target's own keys (keys.h), for a log line. */
static const char *own_key(const struct target *t, const char *name, char *out, size_t len)
{
	if (t->route)
		snprintf(out, len, KEYS_ROUTE_OWN_FMT, t->cfg->key_prefix, t->cfg->lock_key, t->route, name);
	else
		snprintf(out, len, KEYS_OWN_FMT, t->cfg->key_prefix, t->cfg->lock_key, name);
	return out;
}

/* NEED_EPOCH -> NEED_FENCE: a new epoch makes Redis refuse any push of an
 * older one that arrives late. False to try again. */
static bool take_epoch(struct ladder *l, struct target *t)
{
	char key[300];
	int rc = redis_sink_new_epoch(&t->redis);

	if (rc < 0) {
		ladder_redis_trouble(l, t, rc, "could not take a new epoch in redis; will retry");
		return false;
	}
	t->state = TARGET_NEED_FENCE;
	if (t->redis.found[0])
		log_warn("replaced the relay's epoch key, which held what the relay does not write; counting from 1 "
			 "again (the epoch's token keeps it new)",
			 LOGF(F_STR("key", own_key(t, KEYS_EPOCH, key, sizeof(key))), F_STR("found", t->redis.found),
			      F_INT("epoch", t->redis.epoch)));
	log_info("leading", LOGF(F_INT("epoch", t->redis.epoch), F_STR("target", t->name)));
	if (t->index == 0)
		metrics_epoch(l->metrics, t->redis.epoch);
	return true;
}

/*
 * NEED_FENCE -> READY: before pushing again after anything that may have left
 * a pushed batch undeleted (a takeover, a failed push or delete), delete what
 * the last fence names instead of pushing it twice. False to try again.
 */
static bool settle_fence(struct ladder *l, struct target *t)
{
	char key[300];
	long long deleted = 0;
	int rc;

	/* A failed GET also closes the connection, so no push can follow until
	 * a reconnect and this read succeed. Too few replicas: the rows the fence
	 * names stay until they have it. */
	if ((rc = redis_sink_get_fence(&t->redis, &t->fence_text)) < 0) {
		ladder_redis_trouble(l, t, rc, "could not read the fence from redis; will retry");
		return false;
	}
	/* A key of another type names no batch; the batches it may have
	 * overwritten are unknown, as after a Redis that lost its data. */
	if (t->redis.found[0])
		log_warn("deleted the fence key, which held what the relay does not write; taking it as no fence",
			 LOGF(F_STR("key", own_key(t, KEYS_FENCE, key, sizeof(key))), F_STR("found", t->redis.found)));
	if (t->fence_text.len && fence_parse(&t->fence, t->fence_text.data, t->fence_text.len) < 0) {
		log_warn("ignoring a fence that is not stagedrain's", LOGF(F_STR("target", t->name)));
		t->fence.n = 0;
	}
	/* Rows a target's fence names are deleted wherever they wait, in
	 * staged_jobs or, held while it was down, in staged_jobs_held. */
	if (pg_source_delete_fenced(l->pg, &t->fence, &deleted) < 0) {
		ladder_pg_trouble(l, "could not delete the rows the fence names; will retry");
		return false;
	}
	t->state = TARGET_READY;
	backoff_reset(&t->backoff);
	t->retry_ms = 0;
	metrics_target_up(l->metrics, t->index, true);
	/* Read it again: the fence may have deleted released rows (and a
	 * cluster's slots settled again now and then leave it as it was). */
	if (!t->resettle || deleted > 0)
		release_forget(l->release);
	t->resettle = false;
	t->settled = t->settled || !redis_sink_partial(&t->redis);
	target_note_unsettled(t);
	count_fenced(l, deleted);
	metrics_target_fenced(l->metrics, t->index, deleted);
	if (deleted > 0)
		log_info("deleted rows the last batch pushed but did not delete; not pushing them again",
			 LOGF(F_INT("rows", deleted), F_INT("fence_epoch", t->fence.epoch), F_STR("target", t->name)));
	return true;
}

/* Any state: a lost session means a lost lock, so back to STANDBY. */
static bool reconnect_pg(struct ladder *l)
{
	char pgw[300];

	/* However the session was lost (a failed read, a rollback after a
	 * failed push), the lock went with it: take it again, or stand by. */
	l->state = LADDER_STANDBY;
	if (pg_source_connect(l->pg) < 0) {
		ladder_pg_trouble(l, "could not reconnect to postgres; will retry");
		return false;
	}
	/* With several hosts in --pg-url, which one is news (a failover). */
	pg_source_describe(l->pg, pgw, sizeof(pgw));
	log_info("reconnected to postgres", LOGF(F_STR("postgres", pgw)));
	metrics_connected(l->metrics, METRICS_PG, true, true);
	return true;
}

/* STANDBY -> NEED_EPOCH, or false while another relay leads or on a fault. */
static bool take_lead(struct ladder *l)
{
	int rc = become_leader(l);

	if (rc == -ECANCELED)
		return false;
	if (rc == -EROFS) {
		ladder_pg_trouble(l, "will not lead from a hot standby; will reconnect");
		return false;
	}
	if (rc < 0) {
		ladder_pg_trouble(l, "could not take the leader lock; will retry");
		return false;
	}
	return true;
}

/* Any state from NEED_EPOCH up falls back to it: the new connection may
 * reach another server (a failover), whose epoch and fence are its own. */
static bool reconnect_redis(struct ladder *l, struct target *t)
{
	const struct redis_target *rt = &t->cfg->redis;
	int rc = 0;

	target_fall_back(t, TARGET_NEED_EPOCH);
	/* With other targets to serve, the attempt runs off the loop: one that
	 * hangs to --redis-timeout holds up only its own target. Alone, or
	 * without a thread, it runs here. */
	if (target_connecting(t)) {
		if (!target_connect_done(t, &rc))
			return false;
	} else if (l->nt > 1 && target_connect_start(t) == 0) {
		return false;
	} else {
		rc = redis_sink_connect(&t->redis);
	}
	if (rc < 0) {
		ladder_connect_trouble(l, t, rc, "could not reconnect to redis; will retry");
		return false;
	}
	target_note_server(t, l->metrics);
	log_info("reconnected to redis",
		 LOGF(F_STR("redis", t->where), F_STR("master_name", rt->master_name ? rt->master_name : ""),
		      F_STR("tls", rt->tls ? "true" : "false"), F_STR("target", t->name)));
	if (t->index == 0)
		metrics_connected(l->metrics, METRICS_REDIS, true, true);
	target_check_eviction(t);
	return true;
}

/* The sentinels announced a failover: leave the old master before the next push. */
static void follow_failover(struct target *t)
{
	if (!redis_sink_connected(&t->redis) || !redis_conn_master_moved(&t->redis.conn))
		return;
	log_info("the sentinels announced a new redis master; reconnecting",
		 LOGF(F_STR("from", t->where), F_STR("target", t->name)));
	redis_sink_close(&t->redis);
}

/* One target up the ladder, unless it waits out its back-off: true when
 * it is READY. A fault is logged, and the target waits its back-off. */
static bool climb(struct ladder *l, struct target *t)
{
	target_show_cluster(t, l->metrics);
	if (target_connecting(t)) {
		if (!reconnect_redis(l, t))
			return false;
	} else {
		follow_failover(t);
		/* A cluster's slots that could not be settled: tried again now and then. */
		if (t->state == TARGET_READY && redis_sink_wants_settle(&t->redis)) {
			t->state = TARGET_NEED_FENCE;
			t->resettle = true;
		}
		if (t->state == TARGET_READY && redis_sink_connected(&t->redis))
			return true;
		if (clock_mono_ms() < t->retry_ms || pg_source_broken(l->pg))
			return false;
		if (!redis_sink_connected(&t->redis) && !reconnect_redis(l, t))
			return false;
	}
	if (t->state == TARGET_NEED_EPOCH && !take_epoch(l, t))
		return false;
	return t->state != TARGET_NEED_FENCE || settle_fence(l, t);
}

bool ladder_all_settled(const struct ladder *l)
{
	for (size_t i = 0; i < l->nt; i++)
		if (!l->t[i].settled)
			return false;
	return true;
}

long long ladder_hold_through(struct ladder *l)
{
	if (l->hold_through && ladder_all_settled(l))
		l->hold_through = 0;
	return l->hold_through;
}

/* Climbs the ladder: leads, and brings every target it may try to READY,
 * restoring the sessions on the way. True when a batch may go (one target
 * at least is READY; the others' rows wait held), false to try again (the
 * fault was logged and, when no target is up, waited out). */
bool ladder_ensure_ready(struct ladder *l)
{
	bool any = false;

	signals_note_hup();
	if (pg_source_broken(l->pg) && !reconnect_pg(l))
		return false;
	if (l->state == LADDER_STANDBY && !take_lead(l))
		return false;
	for (size_t i = 0; i < l->nt && !stop_seen(l->stopping); i++)
		any = climb(l, &l->t[i]) || any;
	ladder_note_settled(l);
	if (!any && !pg_source_broken(l->pg) && !stop_seen(l->stopping))
		ladder_nap(l, ladder_next_try_ms(l));
	return any && !pg_source_broken(l->pg);
}
