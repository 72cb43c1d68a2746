/* The Redis side: one script call per batch, keys as Sidekiq's or Resque's client writes them. */
#include "fmacros.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "fence.h"
#include "keys.h"
#include "redis_sink.h"

void redis_sink_init(struct redis_sink *rs, const struct config *cfg)
{
	memset(rs, 0, sizeof(*rs));
	rs->cfg = cfg;
	redis_conn_init(&rs->conn, cfg);
	buf_init(&rs->scratch);
	buf_init(&rs->bad);
	buf_init(&rs->key);
}

bool redis_sink_connected(const struct redis_sink *rs)
{
	return redis_conn_connected(&rs->conn);
}

void redis_sink_close(struct redis_sink *rs)
{
	redis_conn_close(&rs->conn);
}

void redis_sink_free(struct redis_sink *rs)
{
	if (!rs)
		return;
	redis_conn_free(&rs->conn);
	buf_free(&rs->scratch);
	buf_free(&rs->bad);
	buf_free(&rs->key);
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

int redis_sink_connect(struct redis_sink *rs)
{
	if (redis_conn_connect(&rs->conn) < 0) {
		snprintf(rs->errstr, sizeof(rs->errstr), "%s", rs->conn.errstr);
		return -EIO;
	}
	return 0;
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

/* The push script unpacks each command's arguments, and Lua unpacks at most
 * a few thousand values at once: longer commands continue in a copy of their
 * first head arguments (LPUSH a b then LPUSH c d keeps the order of LPUSH a b c d). */
#define CMD_MAX_ARGS 1000

static int make_room(struct redis_sink *rs, size_t head)
{
	size_t first = rs->cmds[rs->ncmds - 1].first;
	int rc;

	if (rs->cmds[rs->ncmds - 1].argc < CMD_MAX_ARGS)
		return 0;
	if ((rc = cmd_begin(rs)) < 0)
		return rc;
	for (size_t a = 0; rc == 0 && a < head; a++) {
		struct sink_arg copy = rs->args[first + a]; /* push_arg may move args */
		rc = push_arg(rs, copy.ptr, copy.off, copy.len);
	}
	return rc;
}

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
		if ((rc = make_room(rs, 2)) == 0)
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
			if (!b->jobs[k].out.scheduled && same_queue(&b->jobs[k], j) && (rc = make_room(rs, 2)) == 0)
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
		if ((rc = make_room(rs, 2)) == 0 && (rc = arg_fmt(rs, "%s", score)) == 0)
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
		    (rc = arg_fmt(rs, "%sdelayed_queue_schedule", p)) < 0 || (rc = arg_fmt(rs, "%lld", ts)) < 0 ||
		    (rc = arg_fmt(rs, "%lld", ts)) < 0)
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
	return arg_fmt(rs, KEYS_OWN_FMT, rs->cfg->key_prefix, rs->cfg->lock_key, name);
}

/* SET fence: last in the push script, so it exists only if the pushes do. */
static int add_fence(struct redis_sink *rs, const struct batch *b)
{
	size_t off;
	int rc;

	if ((rc = cmd_begin(rs)) < 0 || (rc = LIT(rs, "SET")) < 0 || (rc = arg_own_key(rs, KEYS_FENCE)) < 0)
		return rc;
	off = rs->scratch.len;
	if ((rc = fence_write(&rs->scratch, rs->epoch, b)) < 0)
		return rc;
	return push_arg(rs, NULL, off, rs->scratch.len - off);
}

/*
 * The script runs atomically in Redis: it pushes only while ARGV[1] is still
 * the current epoch. A new leader INCRs the epoch before it reads the fence,
 * so a push from a relay that lost its session (or whose reply was lost: the
 * relay takes a new epoch then too) either landed before that read, and the
 * fence names it, or is refused; it can never land after.
 *
 * A Redis script is not rolled back when a command in it fails: a key of the
 * wrong type half-way would leave the pushes before it applied and the fence
 * unwritten, and the batch would be pushed again. So the script first checks
 * the type of every key it will write and, if any is wrong, writes nothing and
 * answers WRONGTYPE with each bad key and its type. Past that check no
 * command can fail (an OOM refusal can only come on the first write), so the
 * batch lands whole or not at all, and the fence's SET, last, exists only if
 * its batch's pushes do.
 */
