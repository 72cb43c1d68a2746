/* One socket to one Redis server (tcp or unix, plain or TLS), speaking RESP with hiredis's reader. */
#ifndef STAGEDRAIN_REDIS_IO_H
#define STAGEDRAIN_REDIS_IO_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "fmacros.h"
#include "redis_tls.h"
#include "stop.h"

/*
 * hiredis 0.14 reads and writes its own socket with read() and write(), so TLS
 * cannot go under it. The relay owns the socket instead and takes only
 * hiredis's protocol parts: redisFormatCommandArgv to write commands and
 * redisReader to parse replies. Plain, unix and TLS connections then share
 * one code path, and every wait is a poll() bounded by the timeout.
 */
struct redis_io {
	int fd;   /* -1: closed */
	SSL *ssl; /* NULL: plain */
	redisReader *reader;
	struct buf out; /* commands formatted and not yet written */
	size_t sent;    /* bytes of out already written */
	int timeout_ms;
	bool replied;               /* a reply came since the connect */
	struct stop *stop;          /* NULL: waits ignore stop signals; else none outlasts its deadline */
	struct redis_tls_error err; /* why the last call failed; the socket is then closed */
};

void redis_io_init(struct redis_io *io);
/* Bounds every later wait by stop's deadline too (stop.h): past it the wait
 * gives up as after a timeout, errstr saying "abandoned", and the socket
 * closes. A command Redis had not read whole is then never run; one it had
 * may still run. */
void redis_io_stop_on(struct redis_io *io, struct stop *stop);
/* Connects to host:port, or the unix socket path when path is not NULL, then
 * runs the TLS handshake when tls is not NULL, all within timeout_ms.
 * -EIO with io->err filled, -ENOMEM. */
int redis_io_connect(struct redis_io *io, const char *host, int port, const char *path, const struct redis_tls *tls,
		     int timeout_ms) SD_MUSTCHECK;
bool redis_io_is_open(const struct redis_io *io);
/* Queues a command; nothing is sent until a reply is asked for. */
int redis_io_append(struct redis_io *io, int argc, const char **argv, const size_t *argvlen) SD_MUSTCHECK;
/* Queues a command already in RESP (redisFormatCommandArgv's). 0 or -ENOMEM. */
int redis_io_append_raw(struct redis_io *io, const char *cmd, size_t len) SD_MUSTCHECK;
/* Sends what is queued, waiting at most the timeout, without reading. */
int redis_io_flush(struct redis_io *io) SD_MUSTCHECK;
/* Sends what is queued and reads the next reply, waiting at most the
 * timeout plus extra_ms. The caller frees *reply with freeReplyObject. */
int redis_io_reply(struct redis_io *io, redisReply **reply, int extra_ms) SD_MUSTCHECK;
/* The next reply if one has arrived, else *reply NULL; never waits. */
int redis_io_poll(struct redis_io *io, redisReply **reply) SD_MUSTCHECK;
/* One command, one reply: redis_io_append then redis_io_reply. */
int redis_io_command(struct redis_io *io, int argc, const char **argv, const size_t *argvlen,
		     redisReply **reply) SD_MUSTCHECK;
void redis_io_close(struct redis_io *io);
void redis_io_free(struct redis_io *io);

#endif
