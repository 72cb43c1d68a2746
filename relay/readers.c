/* Where a format's workers register in Redis, and whether that is where the target pushes. */
#include "fmacros.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "readers.h"
#include "sidekiq_probe.h"

/* A few SCAN rounds bound the look in a big keyspace: registrations are
 * few, and a worker that registers is a worker a look like this one finds
 * in any database of the sizes outboxes feed. */
#define SCAN_ROUNDS 10
#define SCAN_COUNT "1000"
#define KOMBU_BINDINGS "_kombu.binding.*"

/* The set a format's workers register in, under its prefix (Celery: none; kombu's bindings). */
static const char *registry_of(enum job_format f)
{
	if (f == FORMAT_SIDEKIQ || f == FORMAT_ACTIVEJOB)
		return "processes";
	return f == FORMAT_RESQUE ? "workers" : NULL;
}

static const char *what_of(enum job_format f)
{
	if (f == FORMAT_SIDEKIQ || f == FORMAT_ACTIVEJOB)
		return "Sidekiq processes";
	return f == FORMAT_RESQUE ? "Resque workers" : "Celery workers";
}

static int command(struct redis_conn *c, redisReply **r, int argc, const char **argv)
{
	return redis_conn_command(c, argc, argv, NULL, r);
}

/*
 * The first key matching pattern, other than skip, within SCAN_ROUNDS rounds
 * (type set: the registries are sets). *found false when none.
 */
static int scan_for(struct redis_conn *c, const char *pattern, const char *skip, char *out, size_t len, bool *found)
{
	char cursor[32] = "0";
	int rc = 0;

	*found = false;
	for (int round = 0; rc == 0 && !*found && round < SCAN_ROUNDS; round++) {
		const char *argv[] = { "SCAN", cursor, "MATCH", pattern, "COUNT", SCAN_COUNT, "TYPE", "set" };
		redisReply *r = NULL;
		if ((rc = command(c, &r, 8, argv)) < 0)
			break;
		if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->type == REDIS_REPLY_STRING) {
			snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
			for (size_t i = 0; !*found && i < r->element[1]->elements; i++) {
				const char *k = r->element[1]->element[i]->str;
				if (k && (!skip || strcmp(k, skip) != 0)) {
					snprintf(out, len, "%s", k);
					*found = true;
				}
			}
		} else {
			snprintf(cursor, sizeof(cursor), "0");
		}
		freeReplyObject(r);
		if (strcmp(cursor, "0") == 0)
			break;
	}
	return rc;
}

/* Whether the format's workers register under prefix in the selected database. */
static int registered(struct redis_conn *c, enum job_format f, const char *prefix, bool *yes)
{
	const char *reg = registry_of(f);
	char set[512], first[512];
	const char *argv[] = { "SCARD", set };
	redisReply *r = NULL;
	size_t live = 0;
	int rc;

	if (!reg)
		return scan_for(c, KOMBU_BINDINGS, NULL, first, sizeof(first), yes);
	if (f != FORMAT_RESQUE) {
		rc = sidekiq_probe_live(c, prefix, &live);
		*yes = rc == 0 && live > 0;
		return rc == -EINVAL ? -EIO : rc;
	}
	snprintf(set, sizeof(set), "%s%s", prefix, reg);
	rc = command(c, &r, 2, argv);
	*yes = rc == 0 && r->type == REDIS_REPLY_INTEGER && r->integer > 0;
	freeReplyObject(r);
	return rc;
}

/* Another prefix in this database whose registry has live workers. */
static int other_prefix(struct redis_conn *c, enum job_format f, const char *prefix, struct readers *out)
{
	const char *reg = registry_of(f);
	char pattern[64], ours[512], key[512];
	bool found = false, live = false;
	int rc;

	snprintf(pattern, sizeof(pattern), "*%s", reg);
	snprintf(ours, sizeof(ours), "%s%s", prefix, reg);
	if ((rc = scan_for(c, pattern, ours, key, sizeof(key), &found)) < 0 || !found)
		return rc;
	key[strlen(key) - strlen(reg)] = '\0';
	if ((rc = registered(c, f, key, &live)) == 0 && live) {
		out->verdict = READERS_ELSEWHERE;
		if (*key)
			snprintf(out->where, sizeof(out->where), "namespace \"%.100s\"", key);
		else
			snprintf(out->where, sizeof(out->where), "no namespace");
	}
	return rc;
}

/* The other databases that hold keys (INFO keyspace), each looked in under
 * the same prefix; then the target's database again. */
static int other_db(struct redis_conn *c, const struct config *cfg, struct readers *out)
{
	const char *argv[] = { "INFO", "keyspace" };
	redisReply *r = NULL;
	int rc = command(c, &r, 2, argv), db;

	for (const char *p = rc == 0 && r->type == REDIS_REPLY_STRING ? r->str : NULL; rc == 0 && p && *p;
	     p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		bool live = false;
		if (sscanf(p, "db%d:", &db) != 1 || db == cfg->redis.db)
			continue;
		if ((rc = redis_conn_select(c, db)) == 0 &&
		    (rc = registered(c, cfg->format, cfg->key_prefix, &live)) == 0 && live) {
			out->verdict = READERS_ELSEWHERE;
			snprintf(out->where, sizeof(out->where), "database %d", db);
			break;
		}
	}
	freeReplyObject(r);
	if (rc == 0)
		rc = redis_conn_select(c, cfg->redis.db);
	if (rc < 0) /* maybe on another database: the next connect selects the target's */
		redis_conn_close(c);
	return rc;
}

int readers_read(struct redis_conn *c, const struct config *cfg, struct readers *out)
{
	bool here = false;
	int rc;

	*out = (struct readers){ .verdict = READERS_UNKNOWN };
	/* Laravel's and BullMQ's workers register nowhere the relay reads. */
	if (cfg->format == FORMAT_LARAVEL || cfg->format == FORMAT_BULLMQ)
		return 0;
	if ((rc = registered(c, cfg->format, cfg->key_prefix, &here)) < 0)
		return rc;
	out->verdict = here ? READERS_HERE : READERS_NONE;
	if (!here && registry_of(cfg->format))
		rc = other_prefix(c, cfg->format, cfg->key_prefix, out);
	if (rc == 0 && out->verdict == READERS_NONE)
		rc = other_db(c, cfg, out);
	return rc;
}

void readers_say(const struct readers *r, const struct config *cfg, char *out, size_t len)
{
	char ours[160];

	if (registry_of(cfg->format) && *cfg->key_prefix)
		snprintf(ours, sizeof(ours), "namespace \"%.100s\", database %d", cfg->key_prefix, cfg->redis.db);
	else
		snprintf(ours, sizeof(ours), "%sdatabase %d", registry_of(cfg->format) ? "no namespace, " : "",
			 cfg->redis.db);
	snprintf(out, len,
		 "%s run under %s, none where this relay pushes (%s): its jobs wait there unread; set %s to the "
		 "workers'",
		 what_of(cfg->format), r->where, ours,
		 registry_of(cfg->format) ? "--namespace or --redis-url's database" : "--redis-url's database");
}