static const char push_script[] = "if redis.call('GET', KEYS[1]) ~= ARGV[1] then\n"
				  "  return redis.error_reply('STALE epoch ' .. ARGV[1] .. ' is not current')\n"
				  "end\n"
				  "local want = { LPUSH = 'list', RPUSH = 'list', SADD = 'set', ZADD = 'zset' }\n"
				  "local bad, seen = { 'WRONGTYPE' }, {}\n"
				  "local i = 2\n"
				  "while i <= #ARGV do\n"
				  "  local key, t = ARGV[i + 2], want[ARGV[i]]\n"
				  "  if t and not seen[key] then\n"
				  "    seen[key] = true\n"
				  "    local have = redis.call('TYPE', key).ok\n"
				  "    if have ~= 'none' and have ~= t then\n"
				  "      bad[#bad + 1] = key\n"
				  "      bad[#bad + 1] = have\n"
				  "    end\n"
				  "  end\n"
				  "  i = i + 2 + tonumber(ARGV[i + 1])\n"
				  "end\n"
				  "if #bad > 1 then return bad end\n"
				  "i = 2\n"
				  "while i <= #ARGV do\n"
				  "  local n = tonumber(ARGV[i + 1])\n"
				  "  redis.call(ARGV[i], unpack(ARGV, i + 2, i + 1 + n))\n"
				  "  i = i + 2 + n\n"
				  "end\n"
				  "return 'OK'\n";

static int build_commands(struct redis_sink *rs, const struct batch *b)
{
	bool sidekiq = rs->cfg->format == FORMAT_SIDEKIQ;
	int rc;

	buf_reset(&rs->scratch);
	rs->nargs = rs->ncmds = 0;
	if ((rc = cmd_begin(rs)) < 0 || (rc = LIT(rs, "EVAL")) < 0 ||
	    (rc = arg_ref(rs, push_script, sizeof(push_script) - 1)) < 0 || (rc = LIT(rs, "1")) < 0 ||
	    (rc = arg_own_key(rs, KEYS_EPOCH)) < 0 || (rc = arg_fmt(rs, "%lld", rs->epoch)) < 0)
		return rc;
	rc = add_queue_pushes(rs, b, sidekiq ? "LPUSH" : "RPUSH");
	if (rc == 0)
		rc = sidekiq ? add_sidekiq_schedule(rs, b) : add_resque_delayed(rs, b);
	return rc == 0 ? add_fence(rs, b) : rc;
}

/* ---- sending: one EVAL of the push script, one reply ---- */

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

static const char *arg_ptr(const struct redis_sink *rs, const struct sink_arg *a)
{
	return a->ptr ? a->ptr : rs->scratch.data + a->off;
}

/* Command 0 is EVAL's head (EVAL, script, 1, epoch key, epoch); each command
 * after it goes in as name, argument count, arguments. */
static int append_eval(struct redis_sink *rs)
{
	size_t counts = rs->scratch.len, total = 0, n = 0;
	const char *count;
	int rc = 0;

	for (size_t c = 1; rc == 0 && c < rs->ncmds; c++)
		if ((rc = buf_printf(&rs->scratch, "%zu", rs->cmds[c].argc - 1)) == 0)
			rc = buf_append(&rs->scratch, "", 1);
	for (size_t c = 0; c < rs->ncmds; c++)
		total += rs->cmds[c].argc + (c > 0);
	if (rc < 0 || (rc = grow_argv(rs, total)) < 0)
		return rc;
	/* scratch no longer moves: pointers into it stay valid until the send. */
	count = rs->scratch.data + counts;
	for (size_t c = 0; c < rs->ncmds; c++) {
		const struct sink_cmd *cmd = &rs->cmds[c];
		for (size_t a = 0; a < cmd->argc; a++) {
			rs->argv[n] = arg_ptr(rs, &rs->args[cmd->first + a]);
			rs->argvlen[n++] = rs->args[cmd->first + a].len;
			if (c > 0 && a == 0) {
				rs->argv[n] = count;
				rs->argvlen[n] = strlen(count);
				count += rs->argvlen[n++] + 1;
			}
		}
	}
	if (redis_conn_append(&rs->conn, (int)n, rs->argv, rs->argvlen) < 0)
		return sink_fail(rs, "could not queue the batch for redis: %s", rs->conn.errstr);
	return 0;
}

