/* Bench helpers: messages, connections and statements that must work (the
 * support library's, dying on failure), staging a backlog. */
#include "bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void vnote(const char *fmt, va_list ap) SD_PRINTF(1, 0);
static void vnote(const char *fmt, va_list ap)
{
	fputs("bench: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

/* Only the main thread may die: exit runs the clean-up that stops the servers. */
void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vnote(fmt, ap);
	va_end(ap);
	exit(1);
}

void note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vnote(fmt, ap);
	va_end(ap);
}

void die_msg(const char *msg)
{
	die("%s", msg);
}

void note_msg(const char *msg)
{
	note("%s", msg);
}

PGconn *pg_connect(const struct bench_env *env)
{
	char err[SQL_ERRLEN];
	PGconn *c = sql_connect(env->srv.pg_url, err);

	if (!c)
		die("%s", err);
	return c;
}

redisContext *redis_connect(const struct bench_env *env)
{
	char err[REDIS_ERRLEN];
	redisContext *r = redis_open(env->srv.redis_port, 0, err);

	if (!r)
		die("%s", err);
	return r;
}

/* The kernel's pick: the caller's server binds it a moment later, and a lost
 * race only costs a retry. */
int bench_free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	if (port < 0)
		die("could not find a free loopback port: %s", strerror(errno));
	return port;
}

void bench_reset(const struct bench_env *env)
{
	PGconn *c = pg_connect(env);
	redisContext *r = redis_connect(env);

	sql(c, "TRUNCATE staged_jobs, staged_jobs_dead, staged_jobs_held");
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
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s\tBenchJob\t[%lld]\n", queue, first + i);
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
