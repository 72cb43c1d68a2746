/* Celery: a protocol 2 task message in kombu's Redis transport envelope, LPUSHed to the queue. */
#include "fmacros.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "celery_codec.h"
#include "format.h"

/*
 * The envelope's tail, after the priority: written and read back (by
 * celery_commands, to pick the priority's list) from this one string.
 */
static const char tail_mid[] = ",\"body_encoding\":\"base64\",\"delivery_tag\":\"";
#define TAIL_LEN (sizeof(tail_mid) - 1 + PAYLOAD_UUID_LEN + 3) /* uuid, "}} */

/* Options a celery row may carry; anything else is a typo, not a silent drop. */
static const char *const celery_keys[] = { "kwargs", "priority", "expires", "serialized", NULL };
/* Those of a row that carries the message Celery built (format_serialized). */
static const char *const built_keys[] = { "serialized", "headers", "priority", "reply_to", NULL };

/* ---- the body ---- */

/* The body Celery built ([args, kwargs, embed]), base64. */
static int put_built_body(struct buf *b, struct span body)
{
	size_t off = b->len;

	return payload_compact(b, body, false) < 0 ? -ENOMEM : celery_codec_base64(b, off);
}

/* [args, kwargs, embed], Celery's protocol 2 body. */
static int put_body(struct buf *b, struct span args, struct span kwargs)
{
	size_t off = b->len;

	if (buf_puts(b, "[") < 0 || payload_compact(b, args, false) < 0 || buf_puts(b, ",") < 0)
		return -ENOMEM;
	if ((kwargs.n ? payload_compact(b, kwargs, false) : buf_puts(b, "{}")) < 0)
		return -ENOMEM;
	if (buf_puts(b, ",{\"callbacks\":null,\"errbacks\":null,\"chain\":null,\"chord\":null}]") < 0)
		return -ENOMEM;
	return celery_codec_base64(b, off);
}

/* ---- options ---- */

struct celery_opts {
	struct span kwargs;   /* n == 0: {} */
	struct span reply_to; /* n == 0: "" */
	int priority;
	bool has_expires;
	long long expires_us;
};

/* Every key of options is one of keys (NULL-terminated), listed in which. */
static int check_keys(struct span options, const char *const *keys, const char *which, char *reason, size_t rlen)
{
	struct span key, v;
	size_t i = 0;
	int rc;

	while (payload_next(options, &i, &key, &v)) {
		bool known = false;
		for (const char *const *k = keys; *k && !known; k++)
			if ((rc = payload_key_is(key, *k, &known)) < 0)
				return rc;
		if (!known) {
			payload_reason(reason, rlen, "options key \"%.*s\" is not one of %s", (int)key.n - 2, key.p + 1,
				       which);
			return JOB_REJECT;
		}
	}
	return 0;
}

/*
 * expires: seconds after staging (send_task's relative form) or an ISO 8601
 * time with an offset, written back in UTC with six digits: Celery 5.2's
 * parse_iso8601 reads a fraction ".5" as 5 microseconds.
 */
static int read_expires(struct span v, const struct job_row *row, struct celery_opts *co, char *reason, size_t rlen)
{
	bool ok = false;
	double secs;
	int rc = 0;

	if (payload_kind(v) == PAYLOAD_NUMBER) {
		rc = payload_double(v, &secs);
		/* Rounded by hand: llround would make the binary need libm. */
		ok = rc == 0 && secs >= 0 && secs < 1e11;
		if (ok)
			co->expires_us = row->created_at_us + (long long)(secs * 1e6 + 0.5);
	} else if (payload_kind(v) == PAYLOAD_STRING) {
		rc = celery_codec_read_iso(v, &co->expires_us, &ok);
	}
	if (rc < 0)
		return rc;
	if (!ok) {
		payload_reason(reason, rlen,
			       "options key \"expires\" is not seconds (0 or more) or an iso 8601 time with an offset");
		return JOB_REJECT;
	}
	co->has_expires = true;
	return 0;
}

