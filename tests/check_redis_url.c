/* redis_url: redis:// and unix:// URLs parsed, refused without quoting them, and described for logs. */
#include "fmacros.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "redis_url.h"
#include "suites.h"

/* As big as the buffer config_load gives the parser. */
#define ERR_SIZE 512

static const struct url_case {
	const char *url, *where, *user, *password;
} url_cases[] = {
	{ "redis://localhost", "localhost:6379/0", NULL, NULL },
	{ "redis://h:7000/5", "h:7000/5", NULL, NULL },
	{ "REDIS://h", "h:6379/0", NULL, NULL },
	{ "redis://h/", "h:6379/0", NULL, NULL },
	{ "redis://my-redis.internal_1:6379/15", "my-redis.internal_1:6379/15", NULL, NULL },
	{ "redis://:secret@h", "h:6379/0", NULL, "secret" },
	{ "redis://alice:s3cret@h:1/2", "h:1/2", "alice", "s3cret" },
	{ "redis://al%40ice:p%3Ass%2Fw%25rd@h", "h:6379/0", "al@ice", "p:ss/w%rd" },
	/* the last @ ends the credentials, so raw @ and / in a password survive */
	{ "redis://:p@ss/w@h:6380", "h:6380/0", NULL, "p@ss/w" },
	{ "redis://:@h", "h:6379/0", NULL, NULL },
	{ "redis://[::1]:6380/1", "[::1]:6380/1", NULL, NULL },
	{ "redis://[::1]", "[::1]:6379/0", NULL, NULL },
	{ "redis://u:p@[fe80::1%eth0]/3", "[fe80::1%eth0]:6379/3", "u", "p" },
	{ "unix:///tmp/r.sock", "unix:/tmp/r.sock?db=0", NULL, NULL },
	{ "unix:///tmp/r.sock?db=2", "unix:/tmp/r.sock?db=2", NULL, NULL },
	{ "unix://:pw@/tmp/r.sock?db=3", "unix:/tmp/r.sock?db=3", NULL, "pw" },
	{ "unix://u:p%26@/s", "unix:/s?db=0", "u", "p&" },
	{ "unix:///s?password=p%40ss&db=1", "unix:/s?db=1", NULL, "p@ss" },
	{ "unix://u@/s?password=sesame", "unix:/s?db=0", "u", "sesame" },
	{ "unix:///tmp/my%20r.sock", "unix:/tmp/my r.sock?db=0", NULL, NULL },
	{ "rediss://:secret@h:6380/2", "h:6380/2", NULL, "secret" },
	{ "REDISS://h", "h:6379/0", NULL, NULL },
	{ "redis-sentinel://s1,s2:26380,[::1]:7/mymaster", "sentinel:s1:26379,s2:26380,[::1]:7/mymaster/0", NULL,
	  NULL },
	{ "rediss-sentinel://u:p%40ss@s1:1/my%20master/3", "sentinel:s1:1/my master/3", "u", "p@ss" },
	{ "redis-sentinel://:pw@s1/m/", "sentinel:s1:26379/m/0", NULL, "pw" },
	{ "redis-cluster://h1:7000,h2:7001,[::1]:7", "cluster:h1:7000,h2:7001,[::1]:7", NULL, NULL },
	{ "rediss-cluster://u:p%40ss@h1/", "cluster:h1:6379", "u", "p@ss" },
	{ "redis-cluster://:pw@h1:7000/0", "cluster:h1:7000", NULL, "pw" },
};

START_TEST(redis_urls_parse)
{
	const struct url_case *uc = &url_cases[_i];
	struct redis_target t;
	char err[ERR_SIZE], where[128];

	ck_assert_msg(redis_target_parse(&t, uc->url, err, sizeof(err)) == 0, "%s: %s", uc->url, err);
	redis_target_describe(&t, where, sizeof(where));
	ck_assert_str_eq(where, uc->where);
	ck_assert_pstr_eq(t.user, uc->user);
	ck_assert_pstr_eq(t.password, uc->password);
	if (t.password)
		ck_assert_msg(!strstr(where, t.password), "%s leaks %s", where, t.password);
	ck_assert(t.is_unix == (strncmp(uc->url, "unix:", 5) == 0));
	ck_assert(t.tls == (strncasecmp(uc->url, "rediss", 6) == 0));
	ck_assert((t.master_name != NULL) == (strstr(uc->url, "-sentinel:") != NULL));
	ck_assert(t.cluster == (strstr(uc->url, "-cluster:") != NULL));
	ck_assert(!t.cluster || (t.nseeds > 0 && t.seeds[0].host));
	redis_target_free(&t);
	redis_target_free(&t);
}
END_TEST

START_TEST(redis_tcp_fields)
{
	struct redis_target t;
	char err[ERR_SIZE];

	ck_assert_int_eq(redis_target_parse(&t, "redis://[::1]:6380/9", err, sizeof(err)), 0);
	ck_assert_str_eq(t.host, "::1");
	ck_assert_int_eq(t.port, 6380);
	ck_assert_int_eq(t.db, 9);
	ck_assert_ptr_null(t.path);
	redis_target_free(&t);
	ck_assert_int_eq(redis_target_parse(&t, "unix:///s?db=4", err, sizeof(err)), 0);
	ck_assert_str_eq(t.path, "/s");
	ck_assert_int_eq(t.db, 4);
	ck_assert_ptr_null(t.host);
	redis_target_free(&t);
}
END_TEST

