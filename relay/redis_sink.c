/* The Redis side: one MULTI/EXEC per batch, keys as Sidekiq's or Resque's client writes them. */
#include "fmacros.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "fence.h"
#include "redis_sink.h"

void redis_sink_init(struct redis_sink *rs, const struct config *cfg)
{
	memset(rs, 0, sizeof(*rs));
	rs->cfg = cfg;
	buf_init(&rs->scratch);
}

bool redis_sink_connected(const struct redis_sink *rs)
{
	return rs->ctx != NULL;
}

void redis_sink_close(struct redis_sink *rs)
{
	if (rs->ctx)
		redisFree(rs->ctx);
	rs->ctx = NULL;
}

void redis_sink_free(struct redis_sink *rs)
{
	if (!rs)
		return;
	redis_sink_close(rs);
	buf_free(&rs->scratch);
	free(rs->args);
	free(rs->cmds);
	free(rs->argv);
	free(rs->argvlen);
	memset(rs, 0, sizeof(*rs));
}

/* Records the cause and drops the connection: after any failure its state is unknown. */
static int sink_fail(struct redis_sink *rs, const char *fmt, ...) SD_PRINTF(2, 3);
static int sink_fail(struct redis_sink *rs, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rs->errstr, sizeof(rs->errstr), fmt, ap);
	va_end(ap);
	redis_sink_close(rs);
	return -EIO;
}

/* The connection's error. hiredis reports a reply that did not come within
 * the timeout as the socket's EAGAIN, "Resource temporarily unavailable";
 * an operator should read "timeout". Call right after the failed call. */
static const char *ctx_error(struct redis_sink *rs)
{
	int err = errno;
	redisContext *c = rs->ctx;

	if (c->err == REDIS_ERR_IO && (err == EAGAIN || err == EWOULDBLOCK))
		snprintf(c->errstr, sizeof(c->errstr), "timeout: no reply within %d ms",
			 rs->cfg->redis_timeout_ms);
	return c->errstr;
}

static const char *reply_text(const redisReply *r)
{
	return r && (r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_STATUS) ? r->str : "";
}

/* Sends one command and fails unless the reply is a non-error. */
static int simple_cmd(struct redis_sink *rs, int argc, const char **argv, const char *what)
{
	char where[300];
	redisReply *r = redisCommandArgv(rs->ctx, argc, argv, NULL);
	int rc = 0;

	redis_target_describe(&rs->cfg->redis, where, sizeof(where));
	if (!r)
		rc = sink_fail(rs, "%s at %s failed: %s", what, where, ctx_error(rs));
	else if (r->type == REDIS_REPLY_ERROR)
		rc = sink_fail(rs, "%s at %s failed: %s", what, where, r->str);
	freeReplyObject(r);
	return rc;
}

int redis_sink_connect(struct redis_sink *rs)
{
	const struct redis_target *t = &rs->cfg->redis;
	struct timeval tv = { rs->cfg->redis_timeout_ms / 1000, (rs->cfg->redis_timeout_ms % 1000) * 1000 };
	char where[300], db[16];
	const char *auth[3] = { "AUTH" }, *sel[2] = { "SELECT", db }, *ping[1] = { "PING" };
	int rc = 0;

	redis_sink_close(rs);
	redis_target_describe(t, where, sizeof(where));
	rs->ctx = t->is_unix ? redisConnectUnixWithTimeout(t->path, tv)
			     : redisConnectWithTimeout(t->host, t->port, tv);
	if (!rs->ctx)
		return -ENOMEM;
	if (rs->ctx->err)
		return sink_fail(rs, "could not connect to redis at %s: %s", where, rs->ctx->errstr);
	/* Bounds every reply wait, so a batch's transaction in Postgres stays short. */
	if (redisSetTimeout(rs->ctx, tv) != REDIS_OK || (!t->is_unix && redisEnableKeepAlive(rs->ctx) != REDIS_OK))
		return sink_fail(rs, "could not set up the redis connection to %s: %s", where, rs->ctx->errstr);
	if (t->password) {
		int n = 1;
		if (t->user)
			auth[n++] = t->user;
		auth[n++] = t->password;
		rc = simple_cmd(rs, n, auth, "AUTH");
	}
	snprintf(db, sizeof(db), "%d", t->db);
	if (rc == 0 && t->db != 0)
		rc = simple_cmd(rs, 2, sel, "SELECT");
	return rc == 0 ? simple_cmd(rs, 1, ping, "PING") : rc;
}