/* Keeps the bad keys of a WRONGTYPE answer: key, type, key, type ... */
static int note_wrong_types(struct redis_sink *rs, const redisReply *r)
{
	buf_reset(&rs->bad);
	rs->nbad = 0;
	for (size_t i = 1; i + 1 < r->elements; i += 2) {
		const redisReply *k = r->element[i], *t = r->element[i + 1];
		if (k->type != REDIS_REPLY_STRING || t->type != REDIS_REPLY_STRING)
			continue;
		if (buf_append(&rs->bad, k->str, k->len + 1) < 0 || buf_append(&rs->bad, t->str, t->len + 1) < 0)
			return -ENOMEM;
		rs->nbad++;
	}
	return rs->nbad ? REDIS_SINK_WRONGTYPE : sink_fail(rs, "redis answered the batch with a malformed WRONGTYPE");
}

/* WAIT N timeout, queued after the command whose writes it waits for. */
static int append_wait(struct redis_sink *rs)
{
	char n[16], ms[16];
	const char *argv[] = { "WAIT", n, ms };

	snprintf(n, sizeof(n), "%d", rs->cfg->redis_wait_replicas);
	snprintf(ms, sizeof(ms), "%d", rs->cfg->redis_wait_timeout_ms);
	if (redis_conn_append(&rs->conn, 3, argv, NULL) < 0)
		return sink_fail(rs, "%s", rs->conn.errstr);
	return 0;
}

/* WAIT's reply: how many replicas acknowledged; fewer than asked is -ETIMEDOUT. */
static int read_wait(struct redis_sink *rs)
{
	int want = rs->cfg->redis_wait_replicas;
	redisReply *r = NULL;
	int rc = 0;

	if (redis_conn_reply(&rs->conn, &r, rs->cfg->redis_wait_timeout_ms) < 0)
		return sink_fail(rs, "WAIT failed: %s", rs->conn.errstr);
	if (r->type == REDIS_REPLY_ERROR)
		rc = sink_fail(rs, "WAIT failed: %s", r->str);
	else if (r->type != REDIS_REPLY_INTEGER || r->integer < want) {
		snprintf(rs->errstr, sizeof(rs->errstr), "only %lld of %d replicas acknowledged within %d ms",
			 r->type == REDIS_REPLY_INTEGER ? r->integer : 0, want, rs->cfg->redis_wait_timeout_ms);
		rc = -ETIMEDOUT;
	}
	freeReplyObject(r);
	return rc;
}

/* The script's reply: 0, -ESTALE, -EIO or REDIS_SINK_WRONGTYPE. */
static int read_push(struct redis_sink *rs)
{
	redisReply *r = NULL;
	int rc = 0;

	if (redis_conn_reply(&rs->conn, &r, 0) < 0)
		return sink_fail(rs, "redis push failed: %s", rs->conn.errstr);
	if (r->type == REDIS_REPLY_ERROR)
		rc = strncmp(r->str, "STALE ", 6) == 0 ? -ESTALE : -EIO;
	else if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 && r->element[0]->type == REDIS_REPLY_STRING &&
		 strcmp(r->element[0]->str, "WRONGTYPE") == 0)
		rc = note_wrong_types(rs, r);
	if (rc < 0 && r->type == REDIS_REPLY_ERROR)
		sink_fail(rs, "redis refused the batch: %s", r->str);
	freeReplyObject(r);
	return rc;
}

int redis_sink_push(struct redis_sink *rs, const struct batch *b)
{
	bool wait = rs->cfg->redis_wait_replicas > 0;
	int rc, wrc = 0;

	if (!redis_sink_connected(rs))
		return sink_fail(rs, "not connected to redis");
	if (b->njobs == 0)
		return 0;
	if ((rc = build_commands(rs, b)) < 0 || (rc = append_eval(rs)) < 0)
		return rc;
	/* One round trip: WAIT goes with the script, and its reply is read
	 * whatever the script's was, while the connection is still open. */
	if (wait && (rc = append_wait(rs)) < 0)
		return rc;
	rc = read_push(rs);
	if (wait && redis_sink_connected(rs))
		wrc = read_wait(rs);
	return rc == 0 ? wrc : rc;
}

