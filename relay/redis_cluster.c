/* A Redis Cluster's slot map and its masters' connections (redis_cluster.h). */
#include "fmacros.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "redis_cluster.h"

/* CRC16-CCITT (XMODEM), the checksum Redis Cluster takes of a key. Bit by
 * bit: a hash tag is short, and no table needs building (connects run in a
 * thread of their own). */
static unsigned crc16(const char *p, size_t n)
{
	unsigned crc = 0;

	for (size_t i = 0; i < n; i++) {
		crc ^= (unsigned)(unsigned char)p[i] << 8;
		for (int b = 0; b < 8; b++)
			crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
		crc &= 0xffff;
	}
	return crc;
}

/* The hash tag's text, or NULL when the key has none. */
static const char *key_tag(const char *key, size_t len, size_t *n)
{
	const char *open = memchr(key, '{', len), *close;

	if (!open)
		return NULL;
	close = memchr(open + 1, '}', len - (size_t)(open + 1 - key));
	if (!close || close == open + 1)
		return NULL;
	*n = (size_t)(close - open - 1);
	return open + 1;
}

bool cluster_key_tagged(const char *key, size_t len)
{
	size_t n;

	return key_tag(key, len, &n) != NULL;
}

unsigned cluster_key_slot(const char *key, size_t len)
{
	size_t n;
	const char *tag = key_tag(key, len, &n);

	return tag ? crc16(tag, n) % CLUSTER_SLOTS : crc16(key, len) % CLUSTER_SLOTS;
}

void redis_cluster_init(struct redis_cluster *c, const struct config *cfg)
{
	memset(c, 0, sizeof(*c));
	c->cfg = cfg;
	c->stale = true;
	for (size_t s = 0; s < CLUSTER_SLOTS; s++)
		c->owner[s] = CLUSTER_NO_NODE;
}

void redis_cluster_stop_on(struct redis_cluster *c, struct stop *stop)
{
	c->stop = stop;
	for (size_t i = 0; i < c->nnodes; i++)
		redis_io_stop_on(&c->nodes[i]->conn.io, stop);
}

struct cluster_node *redis_cluster_node(struct redis_cluster *c, const char *host, int port)
{
	struct cluster_node *n;

	for (size_t i = 0; i < c->nnodes; i++)
		if (c->nodes[i]->port == port && strcmp(c->nodes[i]->host, host) == 0)
			return c->nodes[i];
	/* Each node has its own allocation (a connection must not move), and
	 * owner[] holds their indexes: the list only ever grows (a cluster has
	 * a few dozen masters at most, and a node that left keeps its place). */
	if (c->nnodes == c->capnodes) {
		size_t cap = c->capnodes ? c->capnodes * 2 : 8;
		struct cluster_node **v = realloc(c->nodes, cap * sizeof(*v));
		if (!v || cap >= CLUSTER_NO_NODE)
			return NULL;
		c->nodes = v;
		c->capnodes = cap;
	}
	if (!(n = calloc(1, sizeof(*n))) || !(n->host = strdup(host))) {
		free(n);
		return NULL;
	}
	c->nodes[c->nnodes] = n;
	n->index = c->nnodes;
	n->port = port;
	redis_conn_init(&n->conn, c->cfg);
	redis_io_stop_on(&n->conn.io, c->stop);
	c->nnodes++;
	return n;
}

int redis_cluster_node_connect(struct redis_cluster *c, struct cluster_node *n)
{
	long long now = clock_mono_ms();
	int rc;

	if (redis_conn_connected(&n->conn))
		return 0;
	if (now < n->retry_ms) {
		snprintf(c->errstr, sizeof(c->errstr), "redis cluster node %.100s: not reachable a moment ago (%.100s)",
			 n->conn.where, n->conn.errstr);
		return -EIO;
	}
	if ((rc = redis_conn_connect_to(&n->conn, n->host, n->port)) < 0) {
		n->retry_ms = now + CLUSTER_NODE_RETRY_MS;
		snprintf(c->errstr, sizeof(c->errstr), "%s", n->conn.errstr);
	}
	return rc;
}

/* One CLUSTER SLOTS entry: [start, end, [host, port, ...], replicas ...];
 * an empty host is the node asked's. */
static int note_range(struct redis_cluster *c, const redisReply *e, const char *asked_host)
{
	const redisReply *m;
	struct cluster_node *n;
	long long lo, hi;

	if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[0]->type != REDIS_REPLY_INTEGER ||
	    e->element[1]->type != REDIS_REPLY_INTEGER || e->element[2]->type != REDIS_REPLY_ARRAY)
		return -EINVAL;
	m = e->element[2];
	lo = e->element[0]->integer;
	hi = e->element[1]->integer;
	if (m->elements < 2 || m->element[0]->type != REDIS_REPLY_STRING ||
	    m->element[1]->type != REDIS_REPLY_INTEGER || lo < 0 || hi >= CLUSTER_SLOTS || lo > hi)
		return -EINVAL;
	if (!(n = redis_cluster_node(c, m->element[0]->len ? m->element[0]->str : asked_host,
				     (int)m->element[1]->integer)))
		return -ENOMEM;
	n->in_map = true;
	for (long long s = lo; s <= hi; s++)
		c->owner[s] = (uint16_t)n->index;
	return 0;
}

