/* Celery: a protocol 2 task message in kombu's Redis transport envelope, LPUSHed to the queue. */
#include "fmacros.h"

#include "format.h"

/* Not written yet: every row is dead-lettered with this reason. */
static int celery_payload(const struct job_in *in, const struct job_opts *opts, struct buf *out, char *reason,
			  size_t rlen)
{
	(void)in;
	(void)opts;
	(void)out;
	payload_reason(reason, rlen, "the celery format is not built yet");
	return JOB_REJECT;
}

static int celery_commands(struct redis_cmds *c, const struct batch *b, const char *prefix)
{
	return format_push_queues(c, b, "LPUSH", prefix, "", true);
}

const struct format format_celery = {
	.name = "celery",
	.payload = celery_payload,
	.commands = celery_commands,
};
