/* What a Redis server's own settings say about the relay's promises: an
 * eviction policy that may drop the relay's keys and the workers' jobs. */
#ifndef STAGEDRAIN_REDIS_POLICY_H
#define STAGEDRAIN_REDIS_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include "fmacros.h"
#include "redis_conn.h"

/* The server's maxmemory-policy into policy ("" if it has none to say).
 * -EPERM when the server refuses CONFIG GET (a managed Redis may: c->errstr
 * says how), -EIO when the connection failed (and is closed). */
int redis_policy_read(struct redis_conn *c, char *policy, size_t len) SD_MUSTCHECK;
/* True for a policy that may evict any key (allkeys-*). The volatile-*
 * policies evict only keys with a TTL, and neither the relay's keys nor the
 * workers' queues carry one, so under memory pressure they refuse writes as
 * noeviction does. */
bool redis_policy_evicts(const char *policy);

#endif
