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
#include "target.h"

/*
 * Where the relay stands on Postgres's side: it may read batches only when
 * it LEADS, and push only to targets that are READY (target.h). A lost
 * session falls back to STANDBY, since the lock went with it, and every
 * target to TARGET_NEED_EPOCH once the lock is taken again.
 */
enum drain_state {
	DRAIN_STANDBY, /* no leader lock (or no session): take it, or wait */
	DRAIN_LEADS,   /* holds the lock */
};

/* The last queue the route rules were asked about, and their answer. */
struct route_memo {
	char queue[128];
	size_t len; /* SIZE_MAX: none (a queue name too long to keep is asked each time) */
	size_t target;
};

struct drain {
	const struct config *cfg;
	struct stop
		stopping; /* the SIGTERM/SIGINT flag with --stop-timeout: read between steps, bounds every wait of a batch */
	struct pg_source pg;
	struct target *t; /* the targets, as routes.t: t[0] is the default one */
	size_t nt;
	struct release_target *rts; /* what release sees of them, each batch */
	struct route_memo memo;
	struct batch batch;
	struct batch_job *scratch; /* target_group's */
	size_t capscratch;
	struct pipe pipe; /* a transaction of several batches, overlapped */
	struct gaps gaps;
	struct backoff pg_backoff;
	enum drain_state state;
	long long old_read_ms;      /* when a read last covered every gap */
	long long old_read_cost_ms; /* how long that read took */
	struct release release;     /* queue caps, the memory bound, fair release */
	struct narrow narrow;       /* finding the row of a batch Redis refuses */
	char origin[300];           /* Celery's origin header: gen<pid>@<host>, as Celery's client writes */
	struct once once;           /* with --once: what the last batch did, whether to stop */
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
/* Builds a row read from staged_jobs into the batch, for the target its
 * route column (empty: none) or its queue picks; a route column naming no
 * route makes it a dead row. 0 or -ENOMEM. (drain.c and pipe.c) */
int drain_add_row(struct drain *d, struct job_row *row) SD_MUSTCHECK;
/* Sends each target's part of the batch, appending to the fence of the
 * transaction's earlier pushes to it, if any; the target whose send failed
 * in *failed. 0 or as redis_sink_send. (drain.c and pipe.c) */
int drain_send_parts(struct drain *d, struct target **failed) SD_MUSTCHECK;
/* Reads every reply in flight: 0, or the first failure's code with its
 * target in *failed. With first (a transaction's first batch), a part that
 * met keys of the wrong type keeps their jobs and is pushed again. */
int drain_reply_parts(struct drain *d, struct target **failed, bool first) SD_MUSTCHECK;
/* The transaction committed: each target that pushed counts what it relayed. */
void drain_pushed(struct drain *d);

#endif
