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
#include "watch_readers.h"
#include "xmin_holders.h"

/* Holdings tracked: the last reading's and this one's. */
#define WATCH_MAX_HELD (2 * XMIN_HOLDERS_MAX)

/* A holding of the xmin horizon seen at the last reading (xmin_holder.id). */
struct watch_held {
	struct xmin_holder h;
	long long since_ms; /* when the watcher first saw it hold (xids > 0): the age of a standby or slot */
	double next_age_s;  /* warn (again) at this age */
	bool warned;        /* a warning was logged: its end is logged too */
	bool seen;          /* still there at this reading */
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
	bool told_priv;                 /* said once that it may not see every holder (pg_read_all_stats) */
	bool told_dead;                 /* said once that it may not read staged_jobs_dead */
	bool failing[METRICS_NSERVERS]; /* log only when a server's state changes */
	bool oldest_slow;               /* the oldest job's reading hit the timeout */
	bool held_slow;                 /* the held rows' reading hit the timeout */
	struct xmin_holders holders;    /* the last reading's */
	struct watch_readers readers;
	struct watch_held held[WATCH_MAX_HELD];
	size_t nheld;
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
