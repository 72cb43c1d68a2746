/* Integration-test helpers: the throwaway servers started by tests/services.sh,
 * and the relay binary run as a real process. */
#include "fmacros.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "support/relay_keys.h"
#include "support/services.h"

const char *h_env(const char *name)
{
	const char *v = getenv(name);

	ck_assert_msg(v && *v, "%s is not set: run the suite through `make test`", name);
	return v;
}

/* This run's servers, as `services.sh run` named them in the environment. */
const struct services *h_servers(void)
{
	static struct services s;

	if (!*s.dir)
		ck_assert_msg(services_attach(&s) == 0, "TEST_* is not set: run the suite through `make test`");
	return &s;
}

PGconn *h_pg(void)
{
	char err[SQL_ERRLEN];
	PGconn *c = sql_connect(h_env("TEST_PG_URL"), err);

	ck_assert_msg(c != NULL, "test postgres: %s", err);
	return c;
}

redisContext *h_redis(void)
{
	char err[REDIS_ERRLEN];
	redisContext *r = redis_open(h_servers()->redis_port, 0, err);

	ck_assert_msg(r != NULL, "test redis: %s", err);
	return r;
}

void h_fail(const char *msg)
{
	ck_abort_msg("%s", msg);
}

void h_sql_text(PGconn *c, const char *sql, char *out, size_t len)
{
	char err[SQL_ERRLEN];

	if (sql_text(c, out, len, err, sql) < 0)
		h_fail(err);
}

/* Runs `stagedrain migrate` before every test (it is idempotent: a no-op once
 * the schema is current, and it restores what a test dropped), then empties
 * both tables and Redis. */
void h_reset(void)
{
	static const char *const migrate[] = { "migrate", NULL };
	PGconn *c;
	redisContext *r;

	ck_assert_int_eq(h_relay_run("migrate", migrate), 0);
	c = h_pg();
	h_sql(c, "TRUNCATE staged_jobs, staged_jobs_dead, staged_jobs_held, staged_jobs_leader RESTART IDENTITY");
	PQfinish(c);
	r = h_redis();
	freeReplyObject(h_cmd(r, "FLUSHALL"));
	redisFree(r);
}

void h_stage(PGconn *c, const char *queue, int first, int n)
{
	h_sql(c,
	      "INSERT INTO staged_jobs (queue, job_class, args)"
	      " SELECT '%s', 'HardWorker', jsonb_build_array(i)"
	      " FROM generate_series(%d, %d) i ORDER BY i",
	      queue, first, first + n - 1);
}

void h_stage_expected(PGconn *c, const char *queue, int first, int n)
{
	h_sql(c,
	      "WITH s AS (INSERT INTO staged_jobs (queue, job_class, args)"
	      " SELECT '%s', 'HardWorker', jsonb_build_array(i)"
	      " FROM generate_series(%d, %d) i ORDER BY i"
	      " RETURNING id, jid, queue, job_class, args)"
	      " INSERT INTO expected SELECT * FROM s",
	      queue, first, first + n - 1);
}

void h_proc_start(struct relay_proc *p, const char *name, struct proc_opts *o)
{
	int rc;

	snprintf(p->log, sizeof(p->log), "%s/%s.log", h_env("TEST_DIR"), name);
	unlink(p->log);
	o->log = p->log;
	rc = proc_start(&p->proc, o);
	ck_assert_msg(rc == 0, "could not start %s: %s", o->argv[0], strerror(-rc));
}

/* Whether args give flag (--flag VALUE or --flag=VALUE). */
static bool gives(const char *const *args, const char *flag)
{
	size_t n = strlen(flag);

	for (; args && *args; args++)
		if (strncmp(*args, flag, n) == 0 && ((*args)[n] == '\0' || (*args)[n] == '='))
			return true;
	return false;
}

/* argv is the binary, a leading subcommand, the test servers' URLs (unless
 * urls is false: then the environment must name them), args. A URL args
 * give replaces the test server's: the relay refuses a flag given twice. */
