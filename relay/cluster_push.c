/*
 * A batch on a Redis Cluster (cluster_sink.h): one part per hash slot, each
 * an EVAL of the push script that declares every key it touches, checks its
 * slot's epoch and writes its slot's fence, sent to the slot's master. A
 * part that was not applied (MOVED, ASK, a migration's TRYAGAIN, a
 * CLUSTERDOWN while a replica takes over) goes again where the cluster
 * says, until --redis-timeout: Redis runs a script whole or, refusing it
 * before it starts, not at all, so no part ever lands twice.
 */
#include "fmacros.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "cluster_sink.h"
#include "fence.h"
#include "formats.h"

/* A part that met a migration or a cluster between masters goes again this often. */
#define CLUSTER_AGAIN_MS 20

/* The part of the slot s among the first n parts, or NULL. */
static struct cluster_part *part_of(struct cluster_sink *cs, unsigned s)
{
	for (size_t i = cs->nparts; i > 0; i--)
		if (cs->parts[i - 1].slot == s)
			return &cs->parts[i - 1];
	return NULL;
}

/* Job j's slot: the last job's again when it has the same queue (a queue's
 * jobs come in runs). */
static unsigned slot_of(struct cluster_sink *cs, const struct batch_job *j)
{
	if (cs->memo_queue && cs->memo_len == j->queue_len && memcmp(cs->memo_queue, j->queue, j->queue_len) == 0)
		return cs->memo_slot;
	cs->memo_slot = cluster_sink_queue_slot(cs, cs->cfg->key_prefix, j->queue, j->queue_len);
	cs->memo_queue = j->queue;
	cs->memo_len = j->queue_len;
	return cs->memo_slot;
}

/* Each job's slot, and the jobs grouped by slot into parts (in the order
 * of their first job, each part's jobs in id order). */
static int group(struct cluster_sink *cs, const struct batch *b)
{
	struct cluster_part *p = NULL;
	size_t at = 0;

	if (buf_grow_array((void **)&cs->grouped, &cs->capgrouped, b->njobs, sizeof(*cs->grouped)) < 0 ||
	    buf_grow_array((void **)&cs->slot_of, &cs->capslot, b->njobs, sizeof(*cs->slot_of)) < 0 ||
	    buf_grow_array((void **)&cs->parts, &cs->capparts, b->njobs, sizeof(*cs->parts)) < 0)
		return -ENOMEM;
	cs->nparts = 0;
	cs->memo_queue = NULL;
	for (size_t i = 0; i < b->njobs; i++) {
		const struct batch_job *j = &b->jobs[i];
		unsigned s = slot_of(cs, j);
		if (s >= CLUSTER_SLOTS)
			return -ENOMEM;
		cs->slot_of[i] = s;
		if (!p || p->slot != s)
			p = part_of(cs, s);
		if (!p) {
			p = &cs->parts[cs->nparts++];
			*p = (struct cluster_part){ .slot = s };
		}
		p->n++;
	}
	for (size_t k = 0; k < cs->nparts; k++) {
		cs->parts[k].first = at;
		at += cs->parts[k].n;
		cs->parts[k].n = 0;
	}
	for (size_t i = 0; i < b->njobs; i++) {
		p = part_of(cs, cs->slot_of[i]);
		cs->grouped[p->first + p->n++] = b->jobs[i];
	}
	return 0;
}

/* The keys the body's command k touches: a procedure's (its name has a
 * dot), as its format says, or a command's first argument. */
static int add_keys(struct cluster_sink *cs, struct redis_cmds *keys, size_t k)
{
	const struct format *f = format_of(cs->cfg->format);
	size_t len;
	const char *name = cmds_arg(&cs->body, k, 0, &len), *key;

	if (memchr(name, '.', len) && f->cluster_keys)
		return f->cluster_keys(keys, &cs->body, k);
	key = cmds_arg(&cs->body, k, 1, &len);
	return cmds_fmt(keys, "%.*s", (int)len, key);
}

/* The part's commands, its fence last, then its EVAL's head: every key
 * declared, so that Redis refuses the whole script (TRYAGAIN, ASK) while
 * the slot's keys are split by a migration, never half of it. */
