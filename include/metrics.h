/* What /metrics and /readyz report: the drain's counters, the watcher's readings. */
#ifndef STAGEDRAIN_METRICS_H
#define STAGEDRAIN_METRICS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "batch.h"
#include "buf.h"
#include "fmacros.h"
#include "metrics_text.h"

struct sidekiq_seen;

enum metrics_server { METRICS_PG = 0, METRICS_REDIS, METRICS_NSERVERS };

/* Upper bounds of the batch duration histogram, in seconds (+Inf is added). */
#define METRICS_NBUCKETS 13
/* Queues counted by name at most; the rest are counted under METRICS_OTHER_QUEUE,
 * so a table full of distinct queue names cannot blow up a scrape. */
#define METRICS_MAX_QUEUES 1000
#define METRICS_OTHER_QUEUE "_other"
/* The queue labels kept (each at most METRICS_LABEL_MAX bytes, metrics_text.h),
 * in bytes all told: past it new queues count under
 * METRICS_OTHER_QUEUE too, so names cannot make a scrape or the relay big. */
#define METRICS_LABEL_BUDGET 65536

struct metrics_queue {
	char *name; /* the label: the queue's name, or its shortened form */
	size_t len;
	unsigned long long relayed;
	unsigned long long pending; /* pushed, not yet committed */
	bool capped;                /* has held jobs, ever: its held series are shown */
	unsigned long long held_total, released_total;
	double held_seconds; /* how long the released jobs had been held, summed */
};

/* Why the relay held jobs back. */
enum metrics_held_why { METRICS_HELD_QUEUE = 0, METRICS_HELD_MEMORY, METRICS_HELD_NWHY };

/* The kinds of xmin holders, as include/xmin_holders.h numbers them:
 * backend, standby, slot, prepared. */
#define METRICS_XMIN_KINDS 4
/* Queues of staged_jobs_dead named in stagedrain_dead_jobs; the rest are
 * summed under METRICS_OTHER_QUEUE. The dead table can hold any number of
 * queue names (a row is there because it was wrong), and a scrape must stay
 * small: the queues with most rows are the ones to look at. */
#define METRICS_DEAD_QUEUES 50

struct metrics_dead_queue {
	char queue[METRICS_LABEL_MAX + 1]; /* a label: shortened as metrics_short_label does */
	long long rows;
};

/* One reading of the database by the watcher; NAN where it could not tell. */
struct metrics_db {
	double backlog_jobs;      /* estimate: pg_stat_user_tables.n_live_tup */
	double oldest_job_age_s;  /* leader only: the lowest id staged, wherever it lies */
	double oldest_xact_age_s; /* 0 when no transaction holds back vacuum */
	double dead_tuples;       /* pg_stat_user_tables.n_dead_tup */
	/* The oldest holder of each kind: seconds it has held (for a standby or
	 * a slot, since the watcher saw it begin to), and age(xmin) in xids; 0
	 * when none holds. */
	double holder_age_s[METRICS_XMIN_KINDS];
	double holder_xids[METRICS_XMIN_KINDS];
	/* staged_jobs_dead, leader only: rows by queue, the most first (ndead
	 * of them, the last METRICS_OTHER_QUEUE when more queues have rows), and
	 * the oldest row's age by failed_at (0 when empty), and how many were
	 * staged for a key prefix this relay does not push under. */
	double dead_oldest_age_s;
	double dead_misdirected;
	size_t ndead;
	struct metrics_dead_queue dead[METRICS_DEAD_QUEUES + 1];
};

/*
 * The drain updates it once per batch (one mutex round, no allocation once a
 * queue has been seen); the watcher once per reading; the HTTP thread reads
 * it. Every function takes a NULL m as "no metrics" and does nothing.
 */
/* Pairs of (target, queue) named in stagedrain_held_jobs at most; past it a
 * target's other queues count under METRICS_OTHER_QUEUE. */
#define METRICS_HELD_SERIES 1000

/* Rows of staged_jobs_held of one target and queue, as the leader's watcher
 * read them (metrics_held.c): labels, shortened as metrics_short_label does. */
struct metrics_held_row {
	char target[METRICS_LABEL_MAX + 1]; /* "default" for the default target (NULL in the table) */
	char queue[METRICS_LABEL_MAX + 1];
	long long rows;
	double oldest_s; /* the oldest row's age, by its created_at (when it was staged) */
};

/* Targets named in the metrics at most (routes.h); past it they count in none. */
#define METRICS_MAX_TARGETS 64

/* Masters of a cluster target named in the metrics at most. */
#define METRICS_CLUSTER_NODES 32

