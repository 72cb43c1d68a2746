/* The benchmark program's shared pieces: options, servers, the relay process,
 * load generators, the naive baseline and the result table. */
#ifndef STAGEDRAIN_BENCH_H
#define STAGEDRAIN_BENCH_H

#include "fmacros.h"

#include <hiredis/hiredis.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "support/proc.h"
#include "support/redis.h"
#include "support/services.h"
#include "support/sql.h"
#include "support/timing.h"

#define BENCH_MAX_RUNS 15
#define BENCH_MAX_MINUTES 120

struct bench_opts {
	int runs;
	long long jobs;     /* backlog size */
	int minutes;        /* long-transaction scenario length */
	long long big_jobs; /* memory scenario: jobs drained by one relay, 0 skips */
	int steady_seconds; /* length of each steady measurement */
	int trigger_seconds;
	int batch_size; /* the relay's and the naive loop's batch */
	const char *only;
	const char *bin;
	const char *out;
	const char *redis_fsync;
	const char *relay_args; /* extra flags for the relay, split on spaces */
	const char *services;   /* tests/services.sh */
	bool keep;              /* keep the servers' directory (relay logs) after the run */
	/* xid-holder scenario (xid.c) */
	int xid_seconds;         /* holder open this long before the relay restart, and again after */
	long long xid_backlog;   /* rows drained right after the holder begins */
	int xid_rate;            /* staging transactions/s, committed or rolled back */
	int xid_rollback;        /* % of staging transactions rolled back */
	const char *xid_holders; /* idle,prepared */
};

/* Where the throwaway servers are and how to reach them. */
struct bench_env {
	struct services srv;
	const struct bench_opts *opts;
};

/* SIGINT/SIGTERM set `interrupted` (support/timing.h); every wait in the bench looks at it. */

/* ---- bench.c: shared by the scenarios ---- */
/* Exits (after the clean-up) once Ctrl-C was pressed. */
void check_stop(void);
/* 1000000 as "1M", 50000 as "50k": figures name their sizes. */
const char *human(long long n, char *out, size_t len);
/* Whether a comma-separated list names item (an empty list names everything). */
bool list_has(const char *list, const char *item);
struct relay;
/* Waits until the relay has pushed a probe job: it is connected and leading. */
void wait_relay_ready(const struct bench_env *env, const struct relay *rel);
/* Polls LLEN until it reaches n; dies after 60 s without progress, or once
 * the relay (if given) exited short of n. */
void wait_llen(redisContext *r, const char *key, long long n, const struct relay *rel);
/* The same for any count of pushed jobs (count(arg)); what names them in
 * the message. */
void wait_count(long long (*count)(void *arg), void *arg, const char *what, long long n, const struct relay *rel);
struct load;
struct lat {
	double p50, p99, max; /* ms */
	long long lost, dup;
};
/* Latencies of jobs committed in [from_us, to_us) (monotonic), and losses. */
struct lat latencies(const struct load *l, long long from_us, long long to_us);

/* ---- util.c ---- */
void die(const char *fmt, ...) SD_PRINTF(1, 2) __attribute__((noreturn));
void note(const char *fmt, ...) SD_PRINTF(1, 2);
/* die and note for a message that is all there is to say (the support library's failures). */
void die_msg(const char *msg) __attribute__((noreturn));
void note_msg(const char *msg);
PGconn *pg_connect(const struct bench_env *env);
redisContext *redis_connect(const struct bench_env *env);
/* Runs SQL that must succeed; returns the first value of the first row as a number (or 0). */
#define sql(c, ...) sql_or((c), die_msg, __VA_ARGS__)
/* The same, but failure returns -1 and is only reported. */
#define sql_try(c, ...) sql_or((c), note_msg, __VA_ARGS__)
/* A Redis command that must answer an integer; one that must succeed. */
#define redis_int(r, ...) redis_int_or((r), die_msg, __VA_ARGS__)
#define redis_ok(r, ...) freeReplyObject(redis_or((r), die_msg, __VA_ARGS__))
/* A loopback port nothing listens on now. */
int bench_free_port(void);
/* Empties staged_jobs (and its dead and held tables) and Redis. */
void bench_reset(const struct bench_env *env);
/* COPYs n jobs (class BenchJob, args [seq], queue) into staged_jobs, then VACUUM ANALYZE. */
void stage_backlog(const struct bench_env *env, const char *queue, long long first, long long n);
int cmp_ll(const void *a, const void *b);
int cmp_dbl(const void *a, const void *b);
/* The p-th percentile (0..100) of a sorted array. */
long long pct_ll(const long long *v, size_t n, double p);

