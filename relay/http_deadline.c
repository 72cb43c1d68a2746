/* Cuts off HTTP connections that outlive the whole-request deadline, however
 * slowly they send or read. */
#include "fmacros.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "clock.h"
#include "http_deadline.h"

void http_deadline_open(struct http_deadline *d, int fd, void **ctx)
{
	*ctx = NULL;
	pthread_mutex_lock(&d->lock);
	for (int i = 0; i < HTTP_DEADLINE_SLOTS; i++) {
		if (d->slots[i].fd < 0) {
			d->slots[i] = (struct http_deadline_slot){ fd, clock_mono_ms(), false };
			*ctx = &d->slots[i];
			break;
		}
	}
	pthread_mutex_unlock(&d->lock);
}

void http_deadline_close(struct http_deadline *d, void **ctx)
{
	struct http_deadline_slot *slot = *ctx;

	if (!slot)
		return;
	pthread_mutex_lock(&d->lock);
	slot->fd = -1;
	pthread_mutex_unlock(&d->lock);
	*ctx = NULL;
}

/* Shuts down what is past the deadline; returns how many. */
static int sweep(struct http_deadline *d)
{
	long long now = clock_mono_ms();
	int cut = 0;

	pthread_mutex_lock(&d->lock);
	for (int i = 0; i < HTTP_DEADLINE_SLOTS; i++) {
		struct http_deadline_slot *s = &d->slots[i];

		if (s->fd < 0 || s->cut || now - s->opened_ms < d->deadline_ms)
			continue;
		/* Both ways: a slow sender reads EOF, a slow reader's writes fail. */
		(void)shutdown(s->fd, SHUT_RDWR);
		s->cut = true;
		cut++;
	}
	pthread_mutex_unlock(&d->lock);
	return cut;
}

static void *deadline_main(void *arg)
{
	struct http_deadline *d = arg;
	struct timespec until;

	pthread_mutex_lock(&d->lock);
	while (!d->stop) {
		int cut;

		pthread_mutex_unlock(&d->lock);
		cut = sweep(d);
		d->swept(d->cls, cut);
		until = clock_mono_after(d->sweep_ms);
		pthread_mutex_lock(&d->lock);
		while (!d->stop && pthread_cond_timedwait(&d->wake, &d->lock, &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

int http_deadline_start(struct http_deadline *d, long long deadline_ms, long long sweep_ms,
			void (*swept)(void *cls, int cut), void *cls)
{
	pthread_condattr_t attr;
	int rc;

	memset(d, 0, sizeof(*d));
	d->deadline_ms = deadline_ms;
	d->sweep_ms = sweep_ms;
	d->swept = swept;
	d->cls = cls;
	for (int i = 0; i < HTTP_DEADLINE_SLOTS; i++)
		d->slots[i].fd = -1;
	if ((rc = pthread_condattr_init(&attr)) != 0)
		goto fail_attr;
	if ((rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)) != 0 ||
	    (rc = pthread_cond_init(&d->wake, &attr)) != 0)
		goto fail_cond;
	if ((rc = pthread_mutex_init(&d->lock, NULL)) != 0)
		goto fail_mutex;
	if ((rc = pthread_create(&d->thread, NULL, deadline_main, d)) != 0)
		goto fail_thread;
	pthread_condattr_destroy(&attr);
	d->running = true;
	return 0;
fail_thread:
	pthread_mutex_destroy(&d->lock);
fail_mutex:
	pthread_cond_destroy(&d->wake);
fail_cond:
	pthread_condattr_destroy(&attr);
fail_attr:
	return -rc;
}

void http_deadline_stop(struct http_deadline *d)
{
	if (!d || !d->running)
		return;
	pthread_mutex_lock(&d->lock);
	d->stop = true;
	pthread_cond_signal(&d->wake);
	pthread_mutex_unlock(&d->lock);
	pthread_join(d->thread, NULL);
	pthread_cond_destroy(&d->wake);
	pthread_mutex_destroy(&d->lock);
	d->running = false;
}
