/* Fair release's bookkeeping: per queue, its cap, its held jobs and the
 * release cursor; per tenant with held jobs, the round of its last one.
 * Pure: no I/O. The relay holds one; release.c drives it.
 *
 * A queue's held jobs are released in (round, hold_id) order. Each tenant has
 * at most one job per round: its next held job goes to the round after its
 * last, but never below the round being released now. So a tenant that turns
 * up behind another's flood lands in the current round, one job per tenant
 * ahead of it, and the round-robin keeps its place from one release to the
 * next. New rows sort after the cursor (round >= the cursor's, hold_id larger
 * than any before), so a release reading from the cursor never misses one and
 * never walks rows already released.
 *
 * Every change a batch makes is pending until rounds_commit: a batch that
 * rolls back leaves the bookkeeping as its rows are, with rounds_begin. */
#ifndef STAGEDRAIN_ROUNDS_H
#define STAGEDRAIN_ROUNDS_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "fmacros.h"

/* Tenants remembered at most: past it a new tenant's jobs go to the end of
 * their queue (still in order, without their fair share until room comes). */
#define ROUNDS_MAX_TENANTS 100000
/* Queues with a cap and nothing held that are remembered at most; past it a
 * new such queue is treated as uncapped (the caller says so). */
#define ROUNDS_MAX_QUEUES 10000

/* One side of a queue's state: what is committed, or what the batch made of it. */
struct rounds_pos {
	long long held;       /* rows of the queue in the held table */
	long long round, hid; /* the release cursor: the last (round, hold_id) released */
	long long top;        /* the highest round assigned */
};

struct rounds_queue {
	char *name;
	size_t len;
	long cap;                    /* 0: uncapped */
	struct rounds_pos now, pend; /* committed; this batch's */
	long room;                   /* this batch: jobs it may still put in the list */
	long long nheld;             /* this batch: jobs held */
	long long released;          /* this batch: held jobs read for release */
	long long waited_us;         /* this batch: how long those had been held, summed */
	long long retry_ms;          /* its list had the wrong type: no release before this */
	bool by_rule;                /* holds rows its queue's rule sent (not a route column's): set at load */
	/* Orders one queue's keys (one per target it was held for): the hold_id
	 * of its oldest rule row at load; a key that begins holding since takes
	 * a number above all of those, and above every key's before it. */
	long long first;
};

struct rounds_tenant {
	size_t queue; /* index into rounds.q; SIZE_MAX: free slot */
	char *name;   /* NULL: the NULL tenant */
	size_t len;
	unsigned hash;
	long long last, pend; /* round of its last held job; LLONG_MIN: none */
	bool touched;         /* pend is this batch's */
};

struct rounds {
	struct rounds_queue *q; /* in the order first seen: indices stay */
	size_t nq, capq;
	size_t *by_name;         /* indices into q, sorted by name */
	struct rounds_tenant *t; /* open addressing, linear probing */
	size_t nt, capt;
	size_t *touched; /* tenants this batch changed */
	size_t ntouched, captouched;
	long long base;       /* first round of a queue that has nothing held */
	long long next_first; /* the first of the next key to begin holding */
	size_t max_tenants;
	unsigned long long commits, swept; /* the table is swept when full at most once per commit */
};

void rounds_init(struct rounds *r, size_t max_tenants);
void rounds_free(struct rounds *r);
/* Forgets everything (a new leader); the rounds of queues with nothing held
 * start at base: above every round any earlier leader assigned (rounds never
 * exceed their row's hold_id, so the hold sequence's last value + 1 will do). */
void rounds_reset(struct rounds *r, long long base);
/* A new leader's reading of the held table: count rows of queue held for
 * tenant (NULL: the NULL tenant), their lowest and highest round. 0 or -ENOMEM. */
int rounds_load(struct rounds *r, const char *queue, size_t qlen, const char *tenant, size_t tlen, long long count,
		long long min_round, long long max_round) SD_MUSTCHECK;
/* Key qi holds rows its queue's rule sent, the oldest with hold_id first
 * (a new leader's reading of the held table). */
void rounds_by_rule(struct rounds *r, size_t qi, long long first);
/* The queue's index, added with cap if new: -ENOMEM, or -ENOSPC when it is
 * new, has nothing held and ROUNDS_MAX_QUEUES are known. cap is (re)set. */
long rounds_queue(struct rounds *r, const char *queue, size_t len, long cap) SD_MUSTCHECK;
/* The queue's index, or -1 when it is not known. */
long rounds_find(const struct rounds *r, const char *queue, size_t len);
/* Starts a batch: every queue's pending state is its committed one, rooms
 * unknown (0), no tenant touched. */
void rounds_begin(struct rounds *r);
/* Whether a job for queue qi may go to Redis now rather than be held: the
 * queue has nothing held and room (which it then takes), or no cap. */
bool rounds_admit(struct rounds *r, size_t qi);
/* Holds one job of tenant in queue qi: its round in *round. 0 or -ENOMEM. */
int rounds_hold(struct rounds *r, size_t qi, const char *tenant, size_t tlen, long long *round) SD_MUSTCHECK;
/* A held row of queue qi read for release at (round, hid): the cursor moves. */
void rounds_released(struct rounds *r, size_t qi, long long round, long long hid);
/* Released rows of queue qi could not be pushed (its key had the wrong type)
 * and stay held: the cursor goes back to the committed one, n rows count as
 * held again, and the queue is not released from before retry_ms. */
void rounds_unrelease(struct rounds *r, size_t qi, long long n, long long retry_ms);
/* The batch committed: its pending state becomes the state; tenants whose
 * jobs were all released are forgotten now and then. */
void rounds_commit(struct rounds *r);
/* Jobs held in every queue, committed. */
long long rounds_held(const struct rounds *r);

/* Byte order of two names (a queue's, a key's): <0, 0, >0. */
int rounds_cmp_name(const char *a, size_t alen, const char *b, size_t blen);
/* A queue's key in the rounds: its name for the default target, else
 * "<target>\0<name>" (no queue name holds a NUL: Postgres text cannot). */
int rounds_key(struct buf *key, const char *target, size_t tlen, const char *queue, size_t qlen) SD_MUSTCHECK;
/* The target (NULL: the default) and the queue name of a key. */
void rounds_key_split(const char *key, size_t len, const char **target, size_t *tlen, const char **queue, size_t *qlen);

#endif
