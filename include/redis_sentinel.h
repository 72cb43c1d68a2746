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
	size_t first;        /* the sentinel that answered last is asked first next time */
	struct redis_io sub; /* subscribed to +switch-master on that sentinel */
	char errstr[256];
};

void redis_sentinel_init(struct redis_sentinel *s, const struct redis_target *t, const struct redis_tls *tls,
			 int timeout_ms);
/* Asks the sentinels in turn for t->master_name's address and subscribes to
 * failover news on the first that knows it. -EIO with errstr (and blame, for
 * a TLS fault) when none does. */
int redis_sentinel_master(struct redis_sentinel *s, char *host, size_t hostlen, int *port,
			  const char **blame) SD_MUSTCHECK;
/* True once a +switch-master for our master has arrived; never waits. */
bool redis_sentinel_switched(struct redis_sentinel *s);
void redis_sentinel_free(struct redis_sentinel *s);

#endif
