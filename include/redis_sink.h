/* The Redis side: one atomic script call per batch, keys as the format's worker library writes them. */
#ifndef STAGEDRAIN_REDIS_SINK_H
#define STAGEDRAIN_REDIS_SINK_H

#include <stdbool.h>

#include "batch.h"
#include "buf.h"
#include "config.h"
#include "fmacros.h"
#include "redis_cmds.h"
#include "push_script.h"
#include "redis_conn.h"

struct cluster_sink;

struct redis_sink {
	struct redis_conn conn;       /* a lone Redis's (a cluster's: its first seed that answers, for status) */
	struct cluster_sink *cluster; /* a redis-cluster:// url's pushes, epochs and fences; else NULL */
	const struct config *cfg;
	struct redis_cmds cmds; /* the batch being pushed, as its format lays it out */
	struct redis_cmds head; /* its EVAL's head: the script, the epoch's keys and value */
	bool sent;              /* a push went out whose reply is not read yet */
	struct push_argv argv;  /* the batch's EVAL */
	long long epoch;        /* this leader's epoch's count, written into each batch's fence */
	char epoch_value[64];   /* the whole epoch, "<count>:<token>" (keys.h), checked by each push */
	char found
		[96]; /* what the last epoch or fence read found instead of the relay's own, and replaced; "" if nothing */
	struct buf bad;    /* keys of the wrong type the last push found: "key\0type\0" each */
	struct buf script; /* the push script for the target's format: built at the first push */
	size_t nbad;
	struct redis_cmds one; /* one job's commands, to compare their keys with the bad ones */
	char errstr[256];
};

/* Errors: -EIO or -ESTALE (errstr says why; the connection is closed), -ENOMEM,
 * and -ETIMEDOUT when fewer than --redis-wait-replicas replicas acknowledged
 * (errstr says how many; the connection stays open). */

/* REDIS_SINK_WRONGTYPE and REDIS_SINK_REFUSED: push_script.h. */

/* Out of memory for a cluster url's slots, the sink never connects (-ENOMEM). */
void redis_sink_init(struct redis_sink *rs, const struct config *cfg);
/* Every wait of the sink's connection ends by stop's deadline too
 * (redis_io_stop_on): a push cut short by it fails like one that timed out. */
void redis_sink_stop_on(struct redis_sink *rs, struct stop *stop);
/* Connects, authenticates, selects the database and checks with PING
 * (redis_conn_connect); rs->conn.where names the server, rs->conn.blame the
 * setting to fix after a failure. */
int redis_sink_connect(struct redis_sink *rs) SD_MUSTCHECK;
bool redis_sink_connected(const struct redis_sink *rs);
/* Pushes the batch's jobs and its fence in one round trip, as one atomic
 * script that first checks rs->epoch is still current. Returns 0 only when
 * all applied; -ESTALE when a newer epoch was taken (nothing applied);
 * REDIS_SINK_WRONGTYPE when a key it would write has another type (nothing
 * applied; redis_sink_bad_key names them). After -EIO the push's outcome is
 * unknown: it may still land, until the epoch moves. With --redis-wait-replicas
 * it is 0 only once that many replicas have the batch too; -ETIMEDOUT when
 * they did not in time (the push landed on the primary). */
int redis_sink_push(struct redis_sink *rs, const struct batch *b) SD_MUSTCHECK;
/* redis_sink_push in two halves, so that Postgres reads the next batch while
 * Redis runs this one: send writes the script out (more: the fence names
 * this transaction's earlier batches already, and the script appends this
 * one's jobs to it), reply reads its answer, as redis_sink_push returns it.
 * Nothing else may use the connection in between. */
int redis_sink_send(struct redis_sink *rs, const struct batch *b, bool more) SD_MUSTCHECK;
int redis_sink_reply(struct redis_sink *rs) SD_MUSTCHECK;
/* The push script with no commands: 0 when Redis runs it (the epoch is still
 * ours and scripts run), else as redis_sink_push; writes nothing. */
int redis_sink_probe(struct redis_sink *rs) SD_MUSTCHECK;
/* The i-th key of the wrong type (i < nbad), and its type. */
const char *redis_sink_bad_key(const struct redis_sink *rs, size_t i, const char **type);
/* True if pushing job j of b would write one of those keys. */
bool redis_sink_blocked(struct redis_sink *rs, const struct batch *b, const struct batch_job *j);
/* Takes the next leader epoch, with a new random token, into rs->epoch and
 * rs->epoch_value. An epoch key the relay did not write (another type, text,
 * a count too large) is replaced, counting from 1, and rs->found says what it held. */
int redis_sink_new_epoch(struct redis_sink *rs) SD_MUSTCHECK;
/* Reads the last batch's fence into out; out stays empty when there is none.
 * A fence key of another type is deleted (out stays empty) and rs->found
 * names its type. With --redis-wait-replicas, -ETIMEDOUT unless that many
 * replicas have all this connection wrote (the epoch, so the fence read before it too). */
int redis_sink_get_fence(struct redis_sink *rs, struct buf *out) SD_MUSTCHECK;
void redis_sink_close(struct redis_sink *rs);
void redis_sink_free(struct redis_sink *rs);

/* A Redis Cluster's slots (cluster_sink.h); for a lone Redis these do nothing:
 * a push failed (epoch) or its transaction rolled back, and what its slots must settle again; */
void redis_sink_fall_back(struct redis_sink *rs, bool epoch);
/* a new leadership (every slot settles again); */
void redis_sink_takeover(struct redis_sink *rs);
/* the transaction committed; */
void redis_sink_committed(struct redis_sink *rs);
/* some slots are not settled; */
bool redis_sink_partial(const struct redis_sink *rs);
/* slots wait to be settled again (a master failed over, a migration); */
bool redis_sink_wants_settle(const struct redis_sink *rs);
/* whether a queue's jobs may go now (its slot settled). */
bool redis_sink_queue_up(struct redis_sink *rs, const char *queue, size_t len);

#endif
