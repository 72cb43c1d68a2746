/* The relay's settings (struct config, settings.h), loaded from flags, environment and files. */
#ifndef STAGEDRAIN_CONFIG_H
#define STAGEDRAIN_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "fmacros.h"
#include "settings.h"

#define CONFIG_ERR_SIZE 512

/*
 * Fills cfg from argv, then STAGEDRAIN_* variables, then DATABASE_URL and
 * REDIS_URL, then defaults; the *-file settings are read here, once. On error
 * returns -EINVAL with one line in err naming the flag, its variable (or
 * file) and the cause, never a password or a secret file's contents; cfg is
 * then freed.
 */
int config_load(struct config *cfg, int argc, char **argv, char *err, size_t errlen) SD_MUSTCHECK;
void config_free(struct config *cfg);

/*
 * A route's config (routes.h): a copy of base owning all its strings, with
 * the route's words ("--SETTING VALUE" or "--SETTING=VALUE") applied as
 * config_load applies flags, and route_name set to name. Only the settings
 * the table lets a route give are taken, and --redis-url is required; the
 * Redis settings it does not give are their defaults, so are the format's
 * when it gives --format, and the rest are base's. On error returns -EINVAL
 * with the cause in why (never a password), and route is then freed.
 */
int config_route(struct config *route, const struct config *base, const char *name, char **words, int nwords, char *why,
		 size_t len) SD_MUSTCHECK;

#endif