/* A Redis Cluster target's figures (metrics_cluster.c). */
struct metrics_cluster {
	bool on; /* the target is a cluster */
	unsigned long long masters, connected;
	unsigned long long unsettled; /* slots whose jobs wait held: their master unreachable, or failing over */
	unsigned long long unserved;  /* slots no master serves in the last map */
	unsigned long long refreshes, redirects;
	size_t nnodes;
	struct {
		char addr[64];
		bool up;
	} nodes[METRICS_CLUSTER_NODES];
};

/* One target's figures (metrics_targets.c). Route names are plain (routes.h). */
struct metrics_target {
	char name[72];
	bool up; /* it may take jobs: connected, its epoch and fence settled */
	unsigned long long relayed, pushes;
	double push_seconds;   /* its pushes' time, summed */
	long long held;        /* its jobs waiting in staged_jobs_held */
	int workers_elsewhere; /* 1: its workers register elsewhere, none where it pushes; 0 not; -1 unknown */
	struct metrics_cluster cluster;
};

struct metrics {
	pthread_mutex_t lock;
	struct metrics_target targets[METRICS_MAX_TARGETS];
	size_t ntargets;
	struct metrics_queue *queues;
	size_t nqueues, capqueues;
	size_t label_bytes; /* the queues' labels, all told */
	unsigned long long batches, dead;
	unsigned long long buckets[METRICS_NBUCKETS + 1]; /* per bucket, the last is +Inf */
	double duration_sum;
	bool leader;
	long long epoch;
	long long cursor; /* the leader's read cursor, as the drain last reported it */
	unsigned long long reconnects[METRICS_NSERVERS];
	bool connected[METRICS_NSERVERS]; /* the drain's own connections, as it last knew */
	bool probed[METRICS_NSERVERS];    /* the watcher has an answer from each server */
	bool probe_ok[METRICS_NSERVERS];
	char probe_err[METRICS_NSERVERS][200];
	struct metrics_db db;
	struct metrics_held_row *held; /* every pair seen by this relay's watcher, 0 rows once gone */
	size_t nheld, capheld;
	bool held_read;          /* the last reading had them (the leader's watcher) */
	char redis_address[200]; /* the Redis server the drain uses: host:port/db, never a password */
	char redis_master[128];  /* behind sentinels, the master's name; "" otherwise */
	bool redis_tls;
	unsigned long long wait_short; /* batches fewer replicas acknowledged than asked */
	const char *format;            /* the --format jobs are written in; NULL until the first batch */
	/* Sidekiq layouts: the timestamps written, the version read or
	 * configured, and which (see struct sidekiq_seen); "" otherwise. */
	const char *timestamps;
	char sidekiq_version[32];
	const char *sidekiq_source;
	double backpressure_seconds[METRICS_HELD_NWHY];
	bool memory_paused;
	bool lock_foreign; /* standing by behind a session that is not a relay */
};

extern const double metrics_bucket_bounds[METRICS_NBUCKETS];
/* Each server's name in the series' labels and in /readyz's reason. */
extern const char *const metrics_server_names[METRICS_NSERVERS];

int metrics_init(struct metrics *m) SD_MUSTCHECK;
/* The targets by name, in routes.t order (n of them). */
void metrics_targets(struct metrics *m, const char *const *names, size_t n);
/* Target i may take jobs now, or its jobs wait held. */
void metrics_target_up(struct metrics *m, size_t i, bool up);
/* Target i acknowledged jobs in a committed transaction, its push taking secs. */
void metrics_target_pushed(struct metrics *m, size_t i, long long jobs, double secs);
/* Target i's fence named jobs pushed and not deleted: deleted now, they count as relayed. */
void metrics_target_fenced(struct metrics *m, size_t i, long long jobs);
/* Target i's jobs now waiting in staged_jobs_held. */
void metrics_target_held(struct metrics *m, size_t i, long long held);
/* With several targets, whether one at least may take jobs (/readyz);
 * the lock held. */
bool metrics_targets_ready_locked(const struct metrics *m);
/* Whether target i's workers register elsewhere and none where it pushes (watch_readers.c). */
void metrics_target_readers(struct metrics *m, size_t i, bool elsewhere);
/* The targets' series; the lock held. 0 or -ENOMEM. */
int metrics_targets_format(const struct metrics *m, struct buf *out) SD_MUSTCHECK;
/* A cluster target's figures, as the ladder last saw them. */
void metrics_target_cluster(struct metrics *m, size_t i, const struct metrics_cluster *c);
/* The cluster targets' series. */
int metrics_cluster_format(const struct metrics *m, struct buf *out) SD_MUSTCHECK;
/* False while a cluster target holds jobs for slots no master it reaches serves. */
bool metrics_cluster_ready_locked(const struct metrics *m);
/* Why not, for /readyz. */
int metrics_cluster_reason(const struct metrics *m, struct buf *out) SD_MUSTCHECK;
void metrics_free(struct metrics *m);

