/* A Redis Cluster target's figures: its masters and their connections, its
 * slot map, and the slots whose jobs wait held while their master is away. */
#include "fmacros.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "metrics.h"
#include "metrics_text.h"

void metrics_target_cluster(struct metrics *m, size_t i, const struct metrics_cluster *c)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	if (i < m->ntargets)
		m->targets[i].cluster = *c;
	pthread_mutex_unlock(&m->lock);
}

/* The cluster targets' series, each one figure of struct metrics_cluster. */
static const struct cluster_series {
	const char *name, *type, *help;
	size_t off;
} cluster_series[] = {
	{ "cluster_masters", "gauge", "Masters in the cluster target's slot map.",
	  offsetof(struct metrics_cluster, masters) },
	{ "cluster_masters_connected", "gauge", "Masters the relay is connected to.",
	  offsetof(struct metrics_cluster, connected) },
	{ "cluster_slots_unsettled", "gauge",
	  "Hash slots the relay cannot push to now (their master unreachable, failing over, or too few replicas "
	  "acknowledged): their queues' jobs wait in staged_jobs_held.",
	  offsetof(struct metrics_cluster, unsettled) },
	{ "cluster_slots_unserved", "gauge", "Hash slots no master serves in the slot map.",
	  offsetof(struct metrics_cluster, unserved) },
	{ "cluster_map_refreshes_total", "counter",
	  "Slot maps read (CLUSTER SLOTS): at start, after a failover or a MOVED.",
	  offsetof(struct metrics_cluster, refreshes) },
	{ "cluster_redirects_total", "counter", "MOVED and ASK answers followed (a migration, a failover).",
	  offsetof(struct metrics_cluster, redirects) },
};

/* One series over every cluster target; none for a relay without one. */
static int series(const struct metrics *m, struct buf *out, const struct cluster_series *cs)
{
	bool any = false;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < m->ntargets; i++) {
		const struct metrics_target *t = &m->targets[i];
		if (!t->cluster.on)
			continue;
		if (!any && (rc = metrics_put_head(out, cs->name, cs->type, cs->help)) < 0)
			return rc;
		any = true;
		rc = buf_printf(out, "stagedrain_%s{target=\"%s\"} %llu\n", cs->name, t->name,
				*(const unsigned long long *)((const char *)&t->cluster + cs->off));
	}
	return rc;
}

/* One line per master of every cluster target: 1 while connected. */
static int node_gauge(const struct metrics *m, struct buf *out)
{
	bool any = false;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < m->ntargets; i++) {
		const struct metrics_cluster *c = &m->targets[i].cluster;
		if (!c->on || c->nnodes == 0)
			continue;
		if (!any && (rc = metrics_put_head(out, "cluster_node_up", "gauge",
						   "1 while the relay is connected to this master of the cluster "
						   "target's slot map.")) < 0)
			return rc;
		any = true;
		for (size_t k = 0; rc == 0 && k < c->nnodes; k++)
			rc = buf_printf(out, "stagedrain_cluster_node_up{target=\"%s\",node=\"%s\"} %d\n",
					m->targets[i].name, c->nodes[k].addr, c->nodes[k].up);
	}
	return rc;
}

int metrics_cluster_format(const struct metrics *m, struct buf *out)
{
	int rc = 0;

	for (size_t k = 0; rc == 0 && k < sizeof(cluster_series) / sizeof(cluster_series[0]); k++)
		rc = series(m, out, &cluster_series[k]);
	return rc == 0 ? node_gauge(m, out) : rc;
}

/* Jobs wait for slots the relay cannot reach. */
static bool waiting(const struct metrics_target *t)
{
	return t->cluster.on && t->cluster.unsettled > 0 && t->held > 0;
}

bool metrics_cluster_ready_locked(const struct metrics *m)
{
	for (size_t i = 0; i < m->ntargets; i++)
		if (waiting(&m->targets[i]))
			return false;
	return true;
}

int metrics_cluster_reason(const struct metrics *m, struct buf *out)
{
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < m->ntargets; i++)
		if (waiting(&m->targets[i]))
			rc = buf_printf(out, "; redis cluster (target %s): %llu slots not served, %lld jobs held",
					m->targets[i].name, m->targets[i].cluster.unsettled, m->targets[i].held);
	return rc;
}
