/* PostgreSQL helpers: see sql.h. */
#include "fmacros.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

#include "support/sql.h"

PGconn *sql_connect(const char *conninfo, char err[SQL_ERRLEN])
{
	PGconn *c = PQconnectdb(conninfo);

	if (PQstatus(c) != CONNECTION_OK) {
		snprintf(err, SQL_ERRLEN, "could not connect to postgres: %s", c ? PQerrorMessage(c) : "out of memory");
		PQfinish(c);
		return NULL;
	}
	(void)fcntl(PQsocket(c), F_SETFD, FD_CLOEXEC);
	PQclear(PQexec(c, "SET client_min_messages = warning"));
	return c;
}

/* The statement formatted into memory of its own size: tests build long ones. */
static char *format(const char *fmt, va_list ap) SD_PRINTF(1, 0);
static char *format(const char *fmt, va_list ap)
{
	va_list again;
	char *s;
	int n;

	va_copy(again, ap);
	n = vsnprintf(NULL, 0, fmt, again);
	va_end(again);
	if (n < 0 || !(s = malloc((size_t)n + 1)))
		return NULL;
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	return s;
}

int sql_vrun(PGconn *c, long long *out, char err[SQL_ERRLEN], const char *fmt, va_list ap)
{
	char *q = format(fmt, ap);
	PGresult *res;
	ExecStatusType st;
	int rc = 0;

	if (out)
		*out = 0;
	if (!q) {
		snprintf(err, SQL_ERRLEN, "%s: out of memory", fmt);
		return -1;
	}
	res = PQexec(c, q);
	st = PQresultStatus(res);
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		snprintf(err, SQL_ERRLEN, "%.400s: %s", q, res ? PQresultErrorMessage(res) : PQerrorMessage(c));
		rc = -1;
	} else if (out && st == PGRES_TUPLES_OK && PQntuples(res) > 0 && PQnfields(res) > 0 &&
		   !PQgetisnull(res, 0, 0)) {
		*out = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	}
	PQclear(res);
	free(q);
	return rc;
}

long long sql_or(PGconn *c, sql_fail_fn *fail, const char *fmt, ...)
{
	char err[SQL_ERRLEN];
	va_list ap;
	long long v;
	int rc;

	va_start(ap, fmt);
	rc = sql_vrun(c, &v, err, fmt, ap);
	va_end(ap);
	if (rc < 0) {
		fail(err);
		return -1;
	}
	return v;
}

int sql_text(PGconn *c, char *out, size_t outlen, char err[SQL_ERRLEN], const char *sql)
{
	PGresult *res = PQexec(c, sql);
	int rc = 0;

	*out = '\0';
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		snprintf(err, SQL_ERRLEN, "%.400s: %s", sql, res ? PQresultErrorMessage(res) : PQerrorMessage(c));
		rc = -1;
	} else if (PQntuples(res) > 0 && PQnfields(res) > 0) {
		snprintf(out, outlen, "%s", PQgetvalue(res, 0, 0));
	}
	PQclear(res);
	return rc;
}
