/*
 * BullMQ: the job hash, wait list, delayed and prioritized sets, events
 * stream and marker, as BullMQ 6.7's Queue.add writes them
 * (format_bullmq_script.c runs the add in Redis; this file checks the row
 * and lays out the values).
 *
 * The row: queue is the queue's name, job_class the job's name, args [data]
 * (the job's data as written; [] is {}, as BullMQ stores undefined data), and
 * options the job's opts as BullMQ stores them, copied as written. The id is
 * options' jobId, else the row's uuid: a job's id is known when it is staged
 * and the same however often it is pushed, and BullMQ adds no job whose id
 * exists. The timestamp is options' timestamp, else created_at (the client
 * writes the time of the add() call there).
 */
#include "fmacros.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "format_bullmq.h"

/* BullMQ's PRIORITY_LIMIT, 2^21 - 1. */
#define BULLMQ_PRIORITY_LIMIT 2097151

/* The options this layout reads, as spans of the options text (n == 0:
 * absent), and the numbers among them read once (check_numbers). */
struct bq_opts {
	struct span job_id, timestamp, delay, priority, lifo, size_limit;
	double ts, size;
};

/* What an option's value may be: payload_kind bits. */
#define KIND(k) (1u << (k))
#define NUM KIND(PAYLOAD_NUMBER)

static const struct bq_option {
	const char *name;
	unsigned kinds;  /* 0: refused, with why */
	const char *why; /* for a refused option */
	size_t off;      /* where bq_opts keeps it; (size_t)-1: nowhere */
} known[] = {
	{ "jobId", KIND(PAYLOAD_STRING), NULL, offsetof(struct bq_opts, job_id) },
	{ "timestamp", NUM, NULL, offsetof(struct bq_opts, timestamp) },
	{ "delay", NUM, NULL, offsetof(struct bq_opts, delay) },
	{ "priority", NUM, NULL, offsetof(struct bq_opts, priority) },
	{ "lifo", KIND(PAYLOAD_BOOLEAN), NULL, offsetof(struct bq_opts, lifo) },
	{ "sizeLimit", NUM, NULL, offsetof(struct bq_opts, size_limit) },
	{ "attempts", NUM, NULL, (size_t)-1 },
	{ "stackTraceLimit", NUM, NULL, (size_t)-1 },
	{ "kl", NUM, NULL, (size_t)-1 },
	{ "backoff", NUM | KIND(PAYLOAD_OBJECT), NULL, (size_t)-1 },
	{ "removeOnComplete", NUM | KIND(PAYLOAD_BOOLEAN) | KIND(PAYLOAD_OBJECT), NULL, (size_t)-1 },
	{ "removeOnFail", NUM | KIND(PAYLOAD_BOOLEAN) | KIND(PAYLOAD_OBJECT), NULL, (size_t)-1 },
	{ "repeat", 0, "repeatable jobs are job schedulers: add them with BullMQ's Queue.upsertJobScheduler",
	  (size_t)-1 },
	{ "repeatJobKey", 0, "repeatJobKey belongs to BullMQ's job schedulers", (size_t)-1 },
	{ "parent", 0, "jobs with a parent (flows) are not relayed: add them with BullMQ's FlowProducer", (size_t)-1 },
	{ "de", 0, "deduplication is not relayed", (size_t)-1 },
	{ "deduplication", 0, "deduplication is not relayed", (size_t)-1 },
	{ "debounce", 0, "debounce was removed from BullMQ (and deduplication is not relayed)", (size_t)-1 },
};

