/* Redis URLs: redis:// and rediss://[[user]:password@]host[:port][/db],
 * unix://[[user]:password@]/path[?query], and redis-sentinel:// or
 * rediss-sentinel://[[user]:password@]host1[:port1],host2[:port2]/MASTER_NAME[/db], and
 * redis-cluster:// or rediss-cluster://[[user]:password@]host1[:port1],host2[:port2][/]. */
#include "fmacros.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "redis_url.h"
#include "values.h"

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
		return value_fail(err, errlen, -EINVAL, "bad percent-encoding in user name or password");
	if (*ui && value_set_str(&t->user, ui) < 0)
		return -ENOMEM;
	if (pass && *pass && value_set_str(&t->password, pass) < 0)
		return -ENOMEM;
	return 0;
}

static int parse_db(const char *s, int *db, char *err, size_t errlen)
{
	long long v;

	if (value_parse_scaled(s, value_count.units, &v) < 0 || v < 0 || v > INT_MAX)
		return value_fail(err, errlen, -EINVAL, "db must be a whole number, 0 or more");
	*db = (int)v;
	return 0;
}

#define HOST_CHARS                                                                                                     \
	"abcdefghijklmnopqrstuvwxyz"                                                                                   \
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
			return value_fail(err, errlen, -EINVAL, "missing ] after IPv6 address");
		if (end[1] && end[1] != ':')
			return value_fail(err, errlen, -EINVAL, "unexpected text after IPv6 address");
		*end = '\0';
		*host = s + 1;
		*port = end[1] ? end + 2 : NULL;
		allowed = HOST_CHARS ":%";
	} else if ((end = strchr(s, ':'))) {
		*end = '\0';
		*port = end + 1;
	}
	if (!**host)
		return value_fail(err, errlen, -EINVAL, "missing host");
	if ((*host)[strspn(*host, allowed)])
		return value_fail(err, errlen, -EINVAL, "bad host name");
	return 0;
}

static int parse_port(const char *s, int *port, char *err, size_t errlen)
{
	long long v;

	if (value_parse_scaled(s, value_count.units, &v) < 0 || v < 1 || v > 65535)
		return value_fail(err, errlen, -EINVAL, "port must be a number from 1 to 65535");
	*port = (int)v;
	return 0;
}

/* host[:port] into an address, def_port when the port is absent; s is a scratch copy. */
static int parse_addr(struct redis_addr *a, char *s, int def_port, char *err, size_t errlen)
{
	char *host, *port;
	int rc;

	if ((rc = split_host(s, &host, &port, err, errlen)) < 0)
		return rc;
	a->port = def_port;
	if (port && (rc = parse_port(port, &a->port, err, errlen)) < 0)
		return rc;
	return value_set_str(&a->host, host);
}

/* Splits off an optional userinfo before the last @, so a password with a raw
 * @ or / still works; returns what follows it. */
static int parse_credentials(struct redis_target *t, char **s, char *err, size_t errlen)
{
	char *at = strrchr(*s, '@');
	int rc;

	if (!at)
		return 0;
	*at = '\0';
	if ((rc = parse_userinfo(t, *s, err, errlen)) < 0)
		return rc;
	*s = at + 1;
	return 0;
}

/* host[:port][/db] after an optional userinfo; s is a scratch copy. */
static int parse_tcp(struct redis_target *t, char *s, char *err, size_t errlen)
{
	struct redis_addr a = { NULL, 0 };
	char *path;
	int rc;

	if ((rc = parse_credentials(t, &s, err, errlen)) < 0)
		return rc;
	if ((path = strchr(s, '/')))
		*path++ = '\0';
	if ((rc = parse_addr(&a, s, 6379, err, errlen)) < 0)
		return rc;
	t->host = a.host;
	t->port = a.port;
	if (path && *path && (rc = parse_db(path, &t->db, err, errlen)) < 0)
		return rc;
	return 0;
}

