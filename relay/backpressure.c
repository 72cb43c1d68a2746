/* What Redis can take now: capped queues' lengths and its memory. */
#include "fmacros.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backpressure.h"
#include "clock.h"
#include "formats.h"
#include "log.h"

void backpressure_init(struct backpressure *bp, const struct config *cfg)
{
	memset(bp, 0, sizeof(*bp));
	bp->cfg = cfg;
	cmds_init(&bp->cmds);
}

void backpressure_free(struct backpressure *bp)
{
	if (!bp)
		return;
	cmds_free(&bp->cmds);
	free(bp->of);
	bp->of = NULL;
	bp->ofcap = 0;
}

/* The number after "name:" at the start of a line of INFO's text, or -1. */
static long long info_field(const char *text, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, name, n) == 0 && p[n] == ':')
			return strtoll(p + n + 1, NULL, 10);
	return -1;
}

/* Resumes below PERCENT - 5, or half of PERCENT when that is 10 or less:
 * enough apart that one worker's pop does not flip it back and forth. */
static long long resume_mark(long long maxmemory, int pct)
{
	return maxmemory / 100 * (pct > 10 ? pct - 5 : pct / 2);
}

/* Pauses or resumes at the marks, saying so once each time. */
static int judge(struct backpressure *bp, long long used, long long maxmemory, long *budget)
{
	int pct = bp->cfg->max_redis_memory;
	long long limit = maxmemory / 100 * pct;

	if (!bp->paused && used >= limit) {
		bp->paused = true;
		log_warn("pausing: redis memory above --max-redis-memory; pushing nothing until workers free some",
			 LOGF(F_INT("used_memory", used), F_INT("maxmemory", maxmemory), F_INT("percent", pct)));
	} else if (bp->paused && used < resume_mark(maxmemory, pct)) {
		bp->paused = false;
		log_info("resuming: redis memory below --max-redis-memory again",
			 LOGF(F_INT("used_memory", used), F_INT("maxmemory", maxmemory), F_INT("percent", pct)));
	}
	if (bp->paused)
		return 1;
	*budget = (limit - used) / 4 > LONG_MAX ? LONG_MAX : (long)((limit - used) / 4);
	return 0;
}

int backpressure_memory(struct backpressure *bp, struct redis_conn *conn, long *budget)
{
	const char *argv[] = { "INFO", "memory" };
	redisReply *r = NULL;
	long long used, maxmemory;

	*budget = LONG_MAX;
	if (bp->cfg->max_redis_memory == 0)
		return 0;
	if (redis_conn_command(conn, 2, argv, NULL, &r) < 0) {
		snprintf(bp->errstr, sizeof(bp->errstr), "INFO memory failed: %.200s", conn->errstr);
		return -EIO;
	}
	used = r->type == REDIS_REPLY_STRING ? info_field(r->str, "used_memory") : -1;
	maxmemory = used >= 0 ? info_field(r->str, "maxmemory") : -1;
	freeReplyObject(r);
	if (used < 0 || maxmemory < 0) {
		snprintf(bp->errstr, sizeof(bp->errstr), "INFO memory has no used_memory or maxmemory");
		redis_conn_close(conn);
		return -EIO;
	}
	if (maxmemory == 0) {
		if (!bp->said_no_max)
			log_warn("--max-redis-memory has no effect: redis has no maxmemory set", NULL);
		bp->said_no_max = true;
		bp->paused = false;
		return 0;
	}
	bp->said_no_max = false;
	return judge(bp, used, maxmemory, budget);
}

/* One LLEN per list of each queue, noting which queue each counts for. */
static int build_rooms(struct backpressure *bp, const struct rounds *r, const size_t *qs, size_t n)
{
	const struct format *f = format_of(bp->cfg->format);
	int rc = 0;

	cmds_reset(&bp->cmds);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		size_t before = bp->cmds.ncmds;
		const char *target, *queue;
		size_t tlen, qlen;
		rounds_key_split(r->q[qs[i]].name, r->q[qs[i]].len, &target, &tlen, &queue, &qlen);
		rc = f->lists(&bp->cmds, bp->cfg->key_prefix, queue, qlen);
		if (rc == 0)
			rc = buf_grow_array((void **)&bp->of, &bp->ofcap, bp->cmds.ncmds, sizeof(*bp->of));
		for (size_t k = before; rc == 0 && k < bp->cmds.ncmds; k++)
			bp->of[k] = qs[i];
	}
	return rc;
}

/* Says why a capped queue's length is unknown, at most once a minute for
 * each cause: its list has the wrong type, or Redis answered LLEN with
 * another error (NOPERM, LOADING, BUSY), which is named as Redis gave it. */
static void name_unknown_length(struct backpressure *bp, size_t k, const redisReply *reply)
{
	bool wrongtype = reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "WRONGTYPE", 9) == 0;
	long long now = clock_mono_ms(), *last = wrongtype ? &bp->wrongtype_log_ms : &bp->error_log_ms;
	size_t len;
	const char *key = cmds_arg(&bp->cmds, k, 1, &len);

	if (*last && now - *last < 60000)
		return;
	*last = now;
	if (wrongtype)
		log_warn("a capped queue's redis list has the wrong type; its jobs wait in staged_jobs_held until it "
			 "is fixed",
			 LOGF(F_STR("key", key)));
	else
		log_warn("could not read a capped queue's length; its jobs wait in staged_jobs_held until redis "
			 "answers LLEN",
			 LOGF(F_STR("key", key),
			      F_STR("error", reply->type == REDIS_REPLY_ERROR ? reply->str : "not an integer")));
}

int backpressure_rooms(struct backpressure *bp, struct redis_conn *conn, struct rounds *r, const size_t *qs, size_t n)
{
	int rc = build_rooms(bp, r, qs, n);

	for (size_t i = 0; i < n; i++)
		r->q[qs[i]].room = r->q[qs[i]].cap;
	for (size_t k = 0; rc == 0 && k < bp->cmds.ncmds; k++) {
		const char *argv[2];
		size_t argvlen[2];
		argv[0] = cmds_arg(&bp->cmds, k, 0, &argvlen[0]);
		argv[1] = cmds_arg(&bp->cmds, k, 1, &argvlen[1]);
		if (redis_conn_append(conn, 2, argv, argvlen) < 0) {
			redis_conn_close(conn); /* replies to the LLENs queued before would be read as others' */
			rc = -EIO;
		}
	}
	for (size_t k = 0; rc == 0 && k < bp->cmds.ncmds; k++) {
		struct rounds_queue *q = &r->q[bp->of[k]];
		redisReply *reply = NULL;
		if (redis_conn_reply(conn, &reply, 0) < 0) {
			rc = -EIO;
			break;
		}
		/* A length it cannot read counts as full: the cap is never
		 * passed, and the jobs wait held, measured again each batch,
		 * until Redis answers (the other queues flow meanwhile). */
		if (reply->type == REDIS_REPLY_INTEGER)
			q->room = reply->integer >= q->room ? 0 : q->room - (long)reply->integer;
		else {
			q->room = 0;
			name_unknown_length(bp, k, reply);
		}
		freeReplyObject(reply);
	}
	if (rc == -EIO)
		snprintf(bp->errstr, sizeof(bp->errstr), "reading the capped queues' lengths failed: %.200s",
			 conn->errstr);
	return rc;
}
