/* The build step of a batch: the rows read, each into a job of its target's
 * format (or a dead row with the reason it cannot be one), for the target
 * its route column or its queue picks; then release holds what may not go
 * now and adds what it releases. */
#ifndef STAGEDRAIN_BUILD_H
#define STAGEDRAIN_BUILD_H

#include <stdbool.h>
#include <stddef.h>

#include "batch.h"
#include "config.h"
#include "fmacros.h"
#include "metrics.h"
#include "narrow.h"
#include "pg_source.h"
#include "release.h"
#include "target.h"

/* The last queue the route rules were asked about, and their answer. */
struct route_memo {
	char queue[128];
	size_t len; /* SIZE_MAX: none (a queue name too long to keep is asked each time) */
	size_t target;
};

struct build {
	const struct config *cfg;
	struct target *t; /* borrowed: the targets (their opts are set here each batch) */
	size_t nt;
	struct release_target *rts; /* borrowed: what release sees of them */
	struct release *release;    /* borrowed */
	struct metrics *metrics;    /* borrowed; NULL: none */
	struct route_memo memo;
	char origin[300]; /* Celery's origin header: gen<pid>@<host>, as Celery's client writes */
};

void build_init(struct build *bd, const struct config *cfg, struct target *t, size_t nt, struct release_target *rts,
		struct release *release, struct metrics *metrics);
/*
 * Builds the nrows rows pg read into b (a row narrow condemned goes dead
 * with Redis's answer), then lets release hold and release jobs, within
 * max_bytes. 0, or as release_run (RELEASE_REDIS_FAILED with the failed
 * target's errstr set), or -ENOMEM.
 */
int build_batch(struct build *bd, struct pg_source *pg, const struct narrow *n, struct batch *b, int nrows,
		long max_bytes) SD_MUSTCHECK;
/* A later batch of a pipelined transaction: its rows only (no release).
 * plain false when one of them is not a plain job (dead, or anything the
 * first batch's path must see to). 0 or -ENOMEM. */
int build_more(struct build *bd, const struct pg_source *pg, struct batch *b, int nrows, bool *plain) SD_MUSTCHECK;

#endif
