/* Settings: one table drives --help, argv and environment parsing, and validation. */
#include "fmacros.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libpq-fe.h>

#include "config.h"

/* Choices are stored through an int pointer, so each enum must be int-sized. */
_Static_assert(sizeof(enum job_format) == sizeof(int), "enum job_format is not int-sized");
_Static_assert(sizeof(enum log_level) == sizeof(int), "enum log_level is not int-sized");
_Static_assert(sizeof(enum log_format) == sizeof(int), "enum log_format is not int-sized");
_Static_assert(sizeof(enum config_command) == sizeof(int), "enum config_command is not int-sized");

enum value_type {
	V_PG,     /* char * pg_url, checked with libpq's own parser */
	V_REDIS,  /* char * redis_url, also parsed into cfg->redis */
	V_FILE,   /* a path; the file's contents are the value of .file_for */
	V_SECRET, /* a path; the file's contents go to a char *, never shown */
	V_NS,     /* char * key_prefix; its default depends on the format */
	V_CHOICE, /* int or int-sized enum, one of .choices */
	V_BOOL,   /* bool; bare flag on the command line, words in the environment */
	V_ACTION, /* bool; command line only, no value: print something and exit */
	V_INT,    /* int, with .num units and .min/.max */
	V_LONG,   /* long, with .num units and .min/.max */
	V_I64,    /* long long, decimal or 0x hex */
	V_ADDR,   /* char * http_addr, "" or HOST:PORT, also split into http_host and http_port */
};

struct choice {
	const char *name;
	int value;
	const char *help; /* commands only */
};

struct unit {
	const char *suffix;
	long long mult;
};

/* A kind of number: the suffixes it accepts and what to say when it is not one. */
struct numkind {
	const char *syntax;
	struct unit units[6]; /* ends at the first NULL suffix */
};

struct setting {
	const char *flag; /* without the leading dashes */
	char short_name;
	const char *env;
	const char *env_fallback;
	enum value_type type;
	const char *metavar;
	const char *def;     /* as text, parsed like any other value; NULL: none */
	const char *def_doc; /* shown by --help instead of def */
	const char *help;
	size_t off;
	const struct choice *choices;
	const struct numkind *num;
	long long min, max;
	bool secret;          /* may hold a password: never echoed in errors */
	const char *file_for; /* V_FILE: the flag whose value the file holds */
};

static const struct choice commands[] = {
	{ "run", CMD_RUN, "relay staged jobs to redis until stopped (default)" },
	{ "migrate", CMD_MIGRATE, "create or upgrade the staged_jobs table, then exit" },
	{ NULL, 0, NULL },
};
static const struct choice formats[] = {
	{ "sidekiq", FORMAT_SIDEKIQ, NULL },
	{ "resque", FORMAT_RESQUE, NULL },
	{ NULL, 0, NULL },
};
static const struct choice sidekiq_versions[] = {
	{ "6", 6, NULL }, { "7", 7, NULL }, { "8", 8, NULL }, { NULL, 0, NULL },
};
static const struct choice log_formats[] = {
	{ "kv", LOG_FORMAT_KV, NULL },
	{ "json", LOG_FORMAT_JSON, NULL },
	{ NULL, 0, NULL },
};
static const struct choice log_levels[] = {
	{ "debug", LOG_DEBUG, NULL }, { "info", LOG_INFO, NULL },  { "warn", LOG_WARN, NULL },
	{ "error", LOG_ERROR, NULL }, { NULL, 0, NULL },
};
static const struct choice bool_words[] = {
	{ "true", 1, NULL }, { "false", 0, NULL }, { "1", 1, NULL },  { "0", 0, NULL },
	{ "yes", 1, NULL },  { "no", 0, NULL },    { "on", 1, NULL }, { "off", 0, NULL },
	{ NULL, 0, NULL },
};

static const struct numkind count = { "not a whole number", { { "", 1 } } };
/* K before k and M before m: --help and range errors print the first spelling. */
static const struct numkind size = {
	"not a size (e.g. 65536, 512k or 1M)",
	{ { "", 1 }, { "K", 1024 }, { "k", 1024 }, { "M", 1048576 }, { "m", 1048576 } },
};
static const struct numkind duration = {
	"not a duration (e.g. 250ms or 2s; a bare number is milliseconds)",
	{ { "ms", 1 }, { "s", 1000 }, { "", 1 } },
};

/* Longer spans than the duration above: watching intervals and transaction ages. */
static const struct numkind period = {
	"not a duration (e.g. 30s, 5min or 1h; a bare number is milliseconds)",
	{ { "ms", 1 }, { "s", 1000 }, { "min", 60000 }, { "h", 3600000 }, { "", 1 } },
};

#define OFF(field) offsetof(struct config, field)

/*
 * Applied in this order, except that V_SECRET files go first (the redis url
 * needs to know whether its password is replaced): --format comes before
 * --namespace, whose default needs it.
 */