/* kombu picks the list by it: a number past 64 bits is none of 0 to 9. */
static int read_priority(struct span options, struct celery_opts *co, char *reason, size_t rlen)
{
	struct span pri;
	long long p = 0;
	int rc = payload_member(options, "priority", &pri);

	if (rc < 0)
		return rc;
	if (pri.n && (payload_int(pri, &p) != 0 || p < 0 || p > 9)) {
		payload_reason(reason, rlen, "options key \"priority\" is not an integer from 0 to 9");
		return JOB_REJECT;
	}
	co->priority = (int)p;
	return 0;
}

static int read_options(const struct job_in *in, struct celery_opts *co, char *reason, size_t rlen)
{
	struct span exp;
	int rc = check_keys(in->options, celery_keys, "kwargs, priority, expires", reason, rlen);

	if (rc != 0 || (rc = payload_member(in->options, "kwargs", &co->kwargs)) < 0 ||
	    (rc = payload_member(in->options, "expires", &exp)) < 0)
		return rc;
	if (co->kwargs.n && payload_kind(co->kwargs) != PAYLOAD_OBJECT) {
		payload_reason(reason, rlen, "kwargs is not a json object (got %s)",
			       payload_kind_name(payload_kind(co->kwargs)));
		return JOB_REJECT;
	}
	if ((rc = read_priority(in->options, co, reason, rlen)) != 0)
		return rc;
	return exp.n ? read_expires(exp, in->row, co, reason, rlen) : 0;
}

/* Whether JSON value v is a string spelling the n bytes at p. */
static int string_is(struct span v, const char *p, size_t n, bool *eq)
{
	*eq = false;
	return payload_kind(v) == PAYLOAD_STRING ? payload_string_is(v, span_of(p, n), eq) : 0;
}

/* Celery's headers name the row's task and its uuid: the worker runs the
 * task the headers name, under their id, which the app's AsyncResult holds. */
static int check_headers(const struct job_in *in, struct span headers, char *reason, size_t rlen)
{
	const struct job_row *row = in->row;
	struct span id, task;
	bool id_ok, task_ok;
	int rc;

	if (payload_kind(headers) != PAYLOAD_OBJECT) {
		payload_reason(reason, rlen, "options key \"headers\" is not Celery's headers object");
		return JOB_REJECT;
	}
	if ((rc = payload_member(headers, "id", &id)) < 0 || (rc = payload_member(headers, "task", &task)) < 0 ||
	    (rc = string_is(id, row->uuid, row->uuid_len, &id_ok)) < 0 ||
	    (rc = string_is(task, row->job_class, row->class_len, &task_ok)) < 0)
		return rc;
	if (!id_ok || !task_ok) {
		payload_reason(reason, rlen, "headers \"%s\" is not the row's %s", id_ok ? "task" : "id",
			       id_ok ? "job_class" : "uuid");
		return JOB_REJECT;
	}
	return 0;
}

/* The body Celery built: [args, kwargs, embed], embed an object or null. */
static int check_body(struct span args, char *reason, size_t rlen)
{
	static const enum payload_kind want[] = { PAYLOAD_ARRAY, PAYLOAD_OBJECT, PAYLOAD_OBJECT };
	struct span key, v;
	size_t i = 0, n = 0;
	bool ok = true;

	while (ok && payload_next(args, &i, &key, &v)) {
		enum payload_kind k = payload_kind(v);
		ok = n < 3 && (k == want[n] || (n == 2 && k == PAYLOAD_NULL));
		n++;
	}
	if (ok && n == 3)
		return 0;
	payload_reason(reason, rlen, "serialized celery args is not the body [args, kwargs, embed]");
	return JOB_REJECT;
}

/* A row that carries the message Celery built: its headers, body, priority and reply_to. */
static int read_built(const struct job_in *in, struct celery_opts *co, struct span *headers, char *reason, size_t rlen)
{
	int rc = check_keys(in->options, built_keys, "serialized, headers, priority, reply_to", reason, rlen);

	if (rc != 0 || (rc = payload_member(in->options, "headers", headers)) < 0 ||
	    (rc = payload_member(in->options, "reply_to", &co->reply_to)) < 0)
		return rc;
	if (co->reply_to.n && payload_kind(co->reply_to) != PAYLOAD_STRING) {
		payload_reason(reason, rlen, "options key \"reply_to\" is not a string");
		return JOB_REJECT;
	}
	if ((rc = check_headers(in, *headers, reason, rlen)) != 0 || (rc = check_body(in->args, reason, rlen)) != 0)
		return rc;
	return read_priority(in->options, co, reason, rlen);
}

