/* The HTTP endpoint: libmicrohttpd parses and serves; we pick the page and
 * bound what a client can hold (connections, time) and make us log. */
#include "fmacros.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "clock.h"
#include "http.h"
#include "log.h"

_Static_assert(HTTP_MAX_CONNECTIONS <= HTTP_DEADLINE_SLOTS, "every connection needs a deadline slot");

/* How often the deadline is checked: a slow client is cut off at most this late. */
#define HTTP_SWEEP_MS 250

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
	/* One request a connection: the deadline then bounds each request, not a keep-alive session. */
	MHD_add_response_header(res, MHD_HTTP_HEADER_CONNECTION, "close");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(res, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	rc = MHD_queue_response(conn, status, res);
	MHD_destroy_response(res);
	return rc;
}

/* /metrics and /readyz: the page is built from a snapshot of the metrics. */
static enum MHD_Result page(struct MHD_Connection *conn, struct http *h, bool metrics)
{
	struct buf b;
	bool ready = false;
	int rc;

	buf_init(&b);
	rc = metrics ? metrics_format(h->m, &b) : metrics_ready(h->m, &b, &ready, h->readyz_detail);
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
		return page(conn, h, true);
	if (strcmp(url, "/readyz") == 0)
		return page(conn, h, false);
	if (strcmp(url, "/healthz") == 0)
		return reply(conn, MHD_HTTP_OK, TEXT_TYPE, NULL, 0, "ok\n");
	return reply(conn, MHD_HTTP_NOT_FOUND, TEXT_TYPE, NULL, 0, "not found: try /metrics, /healthz or /readyz\n");
}

/* Whether a warning may be logged now (HTTP_LOG_LINES_PER_MINUTE); first
 * logs how many the last full minute left out. may: false only reports. */
static bool may_warn(struct http *h, bool may)
{
	long long now = clock_mono_ms();
	unsigned long long left_out;

	pthread_mutex_lock(&h->log_lock);
	left_out = http_lograte_flush(&h->lograte, now, false);
	may = may && http_lograte_take(&h->lograte, now);
	pthread_mutex_unlock(&h->log_lock);
	if (left_out)
		log_warn("http server messages suppressed",
			 LOGF(F_INT("suppressed", left_out), F_INT("per_minute", HTTP_LOG_LINES_PER_MINUTE)));
	return may;
}

/* libmicrohttpd's own complaints (a client that misbehaved, mostly) go to
 * our log, a few a minute; at start-up http_start reports the failure itself, once. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct http *h = cls;
	char msg[256];
	size_t n;

	if (!atomic_load(&h->started) || !may_warn(h, true))
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		msg[--n] = '\0';
	log_warn("http server", LOGF(F_STR("error", msg)));
}

/* After each sweep of the deadline (its thread). */
static void swept(void *cls, int cut)
{
	struct http *h = cls;

	if (may_warn(h, cut > 0))
		log_warn("http server cut off connections past the request deadline",
			 LOGF(F_INT("connections", cut), F_INT("deadline_ms", HTTP_REQUEST_DEADLINE_MS)));
}

/* Each connection's start and end (libmicrohttpd's thread), for the deadline. */
static void notify(void *cls, struct MHD_Connection *conn, void **ctx, enum MHD_ConnectionNotificationCode code)
{
	struct http *h = cls;
	const union MHD_ConnectionInfo *fd;

	if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		http_deadline_close(&h->deadline, ctx);
		return;
	}
	fd = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (fd)
		http_deadline_open(&h->deadline, fd->connect_fd, ctx);
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

/* The daemon on ai: one thread polls every connection; a client address
 * gets a few of them, so one client cannot take the probes' place. */
static struct MHD_Daemon *listen_on(struct http *h, const struct config *cfg, const struct addrinfo *ai)
{
	return MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG |
					(ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0),
				(uint16_t)cfg->http_port, NULL, NULL, handle, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
				MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT,
				(unsigned)HTTP_MAX_CONNECTIONS, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
				(unsigned)HTTP_MAX_PER_ADDRESS, MHD_OPTION_CONNECTION_TIMEOUT,
				(unsigned)(HTTP_REQUEST_DEADLINE_MS / 1000), MHD_OPTION_NOTIFY_CONNECTION, notify, h,
				MHD_OPTION_END);
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
	h->readyz_detail = cfg->readyz_detail;
	http_lograte_init(&h->lograte, HTTP_LOG_LINES_PER_MINUTE, 60000);
	snprintf(port, sizeof(port), "%d", cfg->http_port);
	/* An empty host means every interface, as for most servers: IPv4's 0.0.0.0. */
	hints.ai_family = *cfg->http_host ? AF_UNSPEC : AF_INET;
	rc = getaddrinfo(*cfg->http_host ? cfg->http_host : NULL, port, &hints, &ai);
	if (rc != 0) {
		snprintf(h->errstr, sizeof(h->errstr), "could not resolve %s: %s", cfg->http_addr, gai_strerror(rc));
		return -EIO;
	}
	if ((rc = pthread_mutex_init(&h->log_lock, NULL)) != 0) {
		snprintf(h->errstr, sizeof(h->errstr), "could not start the http server: %s", strerror(rc));
		goto fail_lock;
	}
	if ((rc = http_deadline_start(&h->deadline, HTTP_REQUEST_DEADLINE_MS, HTTP_SWEEP_MS, swept, h)) < 0) {
		snprintf(h->errstr, sizeof(h->errstr), "could not start the http server: %s", strerror(-rc));
		goto fail_deadline;
	}
	h->daemon = listen_on(h, cfg, ai);
	if (!h->daemon) {
		/* MHD says why in its log; errno still holds the bind error. */
		snprintf(h->errstr, sizeof(h->errstr), "could not listen on %s: %s", cfg->http_addr, strerror(errno));
		goto fail_daemon;
	}
	atomic_store(&h->started, true);
	describe(h, ai);
	freeaddrinfo(ai);
	return 0;
fail_daemon:
	http_deadline_stop(&h->deadline);
fail_deadline:
	pthread_mutex_destroy(&h->log_lock);
fail_lock:
	freeaddrinfo(ai);
	return -EIO;
}

void http_stop(struct http *h)
{
	unsigned long long left_out;

	if (!h || !h->daemon)
		return;
	MHD_stop_daemon(h->daemon);
	h->daemon = NULL;
	http_deadline_stop(&h->deadline);
	/* The last minute's count, which no later warning will report. */
	left_out = http_lograte_flush(&h->lograte, clock_mono_ms(), true);
	if (left_out)
		log_warn("http server messages suppressed",
			 LOGF(F_INT("suppressed", left_out), F_INT("per_minute", HTTP_LOG_LINES_PER_MINUTE)));
	pthread_mutex_destroy(&h->log_lock);
}