static const struct setting settings[] = {
	{ .flag = "pg-url", .env = "STAGEDRAIN_PG_URL", .env_fallback = "DATABASE_URL",
	  .type = V_PG, .metavar = "URL", .def = "", .off = OFF(pg_url), .secret = true,
	  .def_doc = "empty, so libpq uses PGHOST, PGDATABASE and its other PG* variables",
	  .help = "postgres holding the staged_jobs table: a libpq conninfo string or "
		  "postgresql:// URI, passed to libpq unchanged; TLS with "
		  "sslmode=verify-full and sslrootcert=PATH" },
	{ .flag = "pg-url-file", .env = "STAGEDRAIN_PG_URL_FILE", .type = V_FILE,
	  .metavar = "PATH", .def_doc = "none", .file_for = "pg-url",
	  .help = "read --pg-url from this file, e.g. a mounted secret; one trailing "
		  "newline is ignored" },
	{ .flag = "pg-password-file", .env = "STAGEDRAIN_PG_PASSWORD_FILE", .type = V_SECRET,
	  .metavar = "PATH", .def_doc = "none", .off = OFF(pg_password),
	  .help = "read the postgres password from this file; it replaces any password "
		  "in --pg-url" },
	{ .flag = "redis-url", .env = "STAGEDRAIN_REDIS_URL", .env_fallback = "REDIS_URL",
	  .type = V_REDIS, .metavar = "URL", .def = "redis://127.0.0.1:6379/0",
	  .off = OFF(redis_url), .secret = true,
	  .help = "redis to push jobs to: redis://[[user]:password@]host[:port][/db] or "
		  "unix://[[user]:password@]/path/to/redis.sock[?db=N]; rediss:// (TLS) is "
		  "not supported, use a TLS tunnel such as stunnel on localhost" },
	{ .flag = "redis-url-file", .env = "STAGEDRAIN_REDIS_URL_FILE", .type = V_FILE,
	  .metavar = "PATH", .def_doc = "none", .file_for = "redis-url",
	  .help = "read --redis-url from this file, e.g. a mounted secret; one trailing "
		  "newline is ignored" },
	{ .flag = "redis-password-file", .env = "STAGEDRAIN_REDIS_PASSWORD_FILE",
	  .type = V_SECRET, .metavar = "PATH", .def_doc = "none", .off = OFF(redis_password),
	  .help = "read the redis password (AUTH) from this file; it replaces any "
		  "password in --redis-url" },
	{ .flag = "format", .env = "STAGEDRAIN_FORMAT", .type = V_CHOICE, .def = "sidekiq",
	  .choices = formats, .off = OFF(format),
	  .help = "job layout in redis, as the worker library writes it" },
	{ .flag = "sidekiq-version", .env = "STAGEDRAIN_SIDEKIQ_VERSION", .type = V_CHOICE,
	  .def = "7", .choices = sidekiq_versions, .off = OFF(sidekiq_version),
	  .help = "sidekiq major version: 6 and 7 store timestamps as float seconds, "
		  "8 as integer milliseconds" },
	{ .flag = "namespace", .env = "STAGEDRAIN_NAMESPACE", .type = V_NS, .metavar = "NAME",
	  .off = OFF(key_prefix), .def_doc = "none for sidekiq, \"resque\" for resque",
	  .help = "key prefix as redis-namespace writes it: NAME:queue:default; the colon "
		  "is added, and an empty NAME means no prefix" },
	{ .flag = "batch-size", .env = "STAGEDRAIN_BATCH_SIZE", .type = V_INT, .metavar = "N",
	  .def = "1000", .num = &count, .min = 1, .max = 100000, .off = OFF(batch_size),
	  .help = "rows moved per transaction" },
	{ .flag = "max-job-bytes", .env = "STAGEDRAIN_MAX_JOB_BYTES", .type = V_LONG,
	  .metavar = "SIZE", .def = "1M", .num = &size, .min = 64, .max = 536870912,
	  .off = OFF(max_job_bytes),
	  .help = "largest job payload pushed to redis; k and M multiply by 1024 and 1048576" },
	{ .flag = "batch-max-bytes", .env = "STAGEDRAIN_BATCH_MAX_BYTES", .type = V_LONG,
	  .metavar = "SIZE", .def = "64M", .num = &size, .min = 4096, .max = 1073741824,
	  .off = OFF(batch_max_bytes),
	  .help = "a batch stops taking rows once their text reaches SIZE (it always takes "
		  "one); a row's args over --max-job-bytes are not read at all, so one batch "
		  "holds at most about 2 x (SIZE + --max-job-bytes)" },
	{ .flag = "poll-interval", .env = "STAGEDRAIN_POLL_INTERVAL", .type = V_INT,
	  .metavar = "DURATION", .def = "100ms", .num = &duration, .min = 1, .max = 60000,
	  .off = OFF(poll_interval_ms),
	  .help = "longest an idle relay waits before looking again (it waits 1ms after a "
		  "batch, doubling while reads find nothing); 250ms, 2s, or a bare number of "
		  "milliseconds" },
	{ .flag = "redis-timeout", .env = "STAGEDRAIN_REDIS_TIMEOUT", .type = V_INT,
	  .metavar = "DURATION", .def = "5s", .num = &duration, .min = 10, .max = 300000,
	  .off = OFF(redis_timeout_ms), .help = "connect and command timeout for redis" },
	{ .flag = "lock-key", .env = "STAGEDRAIN_LOCK_KEY", .type = V_I64, .metavar = "KEY",
	  .def = "0x73746764726e", .off = OFF(lock_key),
	  .help = "pg_advisory_lock key that elects the one relay that drains; a signed "
		  "64-bit integer, decimal or 0x hex" },
	{ .flag = "log-format", .env = "STAGEDRAIN_LOG_FORMAT", .type = V_CHOICE, .def = "kv",
	  .choices = log_formats, .off = OFF(log_format),
	  .help = "layout of log lines on stderr" },
	{ .flag = "log-level", .env = "STAGEDRAIN_LOG_LEVEL", .type = V_CHOICE, .def = "info",
	  .choices = log_levels, .off = OFF(log_level), .help = "least severe level logged" },
	{ .flag = "http-addr", .env = "STAGEDRAIN_HTTP_ADDR", .type = V_ADDR,
	  .metavar = "HOST:PORT", .def = "", .def_doc = "off", .off = OFF(http_addr),
	  .help = "serve /metrics (Prometheus), /healthz and /readyz over HTTP here, e.g. "
		  "127.0.0.1:9187, or :9187 for every interface; port 0 picks a free port, "
		  "which is logged" },
	{ .flag = "warn-xact-age", .env = "STAGEDRAIN_WARN_XACT_AGE", .type = V_INT,
	  .metavar = "DURATION", .def = "5min", .num = &period, .min = 0, .max = 86400000,
	  .off = OFF(warn_xact_age_ms),
	  .help = "log a warning naming any transaction in the database open longer than "
		  "this, since vacuum cannot clean up after it; 0 turns the warning off" },
	{ .flag = "watch-interval", .env = "STAGEDRAIN_WATCH_INTERVAL", .type = V_INT,
	  .metavar = "DURATION", .def = "5s", .num = &period, .min = 100, .max = 3600000,
	  .off = OFF(watch_interval_ms),
	  .help = "how often a separate connection reads the backlog, the oldest "
		  "transaction and dead rows from postgres, and pings redis, for metrics, "
		  "/readyz and the warning" },
	{ .flag = "once", .env = "STAGEDRAIN_ONCE", .type = V_BOOL, .def = "off",
	  .choices = bool_words, .off = OFF(once),
	  .help = "drain until the table is empty, then exit 0" },
	{ .flag = "help", .short_name = 'h', .type = V_ACTION, .def = "off",
	  .choices = bool_words, .off = OFF(help), .help = "print this help and exit" },
	{ .flag = "version", .short_name = 'V', .type = V_ACTION, .def = "off",
	  .choices = bool_words, .off = OFF(version), .help = "print the version and exit" },
};

