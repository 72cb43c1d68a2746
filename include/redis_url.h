/* Where Redis is: redis://, rediss://, unix:// and Sentinel URLs parsed into a target, and described for logs. */
#ifndef STAGEDRAIN_REDIS_URL_H
#define STAGEDRAIN_REDIS_URL_H

#include <stdbool.h>
#include <stddef.h>

#include "fmacros.h"

/* One host and port: a Redis server or a sentinel. */
struct redis_addr {
	char *host;
	int port;
};

/* Where Redis is, parsed from redis://, rediss://, unix://, redis-sentinel://,
 * rediss-sentinel://, redis-cluster:// or rediss-cluster:// URLs. */
struct redis_target {
	bool is_unix;
	bool tls;   /* rediss:// or rediss-sentinel://: TLS to every server */
	char *host; /* tcp only */
	int port;   /* tcp only */
	char *path; /* unix only */
	/* Sentinel: master_name is not NULL, and the master is asked of these. */
	struct redis_addr *sentinels;
	size_t nsentinels;
	char *master_name;
	/* Cluster: cluster is true, and the slot map is asked of these (any nodes of it). */
	bool cluster;
	struct redis_addr *seeds;
	size_t nseeds;
	int db;
	char *user;     /* NULL: no ACL user name */
	char *password; /* NULL: no AUTH */
};

/*
 * Parses a Redis URL (the schemes above). On error returns
 * -EINVAL (or -ENOMEM) with one line in err that quotes no piece of the url,
 * which may hold a password; t is then freed.
 */
int redis_target_parse(struct redis_target *t, const char *url, char *err, size_t errlen) SD_MUSTCHECK;
/* The same, but password, when not NULL (e.g. from a secret file), replaces the url's. */
int redis_target_parse_with_password(struct redis_target *t, const char *url, const char *password, char *err,
				     size_t errlen) SD_MUSTCHECK;
void redis_target_free(struct redis_target *t);
/* Writes a printable address with no credentials, for logs: host:port/db,
 * unix:/path?db=N, sentinel:h1:p1,h2:p2/master/db, or cluster:h1:p1,h2:p2. */
void redis_target_describe(const struct redis_target *t, char *out, size_t outlen);
/* host:port, [v6]:port for an IPv6 address. */
void redis_addr_describe(const char *host, int port, char *out, size_t outlen);

#endif
