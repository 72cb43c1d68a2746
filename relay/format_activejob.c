/* ActiveJob through Sidekiq: Rails' SidekiqAdapter JobWrapper hash around ActiveJob's serialized job; Sidekiq's keys. */
#include "fmacros.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "format.h"

/* The class Rails' adapter pushes; Sidekiq 6, 7 and 8 all run it. */
#define AJ_WRAPPER "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper"
#define AJ_GLOBALID "_aj_globalid"

/* Keys ActiveJob::Arguments keeps for itself: a Hash argument holding one
 * makes Rails raise SerializationError, so its client never writes it. */
static const char *const aj_reserved[] = {
	"_aj_globalid", "_aj_symbol_keys", "_aj_ruby2_keywords", "_aj_hash_with_indifferent_access", "_aj_serialized",
	NULL,
};

/* The options this format consumes; every other one is a Sidekiq option. */
static const char *const aj_consumed[] = { "activejob", "serialized", "priority", "locale", "timezone", NULL };
/* A job ActiveJob serialized itself carries its settings inside. */
static const char *const aj_consumed_serialized[] = { "activejob", "serialized", NULL };

/*
 * The args walk: copies the row's args text as ActiveJob::Arguments.serialize
 * writes it, every number and string as written. With b NULL it only checks,
 * so the writer that runs inside sidekiq_put_item cannot reject.
 */
struct aj_walk {
	struct span s;
	size_t i;
	struct buf *b;
	int depth; /* levels above the value being walked, counting Sidekiq's hash */
	char *reason;
	size_t rlen;
};

/* Levels around the row's args array: Sidekiq's hash, its args array, the job hash. */
#define AJ_WRAP_DEPTH 3

static int walk_value(struct aj_walk *w);

static int put(struct aj_walk *w, const char *p, size_t n)
{
	return w->b ? buf_append(w->b, p, n) : 0;
}

static int put_str(struct aj_walk *w, const char *s)
{
	return put(w, s, strlen(s));
}

static void skip_space(struct aj_walk *w)
{
	w->i = payload_skip_ws(w->s, w->i);
}

/* Index past the string that starts at w->i (text jansson accepted). */
static size_t string_end(const struct aj_walk *w)
{
	return payload_string_end(w->s, w->i);
}

/* A new container one level down; Ruby's JSON reads at most JOB_MAX_DEPTH. */
static int enter(struct aj_walk *w)
{
	if (w->depth + 1 <= JOB_MAX_DEPTH)
		return 0;
	payload_reason(w->reason, w->rlen,
		       "args nest too deep for activejob: with the wrapper's %d levels and \"_aj_symbol_keys\" the job "
		       "would pass %d levels",
		       AJ_WRAP_DEPTH, JOB_MAX_DEPTH);
	return JOB_REJECT;
}

/* The reserved key a member key names, or NULL. */
static int reserved_key(struct span key, const char **which)
{
	bool eq;
	int rc;

	*which = NULL;
	for (const char *const *k = aj_reserved; *k; k++) {
		if ((rc = payload_key_is(key, *k, &eq)) < 0)
			return rc;
		if (eq) {
			*which = *k;
			return 0;
		}
	}
	return 0;
}

/* A GlobalID the app wrote: the one member's value must be a gid:// string. */
static int check_globalid(struct aj_walk *w, size_t value_at)
{
	static const char gid[] = "\"gid://";

	if (w->s.n - value_at > sizeof(gid) - 1 && memcmp(w->s.p + value_at, gid, sizeof(gid) - 1) == 0)
		return 0;
	payload_reason(w->reason, w->rlen, "args: \"%s\" is not a \"gid://...\" string", AJ_GLOBALID);
	return JOB_REJECT;
}

/* One member: key copied as written, then its value. Notes a reserved key. */
static int walk_member(struct aj_walk *w, const char **reserved, size_t *value_at)
{
	struct span key;
	int rc;

	skip_space(w);
	key = span_of(w->s.p + w->i, string_end(w) - w->i);
	if ((rc = reserved_key(key, reserved)) < 0 || (rc = put(w, key.p, key.n)) < 0 || (rc = put(w, ":", 1)) < 0)
		return rc;
	w->i += key.n;
	skip_space(w);
	w->i++; /* ':' */
	skip_space(w);
	*value_at = w->i;
	return walk_value(w);
}

