/* A connection to the Redis a URL names. Everything that talks to Redis (the
 * drain's sink and the watcher) connects through here, each with its own. */
#include "fmacros.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "redis_conn.h"

static int conn_fail(struct redis_conn *c, const char *blame, const char *fmt, ...) SD_PRINTF(3, 4);
static int conn_fail(struct redis_conn *c, const char *blame, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->errstr, sizeof(c->errstr), fmt, ap);
	va_end(ap);
	c->blame = blame;
	redis_io_close(&c->io);
	return -EIO;
}

void redis_conn_init(struct redis_conn *c, const struct config *cfg)
{
	const struct redis_target *t = &cfg->redis;

	memset(c, 0, sizeof(*c));
	c->cfg = cfg;
	redis_io_init(&c->io);
	redis_target_describe(t, c->where, sizeof(c->where));
	redis_sentinel_init(&c->sentinel, t, t->tls ? &c->tls : NULL, cfg->redis_timeout_ms);
}

/* The TLS context is made at the first connect, so a file that cannot be
 * used fails start-up with the setting's name: -EINVAL, or -ENOMEM. */
static int load_tls(struct redis_conn *c)
{
	struct redis_tls_error err = { "", NULL };
	int rc = redis_tls_init(&c->tls, c->cfg, &err);

	if (rc == -ENOMEM)
		snprintf(c->errstr, sizeof(c->errstr), "out of memory");
	else if (rc < 0)
		snprintf(c->errstr, sizeof(c->errstr), "%s", err.errstr);
	c->blame = err.blame;
	return rc;
}

int redis_conn_select(struct redis_conn *c, int db)
{
	char n[16];
	const char *argv[] = { "SELECT", n };
	redisReply *r = NULL;
	int rc;

	snprintf(n, sizeof(n), "%d", db);
	rc = redis_conn_command(c, 2, argv, NULL, &r);
	freeReplyObject(r);
	return rc;
}

void redis_conn_close(struct redis_conn *c)
{
	redis_io_close(&c->io);
}

void redis_conn_free(struct redis_conn *c)
{
	if (!c)
		return;
	redis_io_free(&c->io);
	redis_sentinel_free(&c->sentinel);
	redis_tls_free(&c->tls);
}

bool redis_conn_connected(const struct redis_conn *c)
{
	return redis_io_is_open(&c->io);
}

int redis_conn_append(struct redis_conn *c, int argc, const char **argv, const size_t *argvlen)
{
	if (!redis_io_is_open(&c->io))
		return conn_fail(c, NULL, "not connected to redis");
	if (redis_io_append(&c->io, argc, argv, argvlen) < 0)
		return conn_fail(c, NULL, "out of memory");
	return 0;
}

int redis_conn_append_raw(struct redis_conn *c, const char *cmd, size_t len)
{
	if (!redis_io_is_open(&c->io))
		return conn_fail(c, NULL, "not connected to redis");
	if (redis_io_append_raw(&c->io, cmd, len) < 0)
		return conn_fail(c, NULL, "out of memory");
	return 0;
}

int redis_conn_flush(struct redis_conn *c)
{
	if (redis_io_flush(&c->io) < 0)
		return conn_fail(c, c->io.err.blame, "redis at %s: %s", c->where, c->io.err.errstr);
	return 0;
}

int redis_conn_reply(struct redis_conn *c, redisReply **reply, int extra_ms)
{
	if (redis_io_reply(&c->io, reply, extra_ms) < 0)
		return conn_fail(c, c->io.err.blame, "redis at %s: %s", c->where, c->io.err.errstr);
	/* A failover demoted this server: find the master again. */
	if ((*reply)->type == REDIS_REPLY_ERROR && strncmp((*reply)->str, "READONLY", 8) == 0)
		redis_io_close(&c->io);
	return 0;
}

int redis_conn_command(struct redis_conn *c, int argc, const char **argv, const size_t *argvlen, redisReply **reply)
{
	int rc = redis_conn_append(c, argc, argv, argvlen);

	*reply = NULL;
	if (rc == 0)
		rc = redis_conn_reply(c, reply, 0);
	if (rc == 0 && (*reply)->type == REDIS_REPLY_ERROR) {
		rc = conn_fail(c, NULL, "%s at %s failed: %s", argv[0], c->where, (*reply)->str);
		freeReplyObject(*reply);
		*reply = NULL;
	}
	return rc;
}

