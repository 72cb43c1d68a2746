/*
 * Release: the one place that decides which fetched jobs enter Redis now,
 * between the fetch and the push. Per batch: the memory bound (push nothing
 * while Redis is too full), queue caps (a capped queue's jobs beyond its room,
 * or behind jobs already held, move to staged_jobs_held), and the round-robin
 * release of held jobs across tenants into whatever room the queues have.
 * README "Backpressure and fair release" has the design.
 */
#ifndef STAGEDRAIN_RELEASE_H
#define STAGEDRAIN_RELEASE_H

#include <stdbool.h>
#include <stddef.h>

#include "backpressure.h"
#include "batch.h"
#include "config.h"
#include "fmacros.h"
#include "job.h"
#include "metrics.h"
#include "pg_held.h"
#include "pg_source.h"
#include "redis_conn.h"
#include "rounds.h"

/* release_run's failures: which side to blame (its errstr says why). */
#define RELEASE_PG_FAILED (-EIO)
#define RELEASE_REDIS_FAILED (-EPIPE)

/* What release needs of each target (routes.h), indexed as routes.t. */
struct release_target {
	const char *name;            /* the route's name; NULL for the default target */
	bool up;                     /* its jobs may go to Redis now; else they wait held */
	struct backpressure *bp;     /* reads its capped queues' lengths */
	struct redis_conn *conn;     /* on its connection */
	const struct job_opts *opts; /* builds its released jobs */
	/* On a Redis Cluster, some slots may be unsettled (partial) while the
	 * rest go: whether a queue's jobs may go now (NULL: all, when up). */
	bool partial;
	bool (*queue_up)(void *arg, const char *queue, size_t len);
	void *arg;
};

/* A key in the batch's order of each queue's keys (release_routes.h). */
struct release_order {
	const char *queue; /* its queue's name, in the rounds' key */
	size_t qlen;
	long long first; /* rounds_queue.first: the oldest first */
	size_t qi;
};

struct release {
	const struct config *cfg;
	const struct release_target *ts; /* the drain's, set by release_targets */
	size_t nts;
	size_t failed_target; /* with RELEASE_REDIS_FAILED: whose Redis failed */
	struct buf key;       /* a queue's key in the rounds (rounds_key) */
	size_t *tqs;          /* one target's measured queues */
	size_t captqs;
	struct rounds rounds;
	struct pg_held held;
	bool capped; /* some queue may have a cap */
	bool loaded; /* rounds hold what staged_jobs_held holds, for this leadership */
	long *jq;    /* per staged job of the batch: its queue's index, or -1 */
	size_t capjq;
	size_t *qs; /* queues whose lists the batch measures */
	size_t nqs, capqs;
	bool *in_qs; /* by queue index: already in qs (one look, however many queues) */
	size_t capin;
	struct held_move *mv;
	size_t nmv, capmv;
	struct held_want *want;
	size_t nwant, capwant;
	size_t next_queue;    /* the queue the next release starts from: each gets its turn */
	size_t released_dead; /* released rows of this batch that cannot be jobs */
	long long release_us; /* this batch's time in measuring, holding and releasing */
	long long paused_ms;  /* when --max-redis-memory paused the relay; 0: not paused */
	long long backlog_ms; /* since when some capped queue holds jobs; 0: none */
	bool said_queue_bound;
	long long gone_held;    /* rows held for targets this relay does not have (warned of) */
	bool hold_only;         /* the batch at a stop: holds the down targets' rows, releases none, keeps the rest */
	long long hold_through; /* rows at or below this id wait held, whatever their target (ladder.h) */
	struct release_order *order; /* this batch: keys holding rule rows, by queue, oldest first */
	size_t norder, caporder;
	bool *waits; /* by key: an older key of its queue goes first (release_routes.h) */
	size_t capwaits;
	long long reload_ms; /* with gone_held: when to count them again */
	char errstr[300];
};

void release_init(struct release *rl, const struct config *cfg);
void release_free(struct release *rl);
/* The held table must be read again before the next batch (a new
 * leadership, a fence that deleted released rows, a failed move). */
void release_forget(struct release *rl);
/* Reads the held table if release_forget asked for it, and shows what it
 * holds in the metrics. 0, -EIO, -ENOMEM. */