/* How an object ends: a lone GlobalID as it was, anything else with its
 * (empty) list of symbol keys, which is how Rails tells a Hash argument. */
static int close_object(struct aj_walk *w, size_t members, const char *reserved, size_t gid_value_at)
{
	if (members == 1 && reserved && strcmp(reserved, AJ_GLOBALID) == 0) {
		int rc = check_globalid(w, gid_value_at);
		return rc ? rc : put(w, "}", 1);
	}
	if (reserved) {
		payload_reason(w->reason, w->rlen,
			       "args: an object has ActiveJob's reserved key \"%s\" (Rails raises SerializationError)",
			       reserved);
		return JOB_REJECT;
	}
	/* The empty list is one level below the object. */
	if (enter(w) != 0)
		return JOB_REJECT;
	return put_str(w, members ? ",\"_aj_symbol_keys\":[]}" : "\"_aj_symbol_keys\":[]}");
}

static int walk_object(struct aj_walk *w)
{
	const char *reserved = NULL, *r;
	size_t members = 0, value_at = 0, v;
	int rc;

	if ((rc = enter(w)) != 0 || (rc = put(w, "{", 1)) < 0)
		return rc;
	w->i++;
	w->depth++;
	skip_space(w);
	while (rc == 0 && w->i < w->s.n && w->s.p[w->i] != '}') {
		if (members && (rc = put(w, ",", 1)) < 0)
			break;
		if ((rc = walk_member(w, &r, &v)) != 0)
			break;
		if (r && !reserved) {
			reserved = r;
			value_at = v;
		}
		members++;
		skip_space(w);
		if (w->i < w->s.n && w->s.p[w->i] == ',')
			w->i++;
	}
	if (rc != 0)
		return rc;
	w->i++;
	rc = close_object(w, members, reserved, value_at);
	w->depth--;
	return rc;
}

static int walk_array(struct aj_walk *w)
{
	size_t n = 0;
	int rc;

	if ((rc = enter(w)) != 0 || (rc = put(w, "[", 1)) < 0)
		return rc;
	w->i++;
	w->depth++;
	skip_space(w);
	while (rc == 0 && w->i < w->s.n && w->s.p[w->i] != ']') {
		if (n++ && (rc = put(w, ",", 1)) < 0)
			break;
		if ((rc = walk_value(w)) != 0)
			break;
		skip_space(w);
		if (w->i < w->s.n && w->s.p[w->i] == ',') {
			w->i++;
			skip_space(w);
		}
	}
	w->depth--;
	w->i++;
	return rc ? rc : put(w, "]", 1);
}

/* A scalar (number, true, false, null) or string, copied as written. */
static int walk_scalar(struct aj_walk *w)
{
	size_t from = w->i;

	w->i = payload_value_end(w->s, w->i);
	return put(w, w->s.p + from, w->i - from);
}

static int walk_value(struct aj_walk *w)
{
	skip_space(w);
	if (w->i >= w->s.n)
		return 0;
	if (w->s.p[w->i] == '{')
		return walk_object(w);
	if (w->s.p[w->i] == '[')
		return walk_array(w);
	return walk_scalar(w);
}

/* Walks the row's args (a JSON array jansson accepted) into b, or only checks. */
static int walk_args(const struct job_in *in, struct buf *b, char *reason, size_t rlen)
{
	struct aj_walk w = { .s = in->args, .b = b, .depth = AJ_WRAP_DEPTH, .reason = reason, .rlen = rlen };

	return walk_value(&w);
}

