/* The files settings name (--*-file, --route-file): read whole, checked, never quoted. */
#ifndef STAGEDRAIN_CONFIG_FILES_H
#define STAGEDRAIN_CONFIG_FILES_H

#include <stddef.h>

#include "fmacros.h"

/* Reads a file whole into *out (the caller frees it), *n bytes of it and a
 * NUL after them; max bytes at most, shown as max_text when it is more:
 * 0, -ENOMEM, or -EINVAL with the cause in why (nothing of the contents). */
int config_read_whole(const char *path, size_t max, const char *max_text, char **out, size_t *n, char *why,
		      size_t len) SD_MUSTCHECK;
/* Reads a *-file setting's file into *out (the caller frees it): one line,
 * at most 64k, its trailing newline dropped. As config_read_whole. */
int config_read_secret(const char *path, char **out, char *why, size_t len) SD_MUSTCHECK;

#endif
