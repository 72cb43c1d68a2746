/* `stagedrain status`'s targets: the default Redis, each route's, and any a held row names; their lists read. */
#ifndef STAGEDRAIN_STATUS_TARGETS_H
#define STAGEDRAIN_STATUS_TARGETS_H

#include <stddef.h>

#include "config.h"
#include "fmacros.h"
#include "status.h"

/* Adds the configured targets to s in routes' order (s->targets[i] is
 * cfg->routes.t[i]): 0, or -ENOMEM. */
int status_targets_init(struct status *s, const struct config *cfg) SD_MUSTCHECK;
/* The target a staged row of queue goes to by the rules (its index in s->targets). */
size_t status_targets_of(const struct config *cfg, const char *queue);
/* The target a held row waits for, by the held table's name (NULL: the
 * default), added unconfigured when no route has that name now: its index,
 * or -ENOMEM. */
int status_targets_held(struct status *s, const char *name) SD_MUSTCHECK;
/* Connects to each configured target's Redis: the default's epoch, and the
 * length of each shown queue's lists on its own target, in its format. A
 * target that does not answer is noted (reached false, err), never fatal:
 * 0, or -ENOMEM. */
int status_targets_read_redis(struct status *s, const struct config *cfg) SD_MUSTCHECK;

#endif
