/*
 * A target on a Redis Cluster: the sink's pushes, epoch and fence, slot by
 * slot. A script may only touch keys of one hash slot, so each slot keeps
 * its own epoch and fence (the relay's own keys, tagged into that slot:
 * "{<tag>}:<own key>"), a batch goes out as one part per slot, each part's
 * script checks its slot's epoch and writes its slot's fence, and a
 * takeover settles every slot (a new epoch and its fence read, in one
 * script) before any part goes to it. A slot whose master cannot be
 * reached stays unsettled: its queues' jobs wait held (release.h) while
 * the other slots' go, and it is tried again every CLUSTER_RETRY_MS.
 */
#ifndef STAGEDRAIN_CLUSTER_SINK_H
#define STAGEDRAIN_CLUSTER_SINK_H

#include <stdbool.h>
#include <stddef.h>

#include "batch.h"
#include "buf.h"
#include "config.h"
#include "fmacros.h"
#include "keys.h"
#include "push_script.h"
#include "redis_cluster.h"
#include "redis_cmds.h"

/* Unsettled slots are tried again this often (their master failed over, a
 * migration answered TRYAGAIN): back within that of the cluster serving them. */
#define CLUSTER_RETRY_MS 200
/* ... doubling while none of them settles, up to this. */
#define CLUSTER_RETRY_MAX_MS 2000

/* One slot's part of a batch, sent to its master. */
struct cluster_part {
	unsigned slot;
	size_t first, n; /* its jobs in grouped */
	size_t off, len; /* its EVAL in wire */
	struct cluster_node *node;
	int again; /* its answer said it did not run: where it goes next (cluster_push.c) */
};

struct cluster_sink {
	const struct config *cfg;
	struct redis_cluster cl;
	long long *count;                     /* per slot: its epoch's count in this leadership; 0: unsettled */
	bool *pushed;                         /* per slot: pushed in the open transaction (APPEND to its fence) */
	bool *done;                           /* per slot: landed in the batch whose retry (after WRONGTYPE) skips it */
	bool retry;                           /* the next send is that retry */
	char token[KEYS_EPOCH_TOKEN_LEN + 1]; /* the next settles' */
	char (*tokens)[KEYS_EPOCH_TOKEN_LEN + 1]; /* per slot: the token its epoch was settled with */
	bool *doubt;                              /* per slot: a part of the failed push whose outcome is unknown */
	size_t ndoubt;
	bool partial_epoch; /* the next new epoch settles the slots fall_back named, not all */
	size_t unsettled;   /* slots with count 0 */
	long long retry_ms; /* unsettled slots are tried again from then */
	long long retry_wait_ms;
	long long settles; /* slots settled, in all */
	struct batch_job *grouped;
	size_t capgrouped;
	unsigned *slot_of; /* per job of the batch being sent */
	size_t capslot;
	struct cluster_part *parts;
	size_t nparts, capparts;
	struct redis_cmds body, head, keys; /* a part's commands, its EVAL's head, the keys it declares */
	struct push_argv argv;
	struct buf script;      /* the push script for the target's format */
	struct buf wire;        /* the parts' EVALs in RESP, for a part that goes again */
	struct buf key;         /* a queue's slot text */
	const char *memo_queue; /* the last queue group() found the slot of, and its slot */
	size_t memo_len;
	unsigned memo_slot;
	struct buf *bad; /* borrowed: where a WRONGTYPE answer's keys go */
	size_t *nbad;
	bool sent;
	char errstr[256];
};

/* bad, nbad: the sink's, which redis_sink_bad_key reads. 0 or -ENOMEM. */
int cluster_sink_init(struct cluster_sink *cs, const struct config *cfg, struct buf *bad, size_t *nbad) SD_MUSTCHECK;
void cluster_sink_stop_on(struct cluster_sink *cs, struct stop *stop);
/* Reads the slot map and connects every master: 0 when one at least answers. */
int cluster_sink_connect(struct cluster_sink *cs) SD_MUSTCHECK;
bool cluster_sink_connected(const struct cluster_sink *cs);
void cluster_sink_close(struct cluster_sink *cs);
void cluster_sink_free(struct cluster_sink *cs);

/* A new epoch, under a new token: every slot unsettled, but after a push
 * that failed while the cluster still answers, those fall_back named. */
int cluster_sink_new_epoch(struct cluster_sink *cs) SD_MUSTCHECK;
/* Settles the unsettled slots whose masters answer (a new epoch and its
 * fence read, in one script a slot) and appends to out one fence naming
 * every row their fences name. 0 when a slot at least is settled; -EIO
 * (errstr) when none is. */
int cluster_sink_settle(struct cluster_sink *cs, struct buf *out) SD_MUSTCHECK;
/* Unsettled slots wait for their next try (CLUSTER_RETRY_MS). */
bool cluster_sink_wants_settle(const struct cluster_sink *cs);
/* A push failed (epoch: its outcome unknown; the slots of its parts that
 * did not land, or every slot when none is known or no master answers,
 * take a new epoch) or its transaction rolled back (the slots it pushed
 * read their fences again). */
void cluster_sink_fall_back(struct cluster_sink *cs, bool epoch);
/* A new leadership: every slot takes a new epoch and reads its fence. */
void cluster_sink_takeover(struct cluster_sink *cs);
/* The transaction committed: its fences name committed rows. */
void cluster_sink_committed(struct cluster_sink *cs);
/* Whether queue's slot (the format's keys under prefix) is settled. */
bool cluster_sink_queue_up(struct cluster_sink *cs, const char *prefix, const char *queue, size_t len);

/* As redis_sink_send and redis_sink_reply: each slot's part to its master. */
int cluster_sink_send(struct cluster_sink *cs, const struct batch *b) SD_MUSTCHECK;
int cluster_sink_reply(struct cluster_sink *cs) SD_MUSTCHECK;
/* PING on every master: 0 when they all answer. */
int cluster_sink_probe(struct cluster_sink *cs) SD_MUSTCHECK;

/* Shared by cluster_sink.c and cluster_push.c. */
/* "{tag}:<own key>" (keys.h), the relay's key name in slot s, into c. */
int cluster_sink_own_key(struct redis_cmds *c, const struct config *cfg, unsigned s, const char *name) SD_MUSTCHECK;
/* The slot of a queue's keys: the hash tag of "<prefix><infix><queue>";
 * CLUSTER_SLOTS when out of memory. */
unsigned cluster_sink_queue_slot(struct cluster_sink *cs, const char *prefix, const char *queue, size_t len);
/* WAIT --redis-wait-replicas on conn: sent (send), or its answer read: 0,
 * -ETIMEDOUT when too few replicas have what conn wrote, -EIO. */
int cluster_sink_wait(struct cluster_sink *cs, struct redis_conn *conn, bool send) SD_MUSTCHECK;
/* Reads and drops the answer to ASKING. */
int cluster_sink_discard(struct cluster_sink *cs, struct redis_conn *conn) SD_MUSTCHECK;

#endif
