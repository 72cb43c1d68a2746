/* Redis helpers: see redis.h. */
#include "fmacros.h"

#include <fcntl.h>
#include <stdio.h>

#include "support/redis.h"

redisContext *redis_open(int port, int timeout_ms, char err[REDIS_ERRLEN])
{
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	redisContext *r =
		timeout_ms > 0 ? redisConnectWithTimeout("127.0.0.1", port, tv) : redisConnect("127.0.0.1", port);

	if (!r || r->err) {
		snprintf(err, REDIS_ERRLEN, "could not connect to redis on port %d: %s", port,
			 r ? r->errstr : "out of memory");
		if (r)
			redisFree(r);
		return NULL;
	}
	if (timeout_ms > 0)
		redisSetTimeout(r, tv);
	(void)fcntl(r->fd, F_SETFD, FD_CLOEXEC);
	return r;
}

redisReply *redis_vcmd(redisContext *r, char err[REDIS_ERRLEN], const char *fmt, va_list ap)
{
	redisReply *rep = redisvCommand(r, fmt, ap);

	if (!rep) {
		snprintf(err, REDIS_ERRLEN, "redis %s: %s", fmt, r->errstr);
	} else if (rep->type == REDIS_REPLY_ERROR) {
		snprintf(err, REDIS_ERRLEN, "redis %s: %s", fmt, rep->str);
		freeReplyObject(rep);
		rep = NULL;
	}
	return rep;
}

redisReply *redis_or(redisContext *r, redis_fail_fn *fail, const char *fmt, ...)
{
	char err[REDIS_ERRLEN];
	va_list ap;
	redisReply *rep;

	va_start(ap, fmt);
	rep = redis_vcmd(r, err, fmt, ap);
	va_end(ap);
	if (!rep)
		fail(err);
	return rep;
}

long long redis_int_or(redisContext *r, redis_fail_fn *fail, const char *fmt, ...)
{
	char err[REDIS_ERRLEN];
	va_list ap;
	redisReply *rep;
	long long v = -1;

	va_start(ap, fmt);
	rep = redis_vcmd(r, err, fmt, ap);
	va_end(ap);
	if (rep && rep->type == REDIS_REPLY_INTEGER)
		v = rep->integer;
	else if (rep)
		snprintf(err, sizeof(err), "redis %s: not an integer reply", fmt);
	if (!rep || rep->type != REDIS_REPLY_INTEGER)
		fail(err);
	freeReplyObject(rep);
	return v;
}
