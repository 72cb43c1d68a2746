/* What the chaos programs (chaos.c, steady.c) share: small helpers, the
 * throwaway servers and their sessions, the relay run as a process, and the
 * checker that proves what reached Redis. */
#ifndef STAGEDRAIN_CHAOS_COMMON_H
#define STAGEDRAIN_CHAOS_COMMON_H

#include "fmacros.h"

#include <hiredis/hiredis.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

/* The relays' default --lock-key 0x73746764726e, in decimal as their Redis keys spell it. */
#define LOCK_KEY "126943985087086"
#define FENCE_KEY "stagedrain:" LOCK_KEY ":fence"
#define EPOCH_KEY "stagedrain:" LOCK_KEY ":epoch"

#define NQUEUES 4
extern const char *const queues[NQUEUES];

/* Set by SIGINT and SIGTERM (see catch_signals). */
extern volatile sig_atomic_t interrupted;

/* The servers of one run and the orchestrator's own sessions to them. */
struct env {
	const char *bin, *services; /* the relay binary, tests/services.sh */
	char dir[512];              /* servers, logs: kept when a run fails */
	char pg_url[1024];
	int redis_port;
	PGconn *pg;
	redisContext *redis;
	bool services_up;
};

/* ---- small helpers ---- */

void catch_signals(void);
long long mono_ms(void);
/* CLOCK_REALTIME, the clock the relay stamps enqueued_at with. */
long long real_us(void);
void sleep_ms(long long ms);
/* splitmix64: seeded, so a failing run can be repeated with --seed. */
unsigned long long rnd(unsigned long long *s);
long long rnd_range(unsigned long long *s, long long lo, long long hi);
void say(const char *fmt, ...) SD_PRINTF(1, 2);
/* Our sockets must not leak into the relays we exec. */
void cloexec(int fd);
bool file_contains(const char *path, const char *text);
/* Lines of a file that contain text. */
int file_count(const char *path, const char *text);
int cmp_ll(const void *a, const void *b);

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
int env_setup(struct env *e, const char *extra_sql) SD_MUSTCHECK;
/* Closes the sessions, stops the servers, removes the directory if asked. */
void env_teardown(struct env *e, bool remove_dir);
/* Runs `bash services.sh CMD DIR` and returns its exit status. */
int env_services(struct env *e, const char *cmd);
/* A session to the test Postgres, named so the killer never picks it. */
PGconn *env_pg_connect(const struct env *e, const char *name);
/* SQL on the orchestrator's session; the first value as a number, or -1. */
long long sql_val(struct env *e, const char *sql);
/* The first value of a query's first row as text, or "" if none. */
void sql_text(struct env *e, const char *sql, char *out, size_t outlen);
/* A Redis command on the orchestrator's connection, reconnecting once if Redis
 * was restarted under it; NULL on error (caller frees the reply). */
redisReply *rcmd(struct env *e, const char *fmt, ...);
/* In a forked child: execs the relay with the servers' URLs and args
 * (NULL-terminated), its stdout and stderr to log. */
void exec_relay(const struct env *e, const char *log, const char *const *args) __attribute__((noreturn));

/* ---- the checker ---- */

/*
 * Tables the producers fill: chaos_committed gets each job in the job's own
 * transaction, so it holds exactly the committed jobs (tx: which transaction,
 * for a program that times them); rolled-back jids are recorded after the
 * ROLLBACK. chaos_seen is what Redis held at the end (seen_load).
 */
struct results {
	long long entries, present, missing, duplicates, rolled_back, phantoms, mismatched, order_violations;
	long long batches, dead, left_staged, unregistered, committed_rows;
	char causes[512]; /* chaos.c: duplicates by the fault that preceded them */
};

/* Loads every job in Redis (queue:* lists and the schedule zset) into chaos_seen. */
int seen_load(struct env *e, long long *entries) SD_MUSTCHECK;
/* Runs every check on chaos_seen against what the producers recorded. */
int check_redis(struct env *e, struct results *res) SD_MUSTCHECK;
/* Breaks Redis in five known ways and checks again: 0 if each count moved,
 * 1 if one did not, -1 if it could not run. */
int check_self_test(struct env *e, const struct results *before, struct results *after);

#endif
