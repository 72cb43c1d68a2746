/* One target's Redis side (see include/target.h). */
#include "fmacros.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster_sink.h"
#include "formats.h"
#include "log.h"
#include "redis_policy.h"
#include "target.h"

#define BACKOFF_BASE_MS 100
#define BACKOFF_CAP_MS 10000

void target_init(struct target *t, size_t index, const char *name, const struct config *cfg, struct stop *stop)
{
	memset(t, 0, sizeof(*t));
	t->index = index;
	t->name = name;
	t->route = index ? name : NULL;
	t->cfg = cfg;
	redis_sink_init(&t->redis, cfg);
	redis_sink_stop_on(&t->redis, stop);
	t->state = TARGET_NEED_EPOCH;
	fence_init(&t->fence);
	buf_init(&t->fence_text);
	backoff_init(&t->backoff, BACKOFF_BASE_MS, BACKOFF_CAP_MS, (unsigned)getpid() * 31u + (unsigned)index);
	sidekiq_probe_init(&t->sidekiq, cfg);
	backpressure_init(&t->bp, cfg);
}

void target_free(struct target *t)
{
	if (!t)
		return;
	target_connect_wait(t);
	redis_sink_free(&t->redis);
	fence_free(&t->fence);
	buf_free(&t->fence_text);
	backpressure_free(&t->bp);
}

void target_fall_back(struct target *t, enum target_state to)
{
	if (t->state > to)
		t->state = to;
	/* On a cluster, the slots this concerns (all, or those it pushed to). */
	redis_sink_fall_back(&t->redis, to == TARGET_NEED_EPOCH);
}

bool target_up(const struct target *t)
{
	/* The state first: a target connecting (its redis the connector's) is
	 * never READY. */
	return t->state == TARGET_READY && !t->paused && redis_sink_connected(&t->redis);
}

bool target_queue_up(void *t, const char *queue, size_t len)
{
	return redis_sink_queue_up(&((struct target *)t)->redis, queue, len);
}

void target_view(struct target *t, const struct batch *b, const struct batch_job *grouped)
{
	size_t i = 0, n = 0;

	while (i < b->njobs && grouped[i].target < t->index)
		i++;
	while (i + n < b->njobs && grouped[i + n].target == t->index)
		n++;
	t->part = *b;
	t->part.jobs = (struct batch_job *)grouped + i;
	t->part.njobs = n;
	t->part.ndead = t->part.nkept = 0;
}

const struct batch_job *target_group(const struct batch *b, size_t n, struct batch_job **scratch, size_t *cap)
{
	size_t at = 0;
	bool sorted = true;

	for (size_t i = 1; sorted && i < b->njobs; i++)
		sorted = b->jobs[i - 1].target <= b->jobs[i].target;
	if (sorted)
		return b->jobs; /* one target, or grouped already: the common case costs a scan */
	if (buf_grow_array((void **)scratch, cap, b->njobs, sizeof(**scratch)) < 0)
		return NULL;
	for (size_t t = 0; t < n; t++)
		for (size_t i = 0; i < b->njobs; i++)
			if (b->jobs[i].target == t)
				(*scratch)[at++] = b->jobs[i];
	return *scratch;
}

void target_note_unsettled(struct target *t)
{
	const struct cluster_sink *cs = t->redis.cluster;

	if (!cs || cs->unsettled == t->unsettled)
		return;
	if (cs->unsettled)
		log_warn("hash slots of the redis cluster cannot take jobs now; their queues' jobs wait in "
			 "staged_jobs_held, and the slots are tried again",
			 LOGF(F_INT("slots", (long long)cs->unsettled), F_STR("error", cs->errstr),
			      F_STR("target", t->name)));
	else
		log_info("every hash slot of the redis cluster takes jobs again", LOGF(F_STR("target", t->name)));
	t->unsettled = cs->unsettled;
}

void target_show_cluster(const struct target *t, struct metrics *m)
{
	const struct cluster_sink *cs = t->redis.cluster;
	struct metrics_cluster c = { .on = true };
	size_t up = 0;

	if (!cs)
		return;
	c.masters = redis_cluster_masters(&cs->cl, &up);
	c.connected = up;
	c.unsettled = cs->unsettled;
	c.unserved = cs->cl.unserved;
	c.refreshes = (unsigned long long)cs->cl.refreshes;
	c.redirects = (unsigned long long)cs->cl.redirects;
	for (size_t i = 0; i < cs->cl.nnodes && c.nnodes < METRICS_CLUSTER_NODES; i++) {
		const struct cluster_node *n = cs->cl.nodes[i];
		if (!n->in_map)
			continue;
		redis_addr_describe(n->host, n->port, c.nodes[c.nnodes].addr, sizeof(c.nodes[c.nnodes].addr));
		c.nodes[c.nnodes++].up = redis_conn_connected(&n->conn);
	}
	metrics_target_cluster(m, t->index, &c);
}

void target_note_server(struct target *t, struct metrics *m)
{
	const struct redis_target *rt = &t->cfg->redis;
	const char *where = t->redis.conn.where, *name = rt->master_name ? rt->master_name : "";

	if (t->where[0] && strcmp(t->where, where) != 0)
		log_warn("redis master changed", LOGF(F_STR("from", t->where), F_STR("to", where),
						      F_STR("master_name", name), F_STR("target", t->name)));
	snprintf(t->where, sizeof(t->where), "%s", where);
	if (t->index == 0)
		metrics_redis_server(m, where, rt->master_name, rt->tls);
}

/*
 * An allkeys-* maxmemory-policy may evict the relay's epoch and fence and the
 * workers' queued jobs alike: one warning per policy seen (redis_policy.h
 * says why volatile-* is left alone). A Redis that refuses CONFIG (a managed
 * one may) gets a debug line; a failed read leaves the connection to the ladder.
 */
void target_check_eviction(struct target *t)
{
	char policy[sizeof(t->policy)];
	int rc = redis_policy_read(&t->redis.conn, policy, sizeof(policy));

	if (rc == -EPERM)
		log_debug("could not read maxmemory-policy", LOGF(F_STR("error", t->redis.conn.errstr)));
	if (rc < 0 || strcmp(policy, t->policy) == 0)
		return;
	snprintf(t->policy, sizeof(t->policy), "%s", policy);
	if (redis_policy_evicts(policy))
		log_warn("redis may evict any key under maxmemory-policy, the relay's epoch and fence and the workers' "
			 "queued jobs alike; Sidekiq requires noeviction",
			 LOGF(F_STR("maxmemory_policy", policy), F_STR("redis", t->where), F_STR("target", t->name)));
}

void target_log_connected(struct target *t, struct metrics *m, const char *pgw)
{
	const struct redis_target *rt = &t->cfg->redis;

	target_note_server(t, m);
	log_info("connected", LOGF(F_STR("postgres", pgw), F_STR("redis", t->where),
				   F_STR("master_name", rt->master_name ? rt->master_name : ""),
				   F_STR("tls", rt->tls ? "true" : "false"),
				   F_STR("format", format_of(t->cfg->format)->name), F_STR("target", t->name)));
	target_check_eviction(t);
	if (t->cfg->redis_tls_insecure)
		log_warn("--redis-tls-insecure: the redis server's certificate is not verified; anyone on the "
			 "network path can read and change the jobs",
			 LOGF(F_STR("target", t->name)));
}
