/* `stagedrain status`'s targets: which there are, and what their Redis holds for the queues shown. */
#include "fmacros.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "formats.h"
#include "keys.h"
#include "readers.h"
#include "redis_cmds.h"
#include "redis_conn.h"
#include "status_targets.h"

int status_targets_init(struct status *s, const struct config *cfg)
{
	for (size_t i = 0; i < cfg->routes.n; i++) {
		int rc = status_target_add(s, cfg->routes.t[i].name, cfg->routes.t[i].cfg);
		if (rc < 0)
			return rc;
	}
	return 0;
}

size_t status_targets_of(const struct config *cfg, const char *queue)
{
	return routes_find(&cfg->routes, queue, strlen(queue), NULL, 0);
}

int status_targets_held(struct status *s, const char *name)
{
	return name ? status_target_add(s, name, NULL) : 0;
}

static void failed(struct status_target *t, const struct redis_conn *c)
{
	if (!t->reached)
		return;
	t->reached = false;
	snprintf(t->err, sizeof(t->err), "%s", c->errstr);
}

static void read_epoch(struct status *s, const struct config *cfg, struct redis_conn *c)
{
	char key[512];
	const char *argv[2] = { "GET", key };
	redisReply *r = NULL;

	snprintf(key, sizeof(key), KEYS_OWN_FMT, cfg->key_prefix, cfg->lock_key, KEYS_EPOCH);
	if (redis_conn_command(c, 2, argv, NULL, &r) < 0) {
		failed(&s->targets[0], c);
		return;
	}
	if (r->type == REDIS_REPLY_STRING)
		s->epoch = atoll(r->str);
	freeReplyObject(r);
}

/* One LLEN per list of each shown queue of target t, pipelined; a list of the
 * wrong type leaves its queue's length unknown, as the relay counts it full. */
static int read_lengths(struct status *s, size_t t, struct redis_conn *c)
{
	const struct config *tc = s->targets[t].cfg;
	const struct format *f = format_of(tc->format);
	struct redis_cmds cmds;
	size_t *of = NULL, ofcap = 0;
	int rc = 0;

	cmds_init(&cmds);
	for (size_t i = 0; rc == 0 && i < s->nqueues; i++) {
		size_t before = cmds.ncmds;
		if (s->queues[i].target != t)
			continue;
		rc = f->lists(&cmds, tc->key_prefix, s->queues[i].name, strlen(s->queues[i].name));
		if (rc == 0)
			rc = buf_grow_array((void **)&of, &ofcap, cmds.ncmds, sizeof(*of));
		for (size_t k = before; rc == 0 && k < cmds.ncmds; k++)
			of[k] = i;
	}
	for (size_t k = 0; rc == 0 && k < cmds.ncmds; k++) {
		const char *argv[2];
		size_t argvlen[2];
		argv[0] = cmds_arg(&cmds, k, 0, &argvlen[0]);
		argv[1] = cmds_arg(&cmds, k, 1, &argvlen[1]);
		if (redis_conn_append(c, 2, argv, argvlen) < 0)
			rc = -EIO;
	}
	for (size_t k = 0; rc == 0 && k < cmds.ncmds; k++) {
		struct status_queue *q = &s->queues[of[k]];
		redisReply *r = NULL;
		if ((rc = redis_conn_reply(c, &r, 0)) < 0)
			break;
		if (r->type == REDIS_REPLY_INTEGER && (q->length >= 0 || k == 0 || of[k - 1] != of[k]))
			q->length = (q->length < 0 ? 0 : q->length) + r->integer;
		else
			q->length = -1;
		freeReplyObject(r);
	}
	if (rc == -EIO)
		failed(&s->targets[t], c);
	cmds_free(&cmds);
	free(of);
	return rc == -ENOMEM ? rc : 0;
}

/* A cluster's state as a seed node sees it (CLUSTER INFO): one line. */
static void read_cluster(struct status_target *x, struct redis_conn *c)
{
	const char *argv[] = { "CLUSTER", "INFO" };
	char state[32] = "?";
	long long ok = -1, masters = -1;
	redisReply *r = NULL;
	const char *p;

	if (redis_conn_command(c, 2, argv, NULL, &r) < 0 || r->type != REDIS_REPLY_STRING) {
		snprintf(x->cluster, sizeof(x->cluster), "CLUSTER INFO failed: %.100s", c->errstr);
		freeReplyObject(r);
		return;
	}
	if ((p = strstr(r->str, "cluster_state:")))
		sscanf(p, "cluster_state:%31[a-z]", state);
	if ((p = strstr(r->str, "cluster_slots_ok:")))
		sscanf(p, "cluster_slots_ok:%lld", &ok);
	if ((p = strstr(r->str, "cluster_size:")))
		sscanf(p, "cluster_size:%lld", &masters);
	snprintf(x->cluster, sizeof(x->cluster), "cluster_state %s, %lld masters, %lld of 16384 slots served", state,
		 masters, ok);
	freeReplyObject(r);
}

/* Target t's Redis: connected to once, bounded by --redis-timeout. */
static int read_target(struct status *s, const struct config *cfg, size_t t)
{
	struct status_target *x = &s->targets[t];
	struct redis_conn c;
	int rc = 0;

	x->tried = x->reached = true;
	redis_conn_init(&c, x->cfg);
	if (redis_conn_connect(&c) < 0) {
		failed(x, &c);
	} else if (x->cfg->redis.cluster) {
		read_cluster(x, &c); /* its queues' lengths are each on their slot's master */
	} else {
		if (t == 0)
			read_epoch(s, cfg, &c);
		if (x->reached)
			rc = read_lengths(s, t, &c);
		/* Who reads is a judgement on top: a failed look leaves it unknown. */
		if (rc == 0 && x->reached && readers_read(&c, x->cfg, &x->readers) < 0)
			x->readers.verdict = READERS_UNKNOWN;
	}
	snprintf(x->where, sizeof(x->where), "%s", c.where);
	redis_conn_free(&c);
	return rc;
}

int status_targets_read_redis(struct status *s, const struct config *cfg)
{
	int rc = 0;

	s->master_name = cfg->redis.master_name;
	s->redis_tls = cfg->redis.tls;
	for (size_t t = 0; rc == 0 && t < s->ntargets; t++)
		if (s->targets[t].cfg)
			rc = read_target(s, cfg, t);
	/* The default target is the relay's own: its line is the redis one. */
	s->redis_ok = s->targets[0].reached;
	snprintf(s->redis_err, sizeof(s->redis_err), "%s", s->targets[0].err);
	snprintf(s->redis_where, sizeof(s->redis_where), "%s", s->targets[0].where);
	return rc;
}
