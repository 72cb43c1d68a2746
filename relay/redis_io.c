/* One socket to one Redis server: connect, TLS, send, and read replies with hiredis's reader, each wait a bounded poll(). */
#include "fmacros.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "redis_io.h"

/* Dead peers are noticed within about a minute even while idle: 30 s, then 3 probes 10 s apart. */
#define KEEPALIVE_IDLE_S 30
#define KEEPALIVE_INTVL_S 10
#define KEEPALIVE_CNT 3

void redis_io_init(struct redis_io *io)
{
	memset(io, 0, sizeof(*io));
	io->fd = -1;
	buf_init(&io->out);
}

void redis_io_stop_on(struct redis_io *io, struct stop *stop)
{
	io->stop = stop;
}

bool redis_io_is_open(const struct redis_io *io)
{
	return io->fd >= 0;
}

void redis_io_close(struct redis_io *io)
{
	if (io->ssl) {
		SSL_free(io->ssl);
		io->ssl = NULL;
	}
	if (io->fd >= 0)
		close(io->fd);
	io->fd = -1;
	if (io->reader)
		redisReaderFree(io->reader);
	io->reader = NULL;
	buf_reset(&io->out);
	io->sent = 0;
}

void redis_io_free(struct redis_io *io)
{
	if (!io)
		return;
	redis_io_close(io);
	buf_free(&io->out);
}

/* Records why and closes: after any failure the stream's state is unknown. */
static int io_fail(struct redis_io *io, const char *fmt, ...) SD_PRINTF(2, 3);
static int io_fail(struct redis_io *io, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(io->err.errstr, sizeof(io->err.errstr), fmt, ap);
	va_end(ap);
	io->err.blame = NULL;
	redis_io_close(io);
	return -EIO;
}

/* A TLS failure: redis_tls_explain's words and blame stand, and the socket closes. */
static int tls_io_fail(struct redis_io *io, int ret, const char *what)
{
	redis_tls_explain(io->ssl, ret, !io->replied, what, &io->err);
	redis_io_close(io);
	return -EIO;
}

/* Waits for events on the socket until deadline: 0, -ETIMEDOUT, or
 * -ECANCELED once the stop deadline passed first. While a stop may come, the
 * wait looks at it every STOP_SLICE_MS. */