static int check_option(struct bq_opts *o, struct span key, struct span v, char *reason, size_t rlen)
{
	enum payload_kind kind = payload_kind(v);
	bool eq = false;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if ((rc = payload_key_is(key, known[i].name, &eq)) < 0 || eq)
			break;
	if (rc < 0 || !eq)
		return rc < 0 ? rc : 0; /* BullMQ keeps options it does not know, and so do we */
	if (!known[i].kinds) {
		payload_reason(reason, rlen, "options key \"%s\": %s", known[i].name, known[i].why);
		return JOB_REJECT;
	}
	if (!(known[i].kinds & KIND(kind))) {
		payload_reason(reason, rlen, "options key \"%s\" is a %s, which BullMQ cannot use there", known[i].name,
			       payload_kind_name(kind));
		return JOB_REJECT;
	}
	if (known[i].off != (size_t)-1)
		*(struct span *)((char *)o + known[i].off) = v;
	return 0;
}

/* A number BullMQ's scripts can count with: finite. */
static int finite_number(struct span v, const char *name, double *out, char *reason, size_t rlen)
{
	int rc = payload_double(v, out);

	if (rc == 0 && !isfinite(*out)) {
		payload_reason(reason, rlen, "options key \"%s\" is %.*s, past what a double holds", name,
			       (int)(v.n > 40 ? 40 : v.n), v.p);
		return JOB_REJECT;
	}
	return rc;
}

/* Job.validateOptions' checks of priority, and the numbers the script reads:
 * each read once, the timestamp and sizeLimit kept in o. */
static int check_numbers(struct bq_opts *o, char *reason, size_t rlen)
{
	double d;
	int rc = 0;

	if (o->timestamp.n && (rc = finite_number(o->timestamp, "timestamp", &o->ts, reason, rlen)) != 0)
		return rc;
	if (o->size_limit.n && (rc = payload_double(o->size_limit, &o->size)) < 0)
		return rc;
	if (o->delay.n && (rc = finite_number(o->delay, "delay", &d, reason, rlen)) != 0)
		return rc;
	if (o->priority.n && (rc = finite_number(o->priority, "priority", &d, reason, rlen)) != 0)
		return rc;
	/* Checked in this order, the cast below is within a long long's range. */
	if (o->priority.n && (d > BULLMQ_PRIORITY_LIMIT || d < -BULLMQ_PRIORITY_LIMIT)) {
		payload_reason(reason, rlen, "options key \"priority\" is outside BullMQ's limit %d",
			       BULLMQ_PRIORITY_LIMIT);
		return JOB_REJECT;
	}
	if (o->priority.n && (double)(long long)d != d) {
		payload_reason(reason, rlen, "options key \"priority\" is %.*s: BullMQ's priority is an integer",
			       (int)(o->priority.n > 40 ? 40 : o->priority.n), o->priority.p);
		return JOB_REJECT;
	}
	return 0;
}

static int read_opts(struct span options, struct bq_opts *o, char *reason, size_t rlen)
{
	struct span key, v;
	size_t i = 0;
	int rc = 0;

	*o = (struct bq_opts){ 0 };
	while (rc == 0 && payload_next(options, &i, &key, &v))
		rc = check_option(o, key, v, reason, rlen);
	if (rc == 0)
		rc = check_numbers(o, reason, rlen);
	/* BullMQ's Job takes opts.timestamp only when it is truthy: 0 is "now". */
	if (rc == 0 && o->timestamp.n && o->ts == 0)
		o->timestamp = span_of("", 0);
	return rc;
}

/* The data: the one value of args, or {} for []. */
static int read_data(struct span args, struct span *data, char *reason, size_t rlen)
{
	struct span key, v, more;
	size_t i = 0;

	*data = span_of("{}", 2);
	if (!payload_next(args, &i, &key, &v))
		return 0;
	if (payload_next(args, &i, &key, &more)) {
		payload_reason(reason, rlen, "args is not [data]: a BullMQ job has one value, its data");
		return JOB_REJECT;
	}
	*data = v;
	return 0;
}