static int build_part(struct cluster_sink *cs, const struct batch *b, const struct cluster_part *p,
		      struct redis_cmds *keys)
{
	struct batch sub = *b;
	struct redis_cmds *c = &cs->body, *h = &cs->head;
	unsigned s = p->slot;
	size_t off, nkeys;
	int rc;

	sub.jobs = cs->grouped + p->first;
	sub.njobs = p->n;
	sub.ndead = sub.nkept = 0;
	cmds_reset(c);
	cmds_reset(h);
	cmds_reset(keys);
	if ((rc = format_of(cs->cfg->format)->commands(c, &sub, cs->cfg->key_prefix)) < 0 ||
	    (rc = cmds_begin(keys, "KEYS")) < 0)
		return rc;
	for (size_t k = 0; rc == 0 && k < c->ncmds; k++)
		rc = add_keys(cs, keys, k);
	if (rc < 0 || (rc = cmds_begin(c, cs->pushed[s] ? "APPEND" : "SET")) < 0 ||
	    (rc = cluster_sink_own_key(c, cs->cfg, s, KEYS_FENCE)) < 0)
		return rc;
	off = c->scratch.len;
	rc = cs->pushed[s] ? fence_write_more(&c->scratch, &sub) : fence_write(&c->scratch, cs->count[s], &sub);
	if (rc < 0 || (rc = cmds_tail(c, off)) < 0)
		return rc;
	nkeys = 3 + keys->cmds[0].argc - 1;
	if ((rc = cmds_begin(h, "EVAL")) < 0 || (rc = cmds_ref(h, cs->script.data, cs->script.len)) < 0 ||
	    (rc = cmds_fmt(h, "%zu", nkeys)) < 0 || (rc = cluster_sink_own_key(h, cs->cfg, s, KEYS_EPOCH)) < 0 ||
	    (rc = cluster_sink_own_key(h, cs->cfg, s, KEYS_EPOCH_TOKEN)) < 0 ||
	    (rc = cluster_sink_own_key(h, cs->cfg, s, KEYS_FENCE)) < 0)
		return rc;
	for (size_t a = 1; rc == 0 && a < keys->cmds[0].argc; a++) {
		size_t len;
		const char *key = cmds_arg(keys, 0, a, &len);
		rc = cmds_ref(h, key, len);
	}
	return rc ? rc : cmds_fmt(h, "%lld:%s", cs->count[s], cs->tokens[s]);
}

/* The part's EVAL, in RESP, kept in wire: a part that did not run goes
 * again as it was, whatever the batch's memory holds by then. */
static int format_part(struct cluster_sink *cs, const struct batch *b, struct cluster_part *p)
{
	int rc;

	p->off = cs->wire.len;
	if ((rc = build_part(cs, b, p, &cs->keys)) < 0 || (rc = push_argv_build(&cs->argv, &cs->head, &cs->body)) < 0 ||
	    (rc = push_argv_resp(&cs->argv, &cs->wire)) < 0)
		return rc;
	p->len = cs->wire.len - p->off;
	return 0;
}

/* Queues the part on its slot's master (ask: on the node an ASK named,
 * after ASKING): 0, or -EIO when it cannot be reached. */
static int queue_part(struct cluster_sink *cs, struct cluster_part *p, bool ask)
{
	const char *asking[] = { "ASKING" };
	struct redis_conn *conn;

	if (cs->count[p->slot] == 0) {
		snprintf(cs->errstr, sizeof(cs->errstr), "slot %u of the redis cluster is not settled", p->slot);
		return -EIO;
	}
	if (!ask && cs->cl.owner[p->slot] != CLUSTER_NO_NODE)
		p->node = cs->cl.nodes[cs->cl.owner[p->slot]];
	if (!p->node || redis_cluster_node_connect(&cs->cl, p->node) < 0) {
		snprintf(cs->errstr, sizeof(cs->errstr), "slot %u: %.100s", p->slot,
			 p->node ? cs->cl.errstr : "no master of the redis cluster serves it");
		return -EIO;
	}
	conn = &p->node->conn;
	if ((ask && redis_conn_append(conn, 1, asking, NULL) < 0) ||
	    redis_conn_append_raw(conn, cs->wire.data + p->off, p->len) < 0) {
		snprintf(cs->errstr, sizeof(cs->errstr), "%s", conn->errstr);
		return -EIO;
	}
	return 0;
}

