/* The Redis server's eviction policy, read at connect (redis_policy.h). */
#include "fmacros.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "redis_policy.h"

int redis_policy_read(struct redis_conn *c, char *policy, size_t len)
{
	const char *argv[] = { "CONFIG", "GET", "maxmemory-policy" };
	redisReply *r = NULL;
	int rc = 0;

	policy[0] = '\0';
	if (redis_conn_append(c, 3, argv, NULL) < 0 || redis_conn_reply(c, &r, 0) < 0)
		return -EIO;
	if (r->type == REDIS_REPLY_ERROR) {
		snprintf(c->errstr, sizeof(c->errstr), "%s", r->str);
		rc = -EPERM;
	} else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->type == REDIS_REPLY_STRING) {
		snprintf(policy, len, "%s", r->element[1]->str);
	}
	freeReplyObject(r);
	return rc;
}

bool redis_policy_evicts(const char *policy)
{
	return strncmp(policy, "allkeys-", strlen("allkeys-")) == 0;
}