int release_load(struct release *rl, struct pg_source *pg, struct metrics *m) SD_MUSTCHECK;
/* Whether batches need release_run: a cap is set, jobs are held, or a target is not up. */
bool release_needed(const struct release *rl);
/* Before a fetch, of the default target's Redis (bp): 1 while
 * --max-redis-memory pauses it; 0 with *max_bytes the row text the batch may
 * read. -EIO (errstr). */
int release_memory(struct release *rl, struct backpressure *bp, struct redis_conn *conn, long *max_bytes,
		   struct metrics *m) SD_MUSTCHECK;
/* The targets of the next release_run (n of them; ts stays the caller's). */
void release_targets(struct release *rl, const struct release_target *ts, size_t n);
/*
 * After the batch's staged rows were built into b (nothing to do unless
 * release_needed): holds what may not go now (every job of a target that is
 * not up; moved in the batch's transaction), then reads and builds released
 * jobs into b after the staged ones (hold_id set), with their targets' opts.
 * 0, RELEASE_PG_FAILED (pg->errstr), RELEASE_REDIS_FAILED (errstr,
 * failed_target) or -ENOMEM.
 */
int release_run(struct release *rl, struct pg_source *pg, struct batch *b, long max_bytes) SD_MUSTCHECK;
/* Jobs this batch moved to the held table, and released from it. */
void release_counts(const struct release *rl, size_t *held, size_t *released);
/* A released job could not be pushed (its key has the wrong type): it stays
 * held, and its queue waits a while before the next try. */
void release_unrelease(struct release *rl, const struct batch_job *j);
/* The batch's dead rows could not be moved (PG_SOURCE_DEAD_KEPT): released
 * ones among them stay held, behind the cursor; read the table again. */
void release_dead_kept(struct release *rl);
/* Jobs held for target t (release_targets' index), committed. */
long long release_held_for(const struct release *rl, size_t t);
/* The batch committed: its holds and releases count, and each target's held jobs. */
void release_commit(struct release *rl, struct metrics *m);

/*
 * Held rows and today's routes (relay/release_routes.c, for a route change
 * between starts, docs/topologies.md): which target a held queue's key
 * names, or none now; rows whose route is gone; where a released row goes
 * by today's rules; and the order of a queue's keys. A queue's rows may
 * wait held for several targets (its rule changed, or its target was down
 * when another relay that routed it elsewhere led): all go where today's
 * rule sends the queue, so its keys leave one at a time, oldest first, and
 * its new rows wait behind the youngest. A queue keeps its order across
 * any number of changes.
 */
/* A key's target this relay does not have: its route was removed or renamed
 * (the relay knows targets by name). Its Redis may hold a late copy of a
 * push that timed out, so its rows go nowhere else unasked: they wait,
 * counted, for the target to come back or for `stagedrain held`. */
#define RELEASE_KEY_GONE ((size_t)-1)

/* The target index a rounds key names, or RELEASE_KEY_GONE. */
size_t release_key_target(const struct release *rl, const char *key, size_t len);
/* Moves the held rows whose route column names a route that is gone to the
 * dead table (warned of); one that cannot leaves them held. 0 or -ENOMEM. */
int release_dead_gone_routes(struct release *rl, struct pg_source *pg) SD_MUSTCHECK;
/* Rows held for targets that are gone, in all. */
long long release_gone_held(const struct release *rl);
/* Warns of each queue held for a target that is gone, when their number changed. */
void release_warn_gone(struct release *rl);
/* Where a released row goes now: its route column's target, else today's
 * rule for its queue; ROUTES_NONE when its route is gone. */
size_t release_row_target(const struct release *rl, const struct job_row *row);
/* Before a batch: orders the keys holding rows their queue's rule sent (of
 * targets still configured) by queue, oldest first. 0 or -ENOMEM. */
int release_order_keys(struct release *rl) SD_MUSTCHECK;
/* Whether key qi waits this batch: an older key of its queue has rows held. */
bool release_key_waits(const struct release *rl, size_t qi);
/* The key job j waits behind: its queue's youngest, when that is not j's own
 * key and j goes where the queue's rule sends it; else -1. */
long release_behind(struct release *rl, const struct batch_job *j);

#endif