/* The push failed: its parts that did not land may still, later. */
static void doubt_parts(struct cluster_sink *cs)
{
	for (size_t k = 0; k < cs->nparts; k++) {
		unsigned s = cs->parts[k].slot;
		if (!cs->done[s] && !cs->doubt[s]) {
			cs->doubt[s] = true;
			cs->ndoubt++;
		}
	}
}

/* Flushes each master a part went to, with WAIT after its parts. */
static int flush_nodes(struct cluster_sink *cs)
{
	int rc = 0;

	for (size_t i = 0; i < cs->cl.nnodes; i++) {
		struct cluster_node *n = cs->cl.nodes[i];
		if (!n->in_send)
			continue;
		if (cs->cfg->redis_wait_replicas > 0 && rc == 0)
			rc = cluster_sink_wait(cs, &n->conn, true);
		if (rc == 0 && redis_conn_flush(&n->conn) < 0) {
			snprintf(cs->errstr, sizeof(cs->errstr), "redis push failed: %.100s", n->conn.errstr);
			rc = -EIO;
		}
	}
	return rc;
}

int cluster_sink_send(struct cluster_sink *cs, const struct batch *b)
{
	int rc = 0;

	cs->sent = false;
	if (!cs->retry)
		for (size_t k = 0; k < cs->nparts; k++)
			cs->done[cs->parts[k].slot] = false;
	cs->retry = false;
	if (b->njobs == 0)
		return 0;
	if (cs->script.len == 0 && (rc = push_script_build(&cs->script, format_of(cs->cfg->format)->script)) < 0)
		return rc;
	if (cs->cl.stale && redis_cluster_refresh(&cs->cl) < 0) {
		snprintf(cs->errstr, sizeof(cs->errstr), "%s", cs->cl.errstr);
		return -EIO;
	}
	if ((rc = group(cs, b)) < 0)
		return rc;
	for (size_t i = 0; i < cs->cl.nnodes; i++)
		cs->cl.nodes[i]->in_send = false;
	buf_reset(&cs->wire);
	for (size_t k = 0; rc == 0 && k < cs->nparts; k++) {
		struct cluster_part *p = &cs->parts[k];
		p->node = NULL;
		if (cs->done[p->slot])
			continue; /* landed before the WRONGTYPE this retry follows */
		if ((rc = format_part(cs, b, p)) == 0 && (rc = queue_part(cs, p, false)) == 0)
			p->node->in_send = true;
	}
	if (rc == 0)
		rc = flush_nodes(cs);
	if (rc == 0) {
		cs->sent = true;
		return 0;
	}
	/* What was queued must not go out later, ahead of another command. */
	for (size_t i = 0; i < cs->cl.nnodes; i++)
		if (cs->cl.nodes[i]->in_send)
			redis_conn_close(&cs->cl.nodes[i]->conn);
	doubt_parts(cs);
	return rc;
}

/* An answer that says the part did not run: where it goes next. */
enum again { AGAIN_NO, AGAIN_MOVED, AGAIN_ASK, AGAIN_LATER };

static enum again again_of(struct cluster_sink *cs, struct cluster_part *p, const char *err)
{
	static const char *const later[] = { "TRYAGAIN", "CLUSTERDOWN", "LOADING",
					     "ERR Script attempted to access a non local key" };
	struct cluster_node *to;
	unsigned s;
	bool ask;

	if (redis_cluster_redirect(&cs->cl, err, &s, &to, &ask) && s == p->slot) {
		p->node = to;
		return ask ? AGAIN_ASK : AGAIN_MOVED;
	}
	for (size_t i = 0; i < sizeof(later) / sizeof(later[0]); i++)
		if (strncmp(err, later[i], strlen(later[i])) == 0)
			return AGAIN_LATER;
	return AGAIN_NO;
}