/* Answers a server gives while it starts, fails over or is full: waited
 * out like a refused connection, never blamed on a setting. */
static bool passing_answer(const char *str)
{
	static const char *const prefixes[] = { "LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN" };

	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (strncmp(str, prefixes[i], strlen(prefixes[i])) == 0)
			return true;
	return strstr(str, "max number of clients") != NULL;
}

/* Sends one command of the handshake and checks it succeeded. An error
 * answer (a wrong or missing password: WRONGPASS, NOAUTH; a database number
 * out of range) blames the setting, so that a start with it fails at once;
 * a transport fault or a passing answer blames none. */
static int hello_cmd(struct redis_conn *c, int argc, const char **argv, const char *blame)
{
	redisReply *r = NULL;
	int rc = redis_conn_append(c, argc, argv, NULL);

	if (rc == 0)
		rc = redis_conn_reply(c, &r, 0);
	if (rc == 0 && r->type == REDIS_REPLY_ERROR)
		rc = conn_fail(c, passing_answer(r->str) ? NULL : blame, "%s at %s failed: %s", argv[0], c->where,
			       r->str);
	freeReplyObject(r);
	return rc;
}

/* Behind sentinels, the server they named may not have taken over yet, or
 * may already have lost the role again. */
static int check_master(struct redis_conn *c)
{
	const char *role[] = { "ROLE" };
	redisReply *r = NULL;
	int rc = redis_conn_command(c, 1, role, NULL, &r);

	if (rc == 0 && (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || r->element[0]->type != REDIS_REPLY_STRING ||
			strcmp(r->element[0]->str, "master") != 0))
		rc = conn_fail(c, NULL, "redis at %s is not a master (ROLE says %s); will ask the sentinels again",
			       c->where,
			       r->type == REDIS_REPLY_ARRAY && r->elements > 0 && r->element[0]->str
				       ? r->element[0]->str
				       : "something else");
	freeReplyObject(r);
	return rc;
}

/* AUTH, SELECT, ROLE behind sentinels, and PING: the server answers as the relay needs. */
static int hello(struct redis_conn *c)
{
	const struct redis_target *t = &c->cfg->redis;
	const char *auth[3] = { "AUTH" }, *sel[2] = { "SELECT" }, *ping[1] = { "PING" };
	char db[16];
	int n = 1, rc = 0;

	if (t->password) {
		if (t->user)
			auth[n++] = t->user;
		auth[n++] = t->password;
		rc = hello_cmd(c, n, auth, "--redis-url");
	}
	snprintf(db, sizeof(db), "%d", t->db);
	sel[1] = db;
	if (rc == 0 && t->db != 0)
		rc = hello_cmd(c, 2, sel, "--redis-url");
	if (rc == 0 && t->master_name)
		rc = check_master(c);
	return rc == 0 ? hello_cmd(c, 1, ping, "--redis-url") : rc;
}

/* Where to connect: the url's server, or the master the sentinels name. */
static int find_server(struct redis_conn *c, char *host, size_t hostlen, int *port)
{
	const struct redis_target *t = &c->cfg->redis;
	const char *blame = NULL;
	char addr[200];

	if (!t->master_name) {
		snprintf(host, hostlen, "%s", t->host ? t->host : "");
		*port = t->port;
		return 0;
	}
	if (redis_sentinel_master(&c->sentinel, host, hostlen, port, &blame) < 0)
		return conn_fail(c, blame, "no sentinel named the master %s: %s", t->master_name, c->sentinel.errstr);
	redis_addr_describe(host, *port, addr, sizeof(addr));
	if (snprintf(c->where, sizeof(c->where), "%s/%d", addr, t->db) < 0)
		c->where[0] = '\0';
	return 0;
}

