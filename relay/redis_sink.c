/* The Redis side: one script call per batch, its commands laid out by the format. */
#include "fmacros.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "cluster_sink.h"
#include "fence.h"
#include "formats.h"
#include "keys.h"
#include "push_script.h"
#include "redis_sink.h"

void redis_sink_init(struct redis_sink *rs, const struct config *cfg)
{
	memset(rs, 0, sizeof(*rs));
	rs->cfg = cfg;
	redis_conn_init(&rs->conn, cfg);
	cmds_init(&rs->cmds);
	cmds_init(&rs->head);
	cmds_init(&rs->one);
	buf_init(&rs->bad);
	buf_init(&rs->script);
	if (cfg->redis.cluster && (rs->cluster = malloc(sizeof(*rs->cluster))) &&
	    cluster_sink_init(rs->cluster, cfg, &rs->bad, &rs->nbad) < 0) {
		cluster_sink_free(rs->cluster);
		free(rs->cluster);
		rs->cluster = NULL;
	}
}

void redis_sink_stop_on(struct redis_sink *rs, struct stop *stop)
{
	redis_io_stop_on(&rs->conn.io, stop);
	if (rs->cluster)
		cluster_sink_stop_on(rs->cluster, stop);
}

bool redis_sink_connected(const struct redis_sink *rs)
{
	return rs->cluster ? cluster_sink_connected(rs->cluster) : redis_conn_connected(&rs->conn);
}

void redis_sink_close(struct redis_sink *rs)
{
	redis_conn_close(&rs->conn);
	if (rs->cluster)
		cluster_sink_close(rs->cluster);
}

void redis_sink_fall_back(struct redis_sink *rs, bool epoch)
{
	if (rs->cluster)
		cluster_sink_fall_back(rs->cluster, epoch);
}

void redis_sink_takeover(struct redis_sink *rs)
{
	if (rs->cluster)
		cluster_sink_takeover(rs->cluster);
}

void redis_sink_committed(struct redis_sink *rs)
{
	if (rs->cluster)
		cluster_sink_committed(rs->cluster);
}

bool redis_sink_partial(const struct redis_sink *rs)
{
	return rs->cluster && rs->cluster->unsettled > 0;
}

bool redis_sink_wants_settle(const struct redis_sink *rs)
{
	return rs->cluster && cluster_sink_wants_settle(rs->cluster);
}

bool redis_sink_queue_up(struct redis_sink *rs, const char *queue, size_t len)
{
	return !rs->cluster || cluster_sink_queue_up(rs->cluster, rs->cfg->key_prefix, queue, len);
}

/* A cluster's failure: its errstr is the sink's. */
static int cluster_rc(struct redis_sink *rs, int rc)
{
	if (rc != 0)
		snprintf(rs->errstr, sizeof(rs->errstr), "%s", rs->cluster->errstr);
	return rc;
}

void redis_sink_free(struct redis_sink *rs)
{
	if (!rs)
		return;
	if (rs->cluster)
		cluster_sink_free(rs->cluster);
	free(rs->cluster);
	redis_conn_free(&rs->conn);
	cmds_free(&rs->cmds);
	cmds_free(&rs->head);
	cmds_free(&rs->one);
	buf_free(&rs->bad);
	buf_free(&rs->script);
	push_argv_free(&rs->argv);
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
	if (rs->cfg->redis.cluster && !rs->cluster)
		return -ENOMEM;
	if (rs->cluster)
		return cluster_rc(rs, cluster_sink_connect(rs->cluster));
	if (redis_conn_connect(&rs->conn) < 0) {
		snprintf(rs->errstr, sizeof(rs->errstr), "%s", rs->conn.errstr);
		return -EIO;
	}
	return 0;
}

/* ---- building the batch's commands ---- */

/* The relay's own keys sit under the job prefix and the lock key, so relay
 * groups sharing a Redis do not overwrite each other's fence. */
static int own_key_in(struct redis_cmds *c, const struct redis_sink *rs, const char *name)
{
	return push_own_key(c, NULL, rs->cfg->key_prefix, rs->cfg->lock_key, rs->cfg->route_name, name);
}

static int arg_own_key(struct redis_sink *rs, const char *name)
{
	return own_key_in(&rs->cmds, rs, name);
}

/* SET fence, or APPEND to it for a batch of a transaction whose earlier
 * batches it names already: last in the push script, so it names the batch
 * only if the pushes happened. */