/* One part's answer: 0 (landed), a code, or with *again where to send it. */
static int part_reply(struct cluster_sink *cs, struct cluster_part *p, enum again *again)
{
	struct redis_conn *conn = &p->node->conn;
	redisReply *r = NULL;
	int rc = 0;

	*again = AGAIN_NO;
	if (redis_conn_reply(conn, &r, 0) < 0) {
		snprintf(cs->errstr, sizeof(cs->errstr), "redis push failed: %.100s", conn->errstr);
		return -EIO;
	}
	if (r->type == REDIS_REPLY_ERROR && (*again = again_of(cs, p, r->str)) == AGAIN_NO) {
		rc = push_script_error(r->str);
		snprintf(cs->errstr, sizeof(cs->errstr), "redis at %.100s refused slot %u's part: %.100s", conn->where,
			 p->slot, r->str);
	} else if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 && r->element[0]->type == REDIS_REPLY_STRING &&
		   strcmp(r->element[0]->str, "WRONGTYPE") == 0) {
		rc = push_script_wrongtype(r, cs->bad, cs->nbad) == 0 ? REDIS_SINK_WRONGTYPE : -EIO;
	} else if ((r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) && strcmp(r->str, "OK") == 0) {
		cs->done[p->slot] = cs->pushed[p->slot] = true;
	} else if (r->type != REDIS_REPLY_ERROR) {
		snprintf(cs->errstr, sizeof(cs->errstr),
			 "redis at %.100s answered slot %u's part with what the push "
			 "script does not",
			 conn->where, p->slot);
		redis_conn_close(conn); /* the replies after it cannot be trusted */
		rc = -EIO;
	}
	freeReplyObject(r);
	return rc;
}

static void nap(int ms)
{
	struct timespec ts = { 0, ms * 1000000L };

	nanosleep(&ts, NULL);
}

/* A part that did not run goes again, alone, where the cluster says, until
 * --redis-timeout: its answer, as part_reply's. */
static int part_again(struct cluster_sink *cs, struct cluster_part *p, enum again again)
{
	long long until = clock_mono_ms() + cs->cfg->redis_timeout_ms;
	struct cluster_node *sent;
	int rc = 0;

	while (again != AGAIN_NO) {
		bool ask = again == AGAIN_ASK;
		if (clock_mono_ms() >= until) {
			rc = -EIO; /* errstr: the last refusal */
			break;
		}
		if (again == AGAIN_LATER) {
			nap(CLUSTER_AGAIN_MS);
			if (redis_cluster_refresh(&cs->cl) < 0)
				continue;
		}
		if ((rc = queue_part(cs, p, ask)) < 0 ||
		    (cs->cfg->redis_wait_replicas > 0 && (rc = cluster_sink_wait(cs, &p->node->conn, true)) < 0))
			break;
		if (redis_conn_flush(&p->node->conn) < 0) {
			snprintf(cs->errstr, sizeof(cs->errstr), "redis push failed: %.100s", p->node->conn.errstr);
			rc = -EIO;
			break;
		}
		if (ask && (rc = cluster_sink_discard(cs, &p->node->conn)) < 0)
			break;
		sent = p->node; /* a redirect in the answer points p elsewhere: WAIT's answer is here */
		rc = part_reply(cs, p, &again);
		if (cs->cfg->redis_wait_replicas > 0 && redis_conn_connected(&sent->conn)) {
			int w = cluster_sink_wait(cs, &sent->conn, false);
			rc = rc ? rc : w;
		}
	}
	return rc;
}

/* Keeps the first failure, a code over REDIS_SINK_WRONGTYPE. */
static void keep_first(int *rc, int one)
{
	if (one != 0 && (*rc == 0 || (*rc == REDIS_SINK_WRONGTYPE && one < 0)))
		*rc = one;
}

int cluster_sink_reply(struct cluster_sink *cs)
{
	int rc = 0;

	if (!cs->sent)
		return 0;
	cs->sent = false;
	for (size_t k = 0; k < cs->nparts; k++) {
		enum again again = AGAIN_NO;
		if (cs->parts[k].node)
			keep_first(&rc, part_reply(cs, &cs->parts[k], &again));
		cs->parts[k].again = again;
	}
	for (size_t i = 0; cs->cfg->redis_wait_replicas > 0 && i < cs->cl.nnodes; i++)
		if (cs->cl.nodes[i]->in_send && redis_conn_connected(&cs->cl.nodes[i]->conn))
			keep_first(&rc, cluster_sink_wait(cs, &cs->cl.nodes[i]->conn, false));
	for (size_t k = 0; rc >= 0 && k < cs->nparts; k++)
		if (cs->parts[k].again != AGAIN_NO)
			keep_first(&rc, part_again(cs, &cs->parts[k], (enum again)cs->parts[k].again));
	cs->retry = rc == REDIS_SINK_WRONGTYPE;
	if (rc < 0)
		doubt_parts(cs);
	return rc;
}
