/* Loading the settings: flags, then environment, then files, then defaults, each checked. */
#include "fmacros.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "config.h"
#include "config_apply.h"
#include "config_files.h"
#include "settings.h"
#include "values.h"

/* A setting's raw text and where it came from; env NULL means the command
 * line, file non-NULL that val is that file's contents, which pick owns. */
struct pick {
	const char *val;
	const char *env;
	const char *file;
	char *owned;
	const char **vals; /* V_ROUTE from the command line: every value, in order */
	size_t nvals;
	bool set;
};

/* The strings a config owns: config_free frees them, a route's copy copies them. */
static const size_t config_strings[] = {
	offsetof(struct config, pg_url),
	offsetof(struct config, pg_password),
	offsetof(struct config, redis_url),
	offsetof(struct config, redis_password),
	offsetof(struct config, redis_tls_ca_file),
	offsetof(struct config, redis_tls_cert_file),
	offsetof(struct config, redis_tls_key_file),
	offsetof(struct config, redis_tls_server_name),
	offsetof(struct config, laravel_prefix),
	offsetof(struct config, bullmq_prefix),
	offsetof(struct config, key_prefix),
	offsetof(struct config, http_addr),
	offsetof(struct config, http_host),
	offsetof(struct config, route_file),
	offsetof(struct config, route_name),
};
#define NSTRINGS (sizeof(config_strings) / sizeof(config_strings[0]))

static char **string_at(struct config *cfg, size_t off)
{
	return (char **)((char *)cfg + off);
}

static const char *string_in(const struct config *cfg, size_t off)
{
	return *(char *const *)((const char *)cfg + off);
}

static void *field(struct config *cfg, const struct setting *s)
{
	return (char *)cfg + s->off;
}

/* Every value of a setting that may be repeated, in order. */
static int add_value(struct pick *p, const char *val)
{
	const char **vals = realloc(p->vals, (p->nvals + 1) * sizeof(*vals));

	if (!vals)
		return -ENOMEM;
	p->vals = vals;
	p->vals[p->nvals++] = val;
	p->val = val;
	p->set = true;
	return 0;
}

static void free_picks(struct pick *picks)
{
	for (size_t i = 0; picks && i < settings_count; i++) {
		free(picks[i].owned);
		free(picks[i].vals);
	}
	free(picks);
}

/* Reads the option at argv[*i], and its value from the next argument if it
 * takes one. A next argument starting with -- is taken for a forgotten value,
 * not a value: --flag=--text still passes such text. */
static int scan_flag(struct pick *picks, int argc, char **argv, int *i, char *err, size_t errlen)
{
	const char *arg = argv[*i], *val;
	size_t n = strcspn(arg, "=");
	const struct setting *s = settings_find_flag(arg, n);
	char shown[64];

	if (!s)
		return value_fail(err, errlen, -EINVAL, "unknown option %s (see --help)",
				  value_printable_n(arg, n, shown, sizeof(shown)));
	/* Two values of one setting: whichever the relay took, the other may
	 * have been meant. --route repeats; -h with --help is still help. */
	if (picks[s - settings].set && s->type != V_ROUTE && s->type != V_ACTION)
		return value_fail(err, errlen, -EINVAL, "--%s given twice: give it once", s->flag);
	if (arg[n] && s->type == V_ACTION)
		return value_fail(err, errlen, -EINVAL, "%.*s takes no value", (int)n, arg);
	if (arg[n])
		val = arg + n + 1;
	else if (s->type == V_BOOL || s->type == V_ACTION)
		val = "true";
	else if (*i + 1 < argc && strncmp(argv[*i + 1], "--", 2) != 0)
		val = argv[++*i];
	else
		return value_fail(err, errlen, -EINVAL, "--%s needs a value", s->flag);
	if (s->type == V_ROUTE)
		return add_value(&picks[s - settings], val) < 0 ? value_fail(err, errlen, -ENOMEM, "out of memory") : 0;
	picks[s - settings] = (struct pick){ .val = val, .set = true };
	return 0;
}

