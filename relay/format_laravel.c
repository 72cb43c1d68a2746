/* Laravel: the Redis queue's payload for a Class@method job, RPUSH queues:<q> and its notify list. */
#include "fmacros.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "format.h"

/*
 * The layout is Illuminate\Queue\Queue::createStringPayload merged with
 * RedisQueue::createPayloadArray's id and attempts, as Laravel 10.x, 11.x
 * and 12.0-12.10 write it (12.11 added createdAt and delay, which its
 * workers read with a null default), encoded by
 * json_encode($payload, JSON_UNESCAPED_UNICODE): compact, "/" as "\/",
 * other non-ASCII raw but U+2028 and U+2029, which PHP still escapes.
 */

/* PHP's escape of the line and paragraph separators (E2 80 A8 and A9). */
static bool line_separator(const char *p, size_t left)
{
	return left >= 3 && (unsigned char)p[0] == 0xe2 && (unsigned char)p[1] == 0x80 &&
	       ((unsigned char)p[2] == 0xa8 || (unsigned char)p[2] == 0xa9);
}

/* PHP's escape of the character at p (left bytes remain) into esc, and how
 * many bytes it takes; 0 when json_encode writes it as it is. */
static size_t php_escape(const char *p, size_t left, char esc[8])
{
	static const char hex[] = "0123456789abcdef";
	static const char named[] = "\"\\/\b\f\n\r\t", letter[] = "\"\\/bfnrt";
	unsigned char c = (unsigned char)*p;
	const char *hit = c ? strchr(named, c) : NULL;

	if (hit) {
		snprintf(esc, 8, "\\%c", letter[hit - named]);
		return 1;
	}
	if (c < 0x20) {
		snprintf(esc, 8, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
		return 1;
	}
	if (line_separator(p, left)) {
		snprintf(esc, 8, "\\u202%c", (unsigned char)p[2] == 0xa8 ? '8' : '9');
		return 3;
	}
	return 0;
}

/* A JSON string as json_encode writes it with JSON_UNESCAPED_UNICODE; s is
 * checked UTF-8 without NULs. (jansson's writer differs: \u001F, no \u2028.) */
static int put_php_string(struct buf *b, struct span s)
{
	size_t from = 0, i = 0, n;
	char esc[8];
	int rc;

	if ((rc = buf_puts(b, "\"")) < 0)
		return rc;
	while (i < s.n) {
		if ((n = php_escape(s.p + i, s.n - i, esc)) == 0) {
			i++;
			continue;
		}
		if ((rc = buf_append(b, s.p + from, i - from)) < 0 || (rc = buf_puts(b, esc)) < 0)
			return rc;
		from = i += n;
	}
	if ((rc = buf_append(b, s.p + from, s.n - from)) < 0)
		return rc;
	return buf_puts(b, "\"");
}

/*
 * The args text (as the app's json_encode wrote it) already escapes what PHP escapes
 * but "/" (payload_compact adds it) and U+2028/U+2029, which can only sit
 * inside strings: they are widened here, in place, from the end.
 */
static int escape_separators(struct buf *b, size_t off)
{
	size_t count = 0, old_len = b->len, src, dst;
	int rc;

	for (size_t i = off; i < old_len; i++)
		count += line_separator(b->data + i, old_len - i);
	if (count == 0)
		return 0;
	/* Room for 3 more bytes per separator ("\u2028" is 6, the raw one 3). */
	if ((rc = buf_printf(b, "%*s", (int)(3 * count), "")) < 0)
		return rc;
	for (src = old_len, dst = b->len; src > off;) {
		if (src - off >= 3 && line_separator(b->data + src - 3, 3)) {
			char last = b->data[src - 1] == (char)0xa8 ? '8' : '9';
			dst -= 6;
			memcpy(b->data + dst, "\\u202", 5);
			b->data[dst + 5] = last;
			src -= 3;
			continue;
		}
		b->data[--dst] = b->data[--src];
	}
	return 0;
}

/* The row's uuid as 8-4-4-4-12 hex digits; id is Laravel's Str::random(32)
 * and any string works, so the uuid's own 32 digits make it. */
static int check_uuid(const struct job_row *row, char *id, char *reason, size_t rlen)
{
	size_t n = 0;

	for (size_t i = 0; row->uuid && row->uuid_len == PAYLOAD_UUID_LEN && i < row->uuid_len; i++) {
		char c = row->uuid[i];
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;
		bool hexd = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
		if (dash ? c != '-' : !hexd)
			break;
		if (!dash)
			id[n++] = c;
	}
	id[n] = '\0';
	if (n == 32)
		return 0;
	payload_reason(reason, rlen, "uuid is not a uuid");
	return JOB_REJECT;
}

/* Str::parseCallback($job, 'fire'): the class before the first '@', the
 * method after it; no '@' means the worker calls fire(). */
static int split_job(struct span job, struct span *display, char *reason, size_t rlen)
{
	const char *at = memchr(job.p, '@', job.n);

	*display = job;
	if (!at)
		return 0;
	display->n = (size_t)(at - job.p);
	if (display->n > 0 && at + 1 < job.p + job.n)
		return 0;
	payload_reason(reason, rlen, "job_class \"Class@method\" has an empty class or method");
	return JOB_REJECT;
}

/* An int PHP holds (json_decode makes a float of a bigger one), 0 or more. */
static bool count_value(struct span v)
{
	long long n;

	return payload_int(v, &n) == 0 && n >= 0;
}

/* Job::backoff() is read by the worker as "10,20,30" (explode), the way
 * Queue::getJobBackoff implodes the job's $backoff property. */
static int put_backoff(struct buf *b, struct span v)
{
	struct span key, e;
	size_t i = 0;
	int rc;

	if (payload_kind(v) == PAYLOAD_NUMBER)
		return buf_printf(b, "\"%.*s\"", (int)v.n, v.p);
	if ((rc = buf_puts(b, "\"")) < 0)
		return rc;
	for (bool first = true; payload_next(v, &i, &key, &e); first = false)
		if ((!first && (rc = buf_puts(b, ",")) < 0) || (rc = buf_append(b, e.p, e.n)) < 0)
			return rc;
	return buf_puts(b, "\"");
}

static bool bool_value(struct span v)
{
	return payload_kind(v) == PAYLOAD_BOOLEAN;
}

static bool backoff_value(struct span v)
{
	struct span key, e;
	size_t i = 0, n = 0;

	if (count_value(v))
		return true;
	if (payload_kind(v) != PAYLOAD_ARRAY)
		return false;
	for (; payload_next(v, &i, &key, &e); n++)
		if (!count_value(e))
			return false;
	return n > 0;
}

/* The job properties a string payload carries; null or absent keeps Laravel's default. */
struct laravel_option {
	const char *key;
	const char *def; /* written when the option is absent or null */
	const char *want;
	bool (*valid)(struct span v);
};

static const struct laravel_option laravel_options[] = {
	{ "maxTries", "null", "a non-negative integer of 64 bits", count_value },
	{ "maxExceptions", "null", "a non-negative integer of 64 bits", count_value },
	{ "failOnTimeout", "false", "true or false", bool_value },
	{ "backoff", "null", "a non-negative integer or a non-empty array of them, of 64 bits", backoff_value },
	{ "timeout", "null", "a non-negative integer of 64 bits", count_value },
};

#define N_OPTIONS (sizeof(laravel_options) / sizeof(laravel_options[0]))

/* Which of laravel_options key names: 0 with *k, N_OPTIONS for none; -ENOMEM. */
static int option_of(struct span key, size_t *k)
{
	bool eq = false;
	int rc;

	for (*k = 0; *k < N_OPTIONS; (*k)++) {
		if ((rc = payload_key_is(key, laravel_options[*k].key, &eq)) < 0)
			return rc;
		if (eq)
			break;
	}
	return 0;
}

static int check_options(struct span options, char *reason, size_t rlen)
{
	struct span key, v;
	size_t i = 0, k;
	bool serialized;
	int rc;

	while (payload_next(options, &i, &key, &v)) {
		if ((rc = option_of(key, &k)) < 0 || (rc = payload_key_is(key, "serialized", &serialized)) < 0)
			return rc;
		if (!serialized && (rc = payload_key_is(key, LARAVEL_PREFIX_KEY, &serialized)) < 0)
			return rc;
		if (serialized) /* "serialized" is false here (format_serialized read it); the prefix was checked */
			continue;
		if (k == N_OPTIONS) {
			payload_reason(reason, rlen,
				       "options key \"%.*s\" is not one laravel reads (maxTries, maxExceptions, "
				       "failOnTimeout, backoff, timeout)",
				       (int)key.n - 2, key.p + 1);
			return JOB_REJECT;
		}
		if (payload_kind(v) != PAYLOAD_NULL && !laravel_options[k].valid(v)) {
			payload_reason(reason, rlen, "options key \"%s\" is not %s", laravel_options[k].key,
				       laravel_options[k].want);
			return JOB_REJECT;
		}
	}
	return 0;
}

/* Each option in Laravel's order, its value as written (backoff imploded). */
static int put_options(struct buf *b, struct span options)
{
	int rc = 0;

	for (size_t k = 0; rc == 0 && k < N_OPTIONS; k++) {
		const struct laravel_option *o = &laravel_options[k];
		struct span v;
		if ((rc = payload_member(options, o->key, &v)) < 0 || (rc = payload_key(b, o->key)) < 0)
			return rc;
		if (v.n == 0 || payload_kind(v) == PAYLOAD_NULL)
			rc = buf_puts(b, o->def);
		else if (strcmp(o->key, "backoff") == 0)
			rc = put_backoff(b, v);
		else
			rc = buf_append(b, v.p, v.n);
	}
	return rc;
}

/*
 * The row's laravel_prefix (set by the Laravel client: the prefix its app's
 * workers read) against the target's. A relay run with another prefix would
 * push where none of that app's workers read, and nothing would say so: the
 * row is dead-lettered instead, its reason naming the flag to set, and is
 * replayed once the relay runs with it. A row without the key (written by
 * hand) goes where the relay's prefix says.
 */
static int check_prefix(struct span options, const struct job_opts *opts, char *reason, size_t rlen)
{
	const char *have = opts->key_prefix ? opts->key_prefix : "";
	struct span v;
	bool eq;
	int rc;

	if ((rc = payload_member(options, LARAVEL_PREFIX_KEY, &v)) < 0 || v.n == 0 || !opts->key_prefix)
		return rc;
	if (payload_kind(v) != PAYLOAD_STRING) {
		payload_reason(reason, rlen, "options key \"" LARAVEL_PREFIX_KEY "\" is not a string");
		return JOB_REJECT;
	}
	if ((rc = payload_string_is(v, span_of(have, strlen(have)), &eq)) < 0 || eq)
		return rc;
	payload_reason(reason, rlen,
		       JOB_MISDIRECTED
		       " the app's Laravel reads prefix %.*s%s, this relay pushes under \"%.40s\" "
		       "(--laravel-prefix): set --laravel-prefix to the app's, then stagedrain dead replay",
		       FORMAT_SHOW(v), have);
	return JOB_REJECT;
}

static int laravel_payload(const struct job_in *in, const struct job_opts *opts, struct buf *b, char *reason,
			   size_t rlen)
{
	const struct job_row *row = in->row;
	struct span job = span_of(row->job_class, row->class_len), display;
	char id[PAYLOAD_UUID_LEN + 1];
	bool serialized;
	size_t data_off;
	int rc;

	if ((rc = check_uuid(row, id, reason, rlen)) != 0 ||
	    (rc = check_prefix(in->options, opts, reason, rlen)) != 0 ||
	    (rc = format_serialized(in->options, &serialized, reason, rlen)) != 0)
		return rc;
	if (serialized)
		return laravel_built_payload(in, b, reason, rlen);
	if ((rc = split_job(job, &display, reason, rlen)) != 0 ||
	    (rc = check_options(in->options, reason, rlen)) != 0 ||
	    (rc = laravel_check_json(in->args, JOB_MAX_DEPTH, reason, rlen)) != 0)
		return rc;
	if (buf_puts(b, "{\"uuid\":\"") < 0 || buf_append(b, row->uuid, row->uuid_len) < 0 ||
	    buf_puts(b, "\",\"displayName\":") < 0 || put_php_string(b, display) < 0 || buf_puts(b, ",\"job\":") < 0 ||
	    put_php_string(b, job) < 0 || put_options(b, in->options) < 0 || buf_puts(b, ",\"data\":") < 0)
		return -ENOMEM;
	data_off = b->len;
	if (payload_compact(b, in->args, true) < 0 || escape_separators(b, data_off) < 0)
		return -ENOMEM;
	if (buf_puts(b, ",\"id\":\"") < 0 || buf_puts(b, id) < 0 || buf_puts(b, "\",\"attempts\":0}") < 0)
		return -ENOMEM;
	return 0;
}

/* LuaScripts::push adds one "1" to queues:<q>:notify per job, which the
 * blocking pop (block_for) waits on and every pop takes one of. */
static int add_notify(struct redis_cmds *c, const struct batch *b, const struct batch_job *j)
{
	(void)b;
	(void)j;
	return CMDS_LIT(c, "1");
}

static long long floor_seconds(long long us)
{
	long long q = us / 1000000;

	return (us % 1000000 != 0 && us < 0) ? q - 1 : q;
}

/*
 * RedisQueue::laterRaw: ZADD queues:<q>:delayed availableAt payload, the
 * score whole seconds as DateTime::getTimestamp() gives them (truncated, as
 * Laravel's own later($runAt) writes). The worker's migrate moves due jobs
 * to the list and notifies then, so nothing is notified here.
 */
static int add_delayed(struct redis_cmds *c, const struct batch *b, const struct batch_job *j)
{
	int rc = cmds_fmt(c, "%lld", floor_seconds(j->out.run_at_us));

	return rc ? rc : format_add_payload(c, b, j);
}

static int laravel_commands(struct redis_cmds *c, const struct batch *b, const char *prefix)
{
	int rc;

	if ((rc = format_push_queues(c, b, "RPUSH", prefix, "queues:", FORMAT_NOW)) < 0 ||
	    (rc = format_per_queue(c, b, FORMAT_NOW, "RPUSH", prefix, "queues:", ":notify", add_notify)) < 0)
		return rc;
	return format_per_queue(c, b, FORMAT_LATER, "ZADD", prefix, "queues:", ":delayed", add_delayed);
}

/* RedisQueue's keys for queue q beside its list queues:q: a queue named
 * q<suffix> would push into them (RedisQueue::migrate, retrieveNextJob). */
static const char *const laravel_keys[][2] = {
	{ ":delayed", "delayed jobs" },
	{ ":reserved", "reserved jobs" },
	{ ":notify", "notify list" },
};

static int laravel_check_queue(struct span q, char *reason, size_t rlen)
{
	for (size_t i = 0; i < sizeof(laravel_keys) / sizeof(laravel_keys[0]); i++) {
		const char *suffix = laravel_keys[i][0];
		size_t n = strlen(suffix);
		struct span owner;
		if (q.n < n || memcmp(q.p + q.n - n, suffix, n) != 0)
			continue;
		owner = span_of(q.p, q.n - n);
		payload_reason(
			reason, rlen,
			"queue \"%.*s%s\" would clobber laravel's key \"queues:%.*s%s%s\" (queue \"%.*s%s\"'s %s)",
			FORMAT_SHOW(q), FORMAT_SHOW(owner), suffix, FORMAT_SHOW(owner), laravel_keys[i][1]);
		return JOB_REJECT;
	}
	return 0;
}

/* queues:<q> alone: the notify list holds a "1" per job, not the jobs. */
static int laravel_lists(struct redis_cmds *c, const char *prefix, const char *queue, size_t len)
{
	return format_llen(c, prefix, "queues:", queue, len);
}

const struct format format_laravel = {
	.name = "laravel",
	.payload = laravel_payload,
	.commands = laravel_commands,
	.lists = laravel_lists,
	.check_queue = laravel_check_queue,
	.cluster_infix = "queues:",
};