/* Connects to host:port (or the url's socket) and greets it. */
static int connect_to(struct redis_conn *c, const char *host, int port)
{
	const struct redis_target *t = &c->cfg->redis;
	int rc = redis_io_connect(&c->io, host, port, t->is_unix ? t->path : NULL, t->tls ? &c->tls : NULL,
				  c->cfg->redis_timeout_ms);

	if (rc == -ENOMEM)
		return conn_fail(c, NULL, "out of memory");
	if (rc < 0)
		return conn_fail(c, c->io.err.blame, "could not connect to redis at %s: %s", c->where,
				 c->io.err.errstr);
	return hello(c);
}

/*
 * Behind sentinels, as Redis's client guide asks: when the master a sentinel
 * named fails (unreachable, or ROLE says replica: that sentinel is stale or
 * wrong), the sentinel goes to the back of the list and the others are asked.
 * Each failed answer sends one sentinel behind every one not yet tried, so
 * nsentinels tries hear each sentinel that answers once; only then does the
 * connect fail (and the caller back off, or at start-up exit).
 */
int redis_conn_connect(struct redis_conn *c)
{
	const struct redis_target *t = &c->cfg->redis;
	size_t tries = t->master_name ? t->nsentinels : 1;
	char host[256] = "";
	int port = 0, rc = 0;

	redis_io_close(&c->io);
	c->blame = NULL;
	if (t->tls && !c->tls.ctx && (rc = load_tls(c)) < 0)
		return rc;
	/* A cluster's seed nodes: the first that answers (the cluster sink
	 * connects to each master itself, redis_conn_connect_to). */
	for (size_t k = 0; t->cluster && k < t->nseeds; k++)
		if ((rc = redis_conn_connect_to(c, t->seeds[k].host, t->seeds[k].port)) == 0 || c->blame)
			return rc;
	if (t->cluster)
		return rc;
	for (size_t k = 0; k < tries; k++) {
		if (!t->is_unix && (rc = find_server(c, host, sizeof(host), &port)) < 0)
			return rc; /* no sentinel answered */
		if ((rc = connect_to(c, host, port)) == 0 || !t->master_name)
			return rc;
		redis_sentinel_distrust(&c->sentinel);
	}
	return rc;
}

bool redis_conn_master_moved(struct redis_conn *c)
{
	return c->cfg->redis.master_name && redis_sentinel_switched(&c->sentinel);
}

int redis_conn_connect_to(struct redis_conn *c, const char *host, int port)
{
	const struct redis_target *t = &c->cfg->redis;
	char addr[200];
	int rc;

	redis_io_close(&c->io);
	c->blame = NULL;
	if (t->tls && !c->tls.ctx && (rc = load_tls(c)) < 0)
		return rc;
	redis_addr_describe(host, port, addr, sizeof(addr));
	snprintf(c->where, sizeof(c->where), "%s", addr);
	return connect_to(c, host, port);
}

int redis_conn_append_wait(struct redis_conn *c)
{
	char n[16], ms[16];
	const char *argv[] = { "WAIT", n, ms };

	snprintf(n, sizeof(n), "%d", c->cfg->redis_wait_replicas);
	snprintf(ms, sizeof(ms), "%d", c->cfg->redis_wait_timeout_ms);
	return redis_conn_append(c, 3, argv, NULL);
}

int redis_conn_read_wait(struct redis_conn *c)
{
	int want = c->cfg->redis_wait_replicas, rc = 0;
	redisReply *r = NULL;

	if (redis_conn_reply(c, &r, c->cfg->redis_wait_timeout_ms) < 0)
		return -EIO;
	if (r->type != REDIS_REPLY_INTEGER)
		/* not WAIT's answer (an error, or one meant for another command):
		 * the replies after it cannot be trusted */
		rc = conn_fail(c, NULL, "WAIT at %s answered %s", c->where,
			       r->type == REDIS_REPLY_ERROR ? r->str : "what WAIT does not");
	else if (r->integer < want) {
		snprintf(c->errstr, sizeof(c->errstr), "only %lld of %d replicas acknowledged within %d ms at %.150s",
			 r->integer, want, c->cfg->redis_wait_timeout_ms, c->where);
		rc = -ETIMEDOUT;
	}
	freeReplyObject(r);
	return rc;
}
