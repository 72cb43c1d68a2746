/* PostgreSQL for the tests, the chaos programs and the bench: connect, run a
 * statement, read one value; failures come back with the statement and the cause. */
#ifndef STAGEDRAIN_SUPPORT_SQL_H
#define STAGEDRAIN_SUPPORT_SQL_H

#include "fmacros.h"

#include <libpq-fe.h>
#include <stdarg.h>
#include <stddef.h>

/* Room for a failure: the statement's start and the server's message. */
#define SQL_ERRLEN 1024

/* What a caller does with a failure message: fail the test, die, or say it and
 * go on. The Check harness, the chaos programs and the bench each pass theirs. */
typedef void sql_fail_fn(const char *msg);

/* A session with client_min_messages = warning, its socket closed on exec (the
 * relays we start must not inherit it); NULL with the cause in err. */
PGconn *sql_connect(const char *conninfo, char err[SQL_ERRLEN]) SD_MUSTCHECK;
/* Runs a statement (printf-style); 0, or -1 with "SQL: cause" in err. With
 * out, the first value of the first row as a number (0 when there is none). */
int sql_vrun(PGconn *c, long long *out, char err[SQL_ERRLEN], const char *fmt, va_list ap) SD_PRINTF(4, 0);
/* The same, returning the value, or -1 after fail(message) if fail returns. */
long long sql_or(PGconn *c, sql_fail_fn *fail, const char *fmt, ...) SD_PRINTF(3, 4);
/* The first value of the first row as text ("" when there is none); 0 or -1. */
int sql_text(PGconn *c, char *out, size_t outlen, char err[SQL_ERRLEN], const char *sql);

#endif