/* Queue.addJob's and Job.validateOptions' rules for a custom id. */
static int check_id(const char *id, size_t n, char *reason, size_t rlen)
{
	size_t colons = 0;

	for (size_t i = 0; i < n; i++)
		colons += id[i] == ':';
	if (memchr(id, '\0', n))
		payload_reason(reason, rlen, "options key \"jobId\" contains a nul byte");
	else if (n >= 2 && memcmp(id, "0:", 2) == 0)
		payload_reason(reason, rlen, "options key \"jobId\" starts with \"0:\", which BullMQ refuses");
	else if (bullmq_integer_id(id, n))
		payload_reason(reason, rlen, "options key \"jobId\" is an integer, which BullMQ keeps for its own ids");
	else if (colons && colons != 2)
		payload_reason(reason, rlen, "options key \"jobId\" contains ':', which BullMQ refuses");
	else
		return 0;
	return JOB_REJECT;
}

/* The id: jobId's text, escapes read, or the row's uuid; appended to out. */
static int put_id(struct buf *out, const struct job_in *in, struct span job_id, char *reason, size_t rlen)
{
	json_error_t err;
	json_t *s = NULL;
	int rc;

	if (job_id.n && (rc = payload_load(job_id, JSON_DECODE_ANY | JSON_ALLOW_NUL, &s, &err)) < 0)
		return rc;
	if (s && json_string_length(s) > 0) {
		rc = check_id(json_string_value(s), json_string_length(s), reason, rlen);
		if (rc == 0)
			rc = buf_append(out, json_string_value(s), json_string_length(s));
		json_decref(s);
		return rc;
	}
	json_decref(s);
	/* An empty jobId is no custom id in BullMQ either. */
	if (!in->row->uuid || in->row->uuid_len != PAYLOAD_UUID_LEN) {
		payload_reason(reason, rlen, "the row has no uuid for the job's id");
		return JOB_REJECT;
	}
	return buf_append(out, in->row->uuid, in->row->uuid_len);
}

/* The whole ms at or after ms (no libm: the binary links libc alone);
 * beyond a long long's range, which no run_at reaches, clamped. */
static long long ceil_ms(double ms)
{
	long long whole;

	if (!(ms > -9e18 && ms < 9e18))
		return ms > 0 ? LLONG_MAX / 2 : 0;
	whole = (long long)ms;
	return (double)whole < ms ? whole + 1 : whole;
}

/* opts as written; a row scheduled by run_at (written by hand) without a
 * delay of its own gets the delay to it, as if BullMQ's add had been given it. */
static int put_opts(struct buf *out, struct span options, long long run_delay)
{
	if (run_delay <= 0)
		return buf_append(out, options.p, options.n);
	if (buf_printf(out, "{\"delay\":%lld", run_delay) < 0 || payload_merge(out, options, NULL) < 0)
		return -ENOMEM;
	return buf_puts(out, "}");
}

/* The values after the id, each ended by a nul (no value holds one: JSON
 * text escapes it, and a name has none): name, data, opts, timestamp,
 * delay, priority, lifo. */
static int put_values(struct buf *out, const struct job_in *in, const struct bq_opts *o, struct span data)
{
	const struct job_row *row = in->row;
	long long ts = payload_floor_div(row->created_at_us, 1000), run_delay = 0;
	double from = o->timestamp.n ? o->ts : (double)ts;

	if (!o->delay.n && row->has_run_at)
		run_delay = ceil_ms((double)row->run_at_us / 1000.0 - from);
	if (buf_append(out, "", 1) < 0 || buf_append(out, row->job_class, row->class_len) < 0 ||
	    buf_append(out, "", 1) < 0 || buf_append(out, data.p, data.n) < 0 || buf_append(out, "", 1) < 0 ||
	    put_opts(out, in->options, run_delay) < 0 || buf_append(out, "", 1) < 0)
		return -ENOMEM;
	if ((o->timestamp.n ? buf_append(out, o->timestamp.p, o->timestamp.n) : buf_printf(out, "%lld", ts)) < 0 ||
	    buf_append(out, "", 1) < 0)
		return -ENOMEM;
	if ((o->delay.n ? buf_append(out, o->delay.p, o->delay.n)
			: buf_printf(out, "%lld", run_delay > 0 ? run_delay : 0)) < 0 ||
	    buf_append(out, "", 1) < 0)
		return -ENOMEM;
	if ((o->priority.n ? buf_append(out, o->priority.p, o->priority.n) : buf_puts(out, "0")) < 0 ||
	    buf_append(out, "", 1) < 0)
		return -ENOMEM;
	return buf_puts(out, o->lifo.n && o->lifo.p[0] == 't' ? "1" : "0");
}