static void spawn(struct relay_proc *p, const char *name, bool urls, const char *const *args)
{
	const char *argv[64];
	struct proc_opts o = { .argv = argv };
	int n = 0;

	argv[n++] = h_env("STAGEDRAIN_BIN");
	if (args && *args && **args != '-')
		argv[n++] = *args++;
	if (urls && !gives(args, "--pg-url") && !gives(args, "--pg-url-file")) {
		argv[n++] = "--pg-url";
		argv[n++] = h_env("TEST_PG_URL");
	}
	if (urls && !gives(args, "--redis-url") && !gives(args, "--redis-url-file")) {
		argv[n++] = "--redis-url";
		argv[n++] = h_env("TEST_REDIS_URL");
	}
	for (; args && *args && n < 63; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	h_proc_start(p, name, &o);
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
	return proc_wait(&p->proc, timeout_ms);
}

void h_relay_kill(struct relay_proc *p, int sig)
{
	(void)proc_signal(&p->proc, sig);
}

int h_relay_run(const char *name, const char *const *args)
{
	struct relay_proc p;
	int st;

	h_relay_start(&p, name, args);
	st = proc_wait(&p.proc, 60000);
	if (st < 0) {
		(void)proc_reap(&p.proc, 0);
		ck_abort_msg("relay %s did not exit within 60 s; see %s", name, p.log);
	}
	return st;
}

bool h_log_contains(const char *path, const char *text)
{
	return logs_contains(path, text);
}

bool h_log_wait(const struct relay_proc *p, const char *text, int timeout_ms)
{
	return h_log_wait_count(p, text, 1, timeout_ms);
}

int h_log_count(const char *path, const char *text)
{
	int n = logs_count(path, text);

	return n < 0 ? 0 : n; /* no log yet: no such line */
}

bool h_log_wait_count(const struct relay_proc *p, const char *text, int n, int timeout_ms)
{
	return logs_wait(p->log, text, n, timeout_ms, NULL);
}

const char *h_fence_key(void)
{
	static char key[96];

	return relay_fence_key(key, sizeof(key), KEYS_LOCK_DEFAULT);
}

const char *h_epoch_key(void)
{
	static char key[96];

	return relay_epoch_key(key, sizeof(key), KEYS_LOCK_DEFAULT);
}

void h_services(const char *subcmd)
{
	ck_assert_msg(services_run(h_servers(), subcmd, NULL) == 0, "services.sh %s failed", subcmd);
}

int h_port(const char *name)
{
	char path[600];
	int port = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.port", h_env("TEST_DIR"), name);
	f = fopen(path, "r");
	ck_assert_msg(f != NULL, "no %s: did services.sh start that server?", path);
	ck_assert_int_eq(fscanf(f, "%d", &port), 1);
	fclose(f);
	return port;
}

char *h_tls_cli(const char *port_name, const char *cmd)
{
	const char *dir = h_env("TEST_DIR");
	char line[2048], *out = NULL;
	size_t len = 0;
	FILE *f;

	snprintf(line, sizeof(line),
		 "redis-cli --tls --cacert %s/tls/ca.crt --cert %s/tls/client.crt --key %s/tls/client.key"
		 " -h 127.0.0.1 -p %d %s",
		 dir, dir, dir, h_port(port_name), cmd);
	f = popen(line, "r");
	ck_assert_msg(f != NULL, "could not run %s", line);
	out = calloc(1, 1);
	while (fgets(line, sizeof(line), f)) {
		size_t n = strlen(line);
		out = realloc(out, len + n + 1);
		memcpy(out + len, line, n + 1);
		len += n;
	}
	ck_assert_msg(pclose(f) == 0, "redis-cli %s failed: %s", cmd, out);
	return out;
}

long long h_tls_cli_int(const char *port_name, const char *cmd)
{
	char *out = h_tls_cli(port_name, cmd), *end;
	long long v = strtoll(out, &end, 10);

	ck_assert_msg(end != out && (*end == '\n' || !*end), "redis-cli %s: not an integer: %s", cmd, out);
	free(out);
	return v;
}

char *h_http_get(int port, const char *path, int *status)
{
	char cmd[256], line[4096], *body = NULL, *last;
	size_t len = 0;
	FILE *f, *out = open_memstream(&body, &len);

	snprintf(cmd, sizeof(cmd), "curl -sS --max-time 10 -w '\\n%%{http_code}' http://127.0.0.1:%d%s", port, path);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		fputs(line, out);
	ck_assert_msg(pclose(f) == 0, "%s failed", cmd);
	fclose(out);
	last = strrchr(body, '\n');
	ck_assert_ptr_nonnull(last);
	*status = atoi(last + 1);
	*last = '\0';
	return body;
}

int h_http_port(struct relay_proc *p)
{
	char line[4096], *at;
	FILE *f;
	int port = 0;

	RELAY_CHECK(p, h_log_wait(p, "serving http", 30000), "no \"serving http\" in %s", p->log);
	f = fopen(p->log, "r");
	ck_assert_ptr_nonnull(f);
	while (!port && fgets(line, sizeof(line), f))
		if (strstr(line, "serving http") && (at = strstr(line, "127.0.0.1:")))
			port = atoi(at + strlen("127.0.0.1:"));
	fclose(f);
	ck_assert_int_gt(port, 0);
	return port;
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

void h_json_table(PGconn *c, const char *table, const char *const *texts, size_t n)
{
	h_sql(c, "DROP TABLE IF EXISTS %s", table);
	h_sql(c, "CREATE TABLE %s (pos int, j jsonb)", table);
	for (size_t i = 0; i < n; i++) {
		char pos[24], sql[128];
		const char *params[2] = { pos, texts[i] };
		PGresult *res;

		snprintf(pos, sizeof(pos), "%zu", i);
		snprintf(sql, sizeof(sql), "INSERT INTO %.64s VALUES ($1::int, $2::jsonb)", table);
		res = PQexecParams(c, sql, 2, NULL, params, NULL, NULL, 0);
		ck_assert_msg(PQresultStatus(res) == PGRES_COMMAND_OK, "%s", PQerrorMessage(c));
		PQclear(res);
	}
}

void h_load_list(PGconn *c, redisContext *r, const char *key, const char *table)
{
	redisReply *rep = h_cmd(r, "LRANGE %s 0 -1", key);
	const char **texts = calloc(rep->elements + 1, sizeof(*texts));

	ck_assert_ptr_nonnull(texts);
	for (size_t i = 0; i < rep->elements; i++)
		texts[i] = rep->element[i]->str;
	h_json_table(c, table, texts, rep->elements);
	free(texts);
	freeReplyObject(rep);
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

void h_assert_each_once(PGconn *c, redisContext *r, const char *const *keys, const char *list, long long n)
{
	h_load_seen(c, r, keys);
	ck_assert_int_eq(h_missing(c), 0);
	ck_assert_int_eq(h_duplicates(c), 0);
	ck_assert_int_eq(h_cmd_int(r, "LLEN %s", list), n);
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

double h_metric_sample(const char *page, const char *series)
{
	size_t n = strlen(series);

	for (const char *p = page; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return NAN;
}

void h_block_commits(PGconn *c)
{
	h_sql(c, "CREATE OR REPLACE FUNCTION test_hold_commit() RETURNS trigger LANGUAGE plpgsql AS"
		 " $$ BEGIN PERFORM pg_advisory_xact_lock_shared(42425); RETURN NULL; END $$");
	h_sql(c, "DROP TRIGGER IF EXISTS test_hold_commit ON staged_jobs");
	h_sql(c, "CREATE CONSTRAINT TRIGGER test_hold_commit AFTER DELETE ON staged_jobs DEFERRABLE INITIALLY DEFERRED"
		 " FOR EACH ROW EXECUTE FUNCTION test_hold_commit()");
}

void h_unblock_commits(PGconn *c)
{
	h_sql(c, "DROP TRIGGER IF EXISTS test_hold_commit ON staged_jobs");
	h_sql(c, "DROP FUNCTION IF EXISTS test_hold_commit()");
}

bool h_wait_blocked(PGconn *c, int timeout_ms)
{
	long long t0 = mono_ms();

	while (h_sql(c, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'stagedrain'"
			" AND wait_event_type = 'Lock'") == 0) {
		if (mono_ms() - t0 > timeout_ms)
			return false;
		sleep_ms(5);
	}
	return true;
}

void h_relay_crash(struct relay_proc *p, PGconn *c)
{
	h_relay_kill(p, SIGKILL);
	ck_assert_int_eq(h_relay_wait(p, 5000), 128 + SIGKILL);
	h_sql(c, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'stagedrain'");
	while (h_sql(c, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'stagedrain'") > 0)
		sleep_ms(10);
}

bool h_wait_staged_empty(PGconn *c, int timeout_ms)
{
	long long t0 = mono_ms();

	while (h_sql(c, "SELECT count(*) FROM staged_jobs") > 0) {
		if (mono_ms() - t0 > timeout_ms)
			return false;
		sleep_ms(10);
	}
	return true;
}

bool h_wait_len(redisContext *r, const char *key, long long n, int timeout_ms)
{
	long long t0 = mono_ms();

	while (h_cmd_int(r, "LLEN %s", key) < n) {
		if (mono_ms() - t0 > timeout_ms)
			return false;
		sleep_ms(10);
	}
	return true;
}

/* The args of a Sidekiq list's jobs, in the order a worker takes them
 * (RPOP: the list's tail first), as one text "1,2,3". */
void h_list_args(redisContext *r, const char *key, char *out, size_t len)
{
	json_t *jobs = h_list_jobs(r, key), *j;
	size_t i, n = json_array_size(jobs), at = 0;

	out[0] = '\0';
	for (i = n; i-- > 0 && at + 24 < len;) {
		j = json_array_get(json_object_get(json_array_get(jobs, i), "args"), 0);
		at += (size_t)snprintf(out + at, len - at, "%s%lld", at ? "," : "", (long long)json_integer_value(j));
	}
	json_decref(jobs);
}

/* "first,first+1,...,first+n-1" */
void h_series(int first, int n, char *out, size_t len)
{
	size_t at = 0;

	out[0] = '\0';
	for (int i = 0; i < n && at + 24 < len; i++)
		at += (size_t)snprintf(out + at, len - at, "%s%d", i ? "," : "", first + i);
}

void h_second_start(struct h_second *s, const char *queues, const char *more)
{
	char path[600];
	FILE *f;

	h_services("redis2-start");
	s->r = redisConnect("127.0.0.1", h_port("redis2"));
	ck_assert_msg(s->r && !s->r->err, "redis2: %s", s->r ? s->r->errstr : "no memory");
	freeReplyObject(h_cmd(s->r, "FLUSHALL"));
	snprintf(s->route, sizeof(s->route), "b %s --redis-url redis://127.0.0.1:%d/0%s", queues, h_port("redis2"),
		 more);
	snprintf(path, sizeof(path), "%s/redis2.pid", h_env("TEST_DIR"));
	ck_assert_ptr_nonnull(f = fopen(path, "r"));
	ck_assert_int_eq(fscanf(f, "%d", &s->pid), 1);
	fclose(f);
}

void h_second_stop(struct h_second *s)
{
	kill(s->pid, SIGCONT);
	redisFree(s->r);
	h_services("redis2-stop");
}

int h_port_file(const char *name)
{
	char path[600];
	FILE *f;
	int port = 0;

	snprintf(path, sizeof(path), "%s/%s", h_env("TEST_DIR"), name);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%d", &port), 1);
	fclose(f);
	return port;
}
