/* A target on a Redis Cluster: epochs, fences and pushes slot by slot (cluster_sink.h). */
#include "fmacros.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "cluster_sink.h"
#include "fence.h"
#include "formats.h"

/* Slots settled per round trip to a master. */
#define SETTLE_WINDOW 1024

/* ---- the slots' tags: the relay's own keys of slot s are "{tag}:<own key>" ---- */

static char slot_tags[CLUSTER_SLOTS][8];
static pthread_once_t tags_once = PTHREAD_ONCE_INIT;

/* The first decimal number that hashes to each slot: the same tags in
 * every relay, so a successor finds its predecessor's fences. */
static void make_tags(void)
{
	size_t left = CLUSTER_SLOTS;
	char text[16];

	for (unsigned long i = 0; left > 0; i++) {
		int n = snprintf(text, sizeof(text), "%lu", i);
		unsigned s = cluster_key_slot(text, (size_t)n);
		if (slot_tags[s][0])
			continue;
		memcpy(slot_tags[s], text, (size_t)n + 1);
		left--;
	}
}

int cluster_sink_own_key(struct redis_cmds *c, const struct config *cfg, unsigned s, const char *name)
{
	return push_own_key(c, slot_tags[s], cfg->key_prefix, cfg->lock_key, cfg->route_name, name);
}

int cluster_sink_init(struct cluster_sink *cs, const struct config *cfg, struct buf *bad, size_t *nbad)
{
	memset(cs, 0, sizeof(*cs));
	pthread_once(&tags_once, make_tags);
	cs->cfg = cfg;
	cs->bad = bad;
	cs->nbad = nbad;
	redis_cluster_init(&cs->cl, cfg);
	cmds_init(&cs->body);
	cmds_init(&cs->head);
	cmds_init(&cs->keys);
	buf_init(&cs->script);
	buf_init(&cs->key);
	buf_init(&cs->wire);
	cs->count = calloc(CLUSTER_SLOTS, sizeof(*cs->count));
	cs->pushed = calloc(CLUSTER_SLOTS, sizeof(*cs->pushed));
	cs->done = calloc(CLUSTER_SLOTS, sizeof(*cs->done));
	cs->doubt = calloc(CLUSTER_SLOTS, sizeof(*cs->doubt));
	cs->tokens = calloc(CLUSTER_SLOTS, sizeof(*cs->tokens));
	cs->unsettled = CLUSTER_SLOTS;
	return cs->count && cs->pushed && cs->done && cs->doubt && cs->tokens ? 0 : -ENOMEM;
}

void cluster_sink_stop_on(struct cluster_sink *cs, struct stop *stop)
{
	redis_cluster_stop_on(&cs->cl, stop);
}

void cluster_sink_free(struct cluster_sink *cs)
{
	if (!cs)
		return;
	redis_cluster_free(&cs->cl);
	cmds_free(&cs->body);
	cmds_free(&cs->head);
	cmds_free(&cs->keys);
	push_argv_free(&cs->argv);
	buf_free(&cs->script);
	buf_free(&cs->key);
	buf_free(&cs->wire);
	free(cs->count);
	free(cs->pushed);
	free(cs->done);
	free(cs->doubt);
	free(cs->tokens);
	free(cs->grouped);
	free(cs->slot_of);
	free(cs->parts);
	memset(cs, 0, sizeof(*cs));
}

static int cs_fail(struct cluster_sink *cs, const char *what, const char *why)
{
	char cause[sizeof(cs->errstr)];

	snprintf(cause, sizeof(cause), "%s", why); /* why may be errstr itself */
	snprintf(cs->errstr, sizeof(cs->errstr), "%.100s: %.150s", what, cause);
	return -EIO;
}

int cluster_sink_connect(struct cluster_sink *cs)
{
	size_t up = 0;
	int rc = redis_cluster_refresh(&cs->cl);

	if (rc < 0) {
		snprintf(cs->errstr, sizeof(cs->errstr), "%s", cs->cl.errstr);
		return rc;
	}
	for (size_t i = 0; i < cs->cl.nnodes; i++)
		if (cs->cl.nodes[i]->in_map)
			if (redis_cluster_node_connect(&cs->cl, cs->cl.nodes[i]) < 0)
				continue; /* its slots wait unsettled */
	if (redis_cluster_masters(&cs->cl, &up) == 0 || up == 0)
		return cs_fail(cs, "no master of the redis cluster answered", cs->cl.errstr);
	return 0;
}

