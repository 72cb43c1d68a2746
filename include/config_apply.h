/* One setting's text into its field of the config (config_load's last step for each setting). */
#ifndef STAGEDRAIN_CONFIG_APPLY_H
#define STAGEDRAIN_CONFIG_APPLY_H

#include <stddef.h>

#include "fmacros.h"
#include "settings.h"

/*
 * Converts raw, the text chosen for s (NULL: unset, for the settings that
 * have no default), and stores it in cfg: 0, -ENOMEM, or -EINVAL with the
 * cause in why, which never quotes a URL or any piece of it. A V_FILE or
 * V_ROUTE setting is not stored here (config.c reads them).
 */
int config_apply_value(struct config *cfg, const struct setting *s, const char *raw, char *why,
		       size_t len) SD_MUSTCHECK;

/* A redis-cluster:// url with what a cluster target cannot do: its
 * format's workers cannot read a cluster, or a cap or memory bound (which
 * read one list or one INFO). 0 or -EINVAL with why. */
int config_check_cluster(const struct config *cfg, char *why, size_t len) SD_MUSTCHECK;

#endif