/* A batch Redis accepted: its jobs by queue, counted once the commit is done.
 * Called before the commit, while the queue names (in the fetched rows) are
 * valid; it forgets what an earlier batch that failed to commit left pending. */
void metrics_batch_pushed(struct metrics *m, const struct batch *b);
/* Another batch of the same transaction Redis accepted (pipe.c): its jobs
 * join those pending. */
void metrics_batch_also(struct metrics *m, const struct batch *b);
/* The batch committed: its jobs, its dead rows, how long it took. */
void metrics_batch_done(struct metrics *m, size_t ndead, double seconds, long long cursor);
/* nbatches of one transaction committed (pipe.h): each counts as a batch
 * that took an equal share of seconds. */
void metrics_batches_done(struct metrics *m, size_t nbatches, size_t ndead, double seconds, long long cursor);
/* n rows of queue that a fence deleted: their push landed, their delete did
 * not, so they count as relayed now. */
void metrics_fenced(struct metrics *m, const char *queue, size_t len, unsigned long long n);
/* Became leader (with the cursor it starts from) or lost the lock. */
void metrics_leader(struct metrics *m, bool leader, long long cursor);
void metrics_epoch(struct metrics *m, long long epoch);
/* Whether this relay stands by behind a foreign session (not a relay) that
 * holds the leader lock: true while it does, false once it leads or a relay holds it. */
void metrics_lock_foreign(struct metrics *m, bool foreign);
/* The drain's own connection went up or down; reconnect counts one more. */
void metrics_connected(struct metrics *m, enum metrics_server s, bool up, bool reconnect);
/* The Redis server the drain connected to (behind sentinels: the master now). */
void metrics_redis_server(struct metrics *m, const char *address, const char *master_name, bool tls);
/* The format the last batch was written in (a static name), and for the
 * Sidekiq layouts what sidekiq_probe saw (NULL: not a Sidekiq layout). */
void metrics_job_format(struct metrics *m, const char *format, const struct sidekiq_seen *seen);
/* A committed batch's holds and releases in queue: held jobs now, jobs it
 * held, jobs it released and how long they had been held. */
void metrics_held(struct metrics *m, const char *queue, size_t len, long long held, long long nheld, long long released,
		  double waited_s);
/* seconds more spent holding back for why; on: whether it goes on (for the
 * memory pause, the paused gauge). */
void metrics_backpressure(struct metrics *m, enum metrics_held_why why, double seconds, bool on);
/* A push or fence that fewer replicas acknowledged than --redis-wait-replicas. */
void metrics_wait_short(struct metrics *m);
/* The watcher's probe of a server; err (may be NULL) says why it failed. */
void metrics_probe(struct metrics *m, enum metrics_server s, bool ok, const char *err);
/* A reading where nothing is known yet: every value NAN, no dead queues. */
void metrics_db_unknown(struct metrics_db *db);
void metrics_db_reading(struct metrics *m, const struct metrics_db *db);
/* The watcher's reading of staged_jobs_held, n rows by target and queue (read
 * false: none, as on a standby or past the statement timeout: its series are
 * then left out). Pairs seen before and absent now read 0. */
void metrics_held_reading(struct metrics *m, const struct metrics_held_row *rows, size_t n, bool read);
/* stagedrain_held_jobs{queue,target} and each target's oldest held job's age; the lock held. 0 or -ENOMEM. */
int metrics_held_format(const struct metrics *m, struct buf *out) SD_MUSTCHECK;
/* Whether this relay leads (the watcher reads the oldest job only then), and its cursor. */
bool metrics_leader_cursor(struct metrics *m, long long *cursor);

/* Appends the Prometheus text exposition (format 0.0.4; metrics_series.c). 0 or -ENOMEM. */
int metrics_format(struct metrics *m, struct buf *out) SD_MUSTCHECK;
/* Both servers reachable; with routes, Redis is any target that takes jobs
 * (metrics_ready.c). The lock held. */
bool metrics_ready_locked(const struct metrics *m);
/* Ready: both of the drain's connections up and both probes answered. Sets
 * *ready and appends a one-line reason, which says leader or standby and, when
 * not ready, each server's state in a word or two ("redis: unreachable"); with
 * detail, the watcher's error text instead (it may name hosts and ports: for
 * --readyz-detail only; metrics_ready.c). 0 or -ENOMEM. */
int metrics_ready(struct metrics *m, struct buf *out, bool *ready, bool detail) SD_MUSTCHECK;

#endif
