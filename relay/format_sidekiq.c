/* Sidekiq: the job hash Sidekiq::Client writes, LPUSH queue:<q> (workers
 * BRPOP the other end), and the schedule zset its poller moves due jobs from. */
#include "fmacros.h"

#include <errno.h>
#include <string.h>

#include "format.h"

int sidekiq_check_jid(const struct job_row *row, char *reason, size_t rlen)
{
	struct span s = span_of(row->jid, row->jid_len);
	size_t i;

	/* Sidekiq's own client makes jids with SecureRandom.hex(12). */
	for (i = 0; i < s.n; i++)
		if (!((s.p[i] >= '0' && s.p[i] <= '9') || (s.p[i] >= 'a' && s.p[i] <= 'f')))
			break;
	if (s.n == 24 && i == s.n)
		return 0;
	payload_reason(reason, rlen, "jid is not 24 lowercase hex digits");
	return JOB_REJECT;
}

/* Sidekiq 6 and 7 write Time#to_f; 8 writes integer milliseconds. */
static int put_stamp(struct buf *b, const struct job_opts *opts, const char *key, long long us)
{
	char num[32];
	int rc;

	if ((rc = payload_key(b, key)) < 0)
		return rc;
	if (opts->sidekiq_version >= 8)
		return buf_put_int(b, payload_floor_div(us, 1000));
	job_format_epoch(num, sizeof(num), us);
	return buf_puts(b, num);
}

/* A scheduled job is the schedule-zset member, from which the client strips
 * enqueued_at and at. */
int sidekiq_put_item(struct buf *b, const struct job_in *in, const struct job_opts *opts, const struct sidekiq_item *it)
{
	const struct job_row *row = in->row;
	struct span retry;

	if (buf_puts(b, "{\"class\":") < 0 || payload_string(b, it->class_name, 0) < 0)
		return -ENOMEM;
	if (it->wrapped.n && (buf_puts(b, ",\"wrapped\":") < 0 || payload_string(b, it->wrapped, 0) < 0))
		return -ENOMEM;
	if (buf_puts(b, ",\"args\":") < 0 || it->put_args(b, in, opts, it->arg) < 0 || buf_puts(b, ",\"queue\":") < 0 ||
	    payload_string(b, span_of(row->queue, row->queue_len), 0) < 0 || buf_puts(b, ",\"jid\":\"") < 0 ||
	    buf_append(b, row->jid, row->jid_len) < 0 || buf_puts(b, "\"") < 0)
		return -ENOMEM;
	/* Sidekiq's default_job_options; an explicit option wins. */
	if (payload_member(in->options, "retry", &retry) < 0 || (retry.n == 0 && buf_puts(b, ",\"retry\":true") < 0))
		return -ENOMEM;
	if (payload_merge(b, in->options, it->skip) < 0 || put_stamp(b, opts, "created_at", row->created_at_us) < 0)
		return -ENOMEM;
	if (!in->scheduled && put_stamp(b, opts, "enqueued_at", opts->now_us) < 0)
		return -ENOMEM;
	return buf_puts(b, "}");
}

int sidekiq_put_row_args(struct buf *b, const struct job_in *in, const struct job_opts *opts, void *arg)
{
	(void)opts;
	(void)arg;
	return buf_append(b, in->args.p, in->args.n);
}

static int sidekiq_payload(const struct job_in *in, const struct job_opts *opts, struct buf *out, char *reason,
			   size_t rlen)
{
	static const char *const skip[] = { "activejob", NULL };
	const struct sidekiq_item it = {
		.class_name = span_of(in->row->job_class, in->row->class_len),
		.put_args = sidekiq_put_row_args,
		.skip = skip,
	};
	int rc = sidekiq_check_jid(in->row, reason, rlen);

	return rc ? rc : sidekiq_put_item(out, in, opts, &it);
}

/* Sidekiq's poller moves due members of `schedule` (score: epoch seconds). */
static int add_schedule(struct redis_cmds *c, const struct batch *b, const char *prefix)
{
	bool any = false;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < b->njobs; i++) {
		const struct batch_job *j = &b->jobs[i];
		char score[32];
		if (!j->out.scheduled)
			continue;
		if (!any && ((rc = cmds_begin(c, "ZADD")) < 0 || (rc = cmds_fmt(c, "%sschedule", prefix)) < 0))
			return rc;
		any = true;
		job_format_epoch(score, sizeof(score), j->out.run_at_us);
		if ((rc = cmds_room(c, 2)) == 0 && (rc = cmds_fmt(c, "%s", score)) == 0)
			rc = cmds_ref(c, b->payloads.data + j->out.off, j->out.len);
	}
	return rc;
}

int sidekiq_commands(struct redis_cmds *c, const struct batch *b, const char *prefix)
{
	int rc;

	if ((rc = format_add_queue_set(c, b, prefix)) < 0 ||
	    (rc = format_push_queues(c, b, "LPUSH", prefix, "queue:", FORMAT_NOW)) < 0)
		return rc;
	return add_schedule(c, b, prefix);
}

const struct format format_sidekiq = {
	.name = "sidekiq",
	.payload = sidekiq_payload,
	.commands = sidekiq_commands,
	.lists = format_queue_list,
};

/*
 * Ruby's Float#to_s of a microsecond time: shortest digits, at least one
 * after the point. Computed on the magnitude so LLONG_MIN cannot overflow.
 */
void job_format_epoch(char *dst, size_t dstlen, long long us)
{
	unsigned long long mag = us < 0 ? 0ULL - (unsigned long long)us : (unsigned long long)us;
	unsigned long long frac = mag % 1000000ULL;
	char tmp[32], *end = tmp + sizeof(tmp), *p = end;
	int n = 6;
	size_t len;

	if (!dst || dstlen == 0)
		return;
	for (; n > 1 && frac % 10 == 0; n--)
		frac /= 10;
	while (n-- > 0) {
		*--p = (char)('0' + frac % 10);
		frac /= 10;
	}
	*--p = '.';
	p = buf_digits(p, mag / 1000000ULL);
	if (us < 0)
		*--p = '-';
	len = (size_t)(end - p) < dstlen ? (size_t)(end - p) : dstlen - 1;
	memcpy(dst, p, len);
	dst[len] = '\0';
}
