/* One setting's text into its field of the config: numbers and their ranges,
 * choices, URLs (checked, never quoted), addresses, the namespace. */
#include "fmacros.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "config_apply.h"
#include "formats.h"
#include "settings.h"
#include "values.h"

/* Choices are stored through an int pointer, so each enum must be int-sized. */
_Static_assert(sizeof(enum job_format) == sizeof(int), "enum job_format is not int-sized");
_Static_assert(sizeof(enum rails_version) == sizeof(int), "enum rails_version is not int-sized");
_Static_assert(sizeof(enum log_level) == sizeof(int), "enum log_level is not int-sized");
_Static_assert(sizeof(enum log_format) == sizeof(int), "enum log_format is not int-sized");
_Static_assert(sizeof(enum config_command) == sizeof(int), "enum config_command is not int-sized");

static void *field(struct config *cfg, const struct setting *s)
{
	return (char *)cfg + s->off;
}

static void store(struct config *cfg, const struct setting *s, long long v)
{
	void *p = field(cfg, s);

	switch (s->type) {
	case V_BOOL:
	case V_ACTION:
		*(bool *)p = v != 0;
		break;
	case V_LONG:
		*(long *)p = (long)v;
		break;
	case V_I64:
		*(long long *)p = v;
		break;
	default:
		*(int *)p = (int)v;
		break;
	}
}

/* NULL means unset: the prefix then follows the format, as Resque's own
 * client defaults to the "resque" namespace and Sidekiq's to none. */
static int apply_namespace(struct config *cfg, const char *raw, char *why, size_t len)
{
	size_t n;

	/* Laravel's prefix has no colon of its own: it is another setting. */
	if (cfg->format == FORMAT_LARAVEL) {
		if (raw)
			return value_fail(why, len, -EINVAL,
					  "is not used with --format laravel: set --laravel-prefix instead");
		return value_set_str(&cfg->key_prefix, cfg->laravel_prefix ? cfg->laravel_prefix : "");
	}
	/* BullMQ's keys are PREFIX:QUEUE:...: its prefix is never empty of its colon. */
	if (cfg->format == FORMAT_BULLMQ) {
		const char *p = cfg->bullmq_prefix ? cfg->bullmq_prefix : "bull";
		if (raw)
			return value_fail(why, len, -EINVAL,
					  "is not used with --format bullmq: set --bullmq-prefix instead");
		if (!(cfg->key_prefix = malloc(strlen(p) + 2)))
			return -ENOMEM;
		snprintf(cfg->key_prefix, strlen(p) + 2, "%s:", p);
		return 0;
	}
	if (!raw)
		raw = cfg->format == FORMAT_RESQUE ? "resque" : "";
	for (const char *p = raw; *p; p++)
		if (isspace((unsigned char)*p) || iscntrl((unsigned char)*p))
			return value_fail(why, len, -EINVAL, "must not contain whitespace or control characters");
	n = strlen(raw);
	if (n && raw[n - 1] == ':')
		return value_fail(why, len, -EINVAL, "must not end with ':' (the colon is added)");
	if (!(cfg->key_prefix = malloc(n + 2)))
		return -ENOMEM;
	snprintf(cfg->key_prefix, n + 2, n ? "%s:" : "%s", raw);
	return 0;
}

/* "" is off; otherwise HOST:PORT, [IPv6]:PORT or :PORT. The host is only
 * checked for shape here: http.c resolves it when it starts listening. */
