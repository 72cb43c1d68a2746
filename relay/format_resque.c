/* Resque: {"class","args"} RPUSHed to queue:<q> (workers LPOP), and
 * resque-scheduler's delayed layout for a future run_at. */
#include "fmacros.h"

#include <errno.h>

#include "format.h"

/*
 * resque-scheduler's delayed item (job_to_hash_with_queue) adds "queue".
 * Resque has no per-job options, so options are checked but not written.
 */
static int resque_payload(const struct job_in *in, const struct job_opts *opts, struct buf *b, char *reason,
			  size_t rlen)
{
	const struct job_row *row = in->row;

	(void)opts;
	(void)reason;
	(void)rlen;
	if (buf_puts(b, "{\"class\":") < 0 || payload_string(b, span_of(row->job_class, row->class_len), 0) < 0 ||
	    buf_puts(b, ",\"args\":") < 0 || buf_append(b, in->args.p, in->args.n) < 0)
		return -ENOMEM;
	if (in->scheduled &&
	    (buf_puts(b, ",\"queue\":") < 0 || payload_string(b, span_of(row->queue, row->queue_len), 0) < 0))
		return -ENOMEM;
	return buf_puts(b, "}");
}

/* resque-scheduler's delayed_push: a list per timestamp, the timestamp in a
 * zset, and a reverse index from job to timestamps. */
static int add_delayed(struct redis_cmds *c, const struct batch *b, const char *p)
{
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < b->njobs; i++) {
		const struct batch_job *j = &b->jobs[i];
		const char *payload = b->payloads.data + j->out.off;
		long long ts = j->out.run_at_us / 1000000;
		if (!j->out.scheduled)
			continue;
		if ((rc = cmds_begin(c, "RPUSH")) < 0 || (rc = cmds_fmt(c, "%sdelayed:%lld", p, ts)) < 0 ||
		    (rc = cmds_ref(c, payload, j->out.len)) < 0)
			return rc;
		if ((rc = cmds_begin(c, "ZADD")) < 0 || (rc = cmds_fmt(c, "%sdelayed_queue_schedule", p)) < 0 ||
		    (rc = cmds_fmt(c, "%lld", ts)) < 0 || (rc = cmds_fmt(c, "%lld", ts)) < 0)
			return rc;
		if ((rc = cmds_begin(c, "SADD")) < 0 ||
		    (rc = cmds_fmt(c, "%stimestamps:%.*s", p, (int)j->out.len, payload)) < 0)
			return rc;
		rc = cmds_fmt(c, "delayed:%lld", ts);
	}
	return rc;
}

static int resque_commands(struct redis_cmds *c, const struct batch *b, const char *prefix)
{
	int rc;

	if ((rc = format_add_queue_set(c, b, prefix)) < 0 ||
	    (rc = format_push_queues(c, b, "RPUSH", prefix, "queue:", FORMAT_NOW)) < 0)
		return rc;
	return add_delayed(c, b, prefix);
}

const struct format format_resque = {
	.name = "resque",
	.payload = resque_payload,
	.commands = resque_commands,
	.lists = format_queue_list,
};
