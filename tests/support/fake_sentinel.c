/* A fake sentinel: see fake_sentinel.h. Requests are parsed with hiredis's
 * reply reader, since a command is a RESP array of bulk strings too. */
#include "fmacros.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support/fake_sentinel.h"

struct client {
	int fd;
	redisReader *rd;
};

static void send_all(int fd, const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static bool arg_is(const redisReply *req, size_t i, const char *word)
{
	return req->elements > i && req->element[i]->type == REDIS_REPLY_STRING &&
	       strcasecmp(req->element[i]->str, word) == 0;
}

static void answer(struct fake_sentinel *f, int fd, const redisReply *req)
{
	static const char sub[] = "*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n";
	char out[128], port[16];
	int n;

	if (req->type == REDIS_REPLY_ARRAY && arg_is(req, 0, "SENTINEL") && arg_is(req, 1, "get-master-addr-by-name")) {
		pthread_mutex_lock(&f->lock);
		f->asked++;
		snprintf(port, sizeof(port), "%d", f->answer_port);
		pthread_mutex_unlock(&f->lock);
		n = snprintf(out, sizeof(out), "*2\r\n$9\r\n127.0.0.1\r\n$%zu\r\n%s\r\n", strlen(port), port);
		send_all(fd, out, (size_t)n);
	} else if (req->type == REDIS_REPLY_ARRAY && arg_is(req, 0, "SUBSCRIBE")) {
		send_all(fd, sub, sizeof(sub) - 1);
	} else {
		send_all(fd, "+OK\r\n", 5);
	}
}

/* Reads what fd has and answers each whole request; false once it closed. */
static bool serve(struct fake_sentinel *f, struct client *c)
{
	char buf[4096];
	ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
	void *req = NULL;

	if (n <= 0 || redisReaderFeed(c->rd, buf, (size_t)n) != REDIS_OK)
		return false;
	while (redisReaderGetReply(c->rd, &req) == REDIS_OK && req) {
		answer(f, c->fd, req);
		freeReplyObject(req);
		req = NULL;
	}
	return c->rd->err == 0;
}

static void drop(struct client *c)
{
	close(c->fd);
	redisReaderFree(c->rd);
	c->fd = -1;
	c->rd = NULL;
}

static void accept_one(struct fake_sentinel *f, struct client *cs, size_t *n)
{
	int fd = accept(f->lfd, NULL, NULL);

	if (fd < 0)
		return;
	(void)fcntl(fd, F_SETFD, FD_CLOEXEC); /* the relays the test starts must not inherit it */
	if (*n == FAKE_SENTINEL_CLIENTS) {
		close(fd);
		return;
	}
	cs[*n].fd = fd;
	cs[*n].rd = redisReaderCreate();
	(*n)++;
}

static bool stopping(struct fake_sentinel *f)
{
	bool stop;

	pthread_mutex_lock(&f->lock);
	stop = f->stop;
	pthread_mutex_unlock(&f->lock);
	return stop;
}

static void *fake_main(void *arg)
{
	struct fake_sentinel *f = arg;
	struct client cs[FAKE_SENTINEL_CLIENTS];
	struct pollfd pfd[FAKE_SENTINEL_CLIENTS + 1];
	size_t n = 0;

	while (!stopping(f)) {
		pfd[0] = (struct pollfd){ .fd = f->lfd, .events = POLLIN };
		for (size_t i = 0; i < n; i++)
			pfd[i + 1] = (struct pollfd){ .fd = cs[i].fd, .events = POLLIN };
		if (poll(pfd, n + 1, 50) <= 0)
			continue;
		for (size_t i = n; i-- > 0;) {
			if (!(pfd[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) || serve(f, &cs[i]))
				continue;
			drop(&cs[i]);
			cs[i] = cs[--n];
		}
		if (pfd[0].revents & POLLIN)
			accept_one(f, cs, &n);
	}
	while (n > 0)
		drop(&cs[--n]);
	return NULL;
}

int fake_sentinel_start(struct fake_sentinel *f, int answer_port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int rc;

	memset(f, 0, sizeof(*f));
	f->answer_port = answer_port;
	if ((f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	if (bind(f->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(f->lfd, 16) < 0 ||
	    getsockname(f->lfd, (struct sockaddr *)&a, &len) < 0) {
		rc = -errno;
		close(f->lfd);
		return rc;
	}
	f->port = ntohs(a.sin_port);
	pthread_mutex_init(&f->lock, NULL);
	if ((rc = pthread_create(&f->thread, NULL, fake_main, f)) != 0) {
		pthread_mutex_destroy(&f->lock);
		close(f->lfd);
		return -rc;
	}
	return 0;
}

void fake_sentinel_answer(struct fake_sentinel *f, int answer_port)
{
	pthread_mutex_lock(&f->lock);
	f->answer_port = answer_port;
	pthread_mutex_unlock(&f->lock);
}

int fake_sentinel_asked(struct fake_sentinel *f)
{
	int n;

	pthread_mutex_lock(&f->lock);
	n = f->asked;
	pthread_mutex_unlock(&f->lock);
	return n;
}

void fake_sentinel_stop(struct fake_sentinel *f)
{
	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_mutex_unlock(&f->lock);
	pthread_join(f->thread, NULL);
	pthread_mutex_destroy(&f->lock);
	close(f->lfd);
}
