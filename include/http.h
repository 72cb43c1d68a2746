/* The HTTP endpoint: /metrics, /healthz and /readyz, served by libmicrohttpd in its own thread. */
#ifndef STAGEDRAIN_HTTP_H
#define STAGEDRAIN_HTTP_H

#include <pthread.h>
#include <stdatomic.h>

#include "config.h"
#include "fmacros.h"
#include "http_deadline.h"
#include "http_lograte.h"
#include "metrics.h"

struct MHD_Daemon;

/* What keeps the probes answering while someone abuses the endpoint (README,
 * Security): connections in all and from one client address, the time a
 * connection gets for its one request (from accept to the last byte of the
 * answer, however slowly it sends), and the endpoint's own warnings a minute
 * (the rest are counted in one line). */
#define HTTP_MAX_CONNECTIONS 256
#define HTTP_MAX_PER_ADDRESS 8
#define HTTP_REQUEST_DEADLINE_MS 5000
#define HTTP_LOG_LINES_PER_MINUTE 5

struct http {
	struct MHD_Daemon *daemon;
	struct metrics *m;
	bool readyz_detail;  /* --readyz-detail: /readyz quotes the errors */
	atomic_bool started; /* before, libmicrohttpd's messages repeat our own error */
	struct http_deadline deadline;
	pthread_mutex_t log_lock; /* lograte: libmicrohttpd's thread and the deadline's both warn */
	struct http_lograte lograte;
	char where[300]; /* the address it listens on, the real port included */
	char errstr[256];
};

/* Listens on cfg->http_host:http_port. -EIO with errstr on failure (address
 * in use, unknown host); handlers only read m, never wait on a server. Each
 * connection carries one request and is cut off HTTP_REQUEST_DEADLINE_MS
 * after it was accepted. */
int http_start(struct http *h, const struct config *cfg, struct metrics *m) SD_MUSTCHECK;
void http_stop(struct http *h);

#endif