static int add_fence(struct redis_sink *rs, const struct batch *b, bool more)
{
	size_t off;
	int rc;

	if ((rc = cmds_begin(&rs->cmds, more ? "APPEND" : "SET")) < 0 || (rc = arg_own_key(rs, KEYS_FENCE)) < 0)
		return rc;
	off = rs->cmds.scratch.len;
	if ((rc = more ? fence_write_more(&rs->cmds.scratch, b) : fence_write(&rs->cmds.scratch, rs->epoch, b)) < 0)
		return rc;
	return cmds_tail(&rs->cmds, off);
}

/* The batch's commands; b NULL: none, a push of nothing (redis_sink_probe). */
static int build_commands(struct redis_sink *rs, const struct batch *b, bool more)
{
	struct redis_cmds *c = &rs->cmds, *h = &rs->head;
	int rc;

	cmds_reset(c);
	cmds_reset(h);
	/* Built once, for the target's format (push_script.h). */
	if (rs->script.len == 0 && (rc = push_script_build(&rs->script, format_of(rs->cfg->format)->script)) < 0)
		return rc;
	if ((rc = cmds_begin(h, "EVAL")) < 0 || (rc = cmds_ref(h, rs->script.data, rs->script.len)) < 0 ||
	    (rc = CMDS_LIT(h, "2")) < 0 || (rc = own_key_in(h, rs, KEYS_EPOCH)) < 0 ||
	    (rc = own_key_in(h, rs, KEYS_EPOCH_TOKEN)) < 0 ||
	    (rc = cmds_ref(h, rs->epoch_value, strlen(rs->epoch_value))) < 0)
		return rc;
	if (!b)
		return 0;
	rc = format_of(rs->cfg->format)->commands(c, b, rs->cfg->key_prefix);
	return rc == 0 ? add_fence(rs, b, more) : rc;
}

/* ---- sending: one EVAL of the push script, one reply ---- */

/* EVAL's head (EVAL, script, 2, epoch keys, epoch), then each command as
 * name, argument count, arguments. */
static int append_eval(struct redis_sink *rs)
{
	int rc = push_argv_build(&rs->argv, &rs->head, &rs->cmds);

	if (rc < 0)
		return rc;
	if (redis_conn_append(&rs->conn, (int)rs->argv.n, rs->argv.argv, rs->argv.len) < 0)
		return sink_fail(rs, "could not queue the batch for redis: %s", rs->conn.errstr);
	return 0;
}

/* WAIT, queued after the command whose writes it waits for. */
static int append_wait(struct redis_sink *rs)
{
	return redis_conn_append_wait(&rs->conn) < 0 ? sink_fail(rs, "%s", rs->conn.errstr) : 0;
}

/* WAIT's reply: how many replicas acknowledged; fewer than asked is -ETIMEDOUT. */
static int read_wait(struct redis_sink *rs)
{
	int rc = redis_conn_read_wait(&rs->conn);

	if (rc == -EIO)
		return sink_fail(rs, "WAIT failed: %s", rs->conn.errstr);
	if (rc < 0)
		snprintf(rs->errstr, sizeof(rs->errstr), "%s", rs->conn.errstr);
	return rc;
}

/* A push that lost its connection: Redis may have dropped it for what the
 * batch holds (a protocol error over proto-max-bulk-len), unless it just did
 * not answer in time, or the relay abandoned it to stop. */
static int push_lost(struct redis_sink *rs)
{
	bool timeout = strstr(rs->conn.errstr, "timeout") != NULL || stop_seen(rs->conn.io.stop);

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
		rc = push_script_error(r->str);
	else if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 && r->element[0]->type == REDIS_REPLY_STRING &&
		 strcmp(r->element[0]->str, "WRONGTYPE") == 0)
		rc = push_script_wrongtype(r, &rs->bad, &rs->nbad) == 0
			     ? REDIS_SINK_WRONGTYPE
			     : sink_fail(rs, "redis answered the batch with a malformed WRONGTYPE");
	if (rc != 0 && r->type == REDIS_REPLY_ERROR)
		sink_fail(rs, "redis refused the batch: %s", r->str);
	freeReplyObject(r);
	return rc;
}

int redis_sink_send(struct redis_sink *rs, const struct batch *b, bool more)
{
	int rc;

	rs->sent = false;
	if (rs->cluster)
		return cluster_rc(rs, cluster_sink_send(rs->cluster, b));
	if (!redis_sink_connected(rs))
		return sink_fail(rs, "not connected to redis");
	if (b->njobs == 0)
		return 0;
	if ((rc = build_commands(rs, b, more)) < 0 || (rc = append_eval(rs)) < 0)
		return rc;
	/* One round trip: WAIT goes with the script. */
	if (rs->cfg->redis_wait_replicas > 0 && (rc = append_wait(rs)) < 0)
		return rc;
	/* Out now, so Redis works while the relay goes on (hiredis would
	 * otherwise write only when the reply is asked for). */
	if (redis_conn_flush(&rs->conn) < 0)
		return sink_fail(rs, "redis push failed: %s", rs->conn.errstr);
	rs->sent = true;
	return 0;
}