static int scan_args(struct config *cfg, struct pick *picks, int argc, char **argv, char *err, size_t errlen)
{
	const struct choice *c;
	char shown[64], names[64];
	int i = 1, rc;

	if (argc > 1 && argv[1][0] != '-') {
		if (!(c = value_find_choice(settings_commands, argv[1]))) {
			value_join_choices(settings_commands, ", ", names, sizeof(names));
			return value_fail(err, errlen, -EINVAL, "unknown command \"%s\": must be one of %s",
					  value_printable(argv[1], shown, sizeof(shown)), names);
		}
		cfg->command = (enum config_command)c->value;
		i = 2;
	}
	for (; i < argc; i++) {
		if (argv[i][0] != '-' || argv[i][1] == '\0')
			return value_fail(err, errlen, -EINVAL, "unexpected argument \"%s\"%s",
					  value_printable(argv[i], shown, sizeof(shown)),
					  value_find_choice(settings_commands, argv[i]) ? " (the command goes first)"
											: "");
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

	for (size_t i = 0; i < settings_count; i++)
		info |= settings[i].type == V_ACTION && picks[i].set;
	for (size_t i = 0; i < settings_count; i++) {
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
		snprintf(out, len, " (from file %s)", value_printable(p->file, shown, sizeof(shown)));
	else if (p->env)
		snprintf(out, len, " (from %s)", p->env);
	return out;
}

#define ROUTE_FILE_MAX 1048576

/* Reads each *-file setting that is set. A V_FILE's contents become the value
 * of the setting it stands for, which must not be given as well. */
static int read_files(struct pick *picks, char *err, size_t errlen)
{
	char why[160], shown[96], from[160], from2[160];

	for (size_t i = 0; i < settings_count; i++) {
		const struct setting *s = &settings[i], *t = s;
		const char *path = picks[i].val;
		char *text = NULL;
		int rc;

		if (!picks[i].set || (s->type != V_FILE && s->type != V_SECRET))
			continue;
		if (s->type == V_FILE && picks[(t = settings_find(s->file_for)) - settings].set)
			return value_fail(err, errlen, -EINVAL, "--%s%s and --%s%s are both set: give one", t->flag,
					  source(&picks[t - settings], from2, sizeof(from2)), s->flag,
					  source(&picks[i], from, sizeof(from)));
		rc = config_read_secret(path, &text, why, sizeof(why));
		if (rc == -ENOMEM)
			return value_fail(err, errlen, rc, "out of memory");
		if (rc < 0)
			return value_fail(err, errlen, rc, "invalid --%s \"%s\"%s: %s", s->flag,
					  value_printable(path, shown, sizeof(shown)),
					  source(&picks[i], from, sizeof(from)), why);
		/* t's pick may be i's own: path is read before it is overwritten. */
		picks[t - settings] = (struct pick){ .val = text, .file = path, .owned = text, .set = true };
	}
	return 0;
}

static int apply_one(struct config *cfg, const struct setting *s, const struct pick *p, char *err, size_t errlen)
{
	char why[256], shown[96], from[160];
	const char *raw = p->set ? p->val : s->def;
	int rc = config_apply_value(cfg, s, raw, why, sizeof(why));

	if (rc == -ENOMEM)
		return value_fail(err, errlen, rc, "out of memory");
	if (rc == 0)
		return 0;
	source(p, from, sizeof(from));
	if (s->secret)
		return value_fail(err, errlen, rc, "invalid --%s%s: %s", s->flag, from, why);
	return value_fail(err, errlen, rc, "invalid --%s \"%s\"%s: %s", s->flag,
			  value_printable(raw, shown, sizeof(shown)), from, why);
}

/* Whether a route's config keeps the relay's value of s, which it copied
 * (enum route_scope); format_given: the route gives --format. */
static bool route_keeps(const struct config *route, const struct setting *s, const struct pick *p, bool format_given)
{
	if (p->set)
		return false;
	switch (s->route) {
	case ROUTE_NO:
	case ROUTE_INHERIT:
		return true;
	case ROUTE_OWN:
		return false;
	case ROUTE_FORMAT:
		/* Laravel's and BullMQ's key prefixes are settings of their own,
		 * which the route may give. */
		return !format_given &&
		       !(s->type == V_NS && (route->format == FORMAT_LARAVEL || route->format == FORMAT_BULLMQ));
	}
	return true;
}

/* Frees the relay's value of s in a route's copy, which apply replaces:
 * some of its cases keep what they find, or never free it. */
static void unset(struct config *cfg, const struct setting *s)
{
	if (s->type == V_REDIS)
		redis_target_free(&cfg->redis);
	if (s->type == V_REDIS || s->type == V_PG || s->type == V_SECRET || s->type == V_NS || s->type == V_STR ||
	    s->type == V_ADDR) {
		free(*(char **)field(cfg, s));
		*(char **)field(cfg, s) = NULL;
	}
}

/* Password files go first: the redis url's parser must know whether its
 * password is replaced (a user name alone is an error otherwise). For a
 * route's config (route), only what the route does not keep is applied. */
static int apply_all(struct config *cfg, const struct pick *picks, bool route, char *err, size_t errlen)
{
	bool format_given = picks[settings_find("format") - settings].set;

	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < settings_count; i++) {
			int rc;

			if ((settings[i].type == V_SECRET) != (pass == 0))
				continue;
			if (route && route_keeps(cfg, &settings[i], &picks[i], format_given))
				continue;
			if (route)
				unset(cfg, &settings[i]);
			if ((rc = apply_one(cfg, &settings[i], &picks[i], err, errlen)) < 0)
				return rc;
		}
	}
	return 0;
}