static int apply_addr(struct config *cfg, const char *raw, char *why, size_t len)
{
	const char *colon = strrchr(raw, ':'), *host = raw;
	size_t hlen;
	long long port;

	cfg->http_port = -1;
	if (value_set_str(&cfg->http_addr, raw) < 0)
		return -ENOMEM;
	if (!*raw)
		return value_set_str(&cfg->http_host, "");
	if (!colon || strstr(raw, "://"))
		return value_fail(why, len, -EINVAL,
				  "must be HOST:PORT, e.g. 127.0.0.1:9187, or :9187 for every interface");
	if (value_parse_scaled(colon + 1, value_count.units, &port) < 0 || port < 0 || port > 65535)
		return value_fail(why, len, -EINVAL, "port must be a number from 0 to 65535");
	hlen = (size_t)(colon - raw);
	if (hlen && raw[0] == '[') {
		if (hlen < 3 || raw[hlen - 1] != ']')
			return value_fail(why, len, -EINVAL, "an IPv6 address goes in brackets: [::1]:9187");
		host++;
		hlen -= 2;
	} else if (memchr(raw, ':', hlen)) {
		return value_fail(why, len, -EINVAL, "an IPv6 address goes in brackets: [::1]:9187");
	}
	for (size_t i = 0; i < hlen; i++)
		if (!isalnum((unsigned char)host[i]) && !strchr(".-_:%", host[i]))
			return value_fail(why, len, -EINVAL, "bad host name");
	free(cfg->http_host);
	if (!(cfg->http_host = strndup(host, hlen)))
		return -ENOMEM;
	cfg->http_port = (int)port;
	return 0;
}

static int apply_number(struct config *cfg, const struct setting *s, const char *raw, char *why, size_t len)
{
	char lo[32], hi[32];
	long long v;

	if (value_parse_scaled(raw, s->num->units, &v) < 0)
		return value_fail(why, len, -EINVAL, "%s", s->num->syntax);
	if (v < s->min || v > s->max) {
		value_format_amount(s->num, s->min, lo, sizeof(lo));
		value_format_amount(s->num, s->max, hi, sizeof(hi));
		return value_fail(why, len, -EINVAL, "must be between %s and %s", lo, hi);
	}
	store(cfg, s, v);
	return 0;
}

/* The length of a leading "scheme://" (letters, digits, "+-.:"), or 0.
 * A conninfo string starts with a key and "=", so it never has one; libpq
 * takes only "postgresql://" and "postgres://", in lower case. */
static size_t pg_url_scheme(const char *url)
{
	size_t n = 0;

	if (!isalpha((unsigned char)url[0]))
		return 0;
	while (isalnum((unsigned char)url[n]) || (url[n] && strchr("+-.:", url[n])))
		n++;
	return strncmp(url + n, "//", 2) == 0 && n > 0 && url[n - 1] == ':' ? n + 2 : 0;
}

/* Whether the text before the first "=" holds ":", "/" or "@", which no
 * conninfo key does: HOST:PORT/DB?sslmode=require lacks only its scheme. */
static bool not_a_key(const char *url)
{
	size_t k = strcspn(url, "=");

	for (size_t i = 0; i < k; i++)
		if (strchr(":/@", url[i]))
			return true;
	return false;
}

/* What libpq's "missing = after ..." means when the text is no conninfo at
 * all: another scheme (named: the scheme holds no secret), HOST:PORT/DB
 * without one, or a bare word. Nothing after the scheme is shown. */
static int explain_not_pg_url(const char *url, char *why, size_t len)
{
	static const char neither[] = "neither a postgresql:// or postgres:// URL nor a conninfo string "
				      "(key=value pairs)";
	size_t scheme = pg_url_scheme(url);

	if (scheme)
		return value_fail(why, len, -EINVAL,
				  "\"%.*s\" is not a postgres URL: use postgresql://, postgres:// or a "
				  "conninfo string (key=value pairs)",
				  scheme > 40 ? 40 : (int)scheme, url);
	if (strpbrk(url, ":/@"))
		return value_fail(why, len, -EINVAL, "%s: write postgresql://HOST:PORT/DB", neither);
	if (strpbrk(url, " \t\r\n"))
		return value_fail(why, len, -EINVAL, "%s", neither);
	return value_fail(why, len, -EINVAL, "%s: a database name alone is written dbname=NAME", neither);
}

/* libpq's parser quotes the text it stumbled on, which may be the password:
 * its message is kept with every quoted piece replaced by "...". Text that
 * is no conninfo at all (no "=", or another scheme) is explained instead:
 * libpq would only say a "=" is missing. */