static int bullmq_payload(const struct job_in *in, const struct job_opts *opts, struct buf *out, char *reason,
			  size_t rlen)
{
	struct bq_opts o;
	struct span data;
	int rc;

	(void)opts;
	if ((rc = read_opts(in->options, &o, reason, rlen)) != 0 ||
	    (rc = read_data(in->args, &data, reason, rlen)) != 0)
		return rc;
	/* Job.validateOptions: the data's JSON text within sizeLimit bytes. */
	if (o.size_limit.n && o.size > 0 && (double)data.n > o.size) {
		payload_reason(reason, rlen, "the job's data is %zu bytes, over its sizeLimit", data.n);
		return JOB_REJECT;
	}
	if ((rc = put_id(out, in, o.job_id, reason, rlen)) != 0)
		return rc;
	return put_values(out, in, &o, data);
}

/* The keys a queue's add writes or reads, in the order the script takes them. */
static const char *const queue_keys[] = { "wait",        "meta", "events", "marker", "delayed",
					  "prioritized", "pc",   "active", "paused" };
#define BQ_HEAD (1 + sizeof(queue_keys) / sizeof(queue_keys[0]) + 1)
#define BQ_VALUES 8

static int add_head(struct redis_cmds *c, const char *prefix, const struct batch_job *j)
{
	int rc = cmds_begin(c, "bullmq.add");

	for (size_t k = 0; rc == 0 && k < sizeof(queue_keys) / sizeof(queue_keys[0]); k++)
		rc = cmds_fmt(c, "%s%.*s:%s", prefix, (int)j->queue_len, j->queue, queue_keys[k]);
	return rc ? rc : cmds_fmt(c, "%s%.*s:", prefix, (int)j->queue_len, j->queue);
}

/* The job's eight values: its payload, cut at each nul. */
static int add_values(struct redis_cmds *c, const struct batch *b, const struct batch_job *j)
{
	const char *p = b->payloads.data + j->out.off, *end = p + j->out.len, *nul;
	int rc = 0;

	for (int v = 0; rc == 0 && v < BQ_VALUES; v++) {
		nul = v < BQ_VALUES - 1 ? memchr(p, '\0', (size_t)(end - p)) : end;
		if (!nul)
			return -EINVAL; /* not a payload this file wrote */
		rc = cmds_ref(c, p, (size_t)(nul - p));
		p = nul + 1;
	}
	return rc;
}

/* One bullmq.add a queue, its jobs in id order (split as cmds_room splits). */
static int bullmq_commands(struct redis_cmds *c, const struct batch *b, const char *prefix)
{
	const struct queue_groups *g = &c->groups;
	int rc = format_group(c, b, FORMAT_ALL, NULL);

	for (size_t i = 0; rc == 0 && i < g->n; i++) {
		const struct batch_job *j = &b->jobs[g->v[i].job];
		if (g->v[i].first && (rc = add_head(c, prefix, j)) < 0)
			return rc;
		if ((rc = cmds_room(c, BQ_HEAD)) == 0)
			rc = add_values(c, b, j);
	}
	return rc;
}