/* Settings that only mean something together. */
static int check_tls(const struct config *cfg, char *err, size_t errlen)
{
	const char *flag = cfg->redis_tls_ca_file       ? "redis-tls-ca-file"
			   : cfg->redis_tls_cert_file   ? "redis-tls-cert-file"
			   : cfg->redis_tls_key_file    ? "redis-tls-key-file"
			   : cfg->redis_tls_server_name ? "redis-tls-server-name"
			   : cfg->redis_tls_insecure    ? "redis-tls-insecure"
							: NULL;

	if (flag && !cfg->redis.tls)
		return value_fail(err, errlen, -EINVAL,
				  "--%s is set but --redis-url does not use TLS (use rediss:// or rediss-sentinel://)",
				  flag);
	if (!cfg->redis_tls_cert_file != !cfg->redis_tls_key_file)
		return value_fail(err, errlen, -EINVAL,
				  "--redis-tls-cert-file and --redis-tls-key-file go together: "
				  "set both or neither");
	return 0;
}

/* The names of the formats in bits (SETTING_FORMAT), joined by " or ". */
static void format_names(unsigned bits, char *out, size_t len)
{
	size_t n = 0;

	out[0] = '\0';
	for (const struct choice *c = settings_find("format")->choices; c->name && n < len; c++)
		if (bits & SETTING_FORMAT(c->value))
			n += (size_t)snprintf(out + n, len - n, "%s%s", n ? " or " : "", c->name);
}

/* A setting given for a format that ignores it is refused: whoever set it
 * expects it to change what is written. */
static int check_formats(const struct config *cfg, const struct pick *picks, char *err, size_t errlen)
{
	char from[160], want[64], have[32];

	for (size_t i = 0; i < settings_count; i++) {
		const struct setting *s = &settings[i];

		if (!picks[i].set || !s->formats || (s->formats & SETTING_FORMAT(cfg->format)))
			continue;
		format_names(s->formats, want, sizeof(want));
		format_names(SETTING_FORMAT(cfg->format), have, sizeof(have));
		return value_fail(err, errlen, -EINVAL, "--%s%s is only used with --format %s, not %s", s->flag,
				  source(&picks[i], from, sizeof(from)), want, have);
	}
	return 0;
}

/* Whether pg_url holds a password: libpq's own parser says. */
static bool pg_url_has_password(const char *url)
{
	PQconninfoOption *opts = *url ? PQconninfoParse(url, NULL) : NULL;
	bool has = false;

	for (PQconninfoOption *o = opts; o && o->keyword; o++)
		has |= strcmp(o->keyword, "password") == 0 && o->val && *o->val;
	PQconninfoFree(opts);
	return has;
}

/* A URL given as a flag (not from a variable or a file) holding a password:
 * main warns, since every user of the machine can read a command line. */
static void note_argv_passwords(struct config *cfg, const struct pick *picks)
{
	const struct pick *pg = &picks[settings_find("pg-url") - settings];
	const struct pick *redis = &picks[settings_find("redis-url") - settings];

	cfg->pg_url_argv_password = pg->set && !pg->env && !pg->file && pg_url_has_password(cfg->pg_url);
	cfg->redis_url_argv_password =
		redis->set && !redis->env && !redis->file && !cfg->redis_password && cfg->redis.password;
}

/* A route's config starts as a deep copy of the relay's, with no Redis
 * target (the route's url gives it one) and no routes. */