static int check_uuid(const struct job_row *row, char *reason, size_t rlen)
{
	static const char shape[] = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
	bool ok = row->uuid && row->uuid_len == PAYLOAD_UUID_LEN;

	for (size_t i = 0; ok && i < PAYLOAD_UUID_LEN; i++) {
		char c = row->uuid[i];
		ok = shape[i] == '-' ? c == '-' : ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
	}
	if (ok)
		return 0;
	payload_reason(reason, rlen, "uuid is not a uuid");
	return JOB_REJECT;
}

/* ---- the envelope ---- */

static int put_uuid(struct buf *b, const char *key, const struct job_row *row)
{
	if (payload_key(b, key) < 0 || buf_puts(b, "\"") < 0 || buf_append(b, row->uuid, row->uuid_len) < 0)
		return -ENOMEM;
	return buf_puts(b, "\"");
}

/* Celery's as_task_v2 headers, in its order. */
static int put_headers(struct buf *b, const struct job_in *in, const struct job_opts *opts,
		       const struct celery_opts *co)
{
	const struct job_row *row = in->row;
	const char *origin = opts->origin ? opts->origin : "stagedrain";
	int rc = 0;

	if (buf_puts(b, ",\"headers\":{\"lang\":\"py\",\"task\":") < 0 ||
	    payload_string(b, span_of(row->job_class, row->class_len), 0) < 0 || put_uuid(b, "id", row) < 0 ||
	    buf_puts(b, ",\"shadow\":null,\"eta\":") < 0)
		return -ENOMEM;
	rc = in->scheduled ? celery_codec_put_iso(b, row->run_at_us) : buf_puts(b, "null");
	if (rc == 0)
		rc = buf_puts(b, ",\"expires\":");
	if (rc == 0)
		rc = co->has_expires ? celery_codec_put_iso(b, co->expires_us) : buf_puts(b, "null");
	if (rc < 0 || buf_puts(b, ",\"group\":null,\"group_index\":null,\"retries\":0,\"timelimit\":[null,null]") < 0 ||
	    put_uuid(b, "root_id", row) < 0 || buf_puts(b, ",\"parent_id\":null,\"argsrepr\":") < 0 ||
	    celery_codec_repr(b, in->args) < 0 || buf_puts(b, ",\"kwargsrepr\":") < 0 ||
	    celery_codec_repr(b, co->kwargs.n ? co->kwargs : span_of("{}", 2)) < 0 || buf_puts(b, ",\"origin\":") < 0 ||
	    payload_string(b, span_of(origin, strlen(origin)), 0) < 0)
		return -ENOMEM;
	return buf_puts(b, ",\"ignore_result\":false}");
}

/* kombu's properties; priority stays as given, its list is the step below it. */
static int put_properties(struct buf *b, const struct job_in *in, const struct job_opts *opts,
			  const struct celery_opts *co)
{
	const struct job_row *row = in->row;

	if (buf_puts(b, ",\"properties\":{\"correlation_id\":\"") < 0 || buf_append(b, row->uuid, row->uuid_len) < 0 ||
	    buf_puts(b, "\",\"reply_to\":") < 0 ||
	    (co->reply_to.n ? payload_compact(b, co->reply_to, false) : buf_puts(b, "\"\"")) < 0 ||
	    buf_puts(b, ",\"delivery_mode\":2") < 0)
		return -ENOMEM;
	/* Producer.publish's expiration: the TTL in whole milliseconds, as a string. */
	if (co->has_expires &&
	    buf_printf(b, ",\"expiration\":\"%lld\"",
		       co->expires_us > opts->now_us ? (co->expires_us - opts->now_us) / 1000 : 0) < 0)
		return -ENOMEM;
	if (buf_puts(b, ",\"delivery_info\":{\"exchange\":\"\",\"routing_key\":") < 0 ||
	    payload_string(b, span_of(row->queue, row->queue_len), 0) < 0 ||
	    buf_printf(b, "},\"priority\":%d%s", co->priority, tail_mid) < 0 ||
	    buf_append(b, row->uuid, row->uuid_len) < 0)
		return -ENOMEM;
	return buf_puts(b, "\"}");
}

