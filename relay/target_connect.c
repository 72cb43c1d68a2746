/* Connecting a target's Redis off the relay's loop (see include/target.h):
 * a Redis that hangs instead of refusing (a frozen server, a black-holed
 * route) costs a connection attempt up to --redis-timeout, which the other
 * targets must not wait out. */
#include "fmacros.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "target.h"

static void *connect_main(void *arg)
{
	struct target *t = arg;

	t->connector.rc = redis_sink_connect(&t->redis);
	atomic_store(&t->connector.state, TARGET_CONNECT_DONE);
	return NULL;
}

int target_connect_start(struct target *t)
{
	int rc;

	atomic_store(&t->connector.state, TARGET_CONNECTING);
	if ((rc = pthread_create(&t->connector.thread, NULL, connect_main, t)) != 0) {
		atomic_store(&t->connector.state, TARGET_CONNECT_IDLE);
		return -rc;
	}
	return 0;
}

bool target_connecting(const struct target *t)
{
	return atomic_load(&t->connector.state) != TARGET_CONNECT_IDLE;
}

bool target_connect_done(struct target *t, int *rc)
{
	if (atomic_load(&t->connector.state) != TARGET_CONNECT_DONE)
		return false;
	pthread_join(t->connector.thread, NULL);
	atomic_store(&t->connector.state, TARGET_CONNECT_IDLE);
	*rc = t->connector.rc;
	return true;
}

void target_connect_wait(struct target *t)
{
	int rc;

	if (!target_connecting(t))
		return;
	pthread_join(t->connector.thread, NULL);
	atomic_store(&t->connector.state, TARGET_CONNECT_DONE);
	(void)target_connect_done(t, &rc);
}