/* The 8-4-4-4-12 hex text of a uuid column. */
static int check_uuid(const struct job_row *row, char *reason, size_t rlen)
{
	struct span s = span_of(row->uuid, row->uuid_len);
	size_t i;

	for (i = 0; s.n == PAYLOAD_UUID_LEN && i < s.n; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;
		char c = s.p[i];
		bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
		if (dash ? c != '-' : !hex)
			break;
	}
	if (s.n == PAYLOAD_UUID_LEN && i == s.n)
		return 0;
	payload_reason(reason, rlen, "uuid is not a uuid");
	return JOB_REJECT;
}

/* Rails' job settings from options: priority an Integer (any size: Ruby
 * reads it, the relay copies it) or nil, locale and timezone non-empty
 * strings (I18n and Time.use_zone refuse ""). */
static int check_settings(struct span options, char *reason, size_t rlen)
{
	static const char *const texts[] = { "locale", "timezone" };
	struct span p, t;
	long long n;
	int rc;

	if ((rc = payload_member(options, "priority", &p)) < 0)
		return rc;
	if (p.n && payload_kind(p) != PAYLOAD_NULL && payload_int(p, &n) == -EINVAL) {
		payload_reason(reason, rlen, "options key \"priority\" is not an integer or null");
		return JOB_REJECT;
	}
	for (size_t i = 0; i < 2; i++) {
		if ((rc = payload_member(options, texts[i], &t)) < 0)
			return rc;
		/* "" is the one way to write an empty string. */
		if (t.n && (payload_kind(t) != PAYLOAD_STRING || t.n == 2)) {
			payload_reason(reason, rlen, "options key \"%s\" is not a non-empty string", texts[i]);
			return JOB_REJECT;
		}
	}
	return 0;
}

/* The adapter writes "wrapped" itself: a second one would forge the job. */
static int check_wrapped(struct span options, char *reason, size_t rlen)
{
	struct span wrapped;
	int rc = payload_member(options, "wrapped", &wrapped);

	if (rc < 0)
		return rc;
	if (wrapped.n) {
		payload_reason(reason, rlen, "options key \"wrapped\" is reserved");
		return JOB_REJECT;
	}
	return 0;
}