#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

/* A setting's raw text and where it came from; env NULL means the command
 * line, file non-NULL that val is that file's contents, which pick owns. */
struct pick {
	const char *val;
	const char *env;
	const char *file;
	char *owned;
	bool set;
};

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...) SD_PRINTF(4, 5);

/* Writes one message into err (which may be NULL) and returns rc. */
static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* Copies s for quoting in a message: one bounded line, so a stray newline
 * in a variable cannot split or forge log lines. */
static const char *printable(const char *s, char *out, size_t len)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < len; i++)
		out[i] = isprint((unsigned char)s[i]) ? s[i] : '?';
	out[i] = '\0';
	if (s[i] && len > 4)
		memcpy(out + len - 4, "...", 4);
	return out;
}

static int set_str(char **dst, const char *src)
{
	free(*dst);
	*dst = strdup(src);
	return *dst ? 0 : -ENOMEM;
}

static void join_choices(const struct choice *c, const char *sep, char *out, size_t len)
{
	size_t n = 0;

	out[0] = '\0';
	for (; c->name && n < len; c++)
		n += (size_t)snprintf(out + n, len - n, "%s%s", n ? sep : "", c->name);
}

/* Choices are matched without case: operators write INFO as often as info. */
static const struct choice *find_choice(const struct choice *c, const char *name)
{
	for (; c->name; c++)
		if (strcasecmp(c->name, name) == 0)
			return c;
	return NULL;
}

/* Parses [-]digits[suffix]. Saturates rather than overflowing, so a huge
 * number reaches the range check and is reported as out of range. */
static int parse_scaled(const char *s, const struct unit *units, long long *out)
{
	bool neg = *s == '-';
	const char *p = s + neg;
	long long n = 0;

	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	for (; isdigit((unsigned char)*p); p++)
		n = n > (LLONG_MAX - 9) / 10 ? LLONG_MAX : n * 10 + (*p - '0');
	for (; units->suffix; units++) {
		if (strcmp(p, units->suffix) == 0) {
			n = n > LLONG_MAX / units->mult ? LLONG_MAX : n * units->mult;
			*out = neg ? -n : n;
			return 0;
		}
	}
	return -EINVAL;
}

/* Prints v with the largest unit that divides it: 60000 ms as 60s, 536870912 as 512M. */
static void format_amount(const struct numkind *k, long long v, char *out, size_t len)
{
	const struct unit *best = &k->units[0];

	if (v == 0) {
		snprintf(out, len, "0");
		return;
	}
	for (const struct unit *u = k->units; u->suffix; u++)
		if (u->mult > best->mult && v % u->mult == 0)
			best = u;
	snprintf(out, len, "%lld%s", v / best->mult, best->suffix);
}

/* Decimal, or hex after 0x; a leading 0 does not mean octal. */
static int parse_i64(const char *s, long long *out)
{
	const char *p = s + (*s == '-' || *s == '+');
	bool hex = p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
	char *end;

	if (!(hex ? isxdigit((unsigned char)p[2]) : isdigit((unsigned char)p[0])))
		return -EINVAL;
	errno = 0;
	*out = strtoll(s, &end, hex ? 16 : 10);
	return *end || errno == ERANGE ? -EINVAL : 0;
}

/* ---- redis targets ---- */

static bool has_prefix(const char *s, const char *prefix)
{
	return strncasecmp(s, prefix, strlen(prefix)) == 0;
}

static int hex_value(char c)
{
	return isdigit((unsigned char)c) ? c - '0' : tolower((unsigned char)c) - 'a' + 10;
}

/* Decodes %XX in place; %00 is refused because it would cut the string short. */
static int pct_decode(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (*s != '%') {
			*w++ = *s;
			continue;
		}
		if (!isxdigit((unsigned char)s[1]) || !isxdigit((unsigned char)s[2]))
			return -EINVAL;
		*w = (char)(hex_value(s[1]) * 16 + hex_value(s[2]));
		if (*w++ == '\0')
			return -EINVAL;
		s += 2;
	}
	*w = '\0';
	return 0;
}

/* None of these messages quote the URL or any piece of it: a mistyped URL can
 * put the password anywhere. */
static int parse_userinfo(struct redis_target *t, char *ui, char *err, size_t errlen)
{
	char *pass = strchr(ui, ':');

	if (pass)
		*pass++ = '\0';
	if (pct_decode(ui) < 0 || (pass && pct_decode(pass) < 0))
		return fail(err, errlen, -EINVAL, "bad percent-encoding in user name or password");
	if (*ui && set_str(&t->user, ui) < 0)
		return -ENOMEM;
	if (pass && *pass && set_str(&t->password, pass) < 0)
		return -ENOMEM;
	return 0;
}

