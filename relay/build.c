/* The build step of a batch: rows into jobs, by target and format (build.h). */
#include "fmacros.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "build.h"
#include "clock.h"
#include "formats.h"
#include "job_build.h"

void build_init(struct build *bd, const struct config *cfg, struct target *t, size_t nt, struct release_target *rts,
		struct release *release, struct metrics *metrics)
{
	char host[256] = "localhost";

	*bd = (struct build){ .cfg = cfg, .t = t, .nt = nt, .rts = rts, .release = release, .metrics = metrics };
	bd->memo.len = SIZE_MAX;
	gethostname(host, sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	snprintf(bd->origin, sizeof(bd->origin), "gen%d@%s", (int)getpid(), host);
}

/* Each target's opts for this batch, and whether it may take jobs now. */
static void begin_targets(struct build *bd)
{
	long long now_us = clock_wall_us(), now_ms = clock_mono_ms();

	for (size_t i = 0; i < bd->nt; i++) {
		struct target *t = &bd->t[i];
		t->opts = (struct job_opts){
			.format = t->cfg->format,
			.sidekiq_version = target_up(t) ? sidekiq_probe_version(&t->sidekiq, &t->redis.conn, now_ms)
							: t->cfg->sidekiq_version,
			.max_job_bytes = bd->cfg->max_job_bytes,
			.now_us = now_us,
			.rails_version = t->cfg->rails_version,
			.origin = bd->origin,
			.target = i,
			.key_prefix = t->cfg->key_prefix,
			.cluster = t->cfg->redis.cluster,
		};
		/* A lone target that went down since the ladder saw it up
		 * fails its push (the batch rolls back, as ever); with others
		 * up, its rows wait held while theirs go. */
		bd->rts[i].up = bd->nt == 1 || target_up(t);
		bd->rts[i].partial = redis_sink_partial(&t->redis);
	}
}

/* The target of a row: the last queue's again when the rules pick it
 * (rows of a queue come in runs, and a glob costs an fnmatch per rule). */
static size_t row_target(struct build *bd, const struct job_row *row)
{
	struct route_memo *m = &bd->memo;

	/* An empty route names nothing: as NULL, the rules pick. */
	if (row->route && row->route_len > 0)
		return routes_find(&bd->cfg->routes, row->queue, row->queue_len, row->route, row->route_len);
	if (bd->cfg->routes.nrules == 0)
		return 0;
	if (m->len == row->queue_len && memcmp(m->queue, row->queue, m->len) == 0)
		return m->target;
	m->target = routes_find(&bd->cfg->routes, row->queue, row->queue_len, NULL, 0);
	m->len = row->queue_len < sizeof(m->queue) ? row->queue_len : SIZE_MAX;
	if (m->len != SIZE_MAX)
		memcpy(m->queue, row->queue, m->len);
	return m->target;
}

static int add_row(struct build *bd, struct batch *b, struct job_row *row)
{
	char why[JOB_REASON_SIZE];
	size_t ti = row_target(bd, row);

	if (ti == ROUTES_NONE) {
		ti = 0;
		if (!row->unfit) {
			snprintf(why, sizeof(why), "route \"%.*s\" is not a route of this relay (--route)",
				 (int)(row->route_len < 100 ? row->route_len : 100), row->route);
			row->unfit = why;
		}
	}
	return job_build_add(b, row, &bd->t[ti].opts, 0);
}

int build_batch(struct build *bd, struct pg_source *pg, const struct narrow *n, struct batch *b, int nrows,
		long max_bytes)
{
	int rc = batch_reset(b, (size_t)nrows);
	bool sidekiq = bd->cfg->format == FORMAT_SIDEKIQ || bd->cfg->format == FORMAT_ACTIVEJOB;

	begin_targets(bd);
	metrics_job_format(bd->metrics, format_of(bd->cfg->format)->name, sidekiq ? &bd->t[0].sidekiq.seen : NULL);
	for (int i = 0; rc == 0 && i < nrows; i++) {
		struct job_row row;
		const char *refused;
		pg_source_row(pg, i, &row);
		if (!row.unfit && (refused = narrow_unfit(n, row.id)) != NULL)
			row.unfit = refused;
		rc = add_row(bd, b, &row);
	}
	if (rc < 0)
		return rc;
	rc = release_run(bd->release, pg, b, max_bytes);
	if (rc == RELEASE_REDIS_FAILED) {
		struct target *t = &bd->t[bd->release->failed_target];
		snprintf(t->redis.errstr, sizeof(t->redis.errstr), "%.250s", bd->release->errstr);
	}
	return rc;
}

int build_more(struct build *bd, const struct pg_source *pg, struct batch *b, int nrows, bool *plain)
{
	int rc = batch_reset(b, (size_t)nrows);
	long long now_us = clock_wall_us();

	for (size_t t = 0; t < bd->nt; t++)
		bd->t[t].opts.now_us = now_us;
	for (int i = 0; rc == 0 && i < nrows; i++) {
		struct job_row row;
		pg_source_row(pg, i, &row);
		rc = add_row(bd, b, &row);
	}
	*plain = rc == 0 && b->ndead == 0 && b->njobs == (size_t)nrows;
	return rc;
}
