/* Integration-test helpers: the throwaway servers started by tests/services.sh,
 * and the relay binary run as a real process. */
#include "fmacros.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

const char *h_env(const char *name)
{
	const char *v = getenv(name);

	ck_assert_msg(v && *v, "%s is not set: run the suite through `make test`", name);
	return v;
}

PGconn *h_pg(void)
{
	PGconn *c = PQconnectdb(h_env("TEST_PG_URL"));

	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "test postgres: %s", PQerrorMessage(c));
	PQclear(PQexec(c, "SET client_min_messages = warning"));
	return c;
}

redisContext *h_redis(void)
{
	redisContext *r = redisConnect("127.0.0.1", atoi(h_env("TEST_REDIS_PORT")));

	ck_assert_msg(r && !r->err, "test redis: %s", r ? r->errstr : "out of memory");
	return r;
}

long long h_sql(PGconn *c, const char *fmt, ...)
{
	char sql[8192];
	va_list ap;
	PGresult *res;
	ExecStatusType st;
	long long v = 0;

	va_start(ap, fmt);
	vsnprintf(sql, sizeof(sql), fmt, ap);
	va_end(ap);
	res = PQexec(c, sql);
	st = PQresultStatus(res);
	ck_assert_msg(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(c));
	if (st == PGRES_TUPLES_OK && PQntuples(res) > 0 && !PQgetisnull(res, 0, 0))
		v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return v;
}

static redisReply *vcmd(redisContext *r, const char *fmt, va_list ap)
{
	redisReply *rep = redisvCommand(r, fmt, ap);

	ck_assert_msg(rep != NULL, "redis: %s", r->errstr);
	ck_assert_msg(rep->type != REDIS_REPLY_ERROR, "redis %s: %s", fmt, rep->str);
	return rep;
}

redisReply *h_cmd(redisContext *r, const char *fmt, ...)
{
	va_list ap;
	redisReply *rep;

	va_start(ap, fmt);
	rep = vcmd(r, fmt, ap);
	va_end(ap);
	return rep;
}

long long h_cmd_int(redisContext *r, const char *fmt, ...)
{
	va_list ap;
	redisReply *rep;
	long long v;

	va_start(ap, fmt);
	rep = vcmd(r, fmt, ap);
	va_end(ap);
	ck_assert_int_eq(rep->type, REDIS_REPLY_INTEGER);
	v = rep->integer;
	freeReplyObject(rep);
	return v;
}

/* Migrates once per process (idempotent anyway), then empties everything. */
void h_reset(void)
{
	static const char *const migrate[] = { "migrate", NULL };
	PGconn *c;
	redisContext *r;

	ck_assert_int_eq(h_relay_run("migrate", migrate), 0);
	c = h_pg();
	h_sql(c, "TRUNCATE staged_jobs, staged_jobs_dead RESTART IDENTITY");
	PQfinish(c);
	r = h_redis();
	freeReplyObject(h_cmd(r, "FLUSHALL"));
	redisFree(r);
}

void h_stage(PGconn *c, const char *queue, int first, int n)
{
	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args)"
		 " SELECT '%s', 'HardWorker', jsonb_build_array(i)"
		 " FROM generate_series(%d, %d) i ORDER BY i",
	      queue, first, first + n - 1);
}

void h_stage_expected(PGconn *c, const char *queue, int first, int n)
{
	h_sql(c, "WITH s AS (INSERT INTO staged_jobs (queue, job_class, args)"
		 " SELECT '%s', 'HardWorker', jsonb_build_array(i)"
		 " FROM generate_series(%d, %d) i ORDER BY i"
		 " RETURNING id, jid, queue, job_class, args)"
		 " INSERT INTO expected SELECT * FROM s",
	      queue, first, first + n - 1);
}

/* In the child: argv is the binary, a leading subcommand, the test servers'
 * URLs (unless urls is false: then the environment must name them), args. */
static void exec_relay(const char *log, bool urls, const char *const *args)
{
	const char *argv[64];
	int n = 0, fd;

	argv[n++] = h_env("STAGEDRAIN_BIN");
	if (args && *args && **args != '-')
		argv[n++] = *args++;
	if (urls) {
		argv[n++] = "--pg-url";
		argv[n++] = h_env("TEST_PG_URL");
		argv[n++] = "--redis-url";
		argv[n++] = h_env("TEST_REDIS_URL");
	}
	for (; args && *args && n < 63; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd >= 0) {
		dup2(fd, STDERR_FILENO);
		dup2(fd, STDOUT_FILENO);
		close(fd);
	}
	execv(argv[0], (char *const *)argv);
	_exit(127);
}

static void spawn(struct relay_proc *p, const char *name, bool urls, const char *const *args)
{
	snprintf(p->log, sizeof(p->log), "%s/%s.log", h_env("TEST_DIR"), name);
	unlink(p->log);
	p->pid = fork();
	ck_assert_int_ge(p->pid, 0);
	if (p->pid == 0)
		exec_relay(p->log, urls, args);
}

void h_relay_start(struct relay_proc *p, const char *name, const char *const *args)
{
	spawn(p, name, true, args);
}

void h_relay_start_bare(struct relay_proc *p, const char *name, const char *const *args)
{
	spawn(p, name, false, args);
}