static int parse_db(const char *s, int *db, char *err, size_t errlen)
{
	long long v;

	if (parse_scaled(s, count.units, &v) < 0 || v < 0 || v > INT_MAX)
		return fail(err, errlen, -EINVAL, "db must be a whole number, 0 or more");
	*db = (int)v;
	return 0;
}

#define HOST_CHARS                  \
	"abcdefghijklmnopqrstuvwxyz" \
	"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_"

/* host, host:port, [v6] or [v6]:port; *port is NULL when absent. */
static int split_host(char *s, char **host, char **port, char *err, size_t errlen)
{
	const char *allowed = HOST_CHARS;
	char *end;

	*host = s;
	*port = NULL;
	if (*s == '[') {
		end = strchr(s, ']');
		if (!end)
			return fail(err, errlen, -EINVAL, "missing ] after IPv6 address");
		if (end[1] && end[1] != ':')
			return fail(err, errlen, -EINVAL, "unexpected text after IPv6 address");
		*end = '\0';
		*host = s + 1;
		*port = end[1] ? end + 2 : NULL;
		allowed = HOST_CHARS ":%";
	} else if ((end = strchr(s, ':'))) {
		*end = '\0';
		*port = end + 1;
	}
	if (!**host)
		return fail(err, errlen, -EINVAL, "missing host");
	if ((*host)[strspn(*host, allowed)])
		return fail(err, errlen, -EINVAL, "bad host name");
	return 0;
}

/* host[:port][/db] after an optional userinfo; s is a scratch copy. The last @
 * ends the userinfo, so a password with a raw @ or / still works. */
static int parse_tcp(struct redis_target *t, char *s, char *err, size_t errlen)
{
	char *at = strrchr(s, '@'), *path, *host, *port;
	long long v;
	int rc;

	if (at) {
		*at = '\0';
		if ((rc = parse_userinfo(t, s, err, errlen)) < 0)
			return rc;
		s = at + 1;
	}
	if ((path = strchr(s, '/')))
		*path++ = '\0';
	if ((rc = split_host(s, &host, &port, err, errlen)) < 0)
		return rc;
	t->port = 6379;
	if (port) {
		if (parse_scaled(port, count.units, &v) < 0 || v < 1 || v > 65535)
			return fail(err, errlen, -EINVAL, "port must be a number from 1 to 65535");
		t->port = (int)v;
	}
	if (path && *path && (rc = parse_db(path, &t->db, err, errlen)) < 0)
		return rc;
	return set_str(&t->host, host);
}