int redis_sink_reply(struct redis_sink *rs)
{
	bool wait = rs->cfg->redis_wait_replicas > 0;
	int rc, wrc = 0;

	if (rs->cluster)
		return cluster_rc(rs, cluster_sink_reply(rs->cluster));
	if (!rs->sent)
		return 0; /* an empty batch */
	rs->sent = false;
	/* WAIT's reply is read whatever the script's was, while the connection is still open. */
	rc = read_push(rs);
	if (wait && redis_sink_connected(rs))
		wrc = read_wait(rs);
	return rc == 0 ? wrc : rc;
}

int redis_sink_push(struct redis_sink *rs, const struct batch *b)
{
	int rc = redis_sink_send(rs, b, false);

	return rc < 0 ? rc : redis_sink_reply(rs);
}

int redis_sink_probe(struct redis_sink *rs)
{
	int rc;

	if (rs->cluster)
		return cluster_rc(rs, cluster_sink_probe(rs->cluster));
	if (!redis_sink_connected(rs))
		return sink_fail(rs, "not connected to redis");
	if ((rc = build_commands(rs, NULL, false)) < 0 || (rc = append_eval(rs)) < 0)
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
 * looks for a bad key among their arguments: a command's key is its first,
 * a procedure's are its first few (a value that equals a bad key can only
 * keep a job that could have gone, never push one wrongly). */
bool redis_sink_blocked(struct redis_sink *rs, const struct batch *b, const struct batch_job *j)
{
	struct batch one = *b;
	const char *key;
	size_t len;

	one.jobs = (struct batch_job *)j;
	one.njobs = 1;
	cmds_reset(&rs->one);
	if (format_of(rs->cfg->format)->commands(&rs->one, &one, rs->cfg->key_prefix) < 0)
		return true; /* out of memory: keep the job rather than push it wrongly */
	for (size_t k = 0; k < rs->one.ncmds; k++) {
		for (size_t a = 1; a < rs->one.cmds[k].argc; a++) {
			key = cmds_arg(&rs->one, k, a, &len);
			if (is_bad(rs, key, len))
				return true;
		}
	}
	return false;
}

/*
 * Takes the next epoch: the count after the one KEYS[1] holds, and the token
 * ARGV[1] into KEYS[2]. The relay owns the count, so whatever else it finds
 * there (a value it did not write, a count too large for Lua's doubles to add
 * 1 to exactly, another type) it replaces, counting from 1 again, and says
 * what it found. The token keeps the epoch new whatever the count.
 */
static const char epoch_script[] = "local t, n, found = redis.call('TYPE', KEYS[1]).ok, 0, ''\n"
				   "if t == 'string' then\n"
				   "  local d = string.match(redis.call('GET', KEYS[1]), '^(%d+)$')\n"
				   "  if not d then\n"
				   "    found = 'a string that is not an epoch'\n"
				   "  elseif #d > 15 then\n"
				   "    found = 'an epoch too large to count on (' .. string.sub(d, 1, 20) .. ')'\n"
				   "  else\n"
				   "    n = tonumber(d)\n"
				   "  end\n"
				   "elseif t ~= 'none' then\n"
				   "  found = 'a ' .. t\n"
				   "end\n"
				   "n = n + 1\n"
				   "redis.call('SET', KEYS[1], string.format('%d', n))\n"
				   "redis.call('SET', KEYS[2], ARGV[1])\n"
				   "return { n, found }\n";

/*
 * Reads the fence. A key of another type cannot name a batch (the push
 * script only ever SETs it): it is deleted and its type returned, and the
 * relay goes on as after a Redis that lost the fence.
 */
static const char fence_script[] = "local t = redis.call('TYPE', KEYS[1]).ok\n"
				   "if t == 'string' then return redis.call('GET', KEYS[1]) end\n"
				   "if t == 'none' then return false end\n"
				   "redis.call('DEL', KEYS[1])\n"
				   "return { 'a ' .. t }\n";

