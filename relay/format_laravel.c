/* Laravel: the Redis queue's payload for a Class@method job, RPUSH queues:<q> and its notify list. */
#include "fmacros.h"

#include "format.h"

/* Not written yet: every row is dead-lettered with this reason. */
static int laravel_payload(const struct job_in *in, const struct job_opts *opts, struct buf *out, char *reason,
			   size_t rlen)
{
	(void)in;
	(void)opts;
	(void)out;
	payload_reason(reason, rlen, "the laravel format is not built yet");
	return JOB_REJECT;
}

static int laravel_commands(struct redis_cmds *c, const struct batch *b, const char *prefix)
{
	return format_push_queues(c, b, "LPUSH", prefix, "", true);
}

const struct format format_laravel = {
	.name = "laravel",
	.payload = laravel_payload,
	.commands = laravel_commands,
};
