/* A Redis Cluster as one target sees it: the slot map (which master serves
 * each hash slot), one connection per master, and the redirects (MOVED,
 * ASK) that tell the map is out of date. The cluster sink (cluster_sink.h)
 * pushes through it; nothing here knows of jobs. */
#ifndef STAGEDRAIN_REDIS_CLUSTER_H
#define STAGEDRAIN_REDIS_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "fmacros.h"
#include "redis_conn.h"

#define CLUSTER_SLOTS 16384
#define CLUSTER_NO_NODE 0xffff
/* A master that could not be reached is not tried again sooner (as a lone
 * target's probe, target.h). */
#define CLUSTER_NODE_RETRY_MS 500

/* One master the map names. */
struct cluster_node {
	size_t index; /* in the cluster's nodes: what owner[] holds */
	char *host;
	int port;
	struct redis_conn conn;
	bool in_map;        /* the last map names it a master */
	bool in_send;       /* a part of the batch in flight went to it (cluster_push.c) */
	long long retry_ms; /* a failed connect: not tried again before this */
};

struct redis_cluster {
	const struct config *cfg;
	struct stop *stop;
	struct cluster_node **nodes; /* each its own allocation: a connection never moves */
	size_t nnodes, capnodes;
	uint16_t owner[CLUSTER_SLOTS]; /* index into nodes, or CLUSTER_NO_NODE */
	bool stale;                    /* a redirect or a failure: read the map again */
	long long refreshes;           /* maps read */
	size_t unserved;               /* slots the last map gives no master */
	long long redirects;           /* MOVED and ASK answers followed */
	char errstr[256];
};

/* The hash slot of a key, as Redis Cluster computes it (CRC16 of its hash
 * tag, the text between its first { and the next }, when not empty). */
unsigned cluster_key_slot(const char *key, size_t len);
/* True when key has a hash tag, so every key around the same tag shares its slot. */
bool cluster_key_tagged(const char *key, size_t len);

void redis_cluster_init(struct redis_cluster *c, const struct config *cfg);
void redis_cluster_stop_on(struct redis_cluster *c, struct stop *stop);
/* Reads the slot map from any node that answers (the masters it knows,
 * then the url's seeds). 0, or -EIO with errstr (and -EINVAL for a TLS
 * file, as redis_conn_connect). */
int redis_cluster_refresh(struct redis_cluster *c) SD_MUSTCHECK;
/* The connection to the master serving slot, connected (at most once per
 * CLUSTER_NODE_RETRY_MS after a failure); NULL with errstr when none serves it or
 * it cannot be reached. */
struct redis_conn *redis_cluster_conn(struct redis_cluster *c, unsigned slot);
/* Connects n unless it is connected, at most once per CLUSTER_NODE_RETRY_MS
 * after a failure. 0, or -EIO with errstr. */
int redis_cluster_node_connect(struct redis_cluster *c, struct cluster_node *n) SD_MUSTCHECK;
/* The node at host:port, added to the nodes when new; NULL: no memory. */
struct cluster_node *redis_cluster_node(struct redis_cluster *c, const char *host, int port);
/* An error reply MOVED or ASK: its slot and node in *slot and *to (MOVED
 * also sets the map's owner, and marks it stale). False for any other. */
bool redis_cluster_redirect(struct redis_cluster *c, const char *err, unsigned *slot, struct cluster_node **to,
			    bool *ask);
/* Masters in the map, and how many of them are connected. */
size_t redis_cluster_masters(const struct redis_cluster *c, size_t *connected);
/* Slots no master serves in the map. */
size_t redis_cluster_unserved(const struct redis_cluster *c);
bool redis_cluster_connected(const struct redis_cluster *c);
void redis_cluster_close(struct redis_cluster *c);
void redis_cluster_free(struct redis_cluster *c);

#endif
