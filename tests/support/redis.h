/* Redis for the tests, the chaos programs and the bench: connect to the test
 * server, run a command whose failure comes back with the cause. */
#ifndef STAGEDRAIN_SUPPORT_REDIS_H
#define STAGEDRAIN_SUPPORT_REDIS_H

#include "fmacros.h"

#include <hiredis/hiredis.h>
#include <stdarg.h>

#define REDIS_ERRLEN 512

/* 127.0.0.1:port, with connect and command timeouts of timeout_ms (0: none),
 * its socket closed on exec; NULL with the cause in err. */
redisContext *redis_open(int port, int timeout_ms, char err[REDIS_ERRLEN]) SD_MUSTCHECK;
/* A command (hiredis format); the reply (caller frees), or NULL with "redis
 * FMT: cause" in err if the connection failed or the reply is an error. */
redisReply *redis_vcmd(redisContext *r, char err[REDIS_ERRLEN], const char *fmt, va_list ap);
/* What a caller does with a failure message (see sql_fail_fn). */
typedef void redis_fail_fn(const char *msg);
/* redis_vcmd, calling fail(message) on failure (NULL if fail returns). */
redisReply *redis_or(redisContext *r, redis_fail_fn *fail, const char *fmt, ...);
/* A command that answers an integer: the integer, or -1 after fail(message)
 * (an error, or another kind of reply) if fail returns. */
long long redis_int_or(redisContext *r, redis_fail_fn *fail, const char *fmt, ...);

#endif