/* days since 1970-01-01 to a proleptic Gregorian date (Hinnant's civil_from_days). */
static void civil_from_days(long long z, long long *y, int *m, int *d)
{
	long long era, doe, yoe, doy, mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = z - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

/* Time#utc.iso8601 (Rails 6.1, 7.0) or iso8601(9) (7.1+) of an epoch
 * microsecond time after 1970 (now, or a run_at after now), as a JSON string. */
static int put_iso8601(struct buf *b, long long us, enum rails_version rails)
{
	long long secs = us / 1000000, y;
	long long sod = secs % 86400;
	int m, d;

	civil_from_days(secs / 86400, &y, &m, &d);
	if (buf_printf(b, "\"%04lld-%02d-%02dT%02lld:%02lld:%02lld", y, m, d, sod / 3600, sod / 60 % 60, sod % 60) < 0)
		return -ENOMEM;
	if (rails != RAILS_6_1 && buf_printf(b, ".%06lld000", us % 1000000) < 0)
		return -ENOMEM;
	return buf_puts(b, "Z\"");
}

/* An option's value as written, or dflt when it is absent. */
static int put_option(struct buf *b, struct span options, const char *key, const char *dflt)
{
	struct span v;
	int rc = payload_member(options, key, &v);

	if (rc < 0)
		return rc;
	return v.n ? payload_compact(b, v, false) : buf_puts(b, dflt);
}

/* [ ActiveJob::Base#serialize ]: the one argument JobWrapper#perform takes. */
static int put_job(struct buf *b, const struct job_in *in, const struct job_opts *opts, void *arg)
{
	const struct job_row *row = in->row;
	enum rails_version rails = opts->rails_version == RAILS_6_1 ? RAILS_6_1 : RAILS_7_1;

	(void)arg;
	if (buf_puts(b, "[{\"job_class\":") < 0 || payload_string(b, span_of(row->job_class, row->class_len), 0) < 0 ||
	    buf_puts(b, ",\"job_id\":\"") < 0 || buf_append(b, row->uuid, row->uuid_len) < 0 ||
	    buf_puts(b, "\",\"provider_job_id\":null,\"queue_name\":") < 0 ||
	    payload_string(b, span_of(row->queue, row->queue_len), 0) < 0 || buf_puts(b, ",\"priority\":") < 0 ||
	    put_option(b, in->options, "priority", "null") < 0 || buf_puts(b, ",\"arguments\":") < 0 ||
	    walk_args(in, b, NULL, 0) < 0)
		return -ENOMEM;
	if (buf_puts(b, ",\"executions\":0,\"exception_executions\":{},\"locale\":") < 0 ||
	    put_option(b, in->options, "locale", "\"en\"") < 0 || buf_puts(b, ",\"timezone\":") < 0 ||
	    put_option(b, in->options, "timezone", "\"UTC\"") < 0 || buf_puts(b, ",\"enqueued_at\":") < 0 ||
	    put_iso8601(b, opts->now_us, rails) < 0)
		return -ENOMEM;
	if (rails != RAILS_6_1) {
		if (buf_puts(b, ",\"scheduled_at\":") < 0)
			return -ENOMEM;
		if ((in->scheduled ? put_iso8601(b, row->run_at_us, rails) : buf_puts(b, "null")) < 0)
			return -ENOMEM;
	}
	return buf_puts(b, "}]");
}

/*
 * A row the client library staged with ActiveJob's own `serialize`: args is
 * [job_data], which JobWrapper#perform hands to ActiveJob::Base.execute.
 * Rails wrote its "_aj_*" keys itself, so the arguments are not walked; the
 * checks are what execute needs before it can fail the job in the worker.
 */
static int check_serialized(struct span args, char *reason, size_t rlen)
{
	struct span key, job, v;
	size_t i = 0;
	bool one = payload_next(args, &i, &key, &job) && payload_kind(job) == PAYLOAD_OBJECT &&
		   !payload_next(args, &i, &key, &v);
	int rc;

	if (!one) {
		payload_reason(reason, rlen, "serialized activejob args is not [job_data], one object");
		return JOB_REJECT;
	}
	if ((rc = payload_member(job, "job_class", &v)) < 0)
		return rc;
	if (payload_kind(v) != PAYLOAD_STRING || v.n == 2) {
		payload_reason(reason, rlen, "serialized activejob job_data has no \"job_class\" string");
		return JOB_REJECT;
	}
	if ((rc = payload_member(job, "arguments", &v)) < 0)
		return rc;
	if (payload_kind(v) != PAYLOAD_ARRAY) {
		payload_reason(reason, rlen, "serialized activejob job_data has no \"arguments\" array");
		return JOB_REJECT;
	}
	return 0;
}

static int activejob_payload(const struct job_in *in, const struct job_opts *opts, struct buf *out, char *reason,
			     size_t rlen)
{
	struct sidekiq_item it = {
		.class_name = span_of(AJ_WRAPPER, strlen(AJ_WRAPPER)),
		.wrapped = span_of(in->row->job_class, in->row->class_len),
		.put_args = put_job,
		.skip = aj_consumed,
	};
	bool serialized;
	int rc;

	if ((rc = sidekiq_check_jid(in->row, reason, rlen)) != 0 || (rc = check_uuid(in->row, reason, rlen)) != 0 ||
	    (rc = check_wrapped(in->options, reason, rlen)) != 0 ||
	    (rc = format_serialized(in->options, &serialized, reason, rlen)) != 0)
		return rc;
	if (serialized) {
		it.put_args = sidekiq_put_row_args; /* [job_data] as the app's ActiveJob serialized it */
		it.skip = aj_consumed_serialized;
		rc = check_serialized(in->args, reason, rlen);
	} else if ((rc = check_settings(in->options, reason, rlen)) == 0) {
		rc = walk_args(in, NULL, reason, rlen);
	}
	return rc ? rc : sidekiq_put_item(out, in, opts, &it);
}

const struct format format_activejob = {
	.name = "activejob",
	.payload = activejob_payload,
	.commands = sidekiq_commands,
	.lists = format_queue_list,
};