static int check_times(const struct job_in *in, const struct celery_opts *co, char *reason, size_t rlen)
{
	if (in->scheduled && in->row->run_at_us > CELERY_CODEC_MAX_US) {
		payload_reason(reason, rlen, "run_at is after the year 9999, which python cannot read");
		return JOB_REJECT;
	}
	if (co->has_expires && (co->expires_us > CELERY_CODEC_MAX_US || co->expires_us < CELERY_CODEC_MIN_US)) {
		payload_reason(reason, rlen, "options key \"expires\" is outside the years 1 to 9999");
		return JOB_REJECT;
	}
	return 0;
}

/*
 * The message Celery built in the app (options "serialized": true): its body
 * and headers as Celery wrote them, in the envelope kombu's Redis transport
 * adds at publish time.
 */
static int built_payload(const struct job_in *in, const struct job_opts *opts, struct buf *out, char *reason,
			 size_t rlen)
{
	struct celery_opts co = { .priority = 0 };
	struct span headers;
	int rc = read_built(in, &co, &headers, reason, rlen);

	if (rc == 0)
		rc = check_times(in, &co, reason, rlen);
	if (rc)
		return rc;
	if (buf_puts(out, "{\"body\":\"") < 0 || put_built_body(out, in->args) < 0 ||
	    buf_puts(out, "\",\"content-encoding\":\"utf-8\",\"content-type\":\"application/json\",\"headers\":") < 0 ||
	    payload_compact(out, headers, false) < 0 || put_properties(out, in, opts, &co) < 0)
		return -ENOMEM;
	return buf_puts(out, "}");
}

static int celery_payload(const struct job_in *in, const struct job_opts *opts, struct buf *out, char *reason,
			  size_t rlen)
{
	struct celery_opts co = { .priority = 0 };
	bool serialized = false;
	int rc = check_uuid(in->row, reason, rlen);

	if (rc == 0)
		rc = format_serialized(in->options, &serialized, reason, rlen);
	if (rc == 0 && serialized)
		return built_payload(in, opts, out, reason, rlen);
	if (rc == 0)
		rc = read_options(in, &co, reason, rlen);
	if (rc == 0)
		rc = check_times(in, &co, reason, rlen);
	if (rc)
		return rc;
	if (buf_puts(out, "{\"body\":\"") < 0 || put_body(out, in->args, co.kwargs) < 0 ||
	    buf_puts(out, "\",\"content-encoding\":\"utf-8\",\"content-type\":\"application/json\"") < 0)
		return -ENOMEM;
	if ((rc = put_headers(out, in, opts, &co)) < 0 || (rc = put_properties(out, in, opts, &co)) < 0)
		return rc;
	return buf_puts(out, "}");
}

/* The priority digit just before the tail every payload ends with. */
static int priority_of(const struct batch *b, const struct batch_job *j)
{
	return b->payloads.data[j->out.off + j->out.len - TAIL_LEN - 1] - '0';
}

/* kombu's _q_for_pri: priority_steps [0, 3, 6, 9], the step at or below it. */
static int step_of(const struct batch *b, const struct batch_job *j)
{
	return priority_of(b, j) / 3 * 3;
}

/* LPUSH <prefix><queue>, or <prefix><queue>\x06\x16<step> (kombu's sep) for a step above 0. */
static int begin_list(struct redis_cmds *c, const struct batch *b, const struct batch_job *j, const char *prefix)
{
	int step = step_of(b, j), rc;

	if ((rc = cmds_begin(c, "LPUSH")) < 0)
		return rc;
	if (step == 0)
		return cmds_fmt(c, "%s%.*s", prefix, (int)j->queue_len, j->queue);
	return cmds_fmt(c, "%s%.*s\x06\x16%d", prefix, (int)j->queue_len, j->queue, step);
}

/*
 * One LPUSH per queue and priority step, in id order (kombu's _put is
 * LPUSH, workers BRPOP the other end). Scheduled tasks go too: Celery holds
 * eta tasks in the worker, not in Redis.
 */