/* db=N&password=P after a unix socket path. */
static int parse_query(struct redis_target *t, char *q, char *err, size_t errlen)
{
	char *save = NULL, *kv, *v;
	int rc;

	for (kv = strtok_r(q, "&", &save); kv; kv = strtok_r(NULL, "&", &save)) {
		if (!(v = strchr(kv, '=')))
			return fail(err, errlen, -EINVAL, "query parameters must be name=value");
		*v++ = '\0';
		if (strcmp(kv, "db") == 0)
			rc = parse_db(v, &t->db, err, errlen);
		else if (strcmp(kv, "password") != 0)
			rc = fail(err, errlen, -EINVAL, "unknown query parameter (expected db or password)");
		else if (pct_decode(v) < 0)
			rc = fail(err, errlen, -EINVAL, "bad percent-encoding in password");
		else
			rc = set_str(&t->password, v);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* [[user]:password@]/path[?query]; s is a scratch copy. */
static int parse_unix(struct redis_target *t, char *s, char *err, size_t errlen)
{
	char *query = strchr(s, '?'), *path = s, *at;
	int rc;

	if (query)
		*query++ = '\0';
	if (*s != '/' && (at = strrchr(s, '@'))) {
		*at = '\0';
		if ((rc = parse_userinfo(t, s, err, errlen)) < 0)
			return rc;
		path = at + 1;
	}
	if (*path != '/')
		return fail(err, errlen, -EINVAL,
			    "socket path must be absolute, as in unix:///path/to/redis.sock");
	if (pct_decode(path) < 0)
		return fail(err, errlen, -EINVAL, "bad percent-encoding in socket path");
	if (query && (rc = parse_query(t, query, err, errlen)) < 0)
		return rc;
	t->is_unix = true;
	return set_str(&t->path, path);
}

static int parse_url(struct redis_target *t, const char *url, char *err, size_t errlen)
{
	char *copy;
	int rc;

	if (!url || !*url)
		return fail(err, errlen, -EINVAL, "empty url");
	if (has_prefix(url, "rediss://"))
		return fail(err, errlen, -EINVAL,
			    "rediss:// (TLS) is not supported yet; run a TLS tunnel such as stunnel "
			    "or spiped on localhost and point a redis:// url at it");
	if (!strstr(url, "://"))
		return fail(err, errlen, -EINVAL,
			    "not a url (expected redis://host:port/db or unix:///path/to/redis.sock)");
	if (!has_prefix(url, "redis://") && !has_prefix(url, "unix://"))
		return fail(err, errlen, -EINVAL, "unsupported scheme (expected redis:// or unix://)");
	if (!(copy = strdup(url)))
		return fail(err, errlen, -ENOMEM, "out of memory");
	if (has_prefix(url, "unix://"))
		rc = parse_unix(t, copy + strlen("unix://"), err, errlen);
	else
		rc = parse_tcp(t, copy + strlen("redis://"), err, errlen);
	free(copy);
	if (rc == -ENOMEM)
		return fail(err, errlen, rc, "out of memory");
	return rc;
}

/* password, when not NULL, replaces the url's (it came from a secret file). */
static int parse_target(struct redis_target *t, const char *url, const char *password,
			char *err, size_t errlen)
{
	int rc;

	memset(t, 0, sizeof(*t));
	rc = parse_url(t, url, err, errlen);
	if (rc == 0 && password && set_str(&t->password, password) < 0)
		rc = fail(err, errlen, -ENOMEM, "out of memory");
	if (rc == 0 && t->user && !t->password)
		rc = fail(err, errlen, -EINVAL,
			  "user name without a password (write :password@ for a password alone)");
	if (rc < 0)
		redis_target_free(t);
	return rc;
}

int redis_target_parse(struct redis_target *t, const char *url, char *err, size_t errlen)
{
	return parse_target(t, url, NULL, err, errlen);
}

void redis_target_free(struct redis_target *t)
{
	if (!t)
		return;
	free(t->host);
	free(t->path);
	free(t->user);
	free(t->password);
	memset(t, 0, sizeof(*t));
}

void redis_target_describe(const struct redis_target *t, char *out, size_t outlen)
{
	if (t->is_unix)
		snprintf(out, outlen, "unix:%s?db=%d", t->path ? t->path : "", t->db);
	else if (t->host && strchr(t->host, ':'))
		snprintf(out, outlen, "[%s]:%d/%d", t->host, t->port, t->db);
	else
		snprintf(out, outlen, "%s:%d/%d", t->host ? t->host : "", t->port, t->db);
}

/* ---- settings ---- */

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

	if (!raw)
		raw = cfg->format == FORMAT_RESQUE ? "resque" : "";
	for (const char *p = raw; *p; p++)
		if (isspace((unsigned char)*p) || iscntrl((unsigned char)*p))
			return fail(why, len, -EINVAL, "must not contain whitespace or control characters");
	n = strlen(raw);
	if (n && raw[n - 1] == ':')
		return fail(why, len, -EINVAL, "must not end with ':' (the colon is added)");
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
	if (set_str(&cfg->http_addr, raw) < 0)
		return -ENOMEM;
	if (!*raw)
		return set_str(&cfg->http_host, "");
	if (!colon || strstr(raw, "://"))
		return fail(why, len, -EINVAL, "must be HOST:PORT, e.g. 127.0.0.1:9187, or :9187 for every interface");
	if (parse_scaled(colon + 1, count.units, &port) < 0 || port < 0 || port > 65535)
		return fail(why, len, -EINVAL, "port must be a number from 0 to 65535");
	hlen = (size_t)(colon - raw);
	if (hlen && raw[0] == '[') {
		if (hlen < 3 || raw[hlen - 1] != ']')
			return fail(why, len, -EINVAL, "an IPv6 address goes in brackets: [::1]:9187");
		host++;
		hlen -= 2;
	} else if (memchr(raw, ':', hlen)) {
		return fail(why, len, -EINVAL, "an IPv6 address goes in brackets: [::1]:9187");
	}
	for (size_t i = 0; i < hlen; i++)
		if (!isalnum((unsigned char)host[i]) && !strchr(".-_:%", host[i]))
			return fail(why, len, -EINVAL, "bad host name");
	free(cfg->http_host);
	if (!(cfg->http_host = strndup(host, hlen)))
		return -ENOMEM;
	cfg->http_port = (int)port;
	return 0;
}

static int apply_number(struct config *cfg, const struct setting *s, const char *raw, char *why,
			size_t len)
{
	char lo[32], hi[32];
	long long v;

	if (parse_scaled(raw, s->num->units, &v) < 0)
		return fail(why, len, -EINVAL, "%s", s->num->syntax);
	if (v < s->min || v > s->max) {
		format_amount(s->num, s->min, lo, sizeof(lo));
		format_amount(s->num, s->max, hi, sizeof(hi));
		return fail(why, len, -EINVAL, "must be between %s and %s", lo, hi);
	}
	store(cfg, s, v);
	return 0;
}

/* libpq's parser quotes the text it stumbled on, which may be the password:
 * its message is kept with every quoted piece replaced by "...". */
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

/* Converts raw (the text chosen for s) and stores it in cfg; why gets the cause. */
static int apply(struct config *cfg, const struct setting *s, const char *raw, char *why,
		 size_t len)
{
	const struct choice *c;
	char names[128];
	long long v;

	switch (s->type) {
	case V_PG:
		if (set_str(field(cfg, s), raw) < 0)
			return -ENOMEM;
		return check_pg_url(raw, why, len);
	case V_REDIS:
		if (set_str(field(cfg, s), raw) < 0)
			return -ENOMEM;
		return parse_target(&cfg->redis, raw, cfg->redis_password, why, len);
	case V_FILE:
		return 0; /* read_files gave its contents to .file_for */
	case V_SECRET:
		return raw ? set_str(field(cfg, s), raw) : 0;
	case V_NS:
		return apply_namespace(cfg, raw, why, len);
	case V_ADDR:
		return apply_addr(cfg, raw, why, len);
	case V_INT:
	case V_LONG:
		return apply_number(cfg, s, raw, why, len);
	case V_I64:
		if (parse_i64(raw, &v) < 0)
			return fail(why, len, -EINVAL, "not a signed 64-bit integer (decimal, or hex with 0x)");
		store(cfg, s, v);
		return 0;
	case V_CHOICE:
	case V_BOOL:
	case V_ACTION:
		if (!(c = find_choice(s->choices, raw))) {
			join_choices(s->choices, ", ", names, sizeof(names));
			return fail(why, len, -EINVAL, "must be one of %s", names);
		}
		store(cfg, s, c->value);
		return 0;
	}
	return -EINVAL;
}

/* Finds the setting for "--name", "--name=value" or "-h"; n is the name's length. */
static const struct setting *find_flag(const char *arg, size_t n)
{
	for (const struct setting *s = settings; s < settings + NSETTINGS; s++) {
		if (arg[1] != '-' ? n == 2 && arg[1] == s->short_name
				  : n - 2 == strlen(s->flag) && strncmp(arg + 2, s->flag, n - 2) == 0)
			return s;
	}
	return NULL;
}

/* Reads the option at argv[*i], and its value from the next argument if it
 * takes one. A next argument starting with -- is taken for a forgotten value,
 * not a value: --flag=--text still passes such text. */
static int scan_flag(struct pick *picks, int argc, char **argv, int *i, char *err, size_t errlen)
{
	const char *arg = argv[*i], *val;
	size_t n = strcspn(arg, "=");
	const struct setting *s = find_flag(arg, n);

	if (!s)
		return fail(err, errlen, -EINVAL, "unknown option %.*s (see --help)", (int)n, arg);
	if (arg[n] && s->type == V_ACTION)
		return fail(err, errlen, -EINVAL, "%.*s takes no value", (int)n, arg);
	if (arg[n])
		val = arg + n + 1;
	else if (s->type == V_BOOL || s->type == V_ACTION)
		val = "true";
	else if (*i + 1 < argc && strncmp(argv[*i + 1], "--", 2) != 0)
		val = argv[++*i];
	else
		return fail(err, errlen, -EINVAL, "--%s needs a value", s->flag);
	picks[s - settings] = (struct pick){ .val = val, .set = true };
	return 0;
}

static int scan_args(struct config *cfg, struct pick *picks, int argc, char **argv, char *err,
		     size_t errlen)
{
	const struct choice *c;
	char shown[64], names[64];
	int i = 1, rc;

	if (argc > 1 && argv[1][0] != '-') {
		if (!(c = find_choice(commands, argv[1]))) {
			join_choices(commands, ", ", names, sizeof(names));
			return fail(err, errlen, -EINVAL, "unknown command \"%s\": must be one of %s",
				    printable(argv[1], shown, sizeof(shown)), names);
		}
		cfg->command = (enum config_command)c->value;
		i = 2;
	}
	for (; i < argc; i++) {
		if (argv[i][0] != '-' || argv[i][1] == '\0')
			return fail(err, errlen, -EINVAL, "unexpected argument \"%s\"%s",
				    printable(argv[i], shown, sizeof(shown)),
				    find_choice(commands, argv[i]) ? " (the command goes first)" : "");
		if ((rc = scan_flag(picks, argc, argv, &i, err, errlen)) < 0)
			return rc;
	}
	return 0;
}

/* Fills unset picks from the environment. A variable set to "" counts as set,
 * as on the command line: STAGEDRAIN_NAMESPACE= means no prefix. With --help
 * or --version nothing else is read, so a broken setting cannot hide the help. */
static void resolve(struct pick *picks)
{
	bool info = false;
	const char *v;

	for (size_t i = 0; i < NSETTINGS; i++)
		info |= settings[i].type == V_ACTION && picks[i].set;
	for (size_t i = 0; i < NSETTINGS; i++) {
		const struct setting *s = &settings[i];
		const char *names[] = { s->env, s->env_fallback };

		if (s->type == V_ACTION)
			continue;
		if (info)
			picks[i].set = false;
		for (size_t k = 0; k < 2 && !info && !picks[i].set; k++)
			if (names[k] && (v = getenv(names[k])))
				picks[i] = (struct pick){ .val = v, .env = names[k], .set = true };
	}
}

/* " (from VARIABLE)", " (from file PATH)" or "" for the command line. */
static const char *source(const struct pick *p, char *out, size_t len)
{
	char shown[128];

	out[0] = '\0';
	if (p->file)
		snprintf(out, len, " (from file %s)", printable(p->file, shown, sizeof(shown)));
	else if (p->env)
		snprintf(out, len, " (from %s)", p->env);
	return out;
}

static const struct setting *find_setting(const char *flag)
{
	for (const struct setting *s = settings; s < settings + NSETTINGS; s++)
		if (strcmp(s->flag, flag) == 0)
			return s;
	return NULL;
}

#define SECRET_FILE_MAX 65536

/* One trailing newline is dropped, as echo and editors write one; what is
 * left must be one line. No message says anything of the contents. */
static int trim_secret(char *buf, size_t *n, char *why, size_t len)
{
	if (*n > 0 && buf[*n - 1] == '\n')
		(*n)--;
	if (*n > 0 && buf[*n - 1] == '\r')
		(*n)--;
	if (*n == 0)
		return fail(why, len, -EINVAL, "the file is empty");
	if (memchr(buf, '\0', *n))
		return fail(why, len, -EINVAL, "the file holds a NUL byte");
	if (memchr(buf, '\n', *n) || memchr(buf, '\r', *n))
		return fail(why, len, -EINVAL, "the file holds more than one line");
	buf[*n] = '\0';
	return 0;
}

/* Reads a *-file setting's file whole into *out (the caller frees it). */
static int read_secret(const char *path, char **out, char *why, size_t len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0;
	int rc = 0;

	if (!f)
		return fail(why, len, -EINVAL, "could not open the file: %s", strerror(errno));
	/* One byte more than allowed tells a file that is too big. */
	if ((buf = malloc(SECRET_FILE_MAX + 1)))
		n = fread(buf, 1, SECRET_FILE_MAX + 1, f);
	if (!buf)
		rc = -ENOMEM;
	else if (ferror(f))
		rc = fail(why, len, -EINVAL, "could not read the file: %s", strerror(errno));
	else if (n > SECRET_FILE_MAX)
		rc = fail(why, len, -EINVAL, "the file is larger than 64k");
	fclose(f);
	if (rc == 0)
		rc = trim_secret(buf, &n, why, len);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	*out = buf;
	return 0;
}

/* Reads each *-file setting that is set. A V_FILE's contents become the value
 * of the setting it stands for, which must not be given as well. */
static int read_files(struct pick *picks, char *err, size_t errlen)
{
	char why[160], shown[96], from[160], from2[160];

	for (size_t i = 0; i < NSETTINGS; i++) {
		const struct setting *s = &settings[i], *t = s;
		const char *path = picks[i].val;
		char *text = NULL;
		int rc;

		if (!picks[i].set || (s->type != V_FILE && s->type != V_SECRET))
			continue;
		if (s->type == V_FILE && picks[(t = find_setting(s->file_for)) - settings].set)
			return fail(err, errlen, -EINVAL, "--%s%s and --%s%s are both set: give one",
				    t->flag, source(&picks[t - settings], from2, sizeof(from2)),
				    s->flag, source(&picks[i], from, sizeof(from)));
		rc = read_secret(path, &text, why, sizeof(why));
		if (rc == -ENOMEM)
			return fail(err, errlen, rc, "out of memory");
		if (rc < 0)
			return fail(err, errlen, rc, "invalid --%s \"%s\"%s: %s", s->flag,
				    printable(path, shown, sizeof(shown)),
				    source(&picks[i], from, sizeof(from)), why);
		/* t's pick may be i's own: path is read before it is overwritten. */
		picks[t - settings] = (struct pick){ .val = text, .file = path, .owned = text, .set = true };
	}
	return 0;
}

static int apply_one(struct config *cfg, const struct setting *s, const struct pick *p, char *err,
		     size_t errlen)
{
	char why[256], shown[96], from[160];
	const char *raw = p->set ? p->val : s->def;
	int rc = apply(cfg, s, raw, why, sizeof(why));

	if (rc == -ENOMEM)
		return fail(err, errlen, rc, "out of memory");
	if (rc == 0)
		return 0;
	source(p, from, sizeof(from));
	if (s->secret)
		return fail(err, errlen, rc, "invalid --%s%s: %s", s->flag, from, why);
	return fail(err, errlen, rc, "invalid --%s \"%s\"%s: %s", s->flag,
		    printable(raw, shown, sizeof(shown)), from, why);
}

/* Password files go first: the redis url's parser must know whether its
 * password is replaced (a user name alone is an error otherwise). */
static int apply_all(struct config *cfg, const struct pick *picks, char *err, size_t errlen)
{
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < NSETTINGS; i++) {
			int rc;

			if ((settings[i].type == V_SECRET) != (pass == 0))
				continue;
			if ((rc = apply_one(cfg, &settings[i], &picks[i], err, errlen)) < 0)
				return rc;
		}
	}
	return 0;
}

