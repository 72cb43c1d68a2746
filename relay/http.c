/* The HTTP endpoint: libmicrohttpd parses and serves; we only pick the page. */
#include "fmacros.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "http.h"
#include "log.h"

#define PROMETHEUS_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define TEXT_TYPE "text/plain; charset=utf-8"

/* Hands body (malloc'd, or NULL for a static text) to MHD, which frees it. */
static enum MHD_Result reply(struct MHD_Connection *conn, unsigned int status, const char *type, char *body, size_t len,
			     const char *text)
{
	struct MHD_Response *res;
	enum MHD_Result rc;

	if (body)
		res = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	else
		res = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	if (!res) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(res, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(res, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(res, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	rc = MHD_queue_response(conn, status, res);
	MHD_destroy_response(res);
	return rc;
}

/* /metrics and /readyz: the page is built from a snapshot of the metrics. */
static enum MHD_Result page(struct MHD_Connection *conn, struct metrics *m, bool metrics)
{
	struct buf b;
	bool ready = false;
	int rc;

	buf_init(&b);
	rc = metrics ? metrics_format(m, &b) : metrics_ready(m, &b, &ready);
	if (rc < 0) {
		buf_free(&b);
		return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, TEXT_TYPE, NULL, 0, "out of memory\n");
	}
	return reply(conn, metrics || ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
		     metrics ? PROMETHEUS_TYPE : TEXT_TYPE, b.data, b.len, "");
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
			      const char *version, const char *upload, size_t *upload_len, void **state)
{
	struct http *h = cls;

	(void)version;
	(void)upload;
	(void)state;
	if (*upload_len)
		return MHD_NO; /* no endpoint takes a body */
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, TEXT_TYPE, NULL, 0, "only GET and HEAD\n");
	if (strcmp(url, "/metrics") == 0)
		return page(conn, h->m, true);
	if (strcmp(url, "/readyz") == 0)
		return page(conn, h->m, false);
	if (strcmp(url, "/healthz") == 0)
		return reply(conn, MHD_HTTP_OK, TEXT_TYPE, NULL, 0, "ok\n");
	return reply(conn, MHD_HTTP_NOT_FOUND, TEXT_TYPE, NULL, 0, "not found: try /metrics, /healthz or /readyz\n");
}

/* libmicrohttpd's own complaints (a client that misbehaved, mostly) go to
 * our log; at start-up http_start reports the failure itself, once. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct http *h = cls;
	char msg[256];
	size_t n;

	if (!atomic_load(&h->started))
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		msg[--n] = '\0';
	log_warn("http server", LOGF(F_STR("error", msg)));
}

/* The address the daemon really listens on (port 0 becomes the chosen one). */
static void describe(struct http *h, const struct addrinfo *ai)
{
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
	char host[INET6_ADDRSTRLEN] = "?";
	const void *a = ai->ai_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr
						  : (const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr;

	inet_ntop(ai->ai_family, a, host, sizeof(host));
	snprintf(h->where, sizeof(h->where), ai->ai_family == AF_INET6 ? "[%s]:%u" : "%s:%u", host,
		 info ? (unsigned)info->port : 0u);
}

int http_start(struct http *h, const struct config *cfg, struct metrics *m)
{
	struct addrinfo hints = { .ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai = NULL;
	char port[8];
	int rc;

	memset(h, 0, sizeof(*h));
	atomic_init(&h->started, false);
	h->m = m;
	snprintf(port, sizeof(port), "%d", cfg->http_port);
	/* An empty host means every interface, as for most servers: IPv4's 0.0.0.0. */
	hints.ai_family = *cfg->http_host ? AF_UNSPEC : AF_INET;
	rc = getaddrinfo(*cfg->http_host ? cfg->http_host : NULL, port, &hints, &ai);
	if (rc != 0) {
		snprintf(h->errstr, sizeof(h->errstr), "could not resolve %s: %s", cfg->http_addr, gai_strerror(rc));
		return -EIO;
	}
	h->daemon = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG |
					     (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0),
				     (uint16_t)cfg->http_port, NULL, NULL, handle, h, MHD_OPTION_EXTERNAL_LOGGER,
				     mhd_log, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT, 64u,
				     MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
	if (!h->daemon) {
		/* MHD says why in its log; errno still holds the bind error. */
		snprintf(h->errstr, sizeof(h->errstr), "could not listen on %s: %s", cfg->http_addr, strerror(errno));
		freeaddrinfo(ai);
		return -EIO;
	}
	atomic_store(&h->started, true);
	describe(h, ai);
	freeaddrinfo(ai);
	return 0;
}

void http_stop(struct http *h)
{
	if (!h || !h->daemon)
		return;
	MHD_stop_daemon(h->daemon);
	h->daemon = NULL;
}
