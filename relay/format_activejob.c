/* ActiveJob through Sidekiq: Rails' SidekiqAdapter JobWrapper hash around ActiveJob's serialized job; Sidekiq's keys. */
#include "fmacros.h"

#include "format.h"

/* Not written yet: every row is dead-lettered with this reason. */
static int activejob_payload(const struct job_in *in, const struct job_opts *opts, struct buf *out, char *reason,
			     size_t rlen)
{
	(void)in;
	(void)opts;
	(void)out;
	payload_reason(reason, rlen, "the activejob format is not built yet");
	return JOB_REJECT;
}

const struct format format_activejob = {
	.name = "activejob",
	.payload = activejob_payload,
	.commands = sidekiq_commands,
};
