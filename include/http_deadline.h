/* The HTTP endpoint's whole-request deadline: libmicrohttpd's timeout is an
 * idle one, which a client sending a byte now and then never meets. */
#ifndef STAGEDRAIN_HTTP_DEADLINE_H
#define STAGEDRAIN_HTTP_DEADLINE_H

#include <pthread.h>
#include <stdbool.h>

#include "fmacros.h"

/* As many as the daemon's connection limit, so every connection gets one. */
#define HTTP_DEADLINE_SLOTS 256

struct http_deadline_slot {
	int fd; /* -1: free */
	long long opened_ms;
	bool cut; /* shut down once already */
};

/*
 * A thread wakes every sweep_ms and shuts down (shutdown(2), not close: the
 * socket stays libmicrohttpd's) every connection older than deadline_ms;
 * libmicrohttpd then sees the end of the stream and closes it as usual. The
 * lock is held from the sweep's look at a slot to its shutdown, and by the
 * close notification, which comes before libmicrohttpd closes the socket: a
 * closed socket's number, maybe reused already, is never touched.
 */
struct http_deadline {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_t thread;
	bool running, stop;
	long long deadline_ms, sweep_ms;
	/* Called after each sweep, outside the lock, with how many it cut off. */
	void (*swept)(void *cls, int cut);
	void *cls;
	struct http_deadline_slot slots[HTTP_DEADLINE_SLOTS];
};

/* 0, or -errno if the thread could not start. */
int http_deadline_start(struct http_deadline *d, long long deadline_ms, long long sweep_ms,
			void (*swept)(void *cls, int cut), void *cls) SD_MUSTCHECK;
/* A connection on fd began: *ctx becomes its slot (NULL if none is free:
 * then only libmicrohttpd's idle timeout bounds it). */
void http_deadline_open(struct http_deadline *d, int fd, void **ctx);
/* Its connection ends (before its socket is closed); ctx may hold NULL. */
void http_deadline_close(struct http_deadline *d, void **ctx);
/* Stops the thread; a no-op if it never started. */
void http_deadline_stop(struct http_deadline *d);

#endif