bool cluster_sink_connected(const struct cluster_sink *cs)
{
	return redis_cluster_connected(&cs->cl);
}

void cluster_sink_close(struct cluster_sink *cs)
{
	redis_cluster_close(&cs->cl);
	cs->sent = false;
}

/* ---- settling: a new epoch and the fence, in one script a slot ---- */

static void unsettle(struct cluster_sink *cs, unsigned s)
{
	if (cs->count[s] == 0)
		return;
	cs->count[s] = 0;
	cs->unsettled++;
}

int cluster_sink_new_epoch(struct cluster_sink *cs)
{
	int rc = push_script_token(cs->token);

	if (rc < 0)
		return cs_fail(cs, "could not draw a random epoch token", strerror(-rc));
	for (unsigned s = 0; !cs->partial_epoch && s < CLUSTER_SLOTS; s++)
		unsettle(cs, s);
	cs->partial_epoch = false;
	cs->retry_ms = 0;
	return 0;
}

/*
 * KEYS: the slot's epoch count, its token, its fence; ARGV[1] the new
 * token. The count goes up by one (from 0 when it holds what the relay
 * does not write), the token is replaced, and the fence is answered: after
 * this, no push of an older epoch lands in the slot, and every one that
 * landed before is named. A key of another type is deleted (it names nothing).
 */
static const char settle_script[] = "local function text(k)\n"
				    "  local t = redis.call('TYPE', k).ok\n"
				    "  if t == 'string' then return redis.call('GET', k) end\n"
				    "  if t ~= 'none' then redis.call('DEL', k) end\n"
				    "  return ''\n"
				    "end\n"
				    "local c, n = text(KEYS[1]), 0\n"
				    "if string.match(c, '^%d+$') and #c <= 15 then n = tonumber(c) end\n"
				    "n = n + 1\n"
				    "redis.call('SET', KEYS[1], string.format('%d', n))\n"
				    "redis.call('SET', KEYS[2], ARGV[1])\n"
				    "return { n, text(KEYS[3]) }\n";

static int append_settle(struct cluster_sink *cs, struct redis_conn *conn, unsigned s)
{
	struct redis_cmds *c = &cs->head;
	int rc;

	cmds_reset(c);
	cmds_reset(&cs->body);
	if ((rc = cmds_begin(c, "EVAL")) < 0 || (rc = cmds_ref(c, settle_script, sizeof(settle_script) - 1)) < 0 ||
	    (rc = CMDS_LIT(c, "3")) < 0 || (rc = cluster_sink_own_key(c, cs->cfg, s, KEYS_EPOCH)) < 0 ||
	    (rc = cluster_sink_own_key(c, cs->cfg, s, KEYS_EPOCH_TOKEN)) < 0 ||
	    (rc = cluster_sink_own_key(c, cs->cfg, s, KEYS_FENCE)) < 0 ||
	    (rc = cmds_ref(c, cs->token, strlen(cs->token))) < 0 || (rc = push_argv_build(&cs->argv, c, &cs->body)) < 0)
		return rc;
	return redis_conn_append(conn, (int)cs->argv.n, cs->argv.argv, cs->argv.len);
}

/* Adds a slot's fence ("epoch=E jobs=...") to the merged one in out. */
static int merge_fence(struct buf *out, const char *text, size_t len)
{
	const char *jobs = strstr(text, " jobs="); /* answers end in a NUL */
	size_t n;

	if (!jobs)
		return buf_append(out, text, len); /* not stagedrain's: fence_parse says so */
	jobs += 6;
	n = len - (size_t)(jobs - text);
	if (n == 0)
		return 0;
	if (out->len == 0)
		return buf_append(out, text, len);
	return buf_append(out, ",", 1) == 0 ? buf_append(out, jobs, n) : -ENOMEM;
}

