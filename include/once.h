/* --once: when the run is over, and the one line that says what it leaves
 * behind and why. It exits 0 only when a read of everything (every gap
 * included) found nothing it could relay, and nothing is held, kept or paused;
 * otherwise ONCE_LEFT (exit 3). README "Running it" has what each case means. */
#ifndef STAGEDRAIN_ONCE_H
#define STAGEDRAIN_ONCE_H

#include <stdbool.h>

#include "config.h"
#include "fmacros.h"
#include "gaps.h"
#include "pg_source.h"
#include "release.h"
#include "tally.h"
#include "target.h"

/* How long --once waits for another relay's leader lock before it says so. */
#define ONCE_LOCK_WAIT_MS 5000
/* How long --once retries a server it cannot use (at start, or a batch that
 * keeps failing) before it ends with an error instead of waiting forever. */
#define ONCE_SERVER_WAIT_MS 10000

/* once_report's answer when jobs are left behind: the relay exits 3. */
#define ONCE_LEFT 1

/* What --once knows of the last batch (the drain holds one), and what it
 * reads to say what is left (borrowed from the drain, set by once_init). */
struct once {
	const struct config *cfg;
	struct pg_source *pg;
	const struct target *t;
	size_t nt;
	const struct release *release;
	const struct gaps *gaps;
	const struct tally *tally;
	bool read_all;        /* the next read covers every gap: the last word before stopping */
	bool all_read;        /* the last read did */
	long long moved;      /* rows the last batch took out of staged_jobs or staged_jobs_held */
	bool gave_up;         /* another session held the leader lock past ONCE_LOCK_WAIT_MS */
	char leader[300];     /* then: who holds it, as far as Postgres shows */
	long long trouble_ms; /* when batches began to fail, none succeeding since; 0: none failing */
};

void once_init(struct once *o, const struct config *cfg, struct pg_source *pg, const struct target *t, size_t nt,
	       const struct release *release, const struct gaps *gaps, const struct tally *tally);
/* After a batch that did not fail: true when --once should stop. A batch that
 * moved nothing and left the cursor where it was (cursor_before) ends the run
 * only if its read covered every gap; else it asks the next read to. A pause
 * by --max-redis-memory ends it at once. */
bool once_over(struct once *o, long long cursor_before);
/* While standing by: true when --once has waited long enough since since_ms;
 * it then names the lock's holder (Postgres's view of it) for the last line. */
bool once_stop_waiting(struct once *o, long long since_ms);
/* After a try at a batch, or at start at a server, that failed (failed) or
 * not: true, logged, when --once has failed for ONCE_SERVER_WAIT_MS without
 * one going through. */
bool once_trouble_over(struct once *o, bool failed);
/* A wait of ms, cut to what is left of ONCE_SERVER_WAIT_MS while --once is
 * in trouble: its last back-off does not run past the time it says. */
int once_nap_ms(const struct once *o, int ms);
/* Logs the line --once ends with: "stopped", or what is left and why. Returns
 * 0, or ONCE_LEFT when something is left. */
int once_report(struct once *o);

#endif