int config_load(struct config *cfg, int argc, char **argv, char *err, size_t errlen)
{
	struct pick picks[NSETTINGS];
	int rc;

	memset(cfg, 0, sizeof(*cfg));
	memset(picks, 0, sizeof(picks));
	rc = scan_args(cfg, picks, argc, argv, err, errlen);
	if (rc == 0) {
		resolve(picks);
		rc = read_files(picks, err, errlen);
	}
	if (rc == 0)
		rc = apply_all(cfg, picks, err, errlen);
	for (size_t i = 0; i < NSETTINGS; i++)
		free(picks[i].owned);
	if (rc < 0)
		config_free(cfg);
	return rc;
}

void config_free(struct config *cfg)
{
	if (!cfg)
		return;
	free(cfg->pg_url);
	free(cfg->pg_password);
	free(cfg->redis_url);
	free(cfg->redis_password);
	free(cfg->key_prefix);
	free(cfg->http_addr);
	free(cfg->http_host);
	redis_target_free(&cfg->redis);
	memset(cfg, 0, sizeof(*cfg));
}

/* Prints text word-wrapped to 78 columns, every line indented. */
static void wrap(FILE *out, const char *text, int indent)
{
	const int width = 78 - indent;

	while (*text) {
		int cut = (int)strlen(text);

		if (cut > width) {
			for (cut = width; cut > 0 && text[cut] != ' '; cut--)
				;
			if (cut == 0)
				cut = (int)strcspn(text, " ");
		}
		fprintf(out, "%*s%.*s\n", indent, "", cut, text);
		for (text += cut; *text == ' '; text++)
			;
	}
}

