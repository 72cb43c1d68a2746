/* Redis Sentinel, as its client guide asks: ask the sentinels in list order,
 * move the first that answers to the front, move one whose answer failed to
 * the back, and listen for +switch-master. */
#include "fmacros.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "redis_sentinel.h"
#include "values.h"

void redis_sentinel_init(struct redis_sentinel *s, const struct redis_target *t, const struct redis_tls *tls,
			 int timeout_ms)
{
	memset(s, 0, sizeof(*s));
	s->t = t;
	s->tls = tls;
	s->timeout_ms = timeout_ms;
	redis_io_init(&s->sub);
}

void redis_sentinel_free(struct redis_sentinel *s)
{
	if (!s)
		return;
	redis_io_free(&s->sub);
	free(s->order);
	s->order = NULL;
}

/* The list starts in the url's order, made at the first question. */
static int make_order(struct redis_sentinel *s)
{
	if (s->order)
		return 0;
	if (!(s->order = calloc(s->t->nsentinels, sizeof(*s->order))))
		return value_fail(s->errstr, sizeof(s->errstr), -ENOMEM, "out of memory");
	for (size_t i = 0; i < s->t->nsentinels; i++)
		s->order[i] = i;
	return 0;
}

/* Moves the k-th of the list to position to, the others keeping their order. */
static void move(struct redis_sentinel *s, size_t k, size_t to)
{
	size_t i = s->order[k];

	if (k > to)
		memmove(&s->order[to + 1], &s->order[to], (k - to) * sizeof(*s->order));
	else
		memmove(&s->order[k], &s->order[k + 1], (to - k) * sizeof(*s->order));
	s->order[to] = i;
}

/* Sends argv and keeps the reply; -EIO with why after a transport fault. */
static int ask(struct redis_io *io, int argc, const char **argv, redisReply **r)
{
	return redis_io_command(io, argc, argv, NULL, r);
}

/* Sentinels usually need no password; one that does gets the master's. */
static int get_master(struct redis_sentinel *s, struct redis_io *io, redisReply **r)
{
	const char *q[] = { "SENTINEL", "get-master-addr-by-name", s->t->master_name };
	const char *auth[3] = { "AUTH" };
	redisReply *a = NULL;
	int n = 1, rc;

	if ((rc = ask(io, 3, q, r)) < 0)
		return rc;
	if ((*r)->type != REDIS_REPLY_ERROR || !s->t->password || strncasecmp((*r)->str, "NOAUTH", 6) != 0)
		return 0;
	freeReplyObject(*r);
	*r = NULL;
	if (s->t->user)
		auth[n++] = s->t->user;
	auth[n++] = s->t->password;
	if ((rc = ask(io, n, auth, &a)) < 0)
		return rc;
	freeReplyObject(a);
	return ask(io, 3, q, r);
}

/* Takes the master's address out of the sentinel's answer: 0, or -ENOENT with why. */
static int parse_master(struct redis_sentinel *s, const redisReply *r, const char *who, char *host, size_t hostlen,
			int *port)
{
	if (r->type == REDIS_REPLY_ERROR)
		return value_fail(s->errstr, sizeof(s->errstr), -ENOENT, "sentinel %s answered: %s", who, r->str);
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[1]->type != REDIS_REPLY_STRING)
		return value_fail(s->errstr, sizeof(s->errstr), -ENOENT, "sentinel %s does not know a master named %s",
				  who, s->t->master_name);
	snprintf(host, hostlen, "%s", r->element[0]->str);
	*port = atoi(r->element[1]->str);
	return 0;
}

/* Keeps the connection that answered, subscribed to failover news. Without
 * it the relay still follows a failover, on READONLY or a lost connection. */
static void subscribe(struct redis_sentinel *s, struct redis_io *io)
{
	const char *sub[] = { "SUBSCRIBE", "+switch-master" };
	redisReply *r = NULL;

	redis_io_free(&s->sub);
	s->sub = *io;
	redis_io_init(io);
	if (redis_io_command(&s->sub, 2, sub, NULL, &r) == 0 && r->type != REDIS_REPLY_ARRAY)
		redis_io_close(&s->sub);
	freeReplyObject(r);
}

/* Asks sentinel i: 0 with the address, -EIO (unreachable) or -ENOENT (no answer). */
static int ask_one(struct redis_sentinel *s, size_t i, char *host, size_t hostlen, int *port, const char **blame)
{
	const struct redis_addr *a = &s->t->sentinels[i];
	struct redis_io io;
	redisReply *r = NULL;
	char who[300];
	int rc;

	redis_addr_describe(a->host, a->port, who, sizeof(who));
	redis_io_init(&io);
	if ((rc = redis_io_connect(&io, a->host, a->port, NULL, s->tls, s->timeout_ms)) == 0)
		rc = get_master(s, &io, &r);
	if (rc < 0) {
		value_fail(s->errstr, sizeof(s->errstr), rc, "could not ask sentinel %s: %s", who, io.err.errstr);
		*blame = io.err.blame;
	} else if ((rc = parse_master(s, r, who, host, hostlen, port)) == 0)
		subscribe(s, &io);
	freeReplyObject(r);
	redis_io_free(&io);
	return rc;
}

int redis_sentinel_master(struct redis_sentinel *s, char *host, size_t hostlen, int *port, const char **blame)
{
	int rc;

	*blame = NULL;
	if ((rc = make_order(s)) < 0)
		return rc;
	for (size_t k = 0; k < s->t->nsentinels; k++) {
		if (ask_one(s, s->order[k], host, hostlen, port, blame) == 0) {
			move(s, k, 0);
			return 0;
		}
	}
	return -EIO;
}

void redis_sentinel_distrust(struct redis_sentinel *s)
{
	if (!s->order || s->t->nsentinels < 2)
		return;
	move(s, 0, s->t->nsentinels - 1);
	/* It may have missed the failover news too. */
	redis_io_close(&s->sub);
}

/* "+switch-master" messages read "<name> <old-ip> <old-port> <new-ip> <new-port>". */
static bool names_ours(const struct redis_sentinel *s, const redisReply *m)
{
	size_t len = strlen(s->t->master_name);
	const redisReply *text;

	if (m->type != REDIS_REPLY_ARRAY || m->elements != 3 || m->element[2]->type != REDIS_REPLY_STRING)
		return false;
	text = m->element[2];
	return text->len > len && strncmp(text->str, s->t->master_name, len) == 0 && text->str[len] == ' ';
}

bool redis_sentinel_switched(struct redis_sentinel *s)
{
	redisReply *m = NULL;
	bool moved = false;

	while (redis_io_is_open(&s->sub) && redis_io_poll(&s->sub, &m) == 0 && m) {
		moved |= names_ours(s, m);
		freeReplyObject(m);
		m = NULL;
	}
	return moved;
}
