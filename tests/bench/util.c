/* Bench helpers: clocks, connections that must work, staging a backlog. */
#include "bench.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

long long mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

long long wall_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !bench_stop)
		;
}

/* Only the main thread may die: exit runs the clean-up that stops the servers. */
void die(const char *fmt, ...)
{
	va_list ap;

	fputs("bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void note(const char *fmt, ...)
{
	va_list ap;

	fputs("bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

PGconn *pg_connect(const struct bench_env *env)
{
	PGconn *c = PQconnectdb(env->pg_url);

	if (PQstatus(c) != CONNECTION_OK)
		die("could not connect to postgres: %s", PQerrorMessage(c));
	PQclear(PQexec(c, "SET client_min_messages = warning"));
	return c;
}

redisContext *redis_connect(const struct bench_env *env)
{
	redisContext *r = redisConnect("127.0.0.1", env->redis_port);

	if (!r || r->err)
		die("could not connect to redis on port %d: %s", env->redis_port,
		    r ? r->errstr : "out of memory");
	return r;
}

static long long vsql(PGconn *c, bool must, const char *fmt, va_list ap)
{
	char q[4096];
	PGresult *res;
	long long v = 0;
	ExecStatusType st;

	vsnprintf(q, sizeof(q), fmt, ap);
	res = PQexec(c, q);
	st = PQresultStatus(res);
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		if (must)
			die("%s: %s", q, PQresultErrorMessage(res));
		note("%s: %s", q, PQresultErrorMessage(res));
		PQclear(res);
		return -1;
	}
	if (st == PGRES_TUPLES_OK && PQntuples(res) > 0 && PQnfields(res) > 0)
		v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return v;
}

long long sql(PGconn *c, const char *fmt, ...)
{
	va_list ap;
	long long v;

	va_start(ap, fmt);
	v = vsql(c, true, fmt, ap);
	va_end(ap);
	return v;
}

long long sql_try(PGconn *c, const char *fmt, ...)
{
	va_list ap;
	long long v;

	va_start(ap, fmt);
	v = vsql(c, false, fmt, ap);
	va_end(ap);
	return v;
}

long long redis_int(redisContext *r, const char *fmt, ...)
{
	va_list ap;
	redisReply *rep;
	long long v;

	va_start(ap, fmt);
	rep = redisvCommand(r, fmt, ap);
	va_end(ap);
	if (!rep)
		die("redis: %s", r->errstr);
	if (rep->type != REDIS_REPLY_INTEGER)
		die("redis %s: not an integer reply", fmt);
	v = rep->integer;
	freeReplyObject(rep);
	return v;
}

void redis_ok(redisContext *r, const char *fmt, ...)
{
	va_list ap;
	redisReply *rep;

	va_start(ap, fmt);
	rep = redisvCommand(r, fmt, ap);
	va_end(ap);
	if (!rep)
		die("redis: %s", r->errstr);
	if (rep->type == REDIS_REPLY_ERROR)
		die("redis %s: %s", fmt, rep->str);
	freeReplyObject(rep);
}

void bench_reset(const struct bench_env *env)
{
	PGconn *c = pg_connect(env);
	redisContext *r = redis_connect(env);

	sql(c, "TRUNCATE staged_jobs, staged_jobs_dead");
	redis_ok(r, "FLUSHALL");
	redisFree(r);
	PQfinish(c);
}

/* COPY streams the rows in one round trip per 64 KiB; the jid and timestamps
 * come from the column defaults, as for an application's INSERT. */
void stage_backlog(const struct bench_env *env, const char *queue, long long first, long long n)
{
	PGconn *c = pg_connect(env);
	PGresult *res;
	char buf[65536];
	size_t len = 0;
	char q[256];

	snprintf(q, sizeof(q), "COPY staged_jobs (queue, job_class, args) FROM STDIN");
	res = PQexec(c, q);
	if (PQresultStatus(res) != PGRES_COPY_IN)
		die("copy: %s", PQresultErrorMessage(res));
	PQclear(res);
	for (long long i = 0; i < n; i++) {
		if (sizeof(buf) - len < 200) {
			if (PQputCopyData(c, buf, (int)len) != 1)
				die("copy: %s", PQerrorMessage(c));
			len = 0;
		}
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s\tBenchJob\t[%lld]\n", queue,
		                        first + i);
	}
	if ((len && PQputCopyData(c, buf, (int)len) != 1) || PQputCopyEnd(c, NULL) != 1)
		die("copy: %s", PQerrorMessage(c));
	res = PQgetResult(c);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		die("copy: %s", PQresultErrorMessage(res));
	PQclear(res);
	while ((res = PQgetResult(c)) != NULL)
		PQclear(res);
	/* Every contender then starts from set hint bits and fresh statistics. */
	sql(c, "VACUUM ANALYZE staged_jobs");
	PQfinish(c);
}

int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

long long pct_ll(const long long *v, size_t n, double p)
{
	size_t i;

	if (n == 0)
		return 0;
	i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}
