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
redisReply *redis_cmd(redisContext *r, char err[REDIS_ERRLEN], const char *fmt, ...);
/* The same for a command that answers an integer; 0 or -1. */
int redis_cmd_int(redisContext *r, long long *out, char err[REDIS_ERRLEN], const char *fmt, ...);

#endif