static int check_pg_url(const char *url, char *why, size_t len)
{
	PQconninfoOption *opts;
	char *msg = NULL;
	bool quoted = false;
	size_t n = 0;

	if (!*url)
		return 0;
	if ((opts = PQconninfoParse(url, &msg))) {
		PQconninfoFree(opts);
		return 0;
	}
	if (strncmp(url, "postgresql://", 13) != 0 && strncmp(url, "postgres://", 11) != 0 &&
	    (pg_url_scheme(url) || !strchr(url, '=') || not_a_key(url))) {
		PQfreemem(msg);
		return explain_not_pg_url(url, why, len);
	}
	if (!msg)
		return -ENOMEM;
	for (const char *p = msg; *p && n + 6 < len; p++) {
		if (*p == '"' && (quoted = !quoted))
			n += (size_t)snprintf(why + n, len - n, "\"...\"");
		else if (!quoted && *p != '"')
			why[n++] = isprint((unsigned char)*p) ? *p : ' ';
	}
	while (n > 0 && why[n - 1] == ' ')
		n--;
	why[n] = '\0';
	PQfreemem(msg);
	return -EINVAL;
}

int config_apply_value(struct config *cfg, const struct setting *s, const char *raw, char *why, size_t len)
{
	const struct choice *c;
	char names[128];
	long long v;

	switch (s->type) {
	case V_PG:
		if (value_set_str(field(cfg, s), raw) < 0)
			return -ENOMEM;
		return check_pg_url(raw, why, len);
	case V_REDIS:
		if (value_set_str(field(cfg, s), raw) < 0)
			return -ENOMEM;
		return redis_target_parse_with_password(&cfg->redis, raw, cfg->redis_password, why, len);
	case V_FILE:
		return 0; /* read_files gave its contents to .file_for */
	case V_ROUTE:
		return 0; /* load_routes adds them last: each copies the finished config */
	case V_SECRET:
		return raw ? value_set_str(field(cfg, s), raw) : 0;
	case V_NS:
		return apply_namespace(cfg, raw, why, len);
	case V_ADDR:
		return apply_addr(cfg, raw, why, len);
	case V_STR:
		return raw && *raw ? value_set_str(field(cfg, s), raw) : 0;
	case V_LIMITS:
		queue_limits_free(&cfg->queue_limits);
		return queue_limits_parse(&cfg->queue_limits, raw, why, len);
	case V_INT:
	case V_LONG:
		return apply_number(cfg, s, raw, why, len);
	case V_I64:
		if (value_parse_i64(raw, &v) < 0)
			return value_fail(why, len, -EINVAL, "not a signed 64-bit integer (decimal, or hex with 0x)");
		store(cfg, s, v);
		return 0;
	case V_CHOICE:
	case V_BOOL:
	case V_ACTION:
		if (!(c = value_find_choice(s->choices, raw))) {
			value_join_choices(s->choices, ", ", names, sizeof(names));
			return value_fail(why, len, -EINVAL, "must be one of %s", names);
		}
		store(cfg, s, c->value);
		return 0;
	}
	return -EINVAL;
}

int config_check_cluster(const struct config *cfg, char *why, size_t len)
{
	const struct format *f = format_of(cfg->format);

	if (!cfg->redis.cluster)
		return 0;
	if (!f->cluster_infix)
		return value_fail(why, len, -EINVAL,
				  "--redis-url: a redis-cluster:// target takes --format bullmq or laravel, whose "
				  "workers read a cluster; %s keeps keys every queue shares, which a cluster spreads "
				  "over its masters",
				  f->name);
	if (cfg->max_queue_length > 0 || cfg->queue_limits.n > 0)
		return value_fail(why, len, -EINVAL,
				  "--max-queue-length and --queue-limits are not supported on a redis-cluster:// "
				  "target yet");
	if (cfg->max_redis_memory > 0)
		return value_fail(why, len, -EINVAL,
				  "--max-redis-memory is not supported on a redis-cluster:// target yet");
	return 0;
}