/* host1[:port1],host2[:port2],... into a new array of *n addresses. */
static int parse_hosts(char *s, int def_port, struct redis_addr **out, size_t *n, char *err, size_t errlen)
{
	char *one, *next;
	size_t cap = 1;
	int rc;

	for (const char *p = s; *p; p++)
		cap += *p == ',';
	if (!(*out = calloc(cap, sizeof(**out))))
		return -ENOMEM;
	/* Not strtok: "h1,,h2" is a mistake to report, not two hosts. */
	for (one = s; one; one = next) {
		if ((next = strchr(one, ',')))
			*next++ = '\0';
		if ((rc = parse_addr(&(*out)[(*n)++], one, def_port, err, errlen)) < 0)
			return rc;
	}
	return 0;
}

/* host1[:port1],host2[:port2],.../MASTER_NAME[/db] after an optional userinfo. */
static int parse_sentinel(struct redis_target *t, char *s, char *err, size_t errlen)
{
	char *name, *db;
	int rc;

	if ((rc = parse_credentials(t, &s, err, errlen)) < 0)
		return rc;
	if (!(name = strchr(s, '/')) || !name[1] || name[1] == '/')
		return value_fail(
			err, errlen, -EINVAL,
			"missing master name (expected redis-sentinel://host1:26379,host2:26379/MASTER_NAME/db)");
	*name++ = '\0';
	if ((db = strchr(name, '/')))
		*db++ = '\0';
	if (db && *db && (rc = parse_db(db, &t->db, err, errlen)) < 0)
		return rc;
	if ((rc = parse_hosts(s, 26379, &t->sentinels, &t->nsentinels, err, errlen)) < 0)
		return rc;
	if (pct_decode(name) < 0)
		return value_fail(err, errlen, -EINVAL, "bad percent-encoding in master name");
	return value_set_str(&t->master_name, name);
}

/* host1[:port1],host2[:port2],...[/] after an optional userinfo: any nodes
 * of the cluster, asked for its slot map. A cluster has database 0 only. */
static int parse_cluster(struct redis_target *t, char *s, char *err, size_t errlen)
{
	char *path;
	int rc;

	if ((rc = parse_credentials(t, &s, err, errlen)) < 0)
		return rc;
	if (strchr(s, '?'))
		return value_fail(err, errlen, -EINVAL, "a redis-cluster:// url takes no query parameters");
	if ((path = strchr(s, '/')))
		*path++ = '\0';
	if (path && *path && strcmp(path, "0") != 0)
		return value_fail(err, errlen, -EINVAL, "a Redis Cluster has database 0 only");
	t->cluster = true;
	return parse_hosts(s, 6379, &t->seeds, &t->nseeds, err, errlen);
}