static int copy_base(struct config *route, const struct config *base)
{
	*route = *base;
	memset(&route->redis, 0, sizeof(route->redis));
	memset(&route->routes, 0, sizeof(route->routes));
	memset(&route->queue_limits, 0, sizeof(route->queue_limits));
	for (size_t i = 0; i < NSTRINGS; i++)
		*string_at(route, config_strings[i]) = NULL;
	for (size_t i = 0; i < NSTRINGS; i++) {
		const char *from = string_in(base, config_strings[i]);

		if (from && !(*string_at(route, config_strings[i]) = strdup(from)))
			return -ENOMEM;
	}
	return queue_limits_copy(&route->queue_limits, &base->queue_limits);
}

/* A route's words, read as the command line is; only the settings a route
 * may give (.route) are taken, and --redis-url is required. */
static int scan_route(struct pick *picks, char **words, int n, char *why, size_t len)
{
	const struct setting *s;
	char shown[64];
	int rc;

	for (int i = 0; i < n; i++) {
		size_t k = strcspn(words[i], "=");

		if (strncmp(words[i], "--", 2) != 0)
			return value_fail(why, len, -EINVAL, "unexpected \"%s\": settings are --SETTING VALUE",
					  value_printable(words[i], shown, sizeof(shown)));
		if ((s = settings_find_flag(words[i], k)) && s->route == ROUTE_NO)
			return value_fail(why, len, -EINVAL, "--%s is the relay's setting, not a route's", s->flag);
		if ((rc = scan_flag(picks, n, words, &i, why, len)) < 0)
			return rc;
	}
	if (!picks[settings_find("redis-url") - settings].set)
		return value_fail(why, len, -EINVAL, "--redis-url is missing: every route needs its own");
	return 0;
}

int config_route(struct config *route, const struct config *base, const char *name, char **words, int nwords, char *why,
		 size_t len)
{
	struct pick *picks = calloc(settings_count, sizeof(*picks));
	int rc;

	memset(route, 0, sizeof(*route));
	if (!picks)
		return value_fail(why, len, -ENOMEM, "out of memory");
	rc = scan_route(picks, words, nwords, why, len);
	if (rc == 0)
		rc = read_files(picks, why, len);
	if (rc == 0 && (copy_base(route, base) < 0 || value_set_str(&route->route_name, name) < 0))
		rc = value_fail(why, len, -ENOMEM, "out of memory");
	if (rc == 0)
		rc = apply_all(route, picks, true, why, len);
	if (rc == 0)
		rc = check_formats(route, picks, why, len);
	if (rc == 0)
		rc = check_tls(route, why, len);
	if (rc == 0)
		rc = config_check_cluster(route, why, len);
	free_picks(picks);
	if (rc < 0)
		config_free(route);
	return rc;
}

/* Adds one route; where says where its text is, for the message. */
static int add_route(struct config *cfg, const char *text, const char *where, bool from_argv, char *err, size_t errlen)
{
	char why[CONFIG_ERR_SIZE];
	struct config *route = NULL;
	struct route_text rt;
	int rc = routes_parse(&cfg->routes, text, &rt, why, sizeof(why));

	if (rc == 0 && !(route = malloc(sizeof(*route))))
		rc = -ENOMEM;
	/* A copy of cfg with the route's settings; freed by config_route on error. */
	if (rc == 0 && (rc = config_route(route, cfg, rt.w[0], rt.w + 2, rt.n - 2, why, sizeof(why))) < 0) {
		free(route);
		route = NULL;
	}
	if (rc == 0 && (rc = routes_add(&cfg->routes, &rt, route)) < 0) {
		config_free(route);
		free(route);
	}
	route_text_free(&rt);
	if (rc == -ENOMEM)
		return value_fail(err, errlen, rc, "out of memory");
	if (rc < 0)
		return value_fail(err, errlen, rc, "%s: %s", where, why);
	route->redis_url_argv_password = from_argv && !route->redis_password && route->redis.password;
	return 0;
}

/* --route's values, or STAGEDRAIN_ROUTE's routes: one per line or between
 * ';' (routes_piece_len: a password's ';' splits nothing). */
