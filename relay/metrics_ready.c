/* Whether the relay is ready (/readyz, stagedrain_ready), and why not, in a line. */
#include "fmacros.h"

#include "metrics.h"

/* Both servers reachable; with routes, Redis is any target that takes jobs. */
bool metrics_ready_locked(const struct metrics *m)
{
	for (int s = 0; s < METRICS_NSERVERS; s++) {
		if (s == METRICS_REDIS && m->ntargets > 1 && metrics_targets_ready_locked(m))
			continue;
		if (!m->connected[s] || !m->probed[s] || !m->probe_ok[s])
			return false;
	}
	return metrics_cluster_ready_locked(m);
}

/* One server's reason: short by default, since /readyz answers anyone; the
 * watcher's error text (addresses, server messages) only when asked for. */
static int ready_reason(const struct metrics *m, int s, struct buf *out, bool detail)
{
	if (!m->connected[s] && detail && m->probed[s] && !m->probe_ok[s] && *m->probe_err[s])
		return buf_printf(out, "; %s: not connected: %s", metrics_server_names[s], m->probe_err[s]);
	if (!m->connected[s])
		return buf_printf(out, "; %s: not connected", metrics_server_names[s]);
	if (!m->probed[s])
		return buf_printf(out, "; %s: not checked yet", metrics_server_names[s]);
	if (!m->probe_ok[s] && detail)
		return buf_printf(out, "; %s: %s", metrics_server_names[s], m->probe_err[s]);
	if (!m->probe_ok[s])
		return buf_printf(out, "; %s: unreachable", metrics_server_names[s]);
	return 0;
}

int metrics_ready(struct metrics *m, struct buf *out, bool *ready, bool detail)
{
	const char *role;
	int rc;

	pthread_mutex_lock(&m->lock);
	*ready = metrics_ready_locked(m);
	role = m->leader ? "leader" : "standby";
	rc = buf_printf(out, "%s %s", *ready ? "ready" : "not ready", role);
	for (int s = 0; rc == 0 && !*ready && s < METRICS_NSERVERS; s++)
		rc = ready_reason(m, s, out, detail);
	if (rc == 0 && !*ready)
		rc = metrics_cluster_reason(m, out);
	if (rc == 0)
		rc = buf_puts(out, "\n");
	pthread_mutex_unlock(&m->lock);
	return rc;
}
