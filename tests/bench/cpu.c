/* CPU time the contenders of a drain spend: a process's from /proc, its
 * Postgres backends', Redis's from INFO cpu, the bench thread's own. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

double proc_cpu_s(pid_t pid)
{
	char path[64], line[1024], *p;
	unsigned long long utime, stime;
	long hz = sysconf(_SC_CLK_TCK);
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (hz <= 0 || !(f = fopen(path, "r")))
		return NAN;
	p = fgets(line, sizeof(line), f);
	fclose(f);
	/* The command name (field 2) may hold spaces and parentheses: count the
	 * fields from the last ')'. utime and stime are fields 14 and 15. */
	if (!p || !(p = strrchr(line, ')')))
		return NAN;
	ok = sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) == 2;
	return ok ? (double)(utime + stime) / (double)hz : NAN;
}

double thread_cpu_s(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return NAN;
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double children_cpu_s(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_CHILDREN, &ru) != 0)
		return NAN;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Backends exit with their session, so they are read while it is open; a
 * parallel worker that already exited is not counted. */
double pg_app_cpu_s(PGconn *c, const char *app_like, int *nbackends)
{
	const char *params[] = { app_like };
	PGresult *res = PQexecParams(c,
				     "SELECT pid FROM pg_stat_activity"
				     " WHERE application_name LIKE $1 AND pid <> pg_backend_pid()",
				     1, NULL, params, NULL, NULL, 0);
	double sum = 0;
	int n = 0;

	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		note("pg_stat_activity: %s", PQresultErrorMessage(res));
		PQclear(res);
		return NAN;
	}
	for (int i = 0; i < PQntuples(res); i++) {
		double s = proc_cpu_s((pid_t)atoi(PQgetvalue(res, i, 0)));
		if (!isnan(s)) {
			sum += s;
			n++;
		}
	}
	PQclear(res);
	if (nbackends)
		*nbackends = n;
	return n ? sum : NAN;
}

/* used_cpu_sys + used_cpu_user: the server's own threads, not its fork children (AOF rewrites). */
double redis_cpu_s(redisContext *r)
{
	redisReply *rep = redisCommand(r, "INFO cpu");
	double sys = NAN, user = NAN;

	if (rep && rep->type == REDIS_REPLY_STRING) {
		const char *s = strstr(rep->str, "used_cpu_sys:");
		const char *u = strstr(rep->str, "used_cpu_user:");
		if (s)
			sys = strtod(s + strlen("used_cpu_sys:"), NULL);
		if (u)
			user = strtod(u + strlen("used_cpu_user:"), NULL);
	}
	if (!rep)
		note("redis INFO cpu: %s", r->errstr);
	freeReplyObject(rep);
	return sys + user;
}