/* The map as conn's node answers it; -EIO when it does not. */
static int read_map(struct redis_cluster *c, struct redis_conn *conn, const char *host)
{
	const char *argv[] = { "CLUSTER", "SLOTS" };
	redisReply *r = NULL;
	int rc = redis_conn_command(conn, 2, argv, NULL, &r);

	if (rc < 0) {
		snprintf(c->errstr, sizeof(c->errstr), "%s", conn->errstr);
		return -EIO;
	}
	if (r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
		freeReplyObject(r);
		snprintf(c->errstr, sizeof(c->errstr), "redis at %.100s serves no slots (is it a cluster node?)",
			 conn->where);
		return -EIO;
	}
	for (size_t i = 0; i < c->nnodes; i++)
		c->nodes[i]->in_map = false;
	for (size_t s = 0; s < CLUSTER_SLOTS; s++)
		c->owner[s] = CLUSTER_NO_NODE;
	for (size_t i = 0; rc == 0 && i < r->elements; i++)
		rc = note_range(c, r->element[i], host);
	freeReplyObject(r);
	if (rc == -EINVAL)
		snprintf(c->errstr, sizeof(c->errstr), "redis at %.100s answered CLUSTER SLOTS with a malformed reply",
			 conn->where);
	return rc == -EINVAL ? -EIO : rc;
}

/* Asks the seed nodes of the url, on a connection of their own. */
static int refresh_from_seeds(struct redis_cluster *c)
{
	const struct redis_target *t = &c->cfg->redis;
	struct redis_conn seed;
	int rc = -EIO;

	redis_conn_init(&seed, c->cfg);
	redis_io_stop_on(&seed.io, c->stop);
	for (size_t k = 0; rc < 0 && rc != -ENOMEM && k < t->nseeds; k++) {
		if ((rc = redis_conn_connect_to(&seed, t->seeds[k].host, t->seeds[k].port)) < 0) {
			snprintf(c->errstr, sizeof(c->errstr), "%s", seed.errstr);
			if (seed.blame)
				break; /* a password, a TLS file: every seed would say the same */
			continue;
		}
		rc = read_map(c, &seed, t->seeds[k].host);
	}
	redis_conn_free(&seed);
	return rc;
}

int redis_cluster_refresh(struct redis_cluster *c)
{
	int rc = -EIO;

	/* The masters it knows first: one of them answers at once. */
	for (size_t i = 0; rc < 0 && rc != -ENOMEM && i < c->nnodes; i++)
		if (redis_conn_connected(&c->nodes[i]->conn))
			rc = read_map(c, &c->nodes[i]->conn, c->nodes[i]->host);
	if (rc < 0 && rc != -ENOMEM)
		rc = refresh_from_seeds(c);
	if (rc < 0)
		return rc;
	c->refreshes++;
	c->stale = false;
	c->unserved = redis_cluster_unserved(c);
	/* A node the map no longer names a master: a replica now, or gone. */
	for (size_t i = 0; i < c->nnodes; i++)
		if (!c->nodes[i]->in_map)
			redis_conn_close(&c->nodes[i]->conn);
	return 0;
}

struct redis_conn *redis_cluster_conn(struct redis_cluster *c, unsigned slot)
{
	struct cluster_node *n;

	if (c->owner[slot] == CLUSTER_NO_NODE) {
		snprintf(c->errstr, sizeof(c->errstr), "no master of the redis cluster serves slot %u", slot);
		return NULL;
	}
	n = c->nodes[c->owner[slot]];
	return redis_cluster_node_connect(c, n) == 0 ? &n->conn : NULL;
}

bool redis_cluster_redirect(struct redis_cluster *c, const char *err, unsigned *slot, struct cluster_node **to,
			    bool *ask)
{
	char host[256];
	unsigned s;
	int port, n = 0;
	char *colon;

	*ask = strncmp(err, "ASK ", 4) == 0;
	if (!*ask && strncmp(err, "MOVED ", 6) != 0)
		return false;
	if (sscanf(err + (*ask ? 4 : 6), "%u %255s%n", &s, host, &n) != 2 || s >= CLUSTER_SLOTS ||
	    !(colon = strrchr(host, ':')))
		return false;
	*colon = '\0';
	port = atoi(colon + 1);
	if (port <= 0 || !(*to = redis_cluster_node(c, host, port)))
		return false;
	*slot = s;
	c->redirects++;
	if (!*ask) {
		(*to)->in_map = true;
		c->owner[s] = (uint16_t)(*to)->index;
		c->stale = true; /* one slot moved: others may have with it */
	}
	return true;
}

size_t redis_cluster_masters(const struct redis_cluster *c, size_t *connected)
{
	size_t n = 0;

	*connected = 0;
	for (size_t i = 0; i < c->nnodes; i++) {
		if (!c->nodes[i]->in_map)
			continue;
		n++;
		*connected += redis_conn_connected(&c->nodes[i]->conn);
	}
	return n;
}

size_t redis_cluster_unserved(const struct redis_cluster *c)
{
	size_t n = 0;

	for (size_t s = 0; s < CLUSTER_SLOTS; s++)
		n += c->owner[s] == CLUSTER_NO_NODE;
	return n;
}

bool redis_cluster_connected(const struct redis_cluster *c)
{
	for (size_t i = 0; i < c->nnodes; i++)
		if (redis_conn_connected(&c->nodes[i]->conn))
			return true;
	return false;
}

void redis_cluster_close(struct redis_cluster *c)
{
	for (size_t i = 0; i < c->nnodes; i++)
		redis_conn_close(&c->nodes[i]->conn);
	c->stale = true;
}

void redis_cluster_free(struct redis_cluster *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nnodes; i++) {
		redis_conn_free(&c->nodes[i]->conn);
		free(c->nodes[i]->host);
		free(c->nodes[i]);
	}
	free(c->nodes);
	memset(c, 0, sizeof(*c));
}