/* What follows a flag in --help and the man page: its choices, or its metavar. */
static void metavar(const struct setting *s, const char *sep, char *out, size_t len)
{
	if (s->choices && s->type == V_CHOICE)
		join_choices(s->choices, sep, out, len);
	else
		snprintf(out, len, "%s", s->metavar ? s->metavar : "");
}

static void usage_setting(FILE *out, const struct setting *s)
{
	char text[512], meta[64], lo[32], hi[32];

	metavar(s, "|", meta, sizeof(meta));
	if (s->short_name)
		fprintf(out, "  -%c, --%s\n", s->short_name, s->flag);
	else
		fprintf(out, "  --%s%s%s\n", s->flag, *meta ? " " : "", meta);
	if (s->num) {
		format_amount(s->num, s->min, lo, sizeof(lo));
		format_amount(s->num, s->max, hi, sizeof(hi));
		snprintf(text, sizeof(text), "%s (%s to %s)", s->help, lo, hi);
		wrap(out, text, 6);
	} else {
		wrap(out, s->help, 6);
	}
	if (!s->env)
		return;
	if (s->type == V_BOOL)
		join_choices(s->choices, "|", meta, sizeof(meta));
	snprintf(text, sizeof(text), "env %s%s%s%s%s%s; default %s", s->env,
		 s->env_fallback ? ", then " : "", s->env_fallback ? s->env_fallback : "",
		 s->type == V_BOOL ? " (" : "", s->type == V_BOOL ? meta : "",
		 s->type == V_BOOL ? ")" : "", s->def_doc ? s->def_doc : s->def);
	wrap(out, text, 6);
}

void config_usage(FILE *out)
{
	char names[64];

	join_choices(commands, "|", names, sizeof(names));
	fprintf(out, "usage: stagedrain [%s] [options]\n\ncommands:\n", names);
	for (const struct choice *c = commands; c->name; c++)
		fprintf(out, "  %-9s %s\n", c->name, c->help);
	fputs("\noptions (a flag overrides its variable, which overrides the default):\n", out);
	for (size_t i = 0; i < NSETTINGS; i++)
		usage_setting(out, &settings[i]);
}

/* ---- the manual page ---- */

/* Writes s as mdoc text: a backslash is \e, no line starts with a control
 * character, and each sentence starts a new line, as mdoc asks ("e.g." ends
 * none: \& after it keeps the single space). */
