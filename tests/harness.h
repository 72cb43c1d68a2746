/* Integration-test helpers: the throwaway servers started by tests/services.sh,
 * and the relay binary run as a real process. Check assertions around the
 * support library (tests/support), which the chaos programs and the bench share. */
#ifndef STAGEDRAIN_HARNESS_H
#define STAGEDRAIN_HARNESS_H

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <sys/types.h>

#include "fmacros.h"

#include "support/logs.h"
#include "support/proc.h"
#include "support/redis.h"
#include "support/services.h"
#include "support/sql.h"
#include "support/timing.h"

/* A relay (or another program a test runs) and where its log goes. */
struct relay_proc {
	struct proc proc;
	char log[512];
};

const char *h_env(const char *name);
PGconn *h_pg(void);
/* The servers of this run (services.sh run's). */
const struct services *h_servers(void);
redisContext *h_redis(void);
/* Fails the test with msg: what a failed statement or command does here. */
void h_fail(const char *msg);
/* Runs SQL that must succeed; returns the first value of the first row as a number (or 0). */
#define h_sql(c, ...) sql_or((c), h_fail, __VA_ARGS__)
/* Runs SQL that must succeed; copies the first value of the first row into out ("" if none). */
void h_sql_text(PGconn *c, const char *sql, char *out, size_t len);
/* Runs a Redis command that must not fail; returns the reply (caller frees). */
#define h_cmd(r, ...) redis_or((r), h_fail, __VA_ARGS__)
/* A Redis command that must answer an integer. */
#define h_cmd_int(r, ...) redis_int_or((r), h_fail, __VA_ARGS__)
/* Empties both tables and Redis: called before each test. */
void h_reset(void);
/* Inserts n jobs in one transaction: class C, args [first+i], on queue q. */
void h_stage(PGconn *c, const char *queue, int first, int n);
/* The same, and in the same statement records their jids in table `expected`
 * (made by h_snapshot_expected): jobs staged while a relay runs are checked too. */
void h_stage_expected(PGconn *c, const char *queue, int first, int n);

/* Starts o->argv (o->log is set here) with its output to TEST_DIR/<name>.log,
 * emptied first: no line of an earlier run may be read for this one's. */
void h_proc_start(struct relay_proc *p, const char *name, struct proc_opts *o);
/* Starts the relay with the test servers' URLs plus args (NULL-terminated). */
void h_relay_start(struct relay_proc *p, const char *name, const char *const *args);
/* The same, without URL flags: the test sets the environment instead. */
void h_relay_start_bare(struct relay_proc *p, const char *name, const char *const *args);
/* Waits for exit; returns the exit status, or -1 if it is still running after
 * timeout_ms (or was reaped already). */
int h_relay_wait(struct relay_proc *p, int timeout_ms);
void h_relay_kill(struct relay_proc *p, int sig);
/* SIGKILLs the relay, waits for it, and ends its Postgres sessions (over c)
 * as a crashed host's would end, so its locks go with it. */
void h_relay_crash(struct relay_proc *p, PGconn *c);
/* A failed check must not leave the relay running after the test
 * (a Check assertion; p is a struct relay_proc *). */
#define RELAY_CHECK(p, cond, ...)                                                                                      \
	do {                                                                                                           \
		if (!(cond)) {                                                                                         \
			h_relay_kill((p), SIGKILL);                                                                    \
			(void)h_relay_wait((p), 5000);                                                                 \
			ck_abort_msg(__VA_ARGS__);                                                                     \
		}                                                                                                      \
	} while (0)

/* Holds every COMMIT that deletes from staged_jobs while the test's session
 * holds pg_advisory_lock(H_COMMIT_LOCK): a relay waits there with its
 * batches pushed, as one that crashes between push and commit would be. */
#define H_COMMIT_LOCK 42425
void h_block_commits(PGconn *c);
void h_unblock_commits(PGconn *c);
/* True once the relay's session waits on a lock, within timeout_ms. */
bool h_wait_blocked(PGconn *c, int timeout_ms);
/* Runs the relay with args to completion (it must exit within 60 s); returns its exit status. */
int h_relay_run(const char *name, const char *const *args);
/* True once LLEN key reaches n on r, within timeout_ms. */
/* True once staged_jobs holds no row within timeout_ms: the relay pushes
 * before its delete commits, so a job in Redis may still be staged. */
