/* The Redis side: one script call per batch, its commands laid out by the format. */
#include "fmacros.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "fence.h"
#include "format.h"
#include "keys.h"
#include "redis_sink.h"

void redis_sink_init(struct redis_sink *rs, const struct config *cfg)
{
	memset(rs, 0, sizeof(*rs));
	rs->cfg = cfg;
	redis_conn_init(&rs->conn, cfg);
	cmds_init(&rs->cmds);
	cmds_init(&rs->one);
	buf_init(&rs->bad);
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
	cmds_free(&rs->cmds);
	cmds_free(&rs->one);
	buf_free(&rs->bad);
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

/* The relay's own keys sit under the job prefix and the lock key, so relay
 * groups sharing a Redis do not overwrite each other's fence. */
static int arg_own_key(struct redis_sink *rs, const char *name)
{
	return cmds_fmt(&rs->cmds, KEYS_OWN_FMT, rs->cfg->key_prefix, rs->cfg->lock_key, name);
}

/* SET fence: last in the push script, so it exists only if the pushes do. */
static int add_fence(struct redis_sink *rs, const struct batch *b)
{
	size_t off;
	int rc;

	if ((rc = cmds_begin(&rs->cmds, "SET")) < 0 || (rc = arg_own_key(rs, KEYS_FENCE)) < 0)
		return rc;
	off = rs->cmds.scratch.len;
	if ((rc = fence_write(&rs->cmds.scratch, rs->epoch, b)) < 0)
		return rc;
	return cmds_tail(&rs->cmds, off);
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

/* The batch's commands; b NULL: none, a push of nothing (redis_sink_probe). */
static int build_commands(struct redis_sink *rs, const struct batch *b)
{
	struct redis_cmds *c = &rs->cmds;
	int rc;

	cmds_reset(c);
	if ((rc = cmds_begin(c, "EVAL")) < 0 || (rc = cmds_ref(c, push_script, sizeof(push_script) - 1)) < 0 ||
	    (rc = CMDS_LIT(c, "1")) < 0 || (rc = arg_own_key(rs, KEYS_EPOCH)) < 0 ||
	    (rc = cmds_fmt(c, "%lld", rs->epoch)) < 0)
		return rc;
	if (!b)
		return 0;
	rc = format_of(rs->cfg->format)->commands(c, b, rs->cfg->key_prefix);
	return rc == 0 ? add_fence(rs, b) : rc;
}

/* ---- sending: one EVAL of the push script, one reply ---- */

/* argv and argvlen always have the same capacity. */
static int grow_argv(struct redis_sink *rs, size_t need)
{
	size_t cap = rs->argvcap ? rs->argvcap : 64;
	const char **argv;
	size_t *lens;

	if (need <= rs->argvcap)
		return 0;
	while (cap < need)
		cap *= 2;
	if (!(argv = realloc(rs->argv, cap * sizeof(*argv))))
		return -ENOMEM;
	rs->argv = argv;
	if (!(lens = realloc(rs->argvlen, cap * sizeof(*lens))))
		return -ENOMEM;
	rs->argvlen = lens;
	rs->argvcap = cap;
	return 0;
}

/* Command 0 is EVAL's head (EVAL, script, 1, epoch key, epoch); each command
 * after it goes in as name, argument count, arguments. */
static int append_eval(struct redis_sink *rs)
{
	struct redis_cmds *c = &rs->cmds;
	size_t counts = c->scratch.len, total = 0, n = 0;
	const char *count;
	int rc = 0;

	for (size_t k = 1; rc == 0 && k < c->ncmds; k++)
		if ((rc = buf_printf(&c->scratch, "%zu", c->cmds[k].argc - 1)) == 0)
			rc = buf_append(&c->scratch, "", 1);
	for (size_t k = 0; k < c->ncmds; k++)
		total += c->cmds[k].argc + (k > 0);
	if (rc < 0 || (rc = grow_argv(rs, total)) < 0)
		return rc;
	/* scratch no longer moves: pointers into it stay valid until the send. */
	count = c->scratch.data + counts;
	for (size_t k = 0; k < c->ncmds; k++) {
		for (size_t a = 0; a < c->cmds[k].argc; a++) {
			rs->argv[n] = cmds_arg(c, k, a, &rs->argvlen[n]);
			n++;
			if (k > 0 && a == 0) {
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

/* Error codes Redis answers for its own state, whatever the batch holds. */
static const char *const state_errors[] = {
	"OOM ",      "READONLY ",    "LOADING ", "BUSY ",   "MASTERDOWN ", "MISCONF ",  "NOREPLICAS ",
	"TRYAGAIN ", "CLUSTERDOWN ", "NOAUTH ",  "NOPERM ", "WRONGPASS ",  "NOSCRIPT ", "UNBLOCKED ",
};

/* An error reply the batch itself may have caused (REDIS_SINK_REFUSED) or
 * one of Redis's state (-EIO): only the former is worth narrowing. */
static int error_code(const char *err)
{
	if (strncmp(err, "STALE ", 6) == 0)
		return -ESTALE;
	for (size_t i = 0; i < sizeof(state_errors) / sizeof(state_errors[0]); i++)
		if (strncmp(err, state_errors[i], strlen(state_errors[i])) == 0)
			return -EIO;
	return REDIS_SINK_REFUSED;
}

/* A push that lost its connection: Redis may have dropped it for what the
 * batch holds (a protocol error over proto-max-bulk-len), unless it just did
 * not answer in time. */
static int push_lost(struct redis_sink *rs)
{
	bool timeout = strstr(rs->conn.errstr, "timeout") != NULL;

	sink_fail(rs, "redis push failed: %s", rs->conn.errstr);
	return timeout ? -EIO : REDIS_SINK_REFUSED;
}

/* The script's reply: 0, -ESTALE, -EIO, REDIS_SINK_WRONGTYPE or REDIS_SINK_REFUSED. */
static int read_push(struct redis_sink *rs)
{
	redisReply *r = NULL;
	int rc = 0;

	if (redis_conn_reply(&rs->conn, &r, 0) < 0)
		return push_lost(rs);
	if (r->type == REDIS_REPLY_ERROR)
		rc = error_code(r->str);
	else if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 && r->element[0]->type == REDIS_REPLY_STRING &&
		 strcmp(r->element[0]->str, "WRONGTYPE") == 0)
		rc = note_wrong_types(rs, r);
	if (rc != 0 && r->type == REDIS_REPLY_ERROR)
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

int redis_sink_probe(struct redis_sink *rs)
{
	int rc;

	if (!redis_sink_connected(rs))
		return sink_fail(rs, "not connected to redis");
	if ((rc = build_commands(rs, NULL)) < 0 || (rc = append_eval(rs)) < 0)
		return rc;
	rc = read_push(rs);
	return rc == 0 ? 0 : rc < 0 ? rc : -EIO;
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

static bool is_bad(const struct redis_sink *rs, const char *key, size_t len)
{
	const char *type, *bad;

	for (size_t i = 0; i < rs->nbad; i++) {
		bad = redis_sink_bad_key(rs, i, &type);
		if (strlen(bad) == len && memcmp(bad, key, len) == 0)
			return true;
	}
	return false;
}

/* Lays out the commands of a batch of j alone, as the format would, and
 * looks for a bad key among their keys (each command's first argument). */
bool redis_sink_blocked(struct redis_sink *rs, const struct batch *b, const struct batch_job *j)
{
	struct batch one = *b;
	const char *key;
	size_t len;

	one.jobs = (struct batch_job *)j;
	one.njobs = 1;
	cmds_reset(&rs->one);
	if (format_of(rs->cfg->format)->commands(&rs->one, &one, rs->cfg->key_prefix) < 0)
		return true; /* out of memory: hold the job rather than push it wrongly */
	for (size_t k = 0; k < rs->one.ncmds; k++) {
		key = cmds_arg(&rs->one, k, 1, &len);
		if (is_bad(rs, key, len))
			return true;
	}
	return false;
}

/* Queues `CMD <own key>`. */
static int append_own_key_cmd(struct redis_sink *rs, const char *cmd, const char *key)
{
	const char *argv[2];
	size_t argvlen[2];

	if (!redis_sink_connected(rs))
		return sink_fail(rs, "not connected to redis");
	cmds_reset(&rs->cmds);
	if (cmds_begin(&rs->cmds, cmd) < 0 || arg_own_key(rs, key) < 0)
		return sink_fail(rs, "out of memory");
	argv[0] = cmds_arg(&rs->cmds, 0, 0, &argvlen[0]);
	argv[1] = cmds_arg(&rs->cmds, 0, 1, &argvlen[1]);
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
