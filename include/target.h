/* One target of the relay (routes.h): its Redis connection, epoch, fence and
 * memory bound, and where it stands, apart from every other target's. */
#ifndef STAGEDRAIN_TARGET_H
#define STAGEDRAIN_TARGET_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "backoff.h"
#include "backpressure.h"
#include "batch.h"
#include "buf.h"
#include "config.h"
#include "fence.h"
#include "job.h"
#include "metrics.h"
#include "redis_sink.h"
#include "sidekiq_probe.h"
#include "stop.h"

/*
 * A target's rungs, climbed while the relay leads: it may push only when
 * READY. A failed push falls back to NEED_EPOCH (its outcome is unknown: a
 * new epoch refuses it if it comes late); a transaction that pushed to it
 * and then rolled back to NEED_FENCE (its fence names rows still staged).
 */
enum target_state {
	TARGET_NEED_EPOCH, /* must take an epoch before pushing */
	TARGET_NEED_FENCE, /* a push may have landed without its delete: read the fence */
	TARGET_READY,      /* a settled fence: batches may push */
};

/* A Redis that cannot be reached (refused, unreachable, timed out, still
 * loading) is tried again this often at most (jittered: half to all of it),
 * whatever its back-off: it is back within that of its return. */
#define TARGET_PROBE_MS 500

/* A connection attempt made off the relay's loop (target_connect.c). */
enum { TARGET_CONNECT_IDLE, TARGET_CONNECTING, TARGET_CONNECT_DONE };
struct target_connector {
	pthread_t thread;
	_Atomic int state; /* TARGET_CONNECT_*: while CONNECTING, the thread owns the target's redis */
	int rc;            /* redis_sink_connect's, once DONE */
};

struct target {
	size_t index;             /* in routes.t; 0 is the default target */
	const char *name;         /* "default" or the route's */
	const char *route;        /* the route's name in keys and the held table; NULL for the default */
	const struct config *cfg; /* its settings */
	struct redis_sink redis;
	enum target_state state;
	struct fence fence;
	struct buf fence_text;
	struct backoff backoff;
	long long retry_ms;           /* down: not tried again before this */
	long long quiet_ms;           /* down: a failed connect is logged (its back-off grows) from this on */
	char where[300];              /* the Redis server last connected to, to tell a failover */
	char policy[32];              /* its maxmemory-policy last read, to warn once per change */
	struct sidekiq_probe sidekiq; /* the version its Sidekiq jobs are written for */
	struct backpressure bp;       /* its memory bound and its capped queues' lengths */
	struct job_opts opts;         /* how its jobs are built, this batch */
	bool paused;                  /* --max-redis-memory pauses it */
	bool pushed;                  /* pushed in the open transaction: its fence names rows not committed */
	bool resettle;                /* a cluster's unsettled slots tried again, the rest settled */
	bool settled;                 /* its whole fence (a cluster's: every slot's) read in this leadership */
	size_t unsettled;             /* a cluster's slots not settled, as last logged */
	bool in_flight;               /* a push sent whose reply is not read yet (pipe.c) */
	long long txn_jobs;           /* jobs it acknowledged in the open transaction */
	struct batch part;            /* its jobs of the batch: a view, owning nothing */
	long long wrongtype_log_ms;   /* when its keys of the wrong type were last named; 0: not since */
	long long relayed;
	long long push_us; /* this batch's push, for its latency figure */
	struct target_connector connector;
};

void target_init(struct target *t, size_t index, const char *name, const struct config *cfg, struct stop *stop);
void target_free(struct target *t);
/* After a fault: the target back down to the rung that must be climbed again, never up. */
void target_fall_back(struct target *t, enum target_state to);
/* Its jobs may go to Redis in this batch. */
bool target_up(const struct target *t);
/* Its jobs of queue may go (t: the target; on a cluster, the queue's slot is settled). */
bool target_queue_up(void *t, const char *queue, size_t len);
/* b's jobs grouped by target (n targets), each target's in their order:
 * b->jobs itself when they are (one target), else a copy in *scratch (of
 * *cap). b keeps its order, which its delete relies on. NULL: no memory. */
const struct batch_job *target_group(const struct batch *b, size_t n, struct batch_job **scratch, size_t *cap);
/* The target's jobs of b, as a view into grouped (target_group's), in t->part. */
void target_view(struct target *t, const struct batch *b, const struct batch_job *grouped);

/* Which Redis server the target now writes to (behind sentinels, the master
 * they named), noted; a change is logged: a failover. m: the default
 * target's server shows in the metrics. */
void target_note_server(struct target *t, struct metrics *m);
/* A cluster's unsettled slots, logged when their number changes. */
void target_note_unsettled(struct target *t);
/* A cluster target's masters, slot map and unsettled slots, shown in the metrics. */
void target_show_cluster(const struct target *t, struct metrics *m);
/* Warns once per policy seen when its Redis may evict any key (an allkeys-*
 * maxmemory-policy: the relay's epoch and fence, the workers' jobs). */
void target_check_eviction(struct target *t);
/* A target's first connection: the line saying what it is (pgw: the
 * Postgres server), and what to know of it. */
void target_log_connected(struct target *t, struct metrics *m, const char *pgw);

/* Starts connecting the target's Redis (redis_sink_connect) in a thread of
 * its own; nothing else may touch t->redis until target_connect_done says
 * it is done. 0 or -errno (no thread). */
int target_connect_start(struct target *t) SD_MUSTCHECK;
bool target_connecting(const struct target *t);
/* True once the attempt ended, with its code in *rc (the thread is joined). */
bool target_connect_done(struct target *t, int *rc);
/* Waits for an attempt still running (at most --redis-timeout), and drops it. */
void target_connect_wait(struct target *t);

#endif