static int wait_for(struct redis_io *io, short events, long long deadline)
{
	struct pollfd p = { .fd = io->fd, .events = events };
	int slice = io->stop ? STOP_SLICE_MS : 60000;

	for (;;) {
		long long now = clock_mono_ms(), left = deadline - now;
		int n;
		if (now >= stop_deadline(io->stop))
			return -ECANCELED;
		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&p, 1, left > slice ? slice : (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

/* A wait that gave up: what failed and its timeout, or the stop that cut it short. */
static int wait_fail(struct redis_io *io, int rc, const char *what, int ms)
{
	if (rc == -ECANCELED)
		return io_fail(io, "abandoned: %s before the relay's --stop-timeout passed", what);
	return io_fail(io, "timeout: %s within %d ms", what, ms);
}

static void tune_tcp(int fd)
{
	int one = 1, idle = KEEPALIVE_IDLE_S, intvl = KEEPALIVE_INTVL_S, cnt = KEEPALIVE_CNT;

	/* Best effort: a socket that refuses these still works. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

/* A non-blocking connect to one address, finished within deadline: 0 or -errno. */
static int connect_one(struct redis_io *io, int family, const struct sockaddr *sa, socklen_t len, long long deadline)
{
	int err = 0, rc;
	socklen_t elen = sizeof(err);

	io->fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (io->fd < 0)
		return -errno;
	if (connect(io->fd, sa, len) == 0)
		return 0;
	if (errno != EINPROGRESS)
		rc = -errno;
	else if ((rc = wait_for(io, POLLOUT, deadline)) == 0 &&
		 getsockopt(io->fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err)
		rc = -err;
	if (rc < 0) {
		close(io->fd);
		io->fd = -1;
	}
	return rc;
}

static int connect_tcp(struct redis_io *io, const char *host, int port, long long deadline)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *a;
	char service[16];
	int rc = -ECONNREFUSED, g;

	snprintf(service, sizeof(service), "%d", port);
	if ((g = getaddrinfo(host, service, &hints, &res)) != 0)
		return io_fail(io, "could not resolve %s: %s", host, gai_strerror(g));
	for (a = res; a && io->fd < 0; a = a->ai_next)
		rc = connect_one(io, a->ai_family, a->ai_addr, a->ai_addrlen, deadline);
	freeaddrinfo(res);
	if (io->fd < 0 && (rc == -ETIMEDOUT || rc == -ECANCELED))
		return wait_fail(io, rc, "no connection", io->timeout_ms);
	if (io->fd < 0)
		return io_fail(io, "%s", strerror(-rc));
	tune_tcp(io->fd);
	return 0;
}

static int connect_unix(struct redis_io *io, const char *path, long long deadline)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return io_fail(io, "socket path is longer than %zu bytes", sizeof(sa.sun_path) - 1);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if ((rc = connect_one(io, AF_UNIX, (const struct sockaddr *)&sa, sizeof(sa), deadline)) < 0)
		return io_fail(io, "%s", strerror(-rc));
	return 0;
}

static int start_tls(struct redis_io *io, const struct redis_tls *tls, const char *host, long long deadline)
{
	bool want_write = false;
	int rc, werr;

	if (!(io->ssl = redis_tls_session(tls, io->fd, host)))
		return io_fail(io, "could not set up TLS for %s", host);
	while ((rc = redis_tls_handshake(io->ssl, &want_write, &io->err)) == -EAGAIN)
		if ((werr = wait_for(io, want_write ? POLLOUT : POLLIN, deadline)) == -ECANCELED)
			return wait_fail(io, werr, "no TLS handshake", io->timeout_ms);
		else if (werr < 0)
			return io_fail(io, "TLS handshake failed: timeout after %d ms", io->timeout_ms);
	if (rc < 0)
		redis_io_close(io); /* io->err says why */
	return rc;
}

int redis_io_connect(struct redis_io *io, const char *host, int port, const char *path, const struct redis_tls *tls,
		     int timeout_ms)
{
	long long deadline = clock_mono_ms() + timeout_ms;
	int rc;

	redis_io_close(io);
	io->timeout_ms = timeout_ms;
	io->replied = false;
	io->err.blame = NULL;
	rc = path ? connect_unix(io, path, deadline) : connect_tcp(io, host, port, deadline);
	if (rc == 0 && tls)
		rc = start_tls(io, tls, host, deadline);
	if (rc == 0 && !(io->reader = redisReaderCreate()))
		rc = io_fail(io, "out of memory");
	return rc;
}

int redis_io_append(struct redis_io *io, int argc, const char **argv, const size_t *argvlen)
{
	char *cmd = NULL;
	int len = redisFormatCommandArgv(&cmd, argc, argv, argvlen);
	int rc;

	if (len < 0)
		return -ENOMEM;
	rc = buf_append(&io->out, cmd, (size_t)len);
	redisFreeCommand(cmd);
	return rc;
}

int redis_io_append_raw(struct redis_io *io, const char *cmd, size_t len)
{
	return buf_append(&io->out, cmd, len);
}

/* Writes what is queued before deadline. */
static int flush(struct redis_io *io, long long deadline)
{
	while (io->sent < io->out.len) {
		const char *p = io->out.data + io->sent;
		size_t n = io->out.len - io->sent;
		ssize_t w;
		short wait = POLLOUT;
		int rc;

		if (io->ssl) {
			int r = SSL_write(io->ssl, p, n > INT_MAX ? INT_MAX : (int)n), e = SSL_get_error(io->ssl, r);
			w = r > 0 ? r : -1;
			if (r <= 0 && e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
				return tls_io_fail(io, r, "TLS write");
			wait = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
		} else if ((w = send(io->fd, p, n, MSG_NOSIGNAL)) < 0 && errno != EAGAIN && errno != EINTR)
			return io_fail(io, "write failed: %s", strerror(errno));
		if (w > 0)
			io->sent += (size_t)w;
		else if ((rc = wait_for(io, wait, deadline)) < 0)
			return wait_fail(io, rc, "could not send", io->timeout_ms);
	}
	buf_reset(&io->out);
	io->sent = 0;
	return 0;
}

/* Reads what the socket has into the reader: 1 if bytes came, 0 if none are
 * there yet (*wait says which event to wait for), -EIO. */
static int read_some(struct redis_io *io, short *wait)
{
	char chunk[16384];
	ssize_t n;

	*wait = POLLIN;
	if (io->ssl) {
		int r = SSL_read(io->ssl, chunk, sizeof(chunk)), e = SSL_get_error(io->ssl, r);
		if (r <= 0 && (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)) {
			*wait = e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN;
			return 0;
		}
		if (r <= 0)
			return tls_io_fail(io, r, "TLS read");
		n = r;
	} else if ((n = read(io->fd, chunk, sizeof(chunk))) < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		return io_fail(io, "read failed: %s", strerror(errno));
	} else if (n == 0)
		return io_fail(io, "connection closed by the server");
	if (redisReaderFeed(io->reader, chunk, (size_t)n) != REDIS_OK)
		return io_fail(io, "out of memory");
	return 1;
}

/* A complete reply from what was read so far, or NULL. */
static int take_reply(struct redis_io *io, redisReply **reply)
{
	void *r = NULL;

	*reply = NULL;
	if (redisReaderGetReply(io->reader, &r) != REDIS_OK)
		return io_fail(io, "protocol error: %s", io->reader->errstr);
	*reply = r;
	return 0;
}

int redis_io_flush(struct redis_io *io)
{
	if (io->fd < 0)
		return io_fail(io, "not connected");
	return flush(io, clock_mono_ms() + io->timeout_ms);
}

int redis_io_reply(struct redis_io *io, redisReply **reply, int extra_ms)
{
	long long deadline = clock_mono_ms() + io->timeout_ms + extra_ms;
	short wait;
	int rc;

	*reply = NULL;
	if (io->fd < 0)
		return io_fail(io, "not connected");
	if ((rc = flush(io, deadline)) < 0)
		return rc;
	while ((rc = take_reply(io, reply)) == 0 && !*reply) {
		if ((rc = read_some(io, &wait)) < 0)
			return rc;
		if (rc == 0 && (rc = wait_for(io, wait, deadline)) < 0)
			return wait_fail(io, rc, "no reply", io->timeout_ms + extra_ms);
	}
	io->replied |= rc == 0;
	return rc;
}

int redis_io_poll(struct redis_io *io, redisReply **reply)
{
	struct pollfd p = { .fd = io->fd, .events = POLLIN };
	short wait;
	int rc;

	*reply = NULL;
	if (io->fd < 0)
		return io_fail(io, "not connected");
	if ((rc = take_reply(io, reply)) < 0 || *reply)
		return rc;
	/* TLS may hold decrypted bytes the socket no longer shows. */
	if (!(io->ssl && SSL_pending(io->ssl) > 0) && poll(&p, 1, 0) <= 0)
		return 0;
	if ((rc = read_some(io, &wait)) < 0)
		return rc;
	return take_reply(io, reply);
}

int redis_io_command(struct redis_io *io, int argc, const char **argv, const size_t *argvlen, redisReply **reply)
{
	int rc = redis_io_append(io, argc, argv, argvlen);

	if (rc < 0) {
		*reply = NULL;
		return rc;
	}
	return redis_io_reply(io, reply, 0);
}