/* ---- building the batch's commands ---- */

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	q = realloc(*p, n * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

static int cmd_begin(struct redis_sink *rs)
{
	if (grow((void **)&rs->cmds, &rs->cmdcap, rs->ncmds + 1, sizeof(*rs->cmds)) < 0)
		return -ENOMEM;
	rs->cmds[rs->ncmds].first = rs->nargs;
	rs->cmds[rs->ncmds].argc = 0;
	rs->ncmds++;
	return 0;
}

/* Adds an argument: ptr, or when ptr is NULL, scratch bytes [off, off+len). */
static int push_arg(struct redis_sink *rs, const char *ptr, size_t off, size_t len)
{
	if (grow((void **)&rs->args, &rs->argcap, rs->nargs + 1, sizeof(*rs->args)) < 0)
		return -ENOMEM;
	rs->args[rs->nargs++] = (struct sink_arg){ .ptr = ptr, .off = off, .len = len };
	rs->cmds[rs->ncmds - 1].argc++;
	return 0;
}

/* An argument that lives elsewhere and stays put: a payload, a queue name, a literal. */
static int arg_ref(struct redis_sink *rs, const char *p, size_t len)
{
	return push_arg(rs, p, 0, len);
}

/* An argument formatted into scratch: key names and scores. */
static int arg_fmt(struct redis_sink *rs, const char *fmt, ...) SD_PRINTF(2, 3);
static int arg_fmt(struct redis_sink *rs, const char *fmt, ...)
{
	size_t off = rs->scratch.len;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = buf_vprintf(&rs->scratch, fmt, ap);
	va_end(ap);
	return rc < 0 ? rc : push_arg(rs, NULL, off, rs->scratch.len - off);
}

#define LIT(rs, s) arg_ref((rs), (s), sizeof(s) - 1)

static bool same_queue(const struct batch_job *a, const struct batch_job *b)
{
	return a->queue_len == b->queue_len && memcmp(a->queue, b->queue, a->queue_len) == 0;
}

/* True if job i is the first job pushed to its queue (not scheduled) in the batch. */
static bool first_of_queue(const struct batch *b, size_t i)
{
	if (b->jobs[i].out.scheduled)
		return false;
	for (size_t k = 0; k < i; k++)
		if (!b->jobs[k].out.scheduled && same_queue(&b->jobs[k], &b->jobs[i]))
			return false;
	return true;
}

/* SADD queues, then one multi-value push per queue with its jobs in id order:
 * LPUSH for Sidekiq (workers BRPOP the other end), RPUSH for Resque (LPOP). */
static int add_queue_pushes(struct redis_sink *rs, const struct batch *b, const char *push)
{
	const char *prefix = rs->cfg->key_prefix;
	bool any = false;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < b->njobs; i++) {
		if (!first_of_queue(b, i))
			continue;
		if (!any && ((rc = cmd_begin(rs)) < 0 || (rc = LIT(rs, "SADD")) < 0 ||
			     (rc = arg_fmt(rs, "%squeues", prefix)) < 0))
			return rc;
		any = true;
		rc = arg_ref(rs, b->jobs[i].queue, b->jobs[i].queue_len);
	}
	for (size_t i = 0; rc == 0 && i < b->njobs; i++) {
		const struct batch_job *j = &b->jobs[i];
		if (!first_of_queue(b, i))
			continue;
		if ((rc = cmd_begin(rs)) < 0 || (rc = arg_ref(rs, push, strlen(push))) < 0 ||
		    (rc = arg_fmt(rs, "%squeue:%.*s", prefix, (int)j->queue_len, j->queue)) < 0)
			return rc;
		for (size_t k = i; rc == 0 && k < b->njobs; k++)
			if (!b->jobs[k].out.scheduled && same_queue(&b->jobs[k], j))
				rc = arg_ref(rs, b->payloads.data + b->jobs[k].out.off, b->jobs[k].out.len);
	}
	return rc;
}

/* Sidekiq's poller moves due members of the `schedule` zset (score: epoch seconds). */
static int add_sidekiq_schedule(struct redis_sink *rs, const struct batch *b)
{
	bool any = false;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < b->njobs; i++) {
		const struct batch_job *j = &b->jobs[i];
		char score[32];
		if (!j->out.scheduled)
			continue;
		if (!any && ((rc = cmd_begin(rs)) < 0 || (rc = LIT(rs, "ZADD")) < 0 ||
			     (rc = arg_fmt(rs, "%sschedule", rs->cfg->key_prefix)) < 0))
			return rc;
		any = true;
		job_format_epoch(score, sizeof(score), j->out.run_at_us);
		if ((rc = arg_fmt(rs, "%s", score)) == 0)
			rc = arg_ref(rs, b->payloads.data + j->out.off, j->out.len);
	}
	return rc;
}