int h_relay_wait(struct relay_proc *p, int timeout_ms)
{
	long long deadline = h_now_ms() + timeout_ms;
	int status;

	while (p->pid > 0) {
		pid_t r = waitpid(p->pid, &status, WNOHANG);
		if (r == p->pid) {
			p->pid = 0;
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		}
		if (h_now_ms() > deadline)
			return -1;
		h_sleep_ms(20);
	}
	return -1;
}

void h_relay_kill(struct relay_proc *p, int sig)
{
	if (p->pid > 0)
		kill(p->pid, sig);
}

int h_relay_run(const char *name, const char *const *args)
{
	struct relay_proc p;
	int st;

	h_relay_start(&p, name, args);
	st = h_relay_wait(&p, 60000);
	if (st < 0) {
		h_relay_kill(&p, SIGKILL);
		(void)h_relay_wait(&p, 5000);
		ck_abort_msg("relay %s did not exit within 60 s; see %s", name, p.log);
	}
	return st;
}

bool h_log_contains(const char *path, const char *text)
{
	char line[4096];
	bool found = false;
	FILE *f = fopen(path, "r");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, text) != NULL;
	fclose(f);
	return found;
}

bool h_log_wait(const struct relay_proc *p, const char *text, int timeout_ms)
{
	return h_log_wait_count(p, text, 1, timeout_ms);
}

int h_log_count(const char *path, const char *text)
{
	char line[4096];
	int n = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, text) != NULL;
	fclose(f);
	return n;
}

bool h_log_wait_count(const struct relay_proc *p, const char *text, int n, int timeout_ms)
{
	long long deadline = h_now_ms() + timeout_ms;

	while (h_log_count(p->log, text) < n) {
		if (h_now_ms() > deadline)
			return false;
		h_sleep_ms(20);
	}
	return true;
}

void h_services(const char *subcmd)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "bash '%s' %s '%s'", h_env("TEST_SERVICES"), subcmd, h_env("TEST_DIR"));
	ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
}

void h_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

long long h_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

json_t *h_list_jobs(redisContext *r, const char *key)
{
	redisReply *rep = h_cmd(r, "LRANGE %s 0 -1", key);
	json_t *arr = json_array();

	for (size_t i = 0; i < rep->elements; i++) {
		json_error_t err;
		json_t *j = json_loadb(rep->element[i]->str, rep->element[i]->len, 0, &err);
		ck_assert_msg(j != NULL, "invalid job json in %s: %s", key, err.text);
		json_array_append_new(arr, j);
	}
	freeReplyObject(rep);
	return arr;
}

/* COPY is one round trip for any number of jids. */
static void copy_jids(PGconn *c, redisContext *r, const char *key)
{
	json_t *jobs = h_list_jobs(r, key);
	PGresult *res = PQexec(c, "COPY seen (jid, key) FROM STDIN");
	size_t i;
	json_t *j;

	ck_assert_int_eq(PQresultStatus(res), PGRES_COPY_IN);
	PQclear(res);
	json_array_foreach(jobs, i, j)
	{
		char line[256];
		int n = snprintf(line, sizeof(line), "%s\t%s\n", json_string_value(json_object_get(j, "jid")), key);
		ck_assert_int_eq(PQputCopyData(c, line, n), 1);
	}
	ck_assert_int_eq(PQputCopyEnd(c, NULL), 1);
	res = PQgetResult(c);
	ck_assert_msg(PQresultStatus(res) == PGRES_COMMAND_OK, "copy: %s", PQerrorMessage(c));
	PQclear(res);
	while ((res = PQgetResult(c)) != NULL)
		PQclear(res);
	json_decref(jobs);
}

void h_load_seen(PGconn *c, redisContext *r, const char *const *keys)
{
	h_sql(c, "DROP TABLE IF EXISTS seen");
	h_sql(c, "CREATE TABLE seen (jid text, key text)");
	for (; *keys; keys++)
		copy_jids(c, r, *keys);
}

void h_snapshot_expected(PGconn *c)
{
	h_sql(c, "DROP TABLE IF EXISTS expected");
	h_sql(c, "CREATE TABLE expected AS SELECT id, jid, queue, job_class, args FROM staged_jobs");
}

long long h_missing(PGconn *c)
{
	return h_sql(c, "SELECT count(*) FROM expected e WHERE NOT EXISTS"
			" (SELECT 1 FROM seen s WHERE s.jid = e.jid)");
}

long long h_duplicates(PGconn *c)
{
	return h_sql(c, "SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM seen GROUP BY jid) x");
}

void h_relay_role(PGconn *c, const char *name, char *conninfo, size_t len)
{
	char services[512], cmd[1600], *slash;

	snprintf(services, sizeof(services), "%s", h_env("TEST_SERVICES"));
	slash = strrchr(services, '/');
	ck_assert_ptr_nonnull(slash);
	*slash = '\0';
	snprintf(cmd, sizeof(cmd), "psql -X -q -v ON_ERROR_STOP=1 -d '%s' -f '%s/../sql/roles.sql'",
		 h_env("TEST_PG_URL"), services);
	ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
	h_sql(c, "DROP ROLE IF EXISTS %s", name);
	h_sql(c, "CREATE ROLE %s LOGIN NOSUPERUSER IN ROLE stagedrain_relay", name);
	snprintf(conninfo, len, "host=127.0.0.1 port=%s dbname=postgres user=%s", PQport(c), name);
}