/* ---- proc.c: the relay binary as a real process ---- */
struct relay {
	struct proc proc;
	char log[1024];
};

/* Starts bin/stagedrain against the bench servers with the given log level. */
void relay_start(struct relay *r, const struct bench_env *env, const char *name, const char *level);
/* The same with more relay flags (NULL-terminated, NULL: none), after --relay-args. */
void relay_start_with(struct relay *r, const struct bench_env *env, const char *name, const char *level,
		      const char *const *flags);
/* SIGTERM, wait (then SIGKILL after 30 s); returns the exit status or -1. */
int relay_stop(struct relay *r);
/* SIGKILL, as a crash would, and reap it. */
void relay_kill(struct relay *r);
/* Waits until the relay's log holds text; -1 if it exited or timeout_ms passed. */
int relay_wait_log(const struct relay *r, const char *text, int timeout_ms);
/* VmHWM of a running process in KiB, or -1. */
long long proc_hwm_kib(pid_t pid);
/* Starts a child (proc_start) that the exit clean-up stops if it is still
 * running then; dies if it cannot start. */
void child_start(struct proc *p, const struct proc_opts *o);
/* proc_wait for such a child. */
int child_wait(struct proc *p, int timeout_ms);
/* proc_stop for such a child: sig, then SIGKILL after timeout_ms; -1 if killed. */
int child_stop(struct proc *p, int sig, int timeout_ms);
/* Stops every child still running (exit clean-up). */
void children_stop_all(void);
/* Per-minute relay batch timings parsed from a JSON debug log. */
struct batch_minute {
	long long batches, jobs;
	double fetch_us, push_us, commit_us; /* sums; NAN when the log has no such field */
	bool timed;
};
/* Buckets "batch relayed" lines by minute since t0 (wall clock, µs). */
int relay_log_batches(const char *log, long long t0_wall_us, struct batch_minute *out, int minutes);
/* One "batch relayed" line: when it ended (µs since a t0) and what it took. */
struct batch_rec {
	long long end_us;
	double fetch_us, push_us, commit_us;
	long long jobs;
	long long gaps; /* gap ranges the relay tracked after it, -1: not logged */
	bool timed;     /* all three times logged */
	/* backpressure: rows it moved to staged_jobs_held, held jobs it pushed
	 * (-1: not logged), time spent on caps and held rows (NAN: not logged) */
	long long held, released;
	double release_us;
};
/* Appends every such line of a log to *v (grown as needed; the caller frees it). */
int relay_log_list(const char *log, long long t0_wall_us, struct batch_rec **v, size_t *n, size_t *cap);

/* ---- load.c: producers, consumer ---- */
struct load {
	const struct bench_env *env;
	const char *table;
	const char *queue;
	int rate;        /* jobs/s, 0: as fast as possible */
	int rows_per_tx; /* 1: single-row transactions */
	int producers;
	int seconds;
	bool consume;     /* run a BRPOP consumer recording visibility times */
	int rollback_pct; /* this share of transactions (scattered) stage and ROLL BACK */
	/* results */
	long long nseq;        /* jobs the arrays have room for */
	long long *commit_us;  /* per seq, monotonic, after COMMIT returned; 0: not committed */
	long long *visible_us; /* per seq, when the consumer got it */
	unsigned char *seen;   /* per seq, how many times */
	long long committed;   /* jobs */
	long long rolled_back; /* transactions */
	long long consumed;
	long long start_us, end_us; /* producers' window (monotonic) */
	int failed;
	char err[256];
	/* internal */
	void *priv;
};

/* Starts producers (and the consumer); returns at once. */
void load_start(struct load *l);
/* Jobs committed and consumed so far (racy snapshots, for backlog sampling). */
long long load_committed(const struct load *l);
long long load_consumed(const struct load *l);
/* Waits for the producers to finish their seconds (once; load_finish calls it too). */
void load_join_producers(struct load *l);
/* Waits for the producers to finish their seconds, then for the consumer to
 * see every committed job (or drain_timeout_s without progress). */
void load_finish(struct load *l, int drain_timeout_s);
void load_free(struct load *l);

