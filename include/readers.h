/* Whether a target's workers read where it pushes, from what they register in Redis. */
#ifndef STAGEDRAIN_READERS_H
#define STAGEDRAIN_READERS_H

#include <stddef.h>

#include "config.h"
#include "fmacros.h"
#include "redis_conn.h"

enum readers_verdict {
	READERS_UNKNOWN = 0, /* the format's workers register nothing (Laravel: its rows say, format_laravel.c) */
	READERS_HERE,        /* some register under the target's prefix, in its database */
	READERS_NONE,        /* none registered anywhere: none runs now, which is not a fault */
	READERS_ELSEWHERE,   /* none here, but some under another prefix or database */
};

struct readers {
	enum readers_verdict verdict;
	char where[160]; /* READERS_ELSEWHERE: `namespace "shop:"` or `database 1` */
};

/*
 * What Redis shows of the workers of cfg's format, over c (connected to the
 * target's Redis, its database selected): Sidekiq's processes set and Resque's
 * workers set under the target's prefix (and, if empty, under any other
 * prefix in the database or the same prefix in another database), Celery's
 * queue bindings (kombu's _kombu.binding.*) in the database or another.
 * Bounded: a few SCAN rounds per database. c is left on its database (on a
 * fault, closed). 0, or -EIO with c->errstr.
 */
int readers_read(struct redis_conn *c, const struct config *cfg, struct readers *out) SD_MUSTCHECK;
/* One sentence: where the workers are, where the target pushes, and the flag to set. */
void readers_say(const struct readers *r, const struct config *cfg, char *out, size_t len);

#endif