/* resque-scheduler's delayed_push: a list per timestamp, the timestamp in a zset,
 * and a reverse index from job to timestamps. */
static int add_resque_delayed(struct redis_sink *rs, const struct batch *b)
{
	const char *p = rs->cfg->key_prefix;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < b->njobs; i++) {
		const struct batch_job *j = &b->jobs[i];
		const char *payload = b->payloads.data + j->out.off;
		long long ts = j->out.run_at_us / 1000000;
		if (!j->out.scheduled)
			continue;
		if ((rc = cmd_begin(rs)) < 0 || (rc = LIT(rs, "RPUSH")) < 0 ||
		    (rc = arg_fmt(rs, "%sdelayed:%lld", p, ts)) < 0 || (rc = arg_ref(rs, payload, j->out.len)) < 0)
			return rc;
		if ((rc = cmd_begin(rs)) < 0 || (rc = LIT(rs, "ZADD")) < 0 ||
		    (rc = arg_fmt(rs, "%sdelayed_queue_schedule", p)) < 0 ||
		    (rc = arg_fmt(rs, "%lld", ts)) < 0 || (rc = arg_fmt(rs, "%lld", ts)) < 0)
			return rc;
		if ((rc = cmd_begin(rs)) < 0 || (rc = LIT(rs, "SADD")) < 0 ||
		    (rc = arg_fmt(rs, "%stimestamps:%.*s", p, (int)j->out.len, payload)) < 0)
			return rc;
		rc = arg_fmt(rs, "delayed:%lld", ts);
	}
	return rc;
}

/* The relay's own keys sit under the job prefix and the lock key, so relay
 * groups sharing a Redis do not overwrite each other's fence. */
static int arg_own_key(struct redis_sink *rs, const char *name)
{
	return arg_fmt(rs, "%sstagedrain:%lld:%s", rs->cfg->key_prefix, rs->cfg->lock_key, name);
}

/* SET fence: in the same EXEC as the pushes, so it exists only if they do. */
static int add_fence(struct redis_sink *rs, const struct batch *b)
{
	size_t off;
	int rc;

	if ((rc = cmd_begin(rs)) < 0 || (rc = LIT(rs, "SET")) < 0 || (rc = arg_own_key(rs, "fence")) < 0)
		return rc;
	off = rs->scratch.len;
	if ((rc = fence_write(&rs->scratch, rs->epoch, b)) < 0)
		return rc;
	return push_arg(rs, NULL, off, rs->scratch.len - off);
}

static int build_commands(struct redis_sink *rs, const struct batch *b)
{
	bool sidekiq = rs->cfg->format == FORMAT_SIDEKIQ;
	int rc;

	buf_reset(&rs->scratch);
	rs->nargs = rs->ncmds = 0;
	rc = add_queue_pushes(rs, b, sidekiq ? "LPUSH" : "RPUSH");
	if (rc == 0)
		rc = sidekiq ? add_sidekiq_schedule(rs, b) : add_resque_delayed(rs, b);
	return rc == 0 ? add_fence(rs, b) : rc;
}

/* ---- sending: MULTI, the commands, EXEC, all written before any reply is read ---- */

/* argv and argvlen always have the same capacity. */
static int grow_argv(struct redis_sink *rs, size_t need)
{
	size_t cap = rs->argvcap;

	if (grow((void **)&rs->argv, &cap, need, sizeof(*rs->argv)) < 0)
		return -ENOMEM;
	if (cap != rs->argvcap) {
		size_t *lens = realloc(rs->argvlen, cap * sizeof(*lens));
		if (!lens)
			return -ENOMEM;
		rs->argvlen = lens;
		rs->argvcap = cap;
	}
	return 0;
}