/* db=N&password=P after a unix socket path. */
static int parse_query(struct redis_target *t, char *q, char *err, size_t errlen)
{
	char *save = NULL, *kv, *v;
	int rc;

	for (kv = strtok_r(q, "&", &save); kv; kv = strtok_r(NULL, "&", &save)) {
		if (!(v = strchr(kv, '=')))
			return value_fail(err, errlen, -EINVAL, "query parameters must be name=value");
		*v++ = '\0';
		if (strcmp(kv, "db") == 0)
			rc = parse_db(v, &t->db, err, errlen);
		else if (strcmp(kv, "password") != 0)
			rc = value_fail(err, errlen, -EINVAL, "unknown query parameter (expected db or password)");
		else if (pct_decode(v) < 0)
			rc = value_fail(err, errlen, -EINVAL, "bad percent-encoding in password");
		else
			rc = value_set_str(&t->password, v);
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
		return value_fail(err, errlen, -EINVAL,
				  "socket path must be absolute, as in unix:///path/to/redis.sock");
	if (pct_decode(path) < 0)
		return value_fail(err, errlen, -EINVAL, "bad percent-encoding in socket path");
	if (query && (rc = parse_query(t, query, err, errlen)) < 0)
		return rc;
	t->is_unix = true;
	return value_set_str(&t->path, path);
}

static const struct scheme {
	const char *prefix;
	bool tls;
	int (*parse)(struct redis_target *t, char *s, char *err, size_t errlen);
} schemes[] = {
	{ "redis://", false, parse_tcp },
	{ "rediss://", true, parse_tcp },
	{ "unix://", false, parse_unix },
	{ "redis-sentinel://", false, parse_sentinel },
	{ "rediss-sentinel://", true, parse_sentinel },
	{ "redis-cluster://", false, parse_cluster },
	{ "rediss-cluster://", true, parse_cluster },
};

static int parse_url(struct redis_target *t, const char *url, char *err, size_t errlen)
{
	const struct scheme *sc = NULL;
	char *copy;
	int rc;

	if (!url || !*url)
		return value_fail(err, errlen, -EINVAL, "empty url");
	if (!strstr(url, "://"))
		return value_fail(err, errlen, -EINVAL,
				  "not a url (expected redis://host:port/db or unix:///path/to/redis.sock)");
	for (size_t i = 0; !sc && i < sizeof(schemes) / sizeof(schemes[0]); i++)
		if (has_prefix(url, schemes[i].prefix))
			sc = &schemes[i];
	if (!sc)
		return value_fail(err, errlen, -EINVAL,
				  "unsupported scheme (expected redis://, rediss://, unix://, redis-sentinel://, "
				  "rediss-sentinel://, redis-cluster:// or rediss-cluster://)");
	if (!(copy = strdup(url)))
		return value_fail(err, errlen, -ENOMEM, "out of memory");
	t->tls = sc->tls;
	rc = sc->parse(t, copy + strlen(sc->prefix), err, errlen);
	free(copy);
	if (rc == -ENOMEM)
		return value_fail(err, errlen, rc, "out of memory");
	return rc;
}

int redis_target_parse_with_password(struct redis_target *t, const char *url, const char *password, char *err,
				     size_t errlen)
{
	int rc;

	memset(t, 0, sizeof(*t));
	rc = parse_url(t, url, err, errlen);
	if (rc == 0 && password && value_set_str(&t->password, password) < 0)
		rc = value_fail(err, errlen, -ENOMEM, "out of memory");
	if (rc == 0 && t->user && !t->password)
		rc = value_fail(err, errlen, -EINVAL,
				"user name without a password (write :password@ for a password alone)");
	if (rc < 0)
		redis_target_free(t);
	return rc;
}

int redis_target_parse(struct redis_target *t, const char *url, char *err, size_t errlen)
{
	return redis_target_parse_with_password(t, url, NULL, err, errlen);
}

void redis_target_free(struct redis_target *t)
{
	if (!t)
		return;
	free(t->host);
	free(t->path);
	for (size_t i = 0; i < t->nsentinels; i++)
		free(t->sentinels[i].host);
	free(t->sentinels);
	for (size_t i = 0; i < t->nseeds; i++)
		free(t->seeds[i].host);
	free(t->seeds);
	free(t->master_name);
	free(t->user);
	free(t->password);
	memset(t, 0, sizeof(*t));
}

/* host:port, with brackets around an IPv6 address. */
void redis_addr_describe(const char *host, int port, char *out, size_t outlen)
{
	snprintf(out, outlen, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

/* what then h1:p1,h2:p2 into out: the length written. */
static size_t describe_addrs(char *out, size_t outlen, const char *what, const struct redis_addr *a, size_t na)
{
	size_t n = (size_t)snprintf(out, outlen, "%s", what);

	for (size_t i = 0; i < na && n < outlen; i++) {
		if (i > 0 && n + 1 < outlen)
			out[n++] = ',';
		redis_addr_describe(a[i].host, a[i].port, out + n, outlen - n);
		n += strlen(out + n);
	}
	return n < outlen ? n : outlen;
}

void redis_target_describe(const struct redis_target *t, char *out, size_t outlen)
{
	size_t n = 0;

	if (t->is_unix) {
		snprintf(out, outlen, "unix:%s?db=%d", t->path ? t->path : "", t->db);
		return;
	}
	if (t->cluster) {
		describe_addrs(out, outlen, "cluster:", t->seeds, t->nseeds);
		return;
	}
	if (!t->master_name) {
		redis_addr_describe(t->host ? t->host : "", t->port, out, outlen);
		n = strlen(out);
		snprintf(out + n, outlen - n, "/%d", t->db);
		return;
	}
	n = describe_addrs(out, outlen, "sentinel:", t->sentinels, t->nsentinels);
	if (n < outlen)
		snprintf(out + n, outlen - n, "/%s/%d", t->master_name, t->db);
}
