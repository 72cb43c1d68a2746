/*
 * Routes: which target (one Redis and one job format) each staged row goes to
 * (--route, STAGEDRAIN_ROUTE, --route-file). Target 0 is the default one,
 * --redis-url with --format; every other target is one route's. A row's
 * `route` column, when set, names its target; otherwise the first rule whose
 * queue pattern matches the row's queue does; otherwise the default.
 *
 * A route, one per --route value, per line or ';'-separated piece of
 * STAGEDRAIN_ROUTE (routes_piece_len), or per line of the file; words separated by whitespace,
 * no quoting:
 *
 *   NAME QUEUES [--SETTING VALUE | --SETTING=VALUE ...]
 *
 * NAME: letters, digits, '_', '-' and '.', at most 64, not starting with '-',
 * unique, not "default". QUEUES: comma-separated queue names or fnmatch
 * globs (a pattern with *, ? or [), or "-" for a route rows reach only by
 * their route column; a pattern no queue could reach (given twice, or taken
 * by an earlier one) is an error. SETTINGS: the Redis and format settings of
 * the relay's own flags, parsed as they are (--redis-url, which every route
 * needs, --redis-password-file, --redis-tls-*, --redis-wait-replicas,
 * --redis-wait-timeout, --max-redis-memory, --format, --namespace,
 * --sidekiq-version, --rails-version, --laravel-prefix; settings.h's .route).
 * A route without --format inherits the default target's format and its
 * settings; one with --format starts that format's settings from their
 * defaults. Redis settings are never inherited (another server), except
 * --redis-timeout, which is the relay's as every other setting is.
 */
#ifndef STAGEDRAIN_ROUTES_H
#define STAGEDRAIN_ROUTES_H

#include <stdbool.h>
#include <stddef.h>

#include "fmacros.h"

struct config;

/* One queue pattern of a route, in the order given: the first match wins. */
struct route_rule {
	char *pattern;
	size_t len;
	bool glob;     /* has *, ? or [: matched with fnmatch */
	size_t target; /* index into routes.t */
};

struct route_target {
	char *name;         /* "default" for target 0 */
	struct config *cfg; /* target 0: the relay's own config; others: owned, whole */
};

struct routes {
	struct route_target *t; /* t[0] is the default target */
	size_t n;
	struct route_rule *rules;
	size_t nrules;
};

/* The default target alone, cfg's: 0 or -ENOMEM. config_load does it. */
int routes_init(struct routes *r, struct config *cfg) SD_MUSTCHECK;
/* Frees the routes' names and rules (their configs are config_free's). */
void routes_free(struct routes *r);

/* One route's text, parsed: its words (into copy) and its rules. */
struct route_text {
	char *copy;
	char **w; /* w[0] its name, w[1] its queues, then its settings' words (config_route takes them) */
	int n;
	struct route_rule *rules;
	size_t nrules;
};

/* Parses one route (the syntax above) against r's names: 0, or -EINVAL with
 * the cause in why (never a password), or -ENOMEM. route_text_free it
 * either way. */
int routes_parse(const struct routes *r, const char *text, struct route_text *rt, char *why, size_t len) SD_MUSTCHECK;
/* Adds rt's target, whose config is cfg (its loader's to free), and its
 * rules after the others, which are r's then: 0, or -ENOMEM with r unchanged. */
int routes_add(struct routes *r, struct route_text *rt, struct config *cfg) SD_MUSTCHECK;
void route_text_free(struct route_text *rt);
/*
 * The length of the first route in text, which holds routes as
 * STAGEDRAIN_ROUTE does: up to the first newline, or the first ';' that is
 * no password's. A ';' in a URL's user or password (an '@' follows it in its
 * word) or in a password= value (before its next '&') is the password's.
 */
size_t routes_piece_len(const char *text);

/* No target: the row's route column names none (routes_find). */
#define ROUTES_NONE ((size_t)-1)

/*
 * The target of a row: the one its route column names (route non-NULL,
 * rlen bytes; ROUTES_NONE when no route has that name), else the first rule
 * matching queue, else 0. Pure; cheap enough to call per row.
 */
size_t routes_find(const struct routes *r, const char *queue, size_t qlen, const char *route, size_t rlen);

#endif
