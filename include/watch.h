/* The watcher: a thread that looks at the database and Redis at a low rate,
 * on connections of its own, for metrics, /readyz and the long-transaction warning. */
#ifndef STAGEDRAIN_WATCH_H
#define STAGEDRAIN_WATCH_H

#include <libpq-fe.h>
#include <pthread.h>
#include <stdbool.h>

#include "config.h"
#include "fmacros.h"
#include "metrics.h"
#include "redis_conn.h"

#define WATCH_MAX_WARNED 16

/* A transaction already warned about, and the age at which to warn again. */
struct watch_warned {
	int pid;
	char xact_start[40];
	double next_age_s;
	bool seen; /* still open at the last reading */
};

struct watch {
	const struct config *cfg;
	struct metrics *m;
	PGconn *pg;
	struct redis_conn redis; /* its own connection, never the drain's */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop, running;
	bool done;                      /* the thread has left its loop: it touches nothing more */
	bool sees_all;                  /* may read every session's transaction (pg_read_all_stats) */
	bool told_priv;                 /* said once that it may not */
	bool failing[METRICS_NSERVERS]; /* log only when a server's state changes */
	bool oldest_slow;               /* the oldest job's reading hit the timeout */
	struct watch_warned warned[WATCH_MAX_WARNED];
	size_t nwarned;
	char errstr[256];
};

/* Starts the thread; it takes its first reading at once. 0 or -errno. */
int watch_start(struct watch *w, const struct config *cfg, struct metrics *m) SD_MUSTCHECK;
/*
 * Stops the thread and closes its connections: true. A round waits on a
 * stuck server up to its timeouts (--redis-timeout, 10 s a statement), which
 * the relay's stop must not: when the thread has not left its loop within
 * wait_ms, it is left to the process's exit, false, and w and the metrics it
 * writes must outlive it (the caller then ends the process with _exit).
 */
bool watch_stop(struct watch *w, int wait_ms);

#endif