/* ---- cpu.c: what a drain costs in CPU ---- */
/* CPU seconds one drain cost: the drainer itself, its Postgres backend(s), Redis; NAN where unread. */
struct drain_cpu {
	double self, backend, redis;
};
/* utime + stime of a process (all its threads), in seconds, from /proc/PID/stat; NAN if unreadable. */
double proc_cpu_s(pid_t pid);
/* The calling thread's CPU time in seconds. */
double thread_cpu_s(void);
/* The CPU seconds of this process's reaped children (getrusage RUSAGE_CHILDREN). */
double children_cpu_s(void);
/* proc_cpu_s summed over the Postgres backends whose application_name is LIKE
 * app_like, c's own left out; NAN if none. *nbackends (if given): how many. */
double pg_app_cpu_s(PGconn *c, const char *app_like, int *nbackends);
/* Redis's used_cpu_sys + used_cpu_user (INFO cpu), in seconds; NAN if unread. */
double redis_cpu_s(redisContext *r);

/* ---- naive.c: the seed design and the raw limit ---- */
struct naive_stats {
	long long batches, jobs;
	long long select_us, push_us, delete_us, commit_us;
};
/*
 * The loop: BEGIN RR; SELECT ... ORDER BY id LIMIT n; MULTI/SADD/LPUSH/EXEC;
 * DELETE WHERE id <= max; COMMIT. With minute stats it runs until *stop,
 * sleeping poll_ms when idle; without, it stops at the first empty SELECT.
 */
struct naive {
	const struct bench_env *env;
	int batch_size;
	int poll_ms;
	long long t0_us; /* monotonic start of minute 0 */
	int minutes;
	struct naive_stats *per_minute; /* minutes entries, or NULL */
	volatile int stop;
	long long moved; /* jobs, or -1 after an error */
	char err[256];
	struct drain_cpu cpu; /* self (its thread) and backend, from connect to the end; redis untouched */
	void *priv;
};
long long naive_drain(struct naive *n);
void naive_start(struct naive *n); /* naive_drain in a thread */
void naive_join(struct naive *n);
/* COPY out, LPUSH via redis-cli --pipe, one DELETE, one transaction; returns
 * jobs or -1. cpu (if given) gets self (the bench thread's and redis-cli's
 * CPU) and backend (its session's); redis is untouched, the caller's. */
long long raw_drain(const struct bench_env *env, struct drain_cpu *cpu);

/* ---- table.c ---- */
enum cmp { CMP_NONE, CMP_LE, CMP_GE };

/* Adds one run's value to a row (created on first use, in insertion order). */
void table_add(const char *scenario, const char *figure, int decimals, double value);
/* Sets a row's target: median <= or >= target gives PASS. */
void table_target(const char *scenario, const char *figure, enum cmp cmp, double target, const char *text);
/* The words a judged row's result shows instead of PASS and MISS. */
void table_words(const char *scenario, const char *figure, const char *pass, const char *miss);
void table_print(FILE *out);
void table_free(void);

/* ---- xid.c: the long transaction that holds an xid ---- */
/* Lets Postgres prepare transactions (a restart); before any scenario runs. */
void xid_setup_servers(const struct bench_env *env);
void scenario_xid_holder(const struct bench_env *env, int run);

/* ---- wait.c: what --redis-wait-replicas costs ---- */
/* The scenario's backlog: --jobs, but at most this many. */
#define WAIT_MAX_JOBS 200000
long long wait_jobs(const struct bench_opts *o);
/* Drains the backlog with no replica, with one (not waited for), with one
 * waited for; starts and stops the replica itself. */
void scenario_wait(const struct bench_env *env, int run);

/* ---- release.c: releasing a held backlog, with and without a long transaction ---- */
/* Holds --jobs jobs behind a queue cap, then frees the list until all are
 * released, with no other session open and with a REPEATABLE READ one. */
void scenario_release(const struct bench_env *env, int run);

/* ---- routed.c: one backlog over three Redis by route, against one Redis ---- */
/* --jobs jobs over three queues: drained into the bench's Redis by one relay,
 * then into three Redis (two started here) by one relay with two routes. */
void scenario_routed(const struct bench_env *env, int run);

/* ---- cluster.c: one BullMQ backlog into a 3-master Redis Cluster, against one Redis ---- */
/* --jobs BullMQ jobs over twelve hash-tagged queues, four a master: drained
 * into the bench's Redis, into a cluster started here, and into it with
 * --redis-wait-replicas 1, by one relay each. */
void scenario_cluster(const struct bench_env *env, int run);

#endif