static int load_route_values(struct config *cfg, const struct pick *p, char *err, size_t errlen)
{
	char shown[200], where[300], *t;
	int rc = 0;

	for (size_t i = 0; i < p->nvals && rc == 0; i++) {
		snprintf(where, sizeof(where), "--route \"%s\"", value_printable(p->vals[i], shown, sizeof(shown)));
		rc = add_route(cfg, p->vals[i], where, true, err, errlen);
	}
	for (const char *at = p->env ? p->val : ""; *at && rc == 0;) {
		size_t n = routes_piece_len(at), k;

		if (!(t = strndup(at, n)))
			return value_fail(err, errlen, -ENOMEM, "out of memory");
		at += n + (at[n] != '\0');
		while (n > 0 && isspace((unsigned char)t[n - 1]))
			t[--n] = '\0';
		k = strspn(t, " \t\r\v\f");
		snprintf(where, sizeof(where), "--route \"%s\" (from %s)", value_printable(t + k, shown, sizeof(shown)),
			 p->env);
		if (t[k])
			rc = add_route(cfg, t + k, where, false, err, errlen);
		free(t);
	}
	return rc;
}

/* --route-file's routes: one a line; blank lines and # comments skipped. */
static int load_route_file(struct config *cfg, const struct pick *p, char *err, size_t errlen)
{
	char why[160], shown[96], from[160], where[300], *text, *line, *next;
	size_t n, lineno = 0;
	int rc = config_read_whole(cfg->route_file, ROUTE_FILE_MAX, "1M", &text, &n, why, sizeof(why));

	if (rc == 0 && memchr(text, '\0', n)) {
		free(text);
		rc = value_fail(why, sizeof(why), -EINVAL, "the file holds a NUL byte");
	}
	value_printable(cfg->route_file, shown, sizeof(shown));
	source(p, from, sizeof(from));
	if (rc == -ENOMEM)
		return value_fail(err, errlen, rc, "out of memory");
	if (rc < 0)
		return value_fail(err, errlen, rc, "invalid --route-file \"%s\"%s: %s", shown, from, why);
	for (line = text; line && rc == 0; line = next) {
		const char *t = line + strspn(line, " \t\r\v\f");

		if ((next = strchr(line, '\n')))
			*next++ = '\0';
		lineno++;
		if (!*t || *t == '#')
			continue;
		snprintf(where, sizeof(where), "--route-file %s%s line %zu", shown, from, lineno);
		rc = add_route(cfg, line, where, false, err, errlen);
	}
	free(text);
	return rc;
}

/* Routes come last: each copies the relay's finished config. */
static int load_routes(struct config *cfg, const struct pick *picks, char *err, size_t errlen)
{
	const struct pick *p = &picks[settings_find("route") - settings];
	int rc = p->set ? load_route_values(cfg, p, err, errlen) : 0;

	if (rc == 0 && cfg->route_file)
		rc = load_route_file(cfg, &picks[settings_find("route-file") - settings], err, errlen);
	return rc;
}

int config_load(struct config *cfg, int argc, char **argv, char *err, size_t errlen)
{
	struct pick *picks = calloc(settings_count, sizeof(*picks));
	int rc;

	memset(cfg, 0, sizeof(*cfg));
	if (!picks)
		return value_fail(err, errlen, -ENOMEM, "out of memory reading the settings");
	rc = scan_args(cfg, picks, argc, argv, err, errlen);
	if (rc == 0) {
		resolve(picks);
		rc = read_files(picks, err, errlen);
	}
	if (rc == 0)
		rc = apply_all(cfg, picks, false, err, errlen);
	if (rc == 0 && !cfg->help && !cfg->version)
		rc = check_formats(cfg, picks, err, errlen);
	if (rc == 0 && !cfg->help && !cfg->version)
		rc = check_tls(cfg, err, errlen);
	if (rc == 0)
		rc = config_check_cluster(cfg, err, errlen);
	if (rc == 0)
		note_argv_passwords(cfg, picks);
	if (rc == 0 && routes_init(&cfg->routes, cfg) < 0)
		rc = value_fail(err, errlen, -ENOMEM, "out of memory reading the settings");
	if (rc == 0 && !cfg->help && !cfg->version)
		rc = load_routes(cfg, picks, err, errlen);
	free_picks(picks);
	if (rc < 0)
		config_free(cfg);
	return rc;
}

void config_free(struct config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < NSTRINGS; i++)
		free(*string_at(cfg, config_strings[i]));
	queue_limits_free(&cfg->queue_limits);
	redis_target_free(&cfg->redis);
	for (size_t i = 1; cfg->routes.t && i < cfg->routes.n; i++) {
		config_free(cfg->routes.t[i].cfg);
		free(cfg->routes.t[i].cfg);
	}
	routes_free(&cfg->routes);
	memset(cfg, 0, sizeof(*cfg));
}