bool h_wait_staged_empty(PGconn *c, int timeout_ms);
bool h_wait_len(redisContext *r, const char *key, long long n, int timeout_ms);
/* True once the relay's log contains text, within timeout_ms. */
bool h_log_wait(const struct relay_proc *p, const char *text, int timeout_ms);
bool h_log_contains(const char *path, const char *text);
/* How many lines of the log contain text. */
int h_log_count(const char *path, const char *text);
/* True once at least n lines of the relay's log contain text, within timeout_ms. */
bool h_log_wait_count(const struct relay_proc *p, const char *text, int n, int timeout_ms);

/* The relay's own fence and epoch keys at the default --lock-key (include/keys.h). */
const char *h_fence_key(void);
const char *h_epoch_key(void);

/* Runs tests/services.sh with a sub-command against this run's servers. */
void h_services(const char *subcmd);

/* The port services.sh wrote into TEST_DIR/NAME.port (tls, sentinel1, ...). */
int h_port(const char *name);
/* A command (space-separated words) to a TLS-only test Redis (services.sh
 * tls-start; port_name tls or tlsauth), through redis-cli with the test CA and
 * client certificate: its raw output, one line per element (caller frees). */
char *h_tls_cli(const char *port_name, const char *cmd);
/* The same for a command that answers an integer. */
long long h_tls_cli_int(const char *port_name, const char *cmd);

/* curl http://127.0.0.1:port/path: the body (caller frees), the status in *status. */
char *h_http_get(int port, const char *path, int *status);
/* The value of the sample on a /metrics page whose name and labels are exactly
 * series ("stagedrain_held_jobs{queue=\"default\"}"); NAN if absent. */
double h_metric_sample(const char *page, const char *series);
/* The port on the relay's "serving http" line (it ran with --http-addr 127.0.0.1:0). */
int h_http_port(struct relay_proc *p);

/* Every job payload in a Redis list, parsed (caller json_decref's). */
json_t *h_list_jobs(redisContext *r, const char *key);
/* A port tests/services.sh wrote into the test directory (pgfo1.port ...). */
int h_port_file(const char *name);
/* The second Redis (services.sh redis2-start), route "b" of the queues
 * given (and more settings after them), its pid to SIGSTOP and SIGCONT. */
struct h_second {
	redisContext *r;
	char route[256];
	int pid;
};
void h_second_start(struct h_second *s, const char *queues, const char *more);
/* Wakes it (SIGCONT) and stops it. */
void h_second_stop(struct h_second *s);
/* The args[0] of a Sidekiq list's jobs, in the order a worker takes them
 * (RPOP: the list's tail first), as one text "1,2,3". */
void h_list_args(redisContext *r, const char *key, char *out, size_t len);
/* "first,first+1,...,first+n-1" */
void h_series(int first, int n, char *out, size_t len);
/* Table `table` (pos int, j jsonb), made anew, of the n JSON texts, pos
 * counting from 0: what a worker recorded, to ask with SQL. */
void h_json_table(PGconn *c, const char *table, const char *const *texts, size_t n);
/* The same of the elements of the Redis list key, in LRANGE order. */
void h_load_list(PGconn *c, redisContext *r, const char *key, const char *table);
/* Records the staged rows' jids in table `expected`, before a relay runs. */
void h_snapshot_expected(PGconn *c);
/* Loads the jid of every job in the given Redis lists into table `seen`. */
void h_load_seen(PGconn *c, redisContext *r, const char *const *keys);
/* How many expected jids are not in `seen`. */
long long h_missing(PGconn *c);
/* How many entries of `seen` repeat a jid seen before (0: each job once). */
long long h_duplicates(PGconn *c);
/* Every expected job arrived exactly once in the keys (h_load_seen), and
 * list holds n jobs: the relay's promise, checked the one way every test does. */
void h_assert_each_once(PGconn *c, redisContext *r, const char *const *keys, const char *list, long long n);

/* Runs sql/roles.sql as an admin would and makes name a login role (not a
 * superuser) in stagedrain_relay; conninfo gets a --pg-url that logs in as it. */
void h_relay_role(PGconn *c, const char *name, char *conninfo, size_t len);

#endif
