/* What the chaos programs (chaos.c, steady.c) share: small helpers, the
 * throwaway servers and their sessions, the relay run as a process, and the
 * checker that proves what reached Redis. */
#ifndef STAGEDRAIN_CHAOS_COMMON_H
#define STAGEDRAIN_CHAOS_COMMON_H

#include "fmacros.h"

#include <hiredis/hiredis.h>
#include <libpq-fe.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "support/logs.h"
#include "support/proc.h"
#include "support/relay_argv.h"
#include "support/services.h"
#include "support/timing.h"

#define NQUEUES 4
extern const char *const queues[NQUEUES];

/* The servers of one run and the orchestrator's own sessions to them. */
struct env {
	const char *bin;     /* the relay binary */
	struct services srv; /* servers, logs: the directory is kept when a run fails */
	PGconn *pg;
	redisContext *redis;
	/* the relays' own Redis keys (their default --lock-key) */
	char fence_key[96], epoch_key[96];
	/* NULL: order is checked in every list; else only in this one (chaos
	 * --caps: the uncapped queue's), since a batch releases held jobs
	 * round-robin across tenants, each tenant's in the order they were held
	 * (id order but for late commits, read through gaps) */
	const char *ordered;
	/* chaos --routes: order is instead each producer's commit order through
	 * the whole of every list of every target (a queue's jobs may be on two
	 * targets when a route was removed for a while; a job's args are
	 * [producer, its sequence]): a
	 * target whose Redis was down releases its held jobs in the order they
	 * were held, late commits after, in one batch, so a batch need not be in
	 * id order; a producer's own jobs must never overtake each other, before,
	 * during or after a hold. `ordered` then names the self-test's list
	 * (on the default target). */
	bool by_producer;
	/* chaos --routes: the Redis queue i went to, if not this one (routes.h) */
	redisContext *queue_redis[NQUEUES];
	/* The target whose Redis seen_load reads (chaos_seen.target); NULL:
	 * "default". A job found on a target its queue never went to
	 * (chaos_routed) is misrouted. */
	const char *seen_target;
	/* Loads other Redis' jobs into chaos_seen after seen_load's (the
	 * self-test's second load too); NULL: none. */
	int (*seen_more)(struct env *e, long long *entries, void *arg);
	void *seen_more_arg;
};

/* A relay run as a process of the built binary, and its log. */
struct relay {
	struct proc proc;
	char log[PATH_MAX];
	/* Its --pg-url, which its argv points at: written by the child, which
	 * names its session after its own pid (env_relay_argv); "" here. */
	char pg_url[1200];
};

/* Forked children that run a function of ours (producers, workers). */
struct kids {
	struct proc p[32];
	int n, failures;
};

/* ---- small helpers ---- */

/* splitmix64: seeded, so a failing run can be repeated with --seed. */
unsigned long long rnd(unsigned long long *s);
long long rnd_range(unsigned long long *s, long long lo, long long hi);
void say(const char *fmt, ...) SD_PRINTF(1, 2);
int cmp_ll(const void *a, const void *b);
/* The sum of one long long field over n structs of size stride (the workers'
 * shared counters). */
long long sum_field(const void *base, size_t stride, int n, size_t off);

/* One command-line flag of a chaos program and the variable its value sets. */
struct flag {
	const char *name;
	enum { FLAG_INT, FLAG_LL, FLAG_UINT, FLAG_STR } type;
	void *to;
};
/* Parses --name VALUE pairs and --keep; 0, or -1 on an unknown flag or a missing value. */
int parse_flags(int argc, char **argv, const struct flag *flags, size_t nflags, bool *keep);
/* What every chaos program does first: catch SIGINT and SIGTERM, map size
 * bytes that its forked children share (zeroed); NULL if that failed. */
void *chaos_begin(size_t size);
/* Prints text (the usage) to stderr; returns 2, the exit status for it. */
int usage(const char *text);
/* The report's last lines: the checker's self-test (what it found; NULL: it
 * could not run), the run's length, the verdict; returns ok. */
bool report_end(bool ok, const char *self_test, long long start_ms);

/* A growing string; aborts if memory runs out (a test program's choice). */
struct strbuf {
	char *data;
	size_t len, cap;
};

void strbuf_put(struct strbuf *b, const char *s, size_t n);
void strbuf_printf(struct strbuf *b, const char *fmt, ...) SD_PRINTF(2, 3);
void strbuf_reset(struct strbuf *b);
void strbuf_free(struct strbuf *b);

/* ---- the servers, sessions to them, the relay ---- */