/* One settle answer: { count, fence }. */
static int settle_reply(struct cluster_sink *cs, struct redis_conn *conn, unsigned s, struct buf *out)
{
	redisReply *r = NULL;
	unsigned slot;
	struct cluster_node *to;
	bool ask;
	int rc = 0;

	if (redis_conn_reply(conn, &r, 0) < 0)
		return cs_fail(cs, "settling a slot failed", conn->errstr);
	if (r->type == REDIS_REPLY_ERROR) {
		if (!redis_cluster_redirect(&cs->cl, r->str, &slot, &to, &ask))
			snprintf(cs->errstr, sizeof(cs->errstr), "settling slot %u at %.100s failed: %.100s", s,
				 conn->where, r->str);
		cs->cl.stale = true;
	} else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->type == REDIS_REPLY_INTEGER &&
		   r->element[1]->type == REDIS_REPLY_STRING) {
		if ((rc = merge_fence(out, r->element[1]->str, r->element[1]->len)) == 0) {
			cs->count[s] = r->element[0]->integer > 0 ? r->element[0]->integer : 1;
			memcpy(cs->tokens[s], cs->token, sizeof(cs->token));
			cs->unsettled--;
			cs->settles++;
		}
	}
	freeReplyObject(r);
	return rc;
}

int cluster_sink_wait(struct cluster_sink *cs, struct redis_conn *conn, bool send)
{
	int rc = send ? redis_conn_append_wait(conn) : redis_conn_read_wait(conn);

	if (rc == -EIO)
		return cs_fail(cs, "WAIT failed", conn->errstr);
	if (rc < 0)
		snprintf(cs->errstr, sizeof(cs->errstr), "%s", conn->errstr);
	return rc;
}

/* The unsettled slots served by node n, from *from on, a window of them:
 * sent, then answered; with --redis-wait-replicas, unsettled again unless
 * the replicas have the new epoch. */
static int settle_window(struct cluster_sink *cs, struct cluster_node *n, unsigned *from, struct buf *out)
{
	unsigned sl[SETTLE_WINDOW], k = 0, s;
	size_t before = out->len;
	bool wait = cs->cfg->redis_wait_replicas > 0;
	int rc = 0;

	for (s = *from; s < CLUSTER_SLOTS && k < SETTLE_WINDOW; s++)
		if (cs->count[s] == 0 && cs->cl.owner[s] == n->index && (rc = append_settle(cs, &n->conn, s)) == 0)
			sl[k++] = s;
	*from = s;
	if (k == 0)
		return rc;
	if (rc == 0 && wait)
		rc = cluster_sink_wait(cs, &n->conn, true);
	if (rc == 0 && k && redis_conn_flush(&n->conn) < 0)
		rc = cs_fail(cs, "settling slots failed", n->conn.errstr);
	for (unsigned i = 0; rc == 0 && i < k; i++)
		rc = settle_reply(cs, &n->conn, sl[i], out);
	if (rc == 0 && wait && k && (rc = cluster_sink_wait(cs, &n->conn, false)) < 0)
		out->len = before; /* the rows stay until the replicas have the epoch */
	for (unsigned i = 0; rc < 0 && i < k; i++)
		unsettle(cs, sl[i]);
	return rc;
}

int cluster_sink_settle(struct cluster_sink *cs, struct buf *out)
{
	long long settled = cs->settles;
	int rc = 0;

	buf_reset(out);
	cs->errstr[0] = '\0';
	if (cs->cl.stale && (rc = redis_cluster_refresh(&cs->cl)) < 0)
		return cs_fail(cs, "could not read the redis cluster's slot map", cs->cl.errstr);
	for (size_t i = 0; rc != -ENOMEM && i < cs->cl.nnodes; i++) {
		struct cluster_node *n = cs->cl.nodes[i];
		unsigned from = 0;
		if (!n->in_map)
			continue;
		/* A master that cannot be reached: its slots unsettled, their
		 * queues held, rather than a failed batch each. */
		if (redis_cluster_node_connect(&cs->cl, n) < 0) {
			snprintf(cs->errstr, sizeof(cs->errstr), "%s", cs->cl.errstr);
			for (unsigned s = 0; s < CLUSTER_SLOTS; s++)
				if (cs->cl.owner[s] == n->index)
					unsettle(cs, s);
			continue;
		}
		while (redis_conn_connected(&n->conn) && from < CLUSTER_SLOTS)
			if ((rc = settle_window(cs, n, &from, out)) < 0)
				break;
	}
	if (rc == -ENOMEM)
		return rc;
	/* Slots that stay unsettled (a master down, a new one without the
	 * replicas WAIT asks for) are tried again less often while nothing changes. */
	cs->retry_wait_ms = cs->settles > settled || cs->retry_wait_ms == 0 ? CLUSTER_RETRY_MS
			    : cs->retry_wait_ms * 2 > CLUSTER_RETRY_MAX_MS  ? CLUSTER_RETRY_MAX_MS
									    : cs->retry_wait_ms * 2;
	cs->retry_ms = clock_mono_ms() + cs->retry_wait_ms;
	if (cs->unsettled == CLUSTER_SLOTS)
		return cs_fail(cs, "no slot of the redis cluster could be settled",
			       cs->errstr[0] ? cs->errstr : cs->cl.errstr);
	return 0;
}