static int append_commands(struct redis_sink *rs)
{
	const char *multi[1] = { "MULTI" }, *exec[1] = { "EXEC" };
	int ok = redisAppendCommandArgv(rs->ctx, 1, multi, NULL) == REDIS_OK;

	for (size_t c = 0; ok && c < rs->ncmds; c++) {
		const struct sink_cmd *cmd = &rs->cmds[c];
		if (grow_argv(rs, cmd->argc) < 0)
			return -ENOMEM;
		for (size_t a = 0; a < cmd->argc; a++) {
			const struct sink_arg *arg = &rs->args[cmd->first + a];
			rs->argv[a] = arg->ptr ? arg->ptr : rs->scratch.data + arg->off;
			rs->argvlen[a] = arg->len;
		}
		ok = redisAppendCommandArgv(rs->ctx, (int)cmd->argc, rs->argv, rs->argvlen) == REDIS_OK;
	}
	if (ok)
		ok = redisAppendCommandArgv(rs->ctx, 1, exec, NULL) == REDIS_OK;
	return ok ? 0 : sink_fail(rs, "could not queue the batch for redis: %s", rs->ctx->errstr);
}

/* EXEC's reply: an error (EXECABORT: nothing applied) or one reply per command. */
static int check_exec(struct redis_sink *rs, const redisReply *r, const char *queued_err)
{
	if (r->type == REDIS_REPLY_ERROR)
		return sink_fail(rs, "redis refused the batch: %s", *queued_err ? queued_err : r->str);
	if (r->type != REDIS_REPLY_ARRAY)
		return sink_fail(rs, "redis aborted the batch transaction");
	for (size_t i = 0; i < r->elements; i++)
		if (r->element[i]->type == REDIS_REPLY_ERROR)
			return sink_fail(rs, "redis applied part of the batch: %s", r->element[i]->str);
	return 0;
}

static int read_replies(struct redis_sink *rs)
{
	char queued_err[200] = "";
	size_t total = rs->ncmds + 2;
	int rc = 0;

	for (size_t i = 0; i < total; i++) {
		redisReply *r = NULL;
		if (redisGetReply(rs->ctx, (void **)&r) != REDIS_OK)
			return sink_fail(rs, "redis push failed: %s", ctx_error(rs));
		if (i == total - 1)
			rc = check_exec(rs, r, queued_err);
		else if (r->type == REDIS_REPLY_ERROR && !*queued_err)
			snprintf(queued_err, sizeof(queued_err), "%s", reply_text(r));
		freeReplyObject(r);
	}
	return rc;
}

int redis_sink_push(struct redis_sink *rs, const struct batch *b)
{
	int rc;

	if (!rs->ctx)
		return sink_fail(rs, "not connected to redis");
	if (b->njobs == 0)
		return 0;
	if ((rc = build_commands(rs, b)) < 0 || (rc = append_commands(rs)) < 0)
		return rc;
	return read_replies(rs);
}

/* Sends `CMD <own key>` and returns the reply, or NULL after recording why. */
static redisReply *own_key_cmd(struct redis_sink *rs, const char *cmd, const char *key)
{
	const char *argv[2];
	size_t argvlen[2];
	redisReply *r;

	if (!rs->ctx) {
		sink_fail(rs, "not connected to redis");
		return NULL;
	}
	buf_reset(&rs->scratch);
	rs->nargs = rs->ncmds = 0;
	if (cmd_begin(rs) < 0 || arg_own_key(rs, key) < 0) {
		sink_fail(rs, "out of memory");
		return NULL;
	}
	argv[0] = cmd;
	argvlen[0] = strlen(cmd);
	argv[1] = rs->scratch.data + rs->args[0].off;
	argvlen[1] = rs->args[0].len;
	r = redisCommandArgv(rs->ctx, 2, argv, argvlen);
	if (!r)
		sink_fail(rs, "%s failed: %s", cmd, ctx_error(rs));
	else if (r->type == REDIS_REPLY_ERROR) {
		sink_fail(rs, "%s failed: %s", cmd, r->str);
		freeReplyObject(r);
		r = NULL;
	}
	return r;
}

int redis_sink_new_epoch(struct redis_sink *rs)
{
	redisReply *r = own_key_cmd(rs, "INCR", "epoch");

	if (!r)
		return -EIO;
	rs->epoch = r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
	freeReplyObject(r);
	return 0;
}

int redis_sink_get_fence(struct redis_sink *rs, struct buf *out)
{
	redisReply *r = own_key_cmd(rs, "GET", "fence");
	int rc = 0;

	buf_reset(out);
	if (!r)
		return -EIO;
	if (r->type == REDIS_REPLY_STRING)
		rc = buf_append(out, r->str, r->len);
	freeReplyObject(r);
	return rc;
}
