/* The formats by name, the per-row ActiveJob switch, and the queue pushes
 * the layouts share. */
#include "fmacros.h"

#include <string.h>

#include "format.h"

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

static bool same_queue(const struct batch_job *a, const struct batch_job *b)
{
	return a->queue_len == b->queue_len && memcmp(a->queue, b->queue, a->queue_len) == 0;
}

static bool takes(const struct batch_job *j, enum format_which which)
{
	return which == FORMAT_ALL || j->out.scheduled == (which == FORMAT_LATER);
}

/* True if job i is the first job of its queue that which takes. */
static bool first_of_queue(const struct batch *b, size_t i, enum format_which which)
{
	if (!takes(&b->jobs[i], which))
		return false;
	for (size_t k = 0; k < i; k++)
		if (takes(&b->jobs[k], which) && same_queue(&b->jobs[k], &b->jobs[i]))
			return false;
	return true;
}

int format_llen(struct redis_cmds *c, const char *prefix, const char *infix, const char *queue, size_t len)
{
	int rc = cmds_begin(c, "LLEN");

	return rc ? rc : cmds_fmt(c, "%s%s%.*s", prefix, infix, (int)len, queue);
}

int format_queue_list(struct redis_cmds *c, const char *prefix, const char *queue, size_t len)
{
	return format_llen(c, prefix, "queue:", queue, len);
}

int format_add_queue_set(struct redis_cmds *c, const struct batch *b, const char *prefix)
{
	bool any = false;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < b->njobs; i++) {
		if (!first_of_queue(b, i, FORMAT_NOW))
			continue;
		if (!any && ((rc = cmds_begin(c, "SADD")) < 0 || (rc = cmds_fmt(c, "%squeues", prefix)) < 0))
			return rc;
		any = true;
		if ((rc = cmds_room(c, 2)) == 0)
			rc = cmds_ref(c, b->jobs[i].queue, b->jobs[i].queue_len);
	}
	return rc;
}

int format_per_queue(struct redis_cmds *c, const struct batch *b, enum format_which which, const char *cmd,
		     const char *prefix, const char *infix, const char *suffix, format_add_fn add)
{
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < b->njobs; i++) {
		const struct batch_job *j = &b->jobs[i];
		if (!first_of_queue(b, i, which))
			continue;
		if ((rc = cmds_begin(c, cmd)) < 0 ||
		    (rc = cmds_fmt(c, "%s%s%.*s%s", prefix, infix, (int)j->queue_len, j->queue, suffix)) < 0)
			return rc;
		for (size_t k = i; rc == 0 && k < b->njobs; k++)
			if (takes(&b->jobs[k], which) && same_queue(&b->jobs[k], j) && (rc = cmds_room(c, 2)) == 0)
				rc = add(c, b, &b->jobs[k]);
	}
	return rc;
}

int format_add_payload(struct redis_cmds *c, const struct batch *b, const struct batch_job *j)
{
	return cmds_ref(c, b->payloads.data + j->out.off, j->out.len);
}

int format_push_queues(struct redis_cmds *c, const struct batch *b, const char *cmd, const char *prefix,
		       const char *infix, enum format_which which)
{
	return format_per_queue(c, b, which, cmd, prefix, infix, "", format_add_payload);
}
