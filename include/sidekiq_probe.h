/* --sidekiq-version auto: which timestamps the running Sidekiq processes read,
 * from the registry they keep in Redis. */
#ifndef STAGEDRAIN_SIDEKIQ_PROBE_H
#define STAGEDRAIN_SIDEKIQ_PROBE_H

#include <stddef.h>

#include "config.h"
#include "fmacros.h"
#include "redis_conn.h"

/* At most this many processes are read; a larger fleet is judged by these. */
#define SIDEKIQ_PROBE_MAX 1000

/* What the relay says of Sidekiq (the job_format_info labels, the log line):
 * the timestamps it writes apart from the version that runs, since 6.x and
 * 7.x are both written float seconds. */
struct sidekiq_seen {
	const char *timestamps; /* "float_seconds" or "integer_milliseconds" */
	/* "read": the lowest live process's, "6" for 6.x (which writes none);
	 * "" before a reading and while none is alive. "configured": the
	 * --sidekiq-version given. */
	char version[32];
	const char *source; /* "read" (auto) or "configured" */
};

struct sidekiq_probe {
	const struct config *cfg;
	int version; /* what jobs are written for: 6 or 7 float seconds, 8 integer ms */
	struct sidekiq_seen seen;
	long long next_ms; /* monotonic ms of the next reading; 0: at once */
	bool read_once;    /* a reading succeeded: its answer was logged */
	size_t live;       /* processes alive at the last reading */
	bool failing;      /* the last reading failed: said once, until one succeeds */
	char errstr[256];  /* the error Redis answered to the last failed reading */
};

void sidekiq_probe_init(struct sidekiq_probe *p, const struct config *cfg);
/*
 * The Sidekiq version to write jobs for. With --sidekiq-version auto (and a
 * Sidekiq-layout format) it reads the processes when a reading is due (the
 * drain asks before each batch; at most once per --watch-interval): 8 only while at least one process is alive and every live
 * one says 8.x (7.x and 8.x write "version" into their info; 6.x writes none);
 * 7, whose floats every version reads, otherwise. A change is logged; a
 * failed reading keeps the last answer and leaves the connection as it was
 * (a warning says why, once until a reading succeeds; a transport fault has
 * closed the connection, and the push that follows finds it).
 */
int sidekiq_probe_version(struct sidekiq_probe *p, struct redis_conn *c, long long now_ms);
/* How many Sidekiq processes under prefix are alive (their info hash is
 * there), as the version reading counts them. 0, -EINVAL (Redis answered an
 * error) or -EIO (c->errstr). */
int sidekiq_probe_live(struct redis_conn *c, const char *prefix, size_t *live) SD_MUSTCHECK;

#endif
