/* The formats by name, and the per-row ActiveJob switch. */
#include "fmacros.h"

#include "formats.h"

const struct format *format_of(enum job_format f)
{
	switch (f) {
	case FORMAT_SIDEKIQ:
		return &format_sidekiq;
	case FORMAT_RESQUE:
		return &format_resque;
	case FORMAT_ACTIVEJOB:
		return &format_activejob;
	case FORMAT_CELERY:
		return &format_celery;
	case FORMAT_LARAVEL:
		return &format_laravel;
	case FORMAT_BULLMQ:
		return &format_bullmq;
	}
	return &format_sidekiq;
}

int format_of_row(enum job_format f, struct span options, const struct format **out, char *reason, size_t rlen)
{
	bool sidekiq_layout = f == FORMAT_SIDEKIQ || f == FORMAT_ACTIVEJOB;
	struct span aj;
	int rc;

	*out = format_of(f);
	if ((rc = payload_member(options, "activejob", &aj)) < 0 || aj.n == 0)
		return rc;
	if (!sidekiq_layout) {
		payload_reason(reason, rlen, "options key \"activejob\" needs --format sidekiq or activejob, not %s",
			       (*out)->name);
		return JOB_REJECT;
	}
	if (payload_kind(aj) != PAYLOAD_BOOLEAN) {
		payload_reason(reason, rlen, "options key \"activejob\" is not true or false");
		return JOB_REJECT;
	}
	*out = aj.p[0] == 't' ? &format_activejob : &format_sidekiq;
	return 0;
}
