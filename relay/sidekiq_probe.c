/* Reads Sidekiq's process registry: SMEMBERS processes, then each process's
 * info hash field (its key expires a minute after the process's last
 * heartbeat, so a missing one is a dead process). */
#include "fmacros.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "buf.h"
#include "log.h"
#include "sidekiq_probe.h"

/* What "unknown" writes: floats, which Sidekiq 6, 7 and 8 all read. */
#define SAFE_VERSION 7

void sidekiq_probe_init(struct sidekiq_probe *p, const struct config *cfg)
{
	memset(p, 0, sizeof(*p));
	p->cfg = cfg;
	p->version = cfg->sidekiq_version == SIDEKIQ_VERSION_AUTO ? SAFE_VERSION : cfg->sidekiq_version;
}

/* The major version an info JSON names; 6 when it names none (6.x). */
static int info_major(const char *text, size_t len)
{
	json_t *info = json_loadb(text, len, 0, NULL);
	const char *v = json_string_value(json_object_get(info, "version"));
	int major = v ? atoi(v) : 6;

	json_decref(info);
	return major;
}

/* HGET <prefix><identity> info for each member, pipelined. */
static int ask_infos(struct redis_conn *c, const char *prefix, const redisReply *members, struct buf *key)
{
	const char *argv[3] = { "HGET", NULL, "info" };
	size_t argvlen[3] = { 4, 0, 4 };
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < members->elements && i < SIDEKIQ_PROBE_MAX; i++) {
		const redisReply *m = members->element[i];
		buf_reset(key);
		if (m->type != REDIS_REPLY_STRING)
			continue;
		if ((rc = buf_printf(key, "%s%.*s", prefix, (int)m->len, m->str)) < 0)
			break;
		argv[1] = key->data;
		argvlen[1] = key->len;
		rc = redis_conn_append(c, 3, argv, argvlen);
	}
	return rc;
}

/*
 * Reads the registry: *live processes, *all8 when every one is 8.x or later.
 * -EINVAL (errstr) when Redis answered an error, -EIO on a transport fault.
 *
 * It reads on the drain's connection, and every reply a reading asks for is
 * read before it returns (SMEMBERS alone, then one reply per HGET sent), so
 * the connection is in step whatever Redis answered: an error reply (a
 * processes key of another type, NOPERM) fails only the reading, never the
 * connection the batch then pushes on. A transport fault closes it in
 * redis_conn_reply, as the push would. A connection of its own would double
 * the relay's connections and handshakes (sentinels, TLS, AUTH) for a reading
 * taken once per --watch-interval.
 */
static int read_registry(struct redis_conn *c, const char *prefix, size_t *live, bool *all8, char *errstr,
			 size_t errlen)
{
	redisReply *members = NULL, *r;
	struct buf key;
	size_t asked = 0;
	char smembers_key[300];
	const char *argv[2] = { "SMEMBERS", smembers_key };
	int rc;

	snprintf(smembers_key, sizeof(smembers_key), "%sprocesses", prefix);
	*live = 0;
	*all8 = true;
	buf_init(&key);
	rc = redis_conn_append(c, 2, argv, NULL);
	if (rc == 0)
		rc = redis_conn_reply(c, &members, 0);
	if (rc == 0 && members->type == REDIS_REPLY_ERROR) {
		snprintf(errstr, errlen, "SMEMBERS %.40s: %.200s", smembers_key, members->str);
		rc = -EINVAL;
	}
	if (rc == 0 && members->type == REDIS_REPLY_ARRAY) {
		rc = ask_infos(c, prefix, members, &key);
		for (size_t i = 0; i < members->elements && i < SIDEKIQ_PROBE_MAX; i++)
			asked += members->element[i]->type == REDIS_REPLY_STRING;
	}
	for (size_t i = 0; rc == 0 && i < asked; i++) {
		if ((rc = redis_conn_reply(c, &r, 0)) < 0)
			break;
		if (r->type == REDIS_REPLY_STRING) {
			(*live)++;
			*all8 = *all8 && info_major(r->str, r->len) >= 8;
		}
		freeReplyObject(r);
	}
	freeReplyObject(members);
	buf_free(&key);
	return rc;
}

int sidekiq_probe_version(struct sidekiq_probe *p, struct redis_conn *c, long long now_ms)
{
	enum job_format f = p->cfg->format;
	size_t live;
	bool all8;
	int was = p->version, rc;

	if (p->cfg->sidekiq_version != SIDEKIQ_VERSION_AUTO || (f != FORMAT_SIDEKIQ && f != FORMAT_ACTIVEJOB))
		return p->version;
	if (now_ms < p->next_ms || !redis_conn_connected(c))
		return p->version;
	p->next_ms = now_ms + p->cfg->watch_interval_ms;
	if ((rc = read_registry(c, p->cfg->key_prefix, &live, &all8, p->errstr, sizeof(p->errstr))) < 0) {
		if (!p->failing)
			log_warn("could not read the sidekiq processes; jobs are written for the version last read",
				 LOGF(F_STR("error", rc == -EIO ? c->errstr : p->errstr),
				      F_INT("version", p->version)));
		p->failing = true;
		return p->version;
	}
	if (p->failing)
		log_info("the sidekiq processes are read again", NULL);
	p->failing = false;
	p->version = live > 0 && all8 ? 8 : SAFE_VERSION;
	if (!p->read_once || p->version != was)
		log_info(p->read_once ? "sidekiq version changed" : "sidekiq version read",
			 LOGF(F_INT("processes", live), F_INT("from", was), F_INT("to", p->version),
			      F_STR("timestamps", p->version >= 8 ? "integer milliseconds" : "float seconds")));
	p->read_once = true;
	p->live = live;
	return p->version;
}