#define BAD_PORT "port must be a number from 1 to 65535"
#define BAD_DB "db must be a whole number, 0 or more"
#define NOT_ABSOLUTE "socket path must be absolute, as in unix:///path/to/redis.sock"
#define BAD_CREDS "bad percent-encoding in user name or password"
#define NO_MASTER "missing master name (expected redis-sentinel://host1:26379,host2:26379/MASTER_NAME/db)"

static const struct bad_url {
	const char *url, *msg;
} bad_urls[] = {
	{ "", "empty url" },
	{ "http://h", "unsupported scheme (expected redis://, rediss://, unix://, redis-sentinel://, "
		      "rediss-sentinel://, redis-cluster:// or rediss-cluster://)" },
	{ "rediss://:hunter2@h:0", BAD_PORT },
	{ "redis-sentinel://:hunter2@h1,h2", NO_MASTER },
	{ "redis-sentinel://h1/", NO_MASTER },
	{ "redis-cluster://h1:7000/3", "a Redis Cluster has database 0 only" },
	{ "redis-cluster://h1?password=x", "a redis-cluster:// url takes no query parameters" },
	{ "redis-cluster://h1,,h2", "missing host" },
	{ "redis-cluster://:hunter2@h1:0", BAD_PORT },
	{ "redis-sentinel://h1//0", NO_MASTER },
	{ "redis-sentinel:///m", "missing host" },
	{ "redis-sentinel://h1,,h2/m", "missing host" },
	{ "redis-sentinel://,/m", "missing host" },
	{ "redis-sentinel://h1:0/m", BAD_PORT },
	{ "redis-sentinel://h1/m/x", BAD_DB },
	{ "redis-sentinel://h1/m%zz", "bad percent-encoding in master name" },
	{ "localhost:6379", "not a url (expected redis://host:port/db or unix:///path/to/redis.sock)" },
	{ "redis://", "missing host" },
	{ "redis://:6379", "missing host" },
	{ "redis://:hunter2@/0", "missing host" },
	{ "redis://[]", "missing host" },
	{ "redis://[::1", "missing ] after IPv6 address" },
	{ "redis://[::1]x", "unexpected text after IPv6 address" },
	{ "redis://h?db=1", "bad host name" },
	{ "redis://h x", "bad host name" },
	{ "redis://h:0", BAD_PORT },
	{ "redis://h:65536", BAD_PORT },
	{ "redis://h:", BAD_PORT },
	{ "redis://h:63x", BAD_PORT },
	{ "redis://:hunter2@h:hunter2", BAD_PORT },
	{ "redis://h/x", BAD_DB },
	{ "redis://h/-1", BAD_DB },
	{ "redis://h/99999999999", BAD_DB },
	{ "redis://h/0?x", BAD_DB },
	{ "redis://:%zz@h", BAD_CREDS },
	{ "redis://:hunter2%4@h", BAD_CREDS },
	{ "redis://:a%00b@h", BAD_CREDS },
	{ "redis://alice@h", "user name without a password (write :password@ for a password alone)" },
	{ "unix://", NOT_ABSOLUTE },
	{ "unix://tmp/r.sock", NOT_ABSOLUTE },
	{ "unix:///s?foo=hunter2", "unknown query parameter (expected db or password)" },
	{ "unix:///s?db", "query parameters must be name=value" },
	{ "unix:///s?db=x", BAD_DB },
	{ "unix:///s?db=", BAD_DB },
	{ "unix:///s?password=%zz", "bad percent-encoding in password" },
	{ "unix:///s%zz", "bad percent-encoding in socket path" },
};

START_TEST(redis_urls_refused)
{
	const struct bad_url *bu = &bad_urls[_i];
	struct redis_target t;
	char err[ERR_SIZE];

	ck_assert_int_eq(redis_target_parse(&t, bu->url, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, bu->msg);
	ck_assert_ptr_null(strstr(err, "hunter2"));
	ck_assert_ptr_null(t.host);
	ck_assert_ptr_null(t.path);
	ck_assert_ptr_null(t.user);
	ck_assert_ptr_null(t.password);
	redis_target_free(&t);
}
END_TEST

START_TEST(redis_null_url)
{
	struct redis_target t;
	char err[ERR_SIZE];

	ck_assert_int_eq(redis_target_parse(&t, NULL, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "empty url");
}
END_TEST

START_TEST(describe_is_bounded)
{
	struct redis_target t;
	char err[ERR_SIZE], out[8];

	memset(&t, 0, sizeof(t));
	redis_target_describe(&t, out, sizeof(out));
	ck_assert_str_eq(out, ":0/0");
	ck_assert_int_eq(redis_target_parse(&t, "redis://:pw@a-long-host-name:6379/1", err, sizeof(err)), 0);
	redis_target_describe(&t, out, sizeof(out));
	ck_assert_str_eq(out, "a-long-");
	redis_target_free(&t);
}
END_TEST

Suite *redis_url_suite(void)
{
	Suite *s = suite_create("redis_url");
	TCase *redis = tcase_create("redis");

	tcase_add_loop_test(redis, redis_urls_parse, 0, (int)(sizeof(url_cases) / sizeof(url_cases[0])));
	tcase_add_test(redis, redis_tcp_fields);
	tcase_add_loop_test(redis, redis_urls_refused, 0, (int)(sizeof(bad_urls) / sizeof(bad_urls[0])));
	tcase_add_test(redis, redis_null_url);
	tcase_add_test(redis, describe_is_bounded);
	suite_add_tcase(s, redis);
	return s;
}
