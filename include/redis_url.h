/* Where Redis is: redis:// and unix:// URLs parsed into a target, and described for logs. */
#ifndef STAGEDRAIN_REDIS_URL_H
#define STAGEDRAIN_REDIS_URL_H

#include <stdbool.h>
#include <stddef.h>

#include "fmacros.h"

/* Where Redis is, parsed from redis://, or unix:// URLs. */
struct redis_target {
	bool is_unix;
	char *host; /* tcp only */
	int port;   /* tcp only */
	char *path; /* unix only */
	int db;
	char *user;     /* NULL: no ACL user name */
	char *password; /* NULL: no AUTH */
};

/*
 * Parses a redis:// or unix:// URL; rediss:// is refused. On error returns
 * -EINVAL (or -ENOMEM) with one line in err that quotes no piece of the url,
 * which may hold a password; t is then freed.
 */
int redis_target_parse(struct redis_target *t, const char *url, char *err, size_t errlen) SD_MUSTCHECK;
/* The same, but password, when not NULL (e.g. from a secret file), replaces the url's. */
int redis_target_parse_with_password(struct redis_target *t, const char *url, const char *password, char *err,
				     size_t errlen) SD_MUSTCHECK;
void redis_target_free(struct redis_target *t);
/* Writes a printable address with no credentials, for logs. */
void redis_target_describe(const struct redis_target *t, char *out, size_t outlen);

#endif