/* The wait list: what a cap counts (prioritized jobs wait in a sorted set). */
static int bullmq_lists(struct redis_cmds *c, const char *prefix, const char *queue, size_t len)
{
	int rc = cmds_begin(c, "LLEN");

	return rc ? rc : cmds_fmt(c, "%s%.*s:wait", prefix, (int)len, queue);
}

/* QueueBase refuses a name with ':'; "stagedrain" would put the queue's keys
 * among the relay's own (keys.h: PREFIX:stagedrain:...). */
static int bullmq_check_queue(struct span q, char *reason, size_t rlen)
{
	if (memchr(q.p, ':', q.n))
		payload_reason(reason, rlen, "queue \"%.*s%s\" contains ':', which BullMQ refuses in a queue name",
			       FORMAT_SHOW(q));
	else if (q.n == 10 && memcmp(q.p, "stagedrain", 10) == 0)
		payload_reason(reason, rlen, "queue \"stagedrain\" would share its keys with the relay's own");
	else
		return 0;
	return JOB_REJECT;
}

/* A bullmq.add's keys, for a cluster's EVAL: its queue's, and each job's hash
 * (the job key prefix and the job's id, its first value). */
static int bullmq_cluster_keys(struct redis_cmds *keys, const struct redis_cmds *c, size_t k)
{
	size_t nq = sizeof(queue_keys) / sizeof(queue_keys[0]), plen, len;
	const char *prefix = cmds_arg(c, k, nq + 1, &plen), *arg;
	int rc = 0;

	for (size_t a = 1; rc == 0 && a <= nq; a++) {
		arg = cmds_arg(c, k, a, &len);
		rc = cmds_fmt(keys, "%.*s", (int)len, arg); /* a copy: c's scratch moves */
	}
	for (size_t a = BQ_HEAD; rc == 0 && a < c->cmds[k].argc; a += BQ_VALUES) {
		arg = cmds_arg(c, k, a, &len);
		rc = cmds_fmt(keys, "%.*s%.*s", (int)plen, prefix, (int)len, arg);
	}
	return rc;
}

const struct format format_bullmq = {
	.name = "bullmq",
	.payload = bullmq_payload,
	.commands = bullmq_commands,
	.lists = bullmq_lists,
	.check_queue = bullmq_check_queue,
	.script = format_bullmq_script,
	.cluster_infix = "",
	.cluster_keys = bullmq_cluster_keys,
};

/* JS's String(Number(digits)) for digits of a number under 1e21: the
 * shortest digits that read back as the same double, then zeros. */
static bool js_same_integer(const char *digits, size_t n)
{
	char text[64], shortest[32];
	double v;
	int p, exp;

	if (n >= sizeof(text))
		return false;
	memcpy(text, digits, n);
	text[n] = '\0';
	v = strtod(text, NULL);
	if (v >= 1e21)
		return false; /* JS writes 1e+21 */
	for (p = 1; p <= 17; p++) {
		snprintf(shortest, sizeof(shortest), "%.*e", p - 1, v);
		if (strtod(shortest, NULL) == v)
			break;
	}
	exp = atoi(strchr(shortest, 'e') + 1);
	/* d.ddde+X: the digits, then X + 1 - p zeros */
	if ((size_t)exp + 1 != n || shortest[0] != digits[0])
		return false;
	for (size_t i = 1, k = 2; i < n; i++, k++) {
		char want = (int)i < p ? shortest[k] : '0';
		if (digits[i] != want)
			return false;
	}
	return true;
}

bool bullmq_integer_id(const char *id, size_t n)
{
	size_t i = id[0] == '-' ? 1 : 0;

	if (n == 0 || i == n)
		return false;
	for (size_t k = i; k < n; k++)
		if (id[k] < '0' || id[k] > '9')
			return false;
	/* parseInt gives -0 for "-0", which JS writes "0"; a leading zero is dropped. */
	if (id[i] == '0')
		return n - i == 1 && i == 0;
	return n - i <= 15 || js_same_integer(id + i, n - i);
}