bool cluster_sink_wants_settle(const struct cluster_sink *cs)
{
	return cs->unsettled > 0 && clock_mono_ms() >= cs->retry_ms;
}

void cluster_sink_fall_back(struct cluster_sink *cs, bool epoch)
{
	/* Only the slots whose parts may still land need a new epoch, while
	 * the cluster answers: the others' masters did not see this push. */
	bool some = epoch && cs->ndoubt > 0 && redis_cluster_connected(&cs->cl);

	for (unsigned s = 0; s < CLUSTER_SLOTS; s++) {
		if ((epoch && (!some || cs->doubt[s])) || cs->pushed[s])
			unsettle(cs, s);
		cs->pushed[s] = false;
		cs->doubt[s] = cs->doubt[s] && !epoch; /* kept for the new epoch a rollback's may precede */
	}
	if (epoch)
		cs->ndoubt = 0;
	cs->partial_epoch = cs->partial_epoch || some;
	cs->retry = false;
	cs->retry_ms = 0;
}

void cluster_sink_takeover(struct cluster_sink *cs)
{
	cs->ndoubt = 0;
	cs->partial_epoch = false;
	memset(cs->doubt, 0, CLUSTER_SLOTS * sizeof(*cs->doubt));
	cluster_sink_fall_back(cs, true);
}

void cluster_sink_committed(struct cluster_sink *cs)
{
	cs->retry = false;
	memset(cs->pushed, 0, CLUSTER_SLOTS * sizeof(*cs->pushed));
}

unsigned cluster_sink_queue_slot(struct cluster_sink *cs, const char *prefix, const char *queue, size_t len)
{
	const char *infix = format_of(cs->cfg->format)->cluster_infix;

	buf_reset(&cs->key);
	if (buf_puts(&cs->key, prefix) < 0 || buf_puts(&cs->key, infix ? infix : "") < 0 ||
	    buf_append(&cs->key, queue, len) < 0)
		return CLUSTER_SLOTS;
	return cluster_key_slot(cs->key.data, cs->key.len);
}

bool cluster_sink_queue_up(struct cluster_sink *cs, const char *prefix, const char *queue, size_t len)
{
	unsigned s = cluster_sink_queue_slot(cs, prefix, queue, len);

	return s < CLUSTER_SLOTS && cs->count[s] > 0 && redis_cluster_connected(&cs->cl);
}

int cluster_sink_discard(struct cluster_sink *cs, struct redis_conn *conn)
{
	redisReply *r = NULL;

	if (redis_conn_reply(conn, &r, 0) < 0)
		return cs_fail(cs, "ASKING failed", conn->errstr);
	freeReplyObject(r);
	return 0;
}

int cluster_sink_probe(struct cluster_sink *cs)
{
	const char *ping[] = { "PING" };
	redisReply *r = NULL;

	for (size_t i = 0; i < cs->cl.nnodes; i++) {
		struct cluster_node *n = cs->cl.nodes[i];
		if (!n->in_map)
			continue;
		if (redis_conn_command(&n->conn, 1, ping, NULL, &r) < 0)
			return cs_fail(cs, "a master of the redis cluster did not answer", n->conn.errstr);
		freeReplyObject(r);
	}
	return 0;
}
