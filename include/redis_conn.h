/* A connection to the Redis a URL names: found (directly or through sentinels), connected, authenticated, selected. */
#ifndef STAGEDRAIN_REDIS_CONN_H
#define STAGEDRAIN_REDIS_CONN_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "fmacros.h"
#include "redis_io.h"
#include "redis_sentinel.h"
#include "redis_tls.h"

struct redis_conn {
	const struct config *cfg;
	struct redis_tls tls; /* tls.ctx is NULL unless the url asks for TLS */
	struct redis_sentinel sentinel;
	struct redis_io io;
	char where[300];   /* the server in use, or last used: host:port/db, never a password */
	char errstr[256];  /* why the last call failed */
	const char *blame; /* the setting that can fix that failure, or NULL */
};

void redis_conn_init(struct redis_conn *c, const struct config *cfg);
/* (Re)connects: asks the sentinels for the master when the url names them
 * (a cluster url: its first seed that answers), then TLS, AUTH, SELECT, ROLE
 * (behind sentinels: a master only) and PING.
 * -EIO with errstr and blame; -EINVAL when a TLS file cannot be used. */
int redis_conn_connect(struct redis_conn *c) SD_MUSTCHECK;
/* Connects to one node of the url's cluster (or any server) at host:port,
 * with the url's TLS and credentials, as redis_conn_connect. */
int redis_conn_connect_to(struct redis_conn *c, const char *host, int port) SD_MUSTCHECK;
bool redis_conn_connected(const struct redis_conn *c);
/* Queues a command (argvlen NULL: strlen of each). */
int redis_conn_append(struct redis_conn *c, int argc, const char **argv, const size_t *argvlen) SD_MUSTCHECK;
/* Queues a command already in RESP (redisFormatCommandArgv's). */
int redis_conn_append_raw(struct redis_conn *c, const char *cmd, size_t len) SD_MUSTCHECK;
/* Sends what is queued (a reply is asked for later); a fault closes the
 * connection: -EIO with errstr. */
int redis_conn_flush(struct redis_conn *c) SD_MUSTCHECK;
/* The next reply, waiting at most --redis-timeout plus extra_ms. A transport
 * fault closes the connection: -EIO with errstr. An error reply is returned as
 * a reply; one that says the server is no longer a master (READONLY) closes
 * the connection too, so the next connect asks the sentinels again. */
int redis_conn_reply(struct redis_conn *c, redisReply **reply, int extra_ms) SD_MUSTCHECK;
/* One command and its reply; an error reply is -EIO with errstr. */
int redis_conn_command(struct redis_conn *c, int argc, const char **argv, const size_t *argvlen,
		       redisReply **reply) SD_MUSTCHECK;
/* Queues WAIT --redis-wait-replicas --redis-wait-timeout, after the commands
 * whose writes it waits for. 0 or -EIO with errstr. */
int redis_conn_append_wait(struct redis_conn *c) SD_MUSTCHECK;
/* WAIT's answer (waited for up to --redis-wait-timeout more): 0 once that
 * many replicas acknowledged; -ETIMEDOUT (errstr says how many; the
 * connection stays open) when fewer did; -EIO (errstr; the connection closed)
 * for a transport fault or an answer that is not WAIT's. */
int redis_conn_read_wait(struct redis_conn *c) SD_MUSTCHECK;
/* SELECT db on the connection (the next connect selects the URL's again). 0, or -EIO with errstr. */
int redis_conn_select(struct redis_conn *c, int db) SD_MUSTCHECK;
/* True when the sentinels announced a new master since the connect; never waits. */
bool redis_conn_master_moved(struct redis_conn *c);
void redis_conn_close(struct redis_conn *c);
void redis_conn_free(struct redis_conn *c);

#endif