/* Queues `EVAL script <n> <own keys...> [arg]`: keys is NULL-terminated, at most 2. */
static int append_own_key_eval(struct redis_sink *rs, const char *script, const char *const *keys, const char *arg)
{
	const char *argv[6];
	size_t argvlen[6], nkeys = 0;
	int rc;

	if (!redis_sink_connected(rs))
		return sink_fail(rs, "not connected to redis");
	while (keys[nkeys])
		nkeys++;
	cmds_reset(&rs->cmds);
	rc = cmds_begin(&rs->cmds, "EVAL");
	if (rc == 0 && (rc = cmds_ref(&rs->cmds, script, strlen(script))) == 0)
		rc = cmds_fmt(&rs->cmds, "%zu", nkeys);
	for (size_t k = 0; rc == 0 && k < nkeys; k++)
		rc = arg_own_key(rs, keys[k]);
	if (rc == 0 && arg)
		rc = cmds_ref(&rs->cmds, arg, strlen(arg));
	if (rc < 0)
		return sink_fail(rs, "out of memory");
	for (size_t a = 0; a < 3 + nkeys + (arg != NULL); a++)
		argv[a] = cmds_arg(&rs->cmds, 0, a, &argvlen[a]);
	if (redis_conn_append(&rs->conn, (int)(3 + nkeys + (arg != NULL)), argv, argvlen) < 0)
		return sink_fail(rs, "%s", rs->conn.errstr);
	return 0;
}

/* The reply to an own key's script, or NULL after recording why. */
static redisReply *own_key_reply(struct redis_sink *rs, const char *what)
{
	redisReply *r = NULL;

	if (redis_conn_reply(&rs->conn, &r, 0) < 0)
		sink_fail(rs, "%s failed: %s", what, rs->conn.errstr);
	else if (r->type == REDIS_REPLY_ERROR) {
		sink_fail(rs, "%s failed: %s", what, r->str);
		freeReplyObject(r);
		r = NULL;
	}
	return r;
}

/* A token no epoch had before: KEYS_EPOCH_TOKEN_LEN random hex digits. */
static int new_token(struct redis_sink *rs, char *out)
{
	int rc = push_script_token(out);

	return rc < 0 ? sink_fail(rs, "could not draw a random epoch token: %s", strerror(-rc)) : 0;
}

/* Keeps what the epoch script answered: { n, what it replaced or "" }. */
static int note_epoch(struct redis_sink *rs, const redisReply *r, const char *token)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_INTEGER ||
	    r->element[1]->type != REDIS_REPLY_STRING)
		return sink_fail(rs, "redis answered the epoch script with a malformed reply");
	rs->epoch = r->element[0]->integer;
	snprintf(rs->epoch_value, sizeof(rs->epoch_value), "%lld:%s", rs->epoch, token);
	snprintf(rs->found, sizeof(rs->found), "%s", r->element[1]->str);
	return 0;
}

int redis_sink_new_epoch(struct redis_sink *rs)
{
	static const char *const epoch_keys[] = { KEYS_EPOCH, KEYS_EPOCH_TOKEN, NULL };
	char token[KEYS_EPOCH_TOKEN_LEN + 1];
	redisReply *r;
	int rc;

	rs->found[0] = '\0';
	if (rs->cluster) {
		rs->epoch++; /* this relay's takeovers of the cluster target, for the logs; each slot counts its own */
		return cluster_rc(rs, cluster_sink_new_epoch(rs->cluster));
	}
	if (new_token(rs, token) < 0 || append_own_key_eval(rs, epoch_script, epoch_keys, token) < 0 ||
	    !(r = own_key_reply(rs, "taking an epoch")))
		return -EIO;
	rc = note_epoch(rs, r, token);
	freeReplyObject(r);
	return rc;
}

int redis_sink_get_fence(struct redis_sink *rs, struct buf *out)
{
	static const char *const fence_keys[] = { KEYS_FENCE, NULL };
	bool wait = rs->cfg->redis_wait_replicas > 0;
	redisReply *r;
	int rc = 0;

	buf_reset(out);
	rs->found[0] = '\0';
	if (rs->cluster)
		return cluster_rc(rs, cluster_sink_settle(rs->cluster, out));
	if (append_own_key_eval(rs, fence_script, fence_keys, NULL) < 0 || (wait && append_wait(rs) < 0))
		return -EIO;
	if (!(r = own_key_reply(rs, "reading the fence")))
		return -EIO;
	if (r->type == REDIS_REPLY_STRING)
		rc = buf_append(out, r->str, r->len);
	else if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->type == REDIS_REPLY_STRING)
		snprintf(rs->found, sizeof(rs->found), "%s", r->element[0]->str);
	freeReplyObject(r);
	/* The rows the fence names are deleted next: only once replicas have it. */
	return rc == 0 && wait ? read_wait(rs) : rc;
}
