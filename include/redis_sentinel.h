/* Redis Sentinel: which server is the master now, and word when that changes. */
#ifndef STAGEDRAIN_REDIS_SENTINEL_H
#define STAGEDRAIN_REDIS_SENTINEL_H

#include <stdbool.h>
#include <stddef.h>

#include "fmacros.h"
#include "redis_io.h"
#include "redis_url.h"

struct redis_sentinel {
	const struct redis_target *t;
	const struct redis_tls *tls; /* NULL: plain */
	int timeout_ms;
	size_t *order;       /* the sentinels' indices, in the order they are asked */
	struct redis_io sub; /* subscribed to +switch-master on that sentinel */
	char errstr[256];
};

void redis_sentinel_init(struct redis_sentinel *s, const struct redis_target *t, const struct redis_tls *tls,
			 int timeout_ms);
/* Asks the sentinels in list order for t->master_name's address; the first
 * that knows it moves to the front of the list, and failover news is
 * subscribed to on it. -EIO with errstr (and blame, for a TLS fault) when
 * none does; -ENOMEM. */
int redis_sentinel_master(struct redis_sentinel *s, char *host, size_t hostlen, int *port,
			  const char **blame) SD_MUSTCHECK;
/* The address the front sentinel gave did not work (unreachable, or ROLE
 * says not a master): that sentinel moves to the back of the list, so the
 * next question goes to the others first. */
void redis_sentinel_distrust(struct redis_sentinel *s);
/* True once a +switch-master for our master has arrived; never waits. */
bool redis_sentinel_switched(struct redis_sentinel *s);
void redis_sentinel_free(struct redis_sentinel *s);

#endif