static int celery_commands(struct redis_cmds *c, const struct batch *b, const char *prefix)
{
	const struct queue_groups *g = &c->groups;
	int rc = format_group(c, b, FORMAT_ALL, step_of);

	for (size_t i = 0; rc == 0 && i < g->n; i++) {
		const struct batch_job *j = &b->jobs[g->v[i].job];
		if (g->v[i].first && (rc = begin_list(c, b, j, prefix)) < 0)
			return rc;
		if ((rc = cmds_room(c, 2)) == 0)
			rc = cmds_ref(c, b->payloads.data + j->out.off, j->out.len);
	}
	return rc;
}

/* The keys kombu's Redis transport keeps beside the queues' lists
 * (kombu/transport/redis.py, Channel): a list there fails every worker. */
static const char *const kombu_keys[][2] = {
	{ "unacked", "hash of unacked tasks" },
	{ "unacked_index", "index of unacked tasks" },
	{ "unacked_mutex", "lock on unacked tasks" },
};
#define KOMBU_BINDING "_kombu.binding." /* keyprefix_queue: a set per exchange */
#define KOMBU_SEP "\x06\x16"            /* sep: between a queue and its priority */

static bool has_prefix(struct span s, const char *prefix)
{
	return s.n >= strlen(prefix) && memcmp(s.p, prefix, strlen(prefix)) == 0;
}

/* The first kombu separator in q, or NULL. */
static const char *find_sep(struct span q)
{
	for (size_t i = 0; i + 1 < q.n; i++)
		if (q.p[i] == KOMBU_SEP[0] && q.p[i + 1] == KOMBU_SEP[1])
			return q.p + i;
	return NULL;
}

/* A queue whose list is one of kombu's own keys, another queue's priority
 * list (q\x06\x16<n>), or whose name kombu's binding table would split. */
static int celery_check_queue(struct span q, char *reason, size_t rlen)
{
	const char *sep = find_sep(q);

	for (size_t i = 0; i < sizeof(kombu_keys) / sizeof(kombu_keys[0]); i++) {
		if (q.n == strlen(kombu_keys[i][0]) && memcmp(q.p, kombu_keys[i][0], q.n) == 0) {
			payload_reason(reason, rlen, "queue \"%s\" would clobber celery's key \"%s\" (kombu's %s)",
				       kombu_keys[i][0], kombu_keys[i][0], kombu_keys[i][1]);
			return JOB_REJECT;
		}
	}
	if (has_prefix(q, KOMBU_BINDING)) {
		struct span ex = span_of(q.p + strlen(KOMBU_BINDING), q.n - strlen(KOMBU_BINDING));
		payload_reason(reason, rlen,
			       "queue \"%.*s%s\" would clobber celery's key \"%.*s%s\" (kombu's bindings of exchange "
			       "\"%.*s%s\")",
			       FORMAT_SHOW(q), FORMAT_SHOW(q), FORMAT_SHOW(ex));
		return JOB_REJECT;
	}
	if (sep) {
		struct span head = span_of(q.p, (size_t)(sep - q.p));
		payload_reason(reason, rlen,
			       "queue \"%.*s%s\" would clobber celery's keys \"%.*s%s\\x06\\x16<n>\" (kombu's priority "
			       "lists of queue \"%.*s%s\")",
			       FORMAT_SHOW(q), FORMAT_SHOW(head), FORMAT_SHOW(head));
		return JOB_REJECT;
	}
	return 0;
}

/* The queue's list and its priority steps' lists, as celery_commands fills them. */
static int celery_lists(struct redis_cmds *c, const char *prefix, const char *queue, size_t len)
{
	int rc = format_llen(c, prefix, "", queue, len);

	for (int step = 3; rc == 0 && step <= 9; step += 3)
		if ((rc = cmds_begin(c, "LLEN")) == 0)
			rc = cmds_fmt(c, "%s%.*s\x06\x16%d", prefix, (int)len, queue, step);
	return rc;
}

const struct format format_celery = {
	.name = "celery",
	.payload = celery_payload,
	.commands = celery_commands,
	.lists = celery_lists,
	.check_queue = celery_check_queue,
};
