/* The relay loop: leader lock, then batches of fetch, build, push, delete, commit. */
#ifndef STAGEDRAIN_DRAIN_H
#define STAGEDRAIN_DRAIN_H

#include <signal.h>
#include <stdbool.h>

#include "backoff.h"
#include "batch.h"
#include "config.h"
#include "fence.h"
#include "gaps.h"
#include "fmacros.h"
#include "metrics.h"
#include "narrow.h"
#include "once.h"
#include "pg_source.h"
#include "pipe.h"
#include "redis_sink.h"
#include "release.h"
#include "sidekiq_probe.h"
#include "stop.h"

/*
 * Where the relay stands, one rung at a time: it may push only when READY.
 * Each rung moves it up one step; a fault moves it down to the rung that
 * must be climbed again (a lost session: STANDBY, since the lock went with it;
 * a failed push: NEED_EPOCH; a failed delete: NEED_FENCE).
 */
enum drain_state {
	DRAIN_STANDBY,    /* no leader lock (or no session): take it, or wait */
	DRAIN_NEED_EPOCH, /* leads, but must take an epoch before pushing */
	DRAIN_NEED_FENCE, /* a push may have landed without its delete: read the fence */
	DRAIN_READY,      /* leads with a settled fence: batches may push */
};

struct drain {
	const struct config *cfg;
	struct stop
		stopping; /* the SIGTERM/SIGINT flag with --stop-timeout: read between steps, bounds every wait of a batch */
	struct pg_source pg;
	struct redis_sink redis;
	struct batch batch;
	struct job_opts opts; /* how the batch was built; its transaction's later batches too */
	struct pipe pipe;     /* a transaction of several batches, overlapped */
	struct gaps gaps;
	struct backoff pg_backoff;
	struct backoff redis_backoff;
	enum drain_state state;
	long long old_read_ms;      /* when a read last covered every gap */
	long long old_read_cost_ms; /* how long that read took */
	long long wrongtype_log_ms; /* when keys of the wrong type were last logged; 0: not since */
	struct fence fence;
	struct buf fence_text;
	char redis_where[300];        /* the Redis server last connected to, to tell a failover */
	char redis_policy[32];        /* its maxmemory-policy last read, to warn once per change */
	struct sidekiq_probe sidekiq; /* the version Sidekiq jobs are written for */
	struct release release;       /* queue caps, the memory bound, fair release */
	struct narrow narrow;         /* finding the row of a batch Redis refuses */
	char origin[300];             /* Celery's origin header: gen<pid>@<host>, as Celery's client writes */
	struct once once;             /* with --once: what the last batch did, whether to stop */
	long long relayed;
	long long dead;
	struct metrics *metrics; /* NULL: none; set by the caller after drain_init */
};

void drain_init(struct drain *d, const struct config *cfg, volatile sig_atomic_t *stop);
/* Connects to both servers and checks the schema. A server that cannot be
 * reached yet is waited for with back-off, as at run time (a sidecar may
 * start before its servers); a setting that can never work (authentication,
 * TLS verification, a missing migration, a bad URL) fails at once, logged
 * once with the setting and the cause. -ECANCELED: a stop signal came while
 * waiting; -ETIMEDOUT: --once waited ONCE_SERVER_WAIT_MS in vain. */
int drain_start(struct drain *d) SD_MUSTCHECK;
/* drain_run with --once stopped with jobs left behind (once.h): exit 3. */
#define DRAIN_LEFT 1

/* Runs until *stop is set, or with --once until a read of everything finds
 * nothing it can move (or it may not lead, or the memory bound pauses it):
 * then 0, or DRAIN_LEFT when jobs are left. Server faults are logged and
 * retried; only -ENOMEM ends it early, and with --once -ETIMEDOUT after
 * ONCE_SERVER_WAIT_MS of faults without a batch going through. */
int drain_run(struct drain *d) SD_MUSTCHECK;
void drain_free(struct drain *d);

#endif
