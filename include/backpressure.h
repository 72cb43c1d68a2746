/* What Redis can take now: the lengths of capped queues' lists, and its
 * memory against --max-redis-memory. One pipelined round trip each. */
#ifndef STAGEDRAIN_BACKPRESSURE_H
#define STAGEDRAIN_BACKPRESSURE_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "fmacros.h"
#include "redis_cmds.h"
#include "redis_conn.h"
#include "rounds.h"

struct backpressure {
	const struct config *cfg;
	struct redis_cmds cmds; /* the LLENs of one reading */
	size_t *of;             /* per LLEN: the queue index it counts for */
	size_t ofcap;
	bool paused;                /* by --max-redis-memory, until memory falls below the resume mark */
	bool said_no_max;           /* maxmemory is 0 and the flag can do nothing: said once */
	long long wrongtype_log_ms; /* when a list of the wrong type was last named */
	long long error_log_ms;     /* when Redis's error to an LLEN was last named */
	char errstr[300];
};

void backpressure_init(struct backpressure *bp, const struct config *cfg);
void backpressure_free(struct backpressure *bp);
/*
 * With --max-redis-memory: reads INFO memory. Returns 1 while paused (at or
 * above PERCENT of maxmemory, until below the resume mark; each change is
 * logged once), else 0 with *budget the bytes of row text a batch may read
 * (a quarter of the room left below PERCENT; LONG_MAX without the flag or
 * without maxmemory). -EIO (errstr) when Redis did not answer.
 */
int backpressure_memory(struct backpressure *bp, struct redis_conn *conn, long *budget) SD_MUSTCHECK;
/* Sets the room of each queue in qs (indices into r): its cap less what its
 * lists hold, 0 when a length cannot be read (a list of the wrong type, or
 * an error reply such as NOPERM, LOADING, BUSY; named in a warning at most
 * once a minute each). 0, -EIO (errstr) or -ENOMEM. */
int backpressure_rooms(struct backpressure *bp, struct redis_conn *conn, struct rounds *r, const size_t *qs,
		       size_t n) SD_MUSTCHECK;

#endif
