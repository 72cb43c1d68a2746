/* The leader's ladder: leading (the Postgres session and its lock), then
 * bringing each target to READY, restoring the sessions, the lock, each
 * epoch and each fence on the way, and falling back to the rung a fault
 * requires. It knows nothing of batches: the drain runs them on top of it. */
#ifndef STAGEDRAIN_LADDER_H
#define STAGEDRAIN_LADDER_H

#include <stdbool.h>

#include "backoff.h"
#include "config.h"
#include "fmacros.h"
#include "gaps.h"
#include "metrics.h"
#include "once.h"
#include "pg_source.h"
#include "release.h"
#include "stop.h"
#include "tally.h"
#include "target.h"

/*
 * Where the relay stands on Postgres's side: it may read batches only when
 * it LEADS, and push only to targets that are READY (target.h). A lost
 * session falls back to STANDBY, since the lock went with it, and every
 * target to TARGET_NEED_EPOCH once the lock is taken again.
 */
enum ladder_state {
	LADDER_STANDBY, /* no leader lock (or no session): take it, or wait */
	LADDER_LEADS,   /* holds the lock */
};

/* The parts the ladder climbs with: borrowed from the drain (set before
 * ladder_init), but for state and pg_backoff, its own. */
struct ladder {
	const struct config *cfg;
	struct stop *stopping;
	struct pg_source *pg;
	struct target *t; /* t[0] is the default target */
	size_t nt;
	struct gaps *gaps;       /* reset when it becomes leader */
	struct release *release; /* read again after a fence deleted rows */
	struct once *once;
	struct tally *tally; /* a fence's deletes count as relayed */
	struct metrics *metrics;
	enum ladder_state state;
	struct backoff pg_backoff;
	/* Rows at or below it (the highest staged at the takeover) may be in a
	 * fence no target has read yet: a leader before this one may have pushed
	 * them, under routes of its own, to any target. 0 once every target has
	 * settled its fence in this leadership. */
	long long hold_through;
	char routes[32];       /* this relay's routes' digest (ladder_reroute.c) */
	bool routes_unsettled; /* staged_jobs_leader says so until every target settled */
};

void ladder_init(struct ladder *l);
/* Connects to every server and checks the schema. A server that cannot be
 * reached yet is waited for with back-off, as at run time (a sidecar may
 * start before its servers); a setting that can never work (authentication,
 * TLS verification, a missing migration, a bad URL) fails at once, logged
 * once with the setting and the cause. -ECANCELED: a stop signal came while
 * waiting; -ETIMEDOUT: --once waited ONCE_SERVER_WAIT_MS in vain. */
int ladder_start(struct ladder *l) SD_MUSTCHECK;
/* Sleeps in short slices so a stop signal is honoured within 50 ms. */
void ladder_nap(struct ladder *l, int ms);
/* Any Postgres fault: end the transaction (or the session, if it is gone) and wait. */
void ladder_pg_trouble(struct ladder *l, const char *what);
/* Any fault rc of target t's Redis: log it; t waits out its back-off while
 * the other targets go on. */
void ladder_redis_trouble(struct ladder *l, struct target *t, int rc, const char *what);
/* A connect to t's Redis failed (rc): probed again soon when the server is
 * not there, else as ladder_redis_trouble. */
void ladder_connect_trouble(struct ladder *l, struct target *t, int rc, const char *what);
/* Leads, on a session that is still up. */
bool ladder_leads(const struct ladder *l);
/* A batch went through: Postgres's back-off starts over. */
void ladder_pg_ok(struct ladder *l);
/* Milliseconds until the first target's back-off ends (1 at least). */
int ladder_next_try_ms(const struct ladder *l);
/* Leads and brings the targets up: true when a batch may go (one target
 * at least is READY), false to try again (the fault was logged and, when
 * no target is up, waited out). */
bool ladder_ensure_ready(struct ladder *l);
/* Rows at or below this id wait held, whatever their target (0: none): a
 * target that has not settled its fence since the takeover may name them,
 * pushed there by the last leader while today's rules send them elsewhere
 * (a route added or changed across a crash). */
long long ladder_hold_through(struct ladder *l);

/* For the ladder's own files (relay/ladder_reroute.c): at a takeover, records
 * this leader's routes and sets hold_through if the last leader routed
 * otherwise or had not settled every fence. 0 or the session's fault. */
int ladder_hold_if_rerouted(struct ladder *l) SD_MUSTCHECK;
/* Every target has settled its fence in this leadership. */
bool ladder_all_settled(const struct ladder *l);
/* Once every target has settled its fence: records it, so that a successor
 * routing alike holds nothing. */
void ladder_note_settled(struct ladder *l);

#endif