/* A temp directory, both servers, `stagedrain migrate`, the orchestrator's
 * sessions and the checker's tables; extra_sql (or NULL) runs after them. */
int env_setup(struct env *e, const char *bin, const char *services, const char *extra_sql) SD_MUSTCHECK;
/* Closes the sessions, stops the servers, removes the directory if asked. */
void env_teardown(struct env *e, bool remove_dir);
/* A session to the test Postgres, named so the killer never picks it. */
PGconn *env_pg_connect(const struct env *e, const char *name);
/* SQL on the orchestrator's session; the first value as a number, or -1. */
long long env_val(struct env *e, const char *sql);
/* The first value of a query's first row as text, or "" if none. */
void env_text(struct env *e, const char *sql, char *out, size_t outlen);
/* A Redis command on the orchestrator's connection, reconnecting once if Redis
 * was restarted under it; NULL on error (caller frees the reply). */
redisReply *env_cmd(struct env *e, const char *fmt, ...);
/* A relay's command line up to its flags: the binary and the servers' URLs,
 * the Postgres one naming the session after the relay's pid, so the killer can
 * map the backend holding the lock to the process. The caller adds flags. */
void env_relay_argv(struct env *e, struct relay *r, struct relay_argv *a);
/* Starts the relay with a (from env_relay_argv), its output to r->log, and
 * waits until a line of its log holds ready: 0, -ECHILD if it exited,
 * -ETIMEDOUT after timeout_ms or an interrupt, the error of a (a->err) if a
 * word did not fit (each said on stderr). */
int env_relay_start(struct env *e, struct relay *r, const struct relay_argv *a, const char *ready, int timeout_ms);
/* Forks n children that each run fn(arg, i) and exit with its return value.
 * In a child, e's sessions are the parent's: it forgets them (leaves them open). */
int kids_start(struct kids *k, struct env *e, int n, int (*fn)(void *arg, int i), void *arg);
/* Reaps children that finished (all of them if block), counting those that
 * failed; returns how many are still running. */
int kids_reap(struct kids *k, bool block, const char *what);
/* SIGKILLs and reaps every child still running. */
void kids_kill(struct kids *k);

/* ---- the checker ---- */

/*
 * Tables the producers fill: chaos_committed gets each job in the job's own
 * transaction, so it holds exactly the committed jobs (tx: which transaction,
 * for a program that times them); rolled-back jids are recorded after the
 * ROLLBACK. chaos_seen is what Redis held at the end (seen_load), with the
 * target whose Redis held it. chaos_routed (queue, target) is every target a
 * queue was routed to during the run: each queue to "default" unless a
 * program (chaos --routes) says otherwise.
 */
struct results {
	long long entries, present, missing, duplicates, rolled_back, phantoms, mismatched, order_violations, misrouted;
	long long batches, dead, left_staged, left_held, unregistered, committed_rows;
	char causes[1024]; /* chaos.c: duplicates by the fault that preceded them (--routes: by targets) */
};

/* chaos_seen's columns, in order: src, target, list, pos, jid, queue, class,
 * args, enq, enq_us. */
#define SEEN_FIELDS 10
/* One chaos_seen row in COPY text form into l (reset first); NULL is \N. */
void seen_line(struct strbuf *l, const char *const f[SEEN_FIELDS]);
/* A loader's COPY into chaos_seen: begin, a line (seen_line) at a time, end
 * (rc 0: the rows stay, then ANALYZE; else the COPY fails); each 0 or -1. */
int seen_copy_begin(struct env *e) SD_MUSTCHECK;
int seen_copy_put(struct env *e, const struct strbuf *l) SD_MUSTCHECK;
int seen_copy_end(struct env *e, int rc) SD_MUSTCHECK;
/* Loads every job in Redis (queue:* lists and the schedule zset) into chaos_seen. */
int seen_load(struct env *e, long long *entries) SD_MUSTCHECK;
/* Runs every check on chaos_seen against what the producers recorded. */
int check_redis(struct env *e, struct results *res) SD_MUSTCHECK;
/* Breaks Redis in five known ways and checks again: 0 if each count moved,
 * 1 if one did not, -1 if it could not run. With a queue on another Redis
 * (queue_redis), the copied job goes to that Redis, so misrouted must move too. */
int check_self_test(struct env *e, const struct results *before, struct results *after);
/* Counts the rows of `copies` (a query with a column t_us: when each extra
 * copy was pushed) by the fault chaos_events logged last before each, as
 * report lines into out ("" if it cannot). */
void fault_causes(struct env *e, const char *copies, char *out, size_t size);

#endif
