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

static const char *timestamps_of(int version)
{
	return version >= 8 ? "integer_milliseconds" : "float_seconds";
}

void sidekiq_probe_init(struct sidekiq_probe *p, const struct config *cfg)
{
	bool fixed = cfg->sidekiq_version != SIDEKIQ_VERSION_AUTO;

	memset(p, 0, sizeof(*p));
	p->cfg = cfg;
	p->version = fixed ? cfg->sidekiq_version : SAFE_VERSION;
	p->seen.timestamps = timestamps_of(p->version);
	p->seen.source = fixed ? "configured" : "read";
	if (fixed)
		snprintf(p->seen.version, sizeof(p->seen.version), "%d", p->version);
}

/* Whether version a is below b, compared part by part as numbers ("7.9.1" <
 * "7.10.0"); text after the numbers is ignored. */
static bool version_below(const char *a, const char *b)
{
	while (*a || *b) {
		char *ea, *eb;
		long x = strtol(a, &ea, 10), y = strtol(b, &eb, 10);

		if (x != y)
			return x < y;
		if (*ea != '.' || *eb != '.')
			return false;
		a = ea + 1;
		b = eb + 1;
	}
	return false;
}

/* The version an info JSON names, into out (printable ASCII, at most its
 * size); "6" when it names none, as 6.x writes none. Returns its major. */
static int info_version(const char *text, size_t len, char *out, size_t outlen)
{
	json_t *info = json_loadb(text, len, 0, NULL);
	const char *v = json_string_value(json_object_get(info, "version"));
	int major = v ? atoi(v) : 6;
	size_t n = 0;

	for (const char *s = v ? v : "6"; *s && n + 1 < outlen; s++)
		out[n++] = *s > ' ' && *s < 0x7f ? *s : '?';
	out[n] = '\0';
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
 * Reads the registry: *live processes, *all8 when every one is 8.x or later,
 * lowest the lowest version of a live one ("" when none is alive).
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
static int read_registry(struct redis_conn *c, const char *prefix, size_t *live, bool *all8, char *lowest, char *errstr,
			 size_t errlen)
{
	char version[sizeof(((struct sidekiq_seen *)0)->version)];
	redisReply *members = NULL, *r;
	struct buf key;
	size_t asked = 0;
	char smembers_key[300];
	const char *argv[2] = { "SMEMBERS", smembers_key };
	int rc;

	snprintf(smembers_key, sizeof(smembers_key), "%sprocesses", prefix);
	*live = 0;
	*all8 = true;
	lowest[0] = '\0';
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
			*all8 = info_version(r->str, r->len, version, sizeof(version)) >= 8 && *all8;
			if (!lowest[0] || version_below(version, lowest))
				memcpy(lowest, version, sizeof(version));
		}
		freeReplyObject(r);
	}
	freeReplyObject(members);
	buf_free(&key);
	return rc;
}

int sidekiq_probe_live(struct redis_conn *c, const char *prefix, size_t *live)
{
	char lowest[sizeof(((struct sidekiq_seen *)0)->version)], errstr[256];
	bool all8;

	return read_registry(c, prefix, live, &all8, lowest, errstr, sizeof(errstr));
}

/* The first reading, and every change of what is written or read, logged. */
static void log_reading(const struct sidekiq_probe *p, const char *was_version, int was)
{
	if (!p->read_once)
		log_info("sidekiq version read", LOGF(F_INT("processes", p->live), F_STR("version", p->seen.version),
						      F_STR("timestamps", p->seen.timestamps)));
	else if (p->version != was || strcmp(was_version, p->seen.version) != 0)
		log_info("sidekiq version changed",
			 LOGF(F_INT("processes", p->live), F_STR("version", p->seen.version),
			      F_STR("timestamps", p->seen.timestamps), F_STR("was", was_version),
			      F_STR("timestamps_were", timestamps_of(was))));
}

int sidekiq_probe_version(struct sidekiq_probe *p, struct redis_conn *c, long long now_ms)
{
	enum job_format f = p->cfg->format;
	char was_version[sizeof(p->seen.version)];
	size_t live;
	bool all8;
	int was = p->version, rc;

	if (p->cfg->sidekiq_version != SIDEKIQ_VERSION_AUTO || (f != FORMAT_SIDEKIQ && f != FORMAT_ACTIVEJOB))
		return p->version;
	if (now_ms < p->next_ms || !redis_conn_connected(c))
		return p->version;
	p->next_ms = now_ms + p->cfg->watch_interval_ms;
	memcpy(was_version, p->seen.version, sizeof(was_version));
	if ((rc = read_registry(c, p->cfg->key_prefix, &live, &all8, p->seen.version, p->errstr, sizeof(p->errstr))) <
	    0) {
		memcpy(p->seen.version, was_version, sizeof(was_version));
		if (!p->failing)
			log_warn("could not read the sidekiq processes; jobs are written for the version last read",
				 LOGF(F_STR("error", rc == -EIO ? c->errstr : p->errstr),
				      F_STR("version", p->seen.version), F_STR("timestamps", p->seen.timestamps)));
		p->failing = true;
		return p->version;
	}
	if (p->failing)
		log_info("the sidekiq processes are read again", NULL);
	p->failing = false;
	p->version = live > 0 && all8 ? 8 : SAFE_VERSION;
	p->seen.timestamps = timestamps_of(p->version);
	p->live = live;
	log_reading(p, was_version, was);
	p->read_once = true;
	return p->version;
}