const char *redis_sink_bad_key(const struct redis_sink *rs, size_t i, const char **type)
{
	const char *p = rs->bad.data;

	for (size_t k = 0; k < i; k++) {
		p += strlen(p) + 1;
		p += strlen(p) + 1;
	}
	*type = p + strlen(p) + 1;
	return p;
}

/* True if the key formatted from fmt is one the last push found of the wrong type. */
static bool is_bad(struct redis_sink *rs, const char *fmt, ...) SD_PRINTF(2, 3);
static bool is_bad(struct redis_sink *rs, const char *fmt, ...)
{
	const char *type;
	va_list ap;
	int rc;

	buf_reset(&rs->key);
	va_start(ap, fmt);
	rc = buf_vprintf(&rs->key, fmt, ap);
	va_end(ap);
	for (size_t i = 0; rc == 0 && i < rs->nbad; i++)
		if (strcmp(redis_sink_bad_key(rs, i, &type), rs->key.data) == 0)
			return true;
	return rc < 0; /* out of memory: hold the job rather than push it wrongly */
}

bool redis_sink_blocked(struct redis_sink *rs, const struct batch *b, const struct batch_job *j)
{
	const char *p = rs->cfg->key_prefix, *payload = b->payloads.data + j->out.off;
	long long ts = j->out.run_at_us / 1000000;

	if (!j->out.scheduled)
		return is_bad(rs, "%squeues", p) || is_bad(rs, "%squeue:%.*s", p, (int)j->queue_len, j->queue);
	if (rs->cfg->format == FORMAT_SIDEKIQ)
		return is_bad(rs, "%sschedule", p);
	return is_bad(rs, "%sdelayed:%lld", p, ts) || is_bad(rs, "%sdelayed_queue_schedule", p) ||
	       is_bad(rs, "%stimestamps:%.*s", p, (int)j->out.len, payload);
}

/* Queues `CMD <own key>`. */
static int append_own_key_cmd(struct redis_sink *rs, const char *cmd, const char *key)
{
	const char *argv[2];
	size_t argvlen[2];

	if (!redis_sink_connected(rs))
		return sink_fail(rs, "not connected to redis");
	buf_reset(&rs->scratch);
	rs->nargs = rs->ncmds = 0;
	if (cmd_begin(rs) < 0 || arg_own_key(rs, key) < 0)
		return sink_fail(rs, "out of memory");
	argv[0] = cmd;
	argvlen[0] = strlen(cmd);
	argv[1] = rs->scratch.data + rs->args[0].off;
	argvlen[1] = rs->args[0].len;
	if (redis_conn_append(&rs->conn, 2, argv, argvlen) < 0)
		return sink_fail(rs, "%s", rs->conn.errstr);
	return 0;
}

/* The reply to `CMD <own key>`, or NULL after recording why. */
static redisReply *own_key_reply(struct redis_sink *rs, const char *cmd)
{
	redisReply *r = NULL;

	if (redis_conn_reply(&rs->conn, &r, 0) < 0)
		sink_fail(rs, "%s failed: %s", cmd, rs->conn.errstr);
	else if (r->type == REDIS_REPLY_ERROR) {
		sink_fail(rs, "%s failed: %s", cmd, r->str);
		freeReplyObject(r);
		r = NULL;
	}
	return r;
}

int redis_sink_new_epoch(struct redis_sink *rs)
{
	redisReply *r;

	if (append_own_key_cmd(rs, "INCR", KEYS_EPOCH) < 0 || !(r = own_key_reply(rs, "INCR")))
		return -EIO;
	rs->epoch = r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
	freeReplyObject(r);
	return 0;
}

int redis_sink_get_fence(struct redis_sink *rs, struct buf *out)
{
	bool wait = rs->cfg->redis_wait_replicas > 0;
	redisReply *r;
	int rc = 0;

	buf_reset(out);
	if (append_own_key_cmd(rs, "GET", KEYS_FENCE) < 0 || (wait && append_wait(rs) < 0))
		return -EIO;
	if (!(r = own_key_reply(rs, "GET")))
		return -EIO;
	if (r->type == REDIS_REPLY_STRING)
		rc = buf_append(out, r->str, r->len);
	freeReplyObject(r);
	/* The rows the fence names are deleted next: only once replicas have it. */
	return rc == 0 && wait ? read_wait(rs) : rc;
}