static void man_text(FILE *out, const char *s)
{
	bool line_start = true;

	int col = 0;

	for (const char *p = s; *p; p++, col++) {
		bool abbrev = p - s >= 4 && strncmp(p - 4, "e.g.", 4) == 0;

		if (line_start && (*p == '.' || *p == '\''))
			fputs("\\&", out);
		line_start = false;
		if (*p == '\\') {
			fputs("\\e", out);
		} else if (*p == ' ' && ((p > s && p[-1] == '.' && !abbrev) || (col > 64 && !abbrev))) {
			/* A new sentence, or a long line: roff joins them again. */
			fputc('\n', out);
			line_start = true;
			col = -1;
		} else {
			fputs(*p == ' ' && abbrev ? "\\& " : (char[]){ *p, '\0' }, out);
		}
	}
	fputc('\n', out);
}

static void man_setting(FILE *out, const struct setting *s)
{
	char meta[64], lo[32], hi[32], text[512];

	metavar(s, " | ", meta, sizeof(meta));
	if (s->short_name)
		fprintf(out, ".It Fl %c , Fl -%s\n", s->short_name, s->flag);
	else
		fprintf(out, ".It Fl -%s%s%s\n", s->flag, *meta ? " Ar " : "", meta);
	/* Capitalized like a sentence, unless it starts with a name such as pg_advisory_lock. */
	snprintf(text, sizeof(text), "%c%s.",
		 s->help[strcspn(s->help, " _")] == '_' ? s->help[0] : toupper((unsigned char)s->help[0]),
		 s->help + 1);
	man_text(out, text);
	if (s->num) {
		format_amount(s->num, s->min, lo, sizeof(lo));
		format_amount(s->num, s->max, hi, sizeof(hi));
		fprintf(out, "From %s to %s.\n", lo, hi);
	}
	if (!s->env)
		return;
	fprintf(out, "Environment:\n.Ev %s", s->env);
	if (s->env_fallback)
		fprintf(out, " ,\nthen\n.Ev %s", s->env_fallback);
	fprintf(out, " .\nDefault:\n");
	snprintf(text, sizeof(text), "%s.", s->def_doc ? s->def_doc : s->def);
	man_text(out, text);
}

void config_man(FILE *out, const char *date, const char *version)
{
	fprintf(out, ".\\\" Generated from the settings table in relay/config.c; do not edit.\n"
		     ".Dd %s\n.Dt STAGEDRAIN 1\n.Os stagedrain %s\n", date, version);
	fputs(".Sh NAME\n.Nm stagedrain\n"
	      ".Nd relay jobs staged in PostgreSQL to Sidekiq or Resque queues in Redis\n"
	      ".Sh SYNOPSIS\n.Nm\n.Op Cm run | migrate\n.Op Ar options\n"
	      ".Sh DESCRIPTION\n"
	      "Applications insert jobs into the\n.Sy staged_jobs\n"
	      "table inside their own transactions.\n"
	      ".Nm\nmoves the committed ones to Redis, in batches, exactly as Sidekiq's or\n"
	      "Resque's own client would write them, and deletes each batch only after Redis\n"
	      "acknowledged it.\n"
	      "Several relays may run: they elect one leader with\n.Fn pg_advisory_lock ;\n"
	      "the others wait as standbys.\n"
	      ".Ss Commands\n.Bl -tag -width migrate\n",
	      out);
	for (const struct choice *c = commands; c->name; c++)
		fprintf(out, ".It Cm %s\n%c%s.\n", c->name, toupper((unsigned char)c->help[0]), c->help + 1);
	fputs(".El\n.Ss HTTP endpoint\nWith\n.Fl -http-addr ,\n"
	      ".Nm\nserves\n.Pa /metrics\nin the Prometheus text format,\n"
	      ".Pa /healthz\n(200 while the process runs) and\n.Pa /readyz\n"
	      "(200 while it reaches both servers, 503 otherwise; the body says whether it\n"
	      "is the leader or a standby).\n"
	      ".Sh OPTIONS\nA flag overrides its environment variable, which overrides the default.\n"
	      ".Bl -tag -width Ds\n",
	      out);
	for (size_t i = 0; i < NSETTINGS; i++)
		man_setting(out, &settings[i]);
	fputs(".El\n.Sh ENVIRONMENT\nEach option above names its variable.\nAlso read:\n"
	      ".Bl -tag -width Ds\n"
	      ".It Ev DATABASE_URL\nUsed for\n.Fl -pg-url\nwhen\n.Ev STAGEDRAIN_PG_URL\nis not set.\n"
	      ".It Ev REDIS_URL\nUsed for\n.Fl -redis-url\nwhen\n.Ev STAGEDRAIN_REDIS_URL\nis not set.\n"
	      ".It Ev PGHOST , Ev PGDATABASE , Ev PGUSER , No ...\n"
	      "Read by libpq when\n.Fl -pg-url\nleaves them out.\n"
	      ".El\n"
	      ".Sh EXIT STATUS\n.Bl -tag -width Ds\n"
	      ".It 0\nAfter\n.Fl -once\ndrained the table, or after SIGTERM or SIGINT.\n"
	      ".It 1\nA server could not be reached, or the schema is missing, at start-up.\n"
	      ".It 2\nA bad flag or value.\n.El\n"
	      ".Sh EXAMPLES\nCreate the tables, then relay to a local Redis and serve metrics:\n"
	      ".Bd -literal -offset indent\n"
	      "stagedrain migrate --pg-url postgresql://app@db/app\n"
	      "stagedrain --pg-url postgresql://relay@db/app \\e\n"
	      "    --redis-url redis://redis:6379/0 --http-addr 127.0.0.1:9187\n"
	      ".Ed\n"
	      ".Sh SEE ALSO\n.Xr psql 1 ,\n.Xr redis-cli 1\n",
	      out);
}
