/* routes: --route, STAGEDRAIN_ROUTE and --route-file into targets and rules, every error, and routes_find. */
#include "fmacros.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "routes.h"
#include "suites.h"

/* Every variable these tests or config_load read: a developer's own must not leak in. */
static const char *const vars[] = {
	"STAGEDRAIN_ROUTE",
	"STAGEDRAIN_ROUTE_FILE",
	"STAGEDRAIN_REDIS_URL",
	"REDIS_URL",
	"STAGEDRAIN_REDIS_URL_FILE",
	"STAGEDRAIN_REDIS_PASSWORD_FILE",
	"STAGEDRAIN_REDIS_TLS_CA_FILE",
	"STAGEDRAIN_REDIS_TLS_CERT_FILE",
	"STAGEDRAIN_REDIS_TLS_KEY_FILE",
	"STAGEDRAIN_REDIS_TLS_SERVER_NAME",
	"STAGEDRAIN_REDIS_TLS_INSECURE",
	"STAGEDRAIN_REDIS_WAIT_REPLICAS",
	"STAGEDRAIN_REDIS_WAIT_TIMEOUT",
	"STAGEDRAIN_MAX_REDIS_MEMORY",
	"STAGEDRAIN_FORMAT",
	"STAGEDRAIN_NAMESPACE",
	"STAGEDRAIN_SIDEKIQ_VERSION",
	"STAGEDRAIN_RAILS_VERSION",
	"STAGEDRAIN_LARAVEL_PREFIX",
	"STAGEDRAIN_BATCH_SIZE",
	"STAGEDRAIN_PG_URL",
	"DATABASE_URL",
	NULL,
};

static char dir[256];

static void setup(void)
{
	const char *tmp = getenv("TMPDIR");

	for (const char *const *v = vars; *v; v++)
		unsetenv(*v);
	snprintf(dir, sizeof(dir), "%s/stagedrain-routes.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static const char *const file_names[] = { "routes", "pw", "pw2", NULL };

static void teardown(void)
{
	char path[300];

	for (const char *const *n = file_names; *n; n++) {
		snprintf(path, sizeof(path), "%s/%s", dir, *n);
		unlink(path);
	}
	rmdir(dir);
}

/* Writes text to the file name (one of file_names) in the test's directory. */
static const char *put_file(const char *name, const char *text, char *path, size_t len)
{
	FILE *f;

	snprintf(path, len, "%s/%s", dir, name);
	f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(text, 1, strlen(text), f), strlen(text));
	fclose(f);
	return path;
}

#define ARGV(...) ((const char *const[]){ "stagedrain", __VA_ARGS__, NULL })

static int load(struct config *cfg, char *err, const char *const *argv)
{
	int argc = 0;

	while (argv[argc])
		argc++;
	err[0] = '\0';
	return config_load(cfg, argc, (char **)argv, err, CONFIG_ERR_SIZE);
}

static void load_ok(struct config *cfg, const char *const *argv)
{
	char err[CONFIG_ERR_SIZE];
	int rc = load(cfg, err, argv);

	ck_assert_msg(rc == 0, "config_load failed: %s", err);
}

/* A failed load says msg, shows no password (hunter2 in every case) and leaves cfg freed. */
static void expect_error(const char *const *argv, const char *msg)
{
	struct config cfg;
	char err[CONFIG_ERR_SIZE];

	ck_assert_int_eq(load(&cfg, err, argv), -EINVAL);
	ck_assert_str_eq(err, msg);
	ck_assert_ptr_null(strstr(err, "hunter2"));
	ck_assert_ptr_null(cfg.routes.t);
	ck_assert_ptr_null(cfg.redis_url);
	config_free(&cfg);
}

static const struct config *target(const struct config *cfg, size_t i)
{
	ck_assert_uint_lt(i, cfg->routes.n);
	return cfg->routes.t[i].cfg;
}

/* ---- errors ---- */

#define SYNTAX "a route is NAME QUEUES [--SETTING VALUE ...]"
#define TLS_NEEDED "but --redis-url does not use TLS (use rediss:// or rediss-sentinel://)"
#define R1 "one q1 --redis-url redis://r1:6379/0"

/* Each error of a route given by flag, with the other routes and flags it needs. */
static const struct err_case {
	const char *args[8];
	const char *msg;
} err_cases[] = {
	/* shape and name */
	{ { "--route", "shard2" }, "--route \"shard2\": too few fields: " SYNTAX },
	{ { "--route", "  " }, "--route \"  \": the route is empty: " SYNTAX },
	{ { "--route=--redis-url redis://h q" },
	  "--route \"--redis-url redis://h q\": a route starts with its name, not \"--redis-url\": NAME QUEUES "
	  "[--SETTING VALUE ...]" },
	{ { "--route", "sh@rd q --redis-url redis://h" },
	  "--route \"...@rd q --redis-url redis://h\": bad name \"...@rd\": use letters, digits, '_', '-' and '.'" },
	{ { "--route", "a1234567890123456789012345678901234567890123456789012345678901234 q --redis-url redis://h" },
	  "--route \"a1234567890123456789012345678901234567890123456789012345678901234 q --redis-url redis://h\": "
	  "the name is longer than 64 characters" },
	{ { "--route", "default q --redis-url redis://h" },
	  "--route \"default q --redis-url redis://h\": \"default\" names the --redis-url target: give the route "
	  "another name" },
	{ { "--route", R1, "--route", "one q2 --redis-url redis://r2" },
	  "--route \"one q2 --redis-url redis://r2\": the name \"one\" is taken by an earlier route" },
	/* queues */
	{ { "--route", "two --redis-url redis://h" },
	  "--route \"two --redis-url redis://h\": QUEUES are missing before \"--redis-url\": NAME QUEUES "
	  "[--SETTING VALUE ...], - for none" },
	{ { "--route", "two a,,b --redis-url redis://h" },
	  "--route \"two a,,b --redis-url redis://h\": an empty queue pattern (two commas, or one at an end)" },
	{ { "--route", "two a, --redis-url redis://h" },
	  "--route \"two a, --redis-url redis://h\": an empty queue pattern (two commas, or one at an end)" },
	{ { "--route", "two a,- --redis-url redis://h" },
	  "--route \"two a,- --redis-url redis://h\": \"-\" (no queues) goes alone, not in a list" },
	/* rules no queue could reach */
	{ { "--route", "two a,b,a --redis-url redis://h" },
	  "--route \"two a,b,a --redis-url redis://h\": \"a\" is given twice: route \"two\" has it already" },
	{ { "--route", R1, "--route", "two q2,q1 --redis-url redis://h" },
	  "--route \"two q2,q1 --redis-url redis://h\": \"q1\" is given twice: route \"one\" has it already" },
	{ { "--route", "one crit* --redis-url redis://h", "--route", "two critical --redis-url redis://h" },
	  "--route \"two critical --redis-url redis://h\": queue \"critical\" would never reach this route: route "
	  "\"one\"'s pattern \"crit*\" matches it first" },
	{ { "--route", "one mail?,a*z --redis-url redis://h", "--route", "two abz --redis-url redis://h" },
	  "--route \"two abz --redis-url redis://h\": queue \"abz\" would never reach this route: route \"one\"'s "
	  "pattern \"a*z\" matches it first" },
	{ { "--route", "one crit* --redis-url redis://h", "--route", "two x,crit*-low --redis-url redis://h" },
	  "--route \"two x,crit*-low --redis-url redis://h\": pattern \"crit*-low\" would never match: route "
	  "\"one\"'s pattern \"crit*\" matches every queue it does, first" },
	{ { "--route", "one *-* --redis-url redis://h", "--route", "two bulk-[ab]? --redis-url redis://h" },
	  "--route \"two bulk-[ab]? --redis-url redis://h\": pattern \"bulk-[ab]?\" would never match: route "
	  "\"one\"'s pattern \"*-*\" matches every queue it does, first" },
	{ { "--route", "one * --redis-url redis://h", "--route", "two - --redis-url redis://h", "--route",
	    "three [xy] --redis-url redis://h" },
	  "--route \"three [xy] --redis-url redis://h\": pattern \"[xy]\" would never match: route \"one\"'s "
	  "pattern \"*\" matches every queue it does, first" },
	/* settings */
	{ { "--route", "two q --format celery" },
	  "--route \"two q --format celery\": --redis-url is missing: every route needs its own" },
	{ { "--route", "two q --redis-url redis://h --frob 1" },
	  "--route \"two q --redis-url redis://h --frob 1\": unknown option --frob (see --help)" },
	{ { "--route", "two q --redis-url redis://h --batch-size 5" },
	  "--route \"two q --redis-url redis://h --batch-size 5\": --batch-size is the relay's setting, not a "
	  "route's" },
	{ { "--route", "two q --redis-url redis://h --redis-timeout=1s" },
	  "--route \"two q --redis-url redis://h --redis-timeout=1s\": --redis-timeout is the relay's setting, not a "
	  "route's" },
	{ { "--route", "two q --redis-url redis://h --route x" },
	  "--route \"two q --redis-url redis://h --route x\": --route is the relay's setting, not a route's" },
	{ { "--route", "two q --redis-url redis://h --format" },
	  "--route \"two q --redis-url redis://h --format\": --format needs a value" },
	{ { "--route", "two q --redis-url --format celery" },
	  "--route \"two q --redis-url --format celery\": --redis-url needs a value" },
	{ { "--route", "two q --redis-url redis://h celery" },
	  "--route \"two q --redis-url redis://h celery\": unexpected \"celery\": settings are --SETTING VALUE" },
	{ { "--route", "two q --redis-url gopher://:hunter2@h" },
	  "--route \"two q --redis-url gopher://...@h\": invalid --redis-url: unsupported scheme (expected "
	  "redis://, rediss://, unix://, redis-sentinel://, rediss-sentinel://, redis-cluster:// or rediss-cluster://)" },
	{ { "--route", "two q --redis-url=redis://u:hunter2@h:99999/0" },
	  "--route \"two q --redis-url=redis://...@h:99999/0\": invalid --redis-url: port must be a number from 1 "
	  "to 65535" },
	{ { "--route", "two q --redis-url unix:///s?password=hunter2&db=x" },
	  "--route \"two q --redis-url unix:///s?password=...&db=x\": invalid --redis-url: db must be a whole "
	  "number, 0 or more" },
	{ { "--route", "two q --redis-url redis://u@h" },
	  "--route \"two q --redis-url redis://...@h\": invalid --redis-url: user name without a password (write "
	  ":password@ for a password alone)" },
	{ { "--route", "two q --redis-url redis://h --format rq" },
	  "--route \"two q --redis-url redis://h --format rq\": invalid --format \"rq\": must be one of sidekiq, "
	  "resque, activejob, celery, laravel, bullmq" },
	{ { "--route", "two q --redis-url redis://h --redis-wait-replicas 101" },
	  "--route \"two q --redis-url redis://h --redis-wait-replicas 101\": invalid --redis-wait-replicas \"101\": "
	  "must be between 0 and 100" },
	{ { "--route", "two q --redis-url redis://h --redis-wait-timeout 2min" },
	  "--route \"two q --redis-url redis://h --redis-wait-timeout 2min\": invalid --redis-wait-timeout "
	  "\"2min\": not a duration (e.g. 250ms or 2s; a bare number is milliseconds)" },
	{ { "--route", "two q --redis-url redis://h --max-redis-memory=101" },
	  "--route \"two q --redis-url redis://h --max-redis-memory=101\": invalid --max-redis-memory \"101\": "
	  "must be between 0 and 100" },
	{ { "--route", "two q --redis-url redis://h --redis-tls-insecure=maybe" },
	  "--route \"two q --redis-url redis://h --redis-tls-insecure=maybe\": invalid --redis-tls-insecure "
	  "\"maybe\": must be one of true, false, 1, 0, yes, no, on, off" },
	{ { "--route", "two q --redis-url redis://h --redis-password-file /nonexistent/stagedrain" },
	  "--route \"two q --redis-url redis://h --redis-password-file /nonexistent/stagedrain\": invalid "
	  "--redis-password-file \"/nonexistent/stagedrain\": could not open the file: No such file or directory" },
	/* TLS settings, as check_tls says at the top level */
	{ { "--route", "two q --redis-url redis://h --redis-tls-ca-file ca.pem" },
	  "--route \"two q --redis-url redis://h --redis-tls-ca-file ca.pem\": --redis-tls-ca-file is set " TLS_NEEDED },
	{ { "--route", "two q --redis-url unix:///s --redis-tls-insecure" },
	  "--route \"two q --redis-url unix:///s --redis-tls-insecure\": --redis-tls-insecure is set " TLS_NEEDED },
	{ { "--route", "two q --redis-url rediss://h --redis-tls-key-file k.pem" },
	  "--route \"two q --redis-url rediss://h --redis-tls-key-file k.pem\": --redis-tls-cert-file and "
	  "--redis-tls-key-file go together: set both or neither" },
	/* a format's settings with another format: the route's own, or the relay's it inherits */
	{ { "--route", "two q --redis-url redis://h --laravel-prefix shop_" },
	  "--route \"two q --redis-url redis://h --laravel-prefix shop_\": --laravel-prefix is only used with "
	  "--format laravel, not sidekiq" },
	{ { "--format", "laravel", "--route", "two q --redis-url redis://h --format celery --laravel-prefix x" },
	  "--route \"two q --redis-url redis://h --format celery --laravel-prefix x\": --laravel-prefix is only used "
	  "with --format laravel, not celery" },
	{ { "--route", "two q --redis-url redis://h --format celery --rails-version 7.1" },
	  "--route \"two q --redis-url redis://h --format celery --rails-version 7.1\": --rails-version is only used "
	  "with --format sidekiq or activejob, not celery" },
	{ { "--format", "resque", "--route", "two q --redis-url redis://h --sidekiq-version 8" },
	  "--route \"two q --redis-url redis://h --sidekiq-version 8\": --sidekiq-version is only used with "
	  "--format sidekiq or activejob, not resque" },
	{ { "--route", "two q --redis-url redis://h --format laravel --namespace app" },
	  "--route \"two q --redis-url redis://h --format laravel --namespace app\": invalid --namespace \"app\": is "
	  "not used with --format laravel: set --laravel-prefix instead" },
	{ { "--format", "laravel", "--route", "two q --redis-url redis://h --namespace app" },
	  "--route \"two q --redis-url redis://h --namespace app\": invalid --namespace \"app\": is not used with "
	  "--format laravel: set --laravel-prefix instead" },
	{ { "--route", "two q --redis-url redis://h --namespace a:" },
	  "--route \"two q --redis-url redis://h --namespace a:\": invalid --namespace \"a:\": must not end with ':' "
	  "(the colon is added)" },
	/* a word that may hold a password: masked wherever it is quoted */
	{ { "--route", "shard2 q redis://u:hunter2@h/0" },
	  "--route \"shard2 q redis://...@h/0\": unexpected \"redis://...@h/0\": settings are --SETTING VALUE" },
	{ { "--route", "shard2 q --format celery u:hunter2@h" },
	  "--route \"shard2 q --format celery ...@h\": unexpected \"...@h\": settings are --SETTING VALUE" },
	{ { "--route", "shard2 q --redis-url redis://h --format redis://:hunter2@h" },
	  "--route \"shard2 q --redis-url redis://h --format redis://...@h\": invalid --format \"redis://...@h\": "
	  "must be one of sidekiq, resque, activejob, celery, laravel, bullmq" },
	{ { "--route", "redis://:hunter2@h q --redis-url redis://h" },
	  "--route \"redis://...@h q --redis-url redis://h\": bad name \"redis://...@h\": use letters, digits, '_', "
	  "'-' and '.'" },
	/* a setting given twice in one route: refused, not the last one taken */
	{ { "--route", "two q --redis-url redis://h1 --redis-url=redis://:hunter2@h2" },
	  "--route \"two q --redis-url redis://h1 --redis-url=redis://...@h2\": --redis-url given twice: give it once" },
	{ { "--route", "two q --redis-url redis://h --format celery --format sidekiq" },
	  "--route \"two q --redis-url redis://h --format celery --format sidekiq\": --format given twice: give it "
	  "once" },
};

START_TEST(error_messages)
{
	const struct err_case *ec = &err_cases[_i];
	const char *argv[10] = { "stagedrain" };

	for (int k = 0; k < 8 && ec->args[k]; k++)
		argv[k + 1] = ec->args[k];
	expect_error(argv, ec->msg);
}
END_TEST

/* STAGEDRAIN_ROUTE's routes are named with their variable. */
START_TEST(error_from_the_variable)
{
	setenv("STAGEDRAIN_ROUTE", R1 ";\n two q2,q3 --redis-url redis://:hunter2@h2 --batch-size 1\n", 1);
	expect_error(ARGV(NULL), "--route \"two q2,q3 --redis-url redis://...@h2 --batch-size 1\" (from "
				 "STAGEDRAIN_ROUTE): --batch-size is the relay's setting, not a route's");
}
END_TEST

/* A password in a route never reaches a message, from any source: the
 * variable (where a ';' inside a password does not end the route) and the file. */
START_TEST(no_password_in_any_message)
{
	char path[300], msg[CONFIG_ERR_SIZE];

	setenv("STAGEDRAIN_ROUTE", "shard2 q redis://u:hunter2@h/0", 1);
	expect_error(ARGV(NULL), "--route \"shard2 q redis://...@h/0\" (from STAGEDRAIN_ROUTE): unexpected "
				 "\"redis://...@h/0\": settings are --SETTING VALUE");
	setenv("STAGEDRAIN_ROUTE", "shard2 q --redis-url redis://u:hun;ter2@h/0 --frob 1", 1);
	expect_error(ARGV(NULL), "--route \"shard2 q --redis-url redis://...@h/0 --frob 1\" (from STAGEDRAIN_ROUTE): "
				 "unknown option --frob (see --help)");
	setenv("STAGEDRAIN_ROUTE", "shard2 q --redis-url unix:///s?password=hun;ter2 --frob 1", 1);
	expect_error(ARGV(NULL), "--route \"shard2 q --redis-url unix:///s?password=... --frob 1\" (from "
				 "STAGEDRAIN_ROUTE): unknown option --frob (see --help)");
	unsetenv("STAGEDRAIN_ROUTE");
	put_file("routes", "# one\nshard2 q redis://u:hunter2@h/0\n", path, sizeof(path));
	snprintf(msg, sizeof(msg),
		 "--route-file %s line 2: unexpected \"redis://...@h/0\": settings are --SETTING VALUE", path);
	expect_error(ARGV("--route-file", path), msg);
}
END_TEST

/* STAGEDRAIN_ROUTE: a ';' inside a URL's user or password (an '@' follows
 * it in its word) or in a password= value is the password's; any other ';'
 * separates routes, with or without a space after it. */
START_TEST(semicolon_in_a_password_splits_nothing)
{
	struct config cfg;

	setenv("STAGEDRAIN_ROUTE",
	       "a q1 --redis-url redis://u:p;w;@r1/1;b q2 --redis-url unix:///s?password=x;y --format resque;c q3 "
	       "--redis-url unix:///s?password=z;w&db=3; d q4 --redis-url redis://:;@r4/4",
	       1);
	load_ok(&cfg, ARGV(NULL));
	ck_assert_uint_eq(cfg.routes.n, 5);
	ck_assert_str_eq(cfg.routes.t[1].name, "a");
	ck_assert_str_eq(target(&cfg, 1)->redis.password, "p;w;");
	ck_assert_str_eq(cfg.routes.t[2].name, "b");
	ck_assert_str_eq(target(&cfg, 2)->redis.password, "x;y");
	ck_assert_int_eq((int)target(&cfg, 2)->format, FORMAT_RESQUE);
	ck_assert_str_eq(cfg.routes.t[3].name, "c");
	ck_assert_str_eq(target(&cfg, 3)->redis.password, "z;w");
	ck_assert_int_eq(target(&cfg, 3)->redis.db, 3);
	ck_assert_str_eq(cfg.routes.t[4].name, "d");
	ck_assert_str_eq(target(&cfg, 4)->redis.password, ";");
	config_free(&cfg);
}
END_TEST

/* A route file's routes are named by the file and line; comments and blank lines count. */
START_TEST(error_in_the_file)
{
	char path[300], msg[CONFIG_ERR_SIZE];

	put_file("routes", "# routes\n\n" R1 "\n   \n\ttwo q1 --redis-url redis://h\n", path, sizeof(path));
	snprintf(msg, sizeof(msg), "--route-file %s line 5: \"q1\" is given twice: route \"one\" has it already", path);
	expect_error(ARGV("--route-file", path), msg);
	setenv("STAGEDRAIN_ROUTE_FILE", path, 1);
	snprintf(msg, sizeof(msg),
		 "--route-file %s (from STAGEDRAIN_ROUTE_FILE) line 5: \"q1\" is given twice: route \"one\" has it "
		 "already",
		 path);
	expect_error(ARGV(NULL), msg);
	/* The file's routes come after --route's: its "one" is the second. */
	put_file("routes", R1 "\n", path, sizeof(path));
	snprintf(msg, sizeof(msg),
		 "--route-file %s (from STAGEDRAIN_ROUTE_FILE) line 1: the name \"one\" is taken by "
		 "an earlier route",
		 path);
	expect_error(ARGV("--route", "one x --redis-url redis://h"), msg);
}
END_TEST

START_TEST(file_missing_or_refused)
{
	char path[300], msg[CONFIG_ERR_SIZE];

	expect_error(
		ARGV("--route-file", "/nonexistent/routes"),
		"invalid --route-file \"/nonexistent/routes\": could not open the file: No such file or directory");
	put_file("routes", R1 "\n", path, sizeof(path));
	ck_assert_int_eq(truncate(path, 2 * 1048576), 0);
	snprintf(msg, sizeof(msg), "invalid --route-file \"%s\": the file is larger than 1M", path);
	expect_error(ARGV("--route-file", path), msg);
	ck_assert_int_eq(truncate(path, 100), 0);
	snprintf(msg, sizeof(msg), "invalid --route-file \"%s\": the file holds a NUL byte", path);
	expect_error(ARGV("--route-file", path), msg);
}
END_TEST

/* A long route is cut in its message, which stays one bounded line. */
START_TEST(error_message_is_bounded)
{
	char route[700], err[CONFIG_ERR_SIZE];
	struct config cfg;

	memset(route, 'q', sizeof(route) - 1);
	route[sizeof(route) - 1] = '\0';
	ck_assert_int_eq(load(&cfg, err, ARGV("--route", route)), -EINVAL);
	ck_assert_uint_lt(strlen(err), CONFIG_ERR_SIZE);
	ck_assert_ptr_nonnull(strstr(err, "...\": too few fields"));
	ck_assert_ptr_null(strchr(err, '\n'));
}
END_TEST

/* ---- good routes ---- */

/* No route: the default target alone, the relay's own config. */
START_TEST(no_routes)
{
	struct config cfg;

	load_ok(&cfg, ARGV(NULL));
	ck_assert_uint_eq(cfg.routes.n, 1);
	ck_assert_uint_eq(cfg.routes.nrules, 0);
	ck_assert_str_eq(cfg.routes.t[0].name, "default");
	ck_assert_ptr_eq(cfg.routes.t[0].cfg, &cfg);
	ck_assert_ptr_null(cfg.route_name);
	config_free(&cfg);
	/* An empty variable is no routes, as --route given nothing would be. */
	setenv("STAGEDRAIN_ROUTE", " ;\n", 1);
	load_ok(&cfg, ARGV(NULL));
	ck_assert_uint_eq(cfg.routes.n, 1);
	config_free(&cfg);
}
END_TEST

/* Flags in their order, then the file's lines; a flag hides the variable. */
START_TEST(flags_then_file_in_order)
{
	struct config cfg;
	char path[300];
	const struct route_rule *rl;

	put_file("routes",
		 "# bulk work\n"
		 "c  bulk,report-*   --redis-url redis://r3:6379/3\r\n"
		 "\n"
		 "   # a comment after spaces\n"
		 "d - --redis-url=redis://r4/4\n",
		 path, sizeof(path));
	setenv("STAGEDRAIN_ROUTE", "ignored q9 --redis-url redis://r9", 1);
	load_ok(&cfg, ARGV("--route", "a critical --redis-url redis://r1:6379/1", "--route-file", path, "--route",
			   "b\tmail*,sms --redis-url redis://r2:6379/2"));
	ck_assert_uint_eq(cfg.routes.n, 5);
	ck_assert_str_eq(cfg.routes.t[1].name, "a");
	ck_assert_str_eq(cfg.routes.t[2].name, "b");
	ck_assert_str_eq(cfg.routes.t[3].name, "c");
	ck_assert_str_eq(cfg.routes.t[4].name, "d");
	for (size_t i = 1; i < 5; i++) {
		ck_assert_str_eq(target(&cfg, i)->route_name, cfg.routes.t[i].name);
		ck_assert_int_eq(target(&cfg, i)->redis.db, (int)i);
		ck_assert_ptr_null(target(&cfg, i)->routes.t);
		ck_assert_uint_eq(target(&cfg, i)->routes.n, 0);
	}
	ck_assert_uint_eq(cfg.routes.nrules, 5);
	rl = cfg.routes.rules;
	ck_assert(strcmp(rl[0].pattern, "critical") == 0 && !rl[0].glob && rl[0].len == 8 && rl[0].target == 1);
	ck_assert(strcmp(rl[1].pattern, "mail*") == 0 && rl[1].glob && rl[1].len == 5 && rl[1].target == 2);
	ck_assert(strcmp(rl[2].pattern, "sms") == 0 && !rl[2].glob && rl[2].target == 2);
	ck_assert(strcmp(rl[3].pattern, "bulk") == 0 && !rl[3].glob && rl[3].target == 3);
	ck_assert(strcmp(rl[4].pattern, "report-*") == 0 && rl[4].glob && rl[4].target == 3);
	config_free(&cfg);
}
END_TEST

/* The variable's routes, one a line or between ';', then the file's. */
START_TEST(variable_then_file)
{
	struct config cfg;
	char path[300];

	setenv("STAGEDRAIN_ROUTE",
	       "a q1 --redis-url redis://r1/1;b q2 --redis-url redis://r2/2\n\nc q3 --redis-url "
	       "redis://:pw@r3/3;",
	       1);
	setenv("STAGEDRAIN_ROUTE_FILE", put_file("routes", "d q4 --redis-url redis://r4/4", path, sizeof(path)), 1);
	load_ok(&cfg, ARGV(NULL));
	ck_assert_uint_eq(cfg.routes.n, 5);
	ck_assert_str_eq(cfg.routes.t[1].name, "a");
	ck_assert_str_eq(cfg.routes.t[2].name, "b");
	ck_assert_str_eq(cfg.routes.t[3].name, "c");
	ck_assert_str_eq(cfg.routes.t[4].name, "d");
	ck_assert_str_eq(cfg.route_file, path);
	ck_assert_str_eq(target(&cfg, 3)->redis.password, "pw");
	/* Only a password on the command line is warned about. */
	ck_assert(!target(&cfg, 3)->redis_url_argv_password);
	config_free(&cfg);
	load_ok(&cfg, ARGV("--route", "e q5 --redis-url redis://:pw@r5/5"));
	ck_assert(target(&cfg, 1)->redis_url_argv_password);
	ck_assert(!cfg.redis_url_argv_password);
	config_free(&cfg);
}
END_TEST

/* A route copies the relay-wide settings and, without --format, the format
 * and its settings; never the Redis settings. */
START_TEST(inherits_all_but_redis)
{
	struct config cfg;
	const struct config *t;
	char pw[300];

	put_file("pw", "base-secret\n", pw, sizeof(pw));
	load_ok(&cfg, ARGV("--format", "resque", "--namespace", "app", "--batch-size", "7", "--lock-key", "42",
			   "--redis-timeout", "2s", "--stop-timeout", "3s", "--max-queue-length", "9", "--queue-limit",
			   "a=1,b=2", "--max-redis-memory", "80", "--redis-url", "rediss://:x@base:6380/5",
			   "--redis-password-file", pw, "--redis-tls-ca-file", "ca.pem", "--redis-tls-cert-file",
			   "c.pem", "--redis-tls-key-file", "k.pem", "--redis-tls-server-name", "base.example",
			   "--redis-tls-insecure", "--redis-wait-replicas", "2", "--redis-wait-timeout", "3s",
			   "--pg-url", "postgresql://db/app", "--route", "two q --redis-url redis://two:6390/1"));
	t = target(&cfg, 1);
	ck_assert_int_eq(t->format, FORMAT_RESQUE);
	ck_assert_str_eq(t->key_prefix, "app:");
	ck_assert_ptr_ne(t->key_prefix, cfg.key_prefix);
	ck_assert_int_eq(t->batch_size, 7);
	ck_assert_int_eq(t->lock_key, 42);
	ck_assert_int_eq(t->redis_timeout_ms, 2000);
	ck_assert_int_eq(t->stop_timeout_ms, 3000);
	ck_assert_int_eq(t->max_queue_length, 9);
	ck_assert_uint_eq(t->queue_limits.n, 2);
	ck_assert_ptr_ne(t->queue_limits.v, cfg.queue_limits.v);
	ck_assert_int_eq(queue_limits_cap(&t->queue_limits, "b", 1, 0), 2);
	ck_assert_int_eq(t->max_redis_memory, 80);
	ck_assert_str_eq(t->pg_url, "postgresql://db/app");
	/* Redis: the route's own server, and every other Redis setting its default. */
	ck_assert_str_eq(t->redis_url, "redis://two:6390/1");
	ck_assert_str_eq(t->redis.host, "two");
	ck_assert_int_eq(t->redis.port, 6390);
	ck_assert(!t->redis.tls);
	ck_assert_ptr_null(t->redis.password);
	ck_assert_ptr_null(t->redis_password);
	ck_assert_ptr_null(t->redis_tls_ca_file);
	ck_assert_ptr_null(t->redis_tls_cert_file);
	ck_assert_ptr_null(t->redis_tls_key_file);
	ck_assert_ptr_null(t->redis_tls_server_name);
	ck_assert(!t->redis_tls_insecure);
	ck_assert_int_eq(t->redis_wait_replicas, 0);
	ck_assert_int_eq(t->redis_wait_timeout_ms, 1000);
	ck_assert_str_eq(t->route_name, "two");
	/* The relay's own config is untouched. */
	ck_assert_str_eq(cfg.redis.host, "base");
	ck_assert_str_eq(cfg.redis.password, "base-secret");
	ck_assert_int_eq(cfg.redis_wait_replicas, 2);
	ck_assert_ptr_null(cfg.route_name);
	config_free(&cfg);
}
END_TEST

/* With --format a route starts that format's settings from their defaults. */
START_TEST(format_settings_follow_the_format)
{
	struct config cfg;

	load_ok(&cfg, ARGV("--format", "resque", "--namespace", "app", "--route",
			   "a qa --redis-url redis://h --format sidekiq", "--route",
			   "b qb --redis-url redis://h --format resque", "--route",
			   "c qc --redis-url redis://h --format=resque --namespace=", "--route",
			   "d qd --redis-url redis://h --namespace other", "--route",
			   "e qe --redis-url redis://h --max-redis-memory 90"));
	ck_assert_int_eq(target(&cfg, 1)->format, FORMAT_SIDEKIQ);
	ck_assert_str_eq(target(&cfg, 1)->key_prefix, "");
	ck_assert_str_eq(target(&cfg, 2)->key_prefix, "resque:");
	ck_assert_str_eq(target(&cfg, 3)->key_prefix, "");
	ck_assert_int_eq(target(&cfg, 4)->format, FORMAT_RESQUE);
	ck_assert_str_eq(target(&cfg, 4)->key_prefix, "other:");
	ck_assert_int_eq(target(&cfg, 5)->max_redis_memory, 90);
	ck_assert_int_eq(target(&cfg, 1)->max_redis_memory, 0);
	config_free(&cfg);

	load_ok(&cfg, ARGV("--sidekiq-version", "7", "--rails-version", "6.1", "--route", "a qa --redis-url redis://h",
			   "--route", "b qb --redis-url redis://h --format activejob", "--route",
			   "c qc --redis-url redis://h --sidekiq-version 8"));
	ck_assert_int_eq(target(&cfg, 1)->format, FORMAT_SIDEKIQ);
	ck_assert_int_eq(target(&cfg, 1)->sidekiq_version, 7);
	ck_assert_int_eq(target(&cfg, 1)->rails_version, RAILS_6_1);
	ck_assert_int_eq(target(&cfg, 2)->format, FORMAT_ACTIVEJOB);
	ck_assert_int_eq(target(&cfg, 2)->sidekiq_version, SIDEKIQ_VERSION_AUTO);
	ck_assert_int_eq(target(&cfg, 2)->rails_version, RAILS_7_1);
	ck_assert_int_eq(target(&cfg, 3)->sidekiq_version, 8);
	ck_assert_int_eq(target(&cfg, 3)->rails_version, RAILS_6_1);
	config_free(&cfg);

	/* Laravel's key prefix is its --laravel-prefix, inherited or the route's. */
	load_ok(&cfg, ARGV("--format", "laravel", "--laravel-prefix", "shop_", "--route", "a qa --redis-url redis://h",
			   "--route", "b qb --redis-url redis://h --laravel-prefix blog_", "--route",
			   "c qc --redis-url redis://h --format laravel", "--route",
			   "d qd --redis-url redis://h --format celery"));
	ck_assert_str_eq(target(&cfg, 1)->key_prefix, "shop_");
	ck_assert_str_eq(target(&cfg, 1)->laravel_prefix, "shop_");
	ck_assert_str_eq(target(&cfg, 2)->key_prefix, "blog_");
	ck_assert_str_eq(target(&cfg, 3)->key_prefix, "laravel_database_");
	ck_assert_int_eq(target(&cfg, 4)->format, FORMAT_CELERY);
	ck_assert_str_eq(target(&cfg, 4)->key_prefix, "");
	config_free(&cfg);

	/* BullMQ's the same with --bullmq-prefix: a Node service's queues beside a Sidekiq app's. */
	load_ok(&cfg, ARGV("--route", "node q.* --redis-url redis://h --format bullmq", "--route",
			   "tagged t.* --redis-url redis://h --format bullmq --bullmq-prefix {jobs}"));
	ck_assert_str_eq(target(&cfg, 0)->key_prefix, "");
	ck_assert_int_eq(target(&cfg, 1)->format, FORMAT_BULLMQ);
	ck_assert_str_eq(target(&cfg, 1)->key_prefix, "bull:");
	ck_assert_str_eq(target(&cfg, 2)->key_prefix, "{jobs}:");
	config_free(&cfg);
}
END_TEST

/* TLS, WAIT and password files parse per route as they do for the relay. */
START_TEST(redis_settings_per_route)
{
	struct config cfg;
	const struct config *t;
	char pw[300], route[600];

	put_file("pw2", "route-secret\n", pw, sizeof(pw));
	snprintf(route, sizeof(route),
		 "tls q --redis-url rediss://app@r1.example:6380/2 --redis-password-file %s --redis-tls-ca-file ca.pem "
		 "--redis-tls-cert-file=c.pem --redis-tls-key-file k.pem --redis-tls-server-name r1.internal "
		 "--redis-tls-insecure --redis-wait-replicas 1 --redis-wait-timeout 250ms",
		 pw);
	load_ok(&cfg, ARGV("--route", route, "--route",
			   "sent s* --redis-url rediss-sentinel://:pw@s1:26379,[::1]/main/3 --redis-tls-insecure=false",
			   "--route", "sock u --redis-url unix:///run/redis.sock?db=4"));
	t = target(&cfg, 1);
	ck_assert(t->redis.tls);
	ck_assert_str_eq(t->redis.host, "r1.example");
	ck_assert_int_eq(t->redis.port, 6380);
	ck_assert_int_eq(t->redis.db, 2);
	ck_assert_str_eq(t->redis.user, "app");
	ck_assert_str_eq(t->redis.password, "route-secret");
	ck_assert_str_eq(t->redis_password, "route-secret");
	ck_assert_str_eq(t->redis_tls_ca_file, "ca.pem");
	ck_assert_str_eq(t->redis_tls_cert_file, "c.pem");
	ck_assert_str_eq(t->redis_tls_key_file, "k.pem");
	ck_assert_str_eq(t->redis_tls_server_name, "r1.internal");
	ck_assert(t->redis_tls_insecure);
	ck_assert_int_eq(t->redis_wait_replicas, 1);
	ck_assert_int_eq(t->redis_wait_timeout_ms, 250);
	t = target(&cfg, 2);
	ck_assert(t->redis.tls);
	ck_assert(!t->redis_tls_insecure);
	ck_assert_str_eq(t->redis.master_name, "main");
	ck_assert_uint_eq(t->redis.nsentinels, 2);
	ck_assert_str_eq(t->redis.sentinels[0].host, "s1");
	ck_assert_int_eq(t->redis.sentinels[0].port, 26379);
	ck_assert_str_eq(t->redis.sentinels[1].host, "::1");
	ck_assert_int_eq(t->redis.sentinels[1].port, 26379);
	ck_assert_int_eq(t->redis.db, 3);
	ck_assert_str_eq(t->redis.password, "pw");
	t = target(&cfg, 3);
	ck_assert(t->redis.is_unix);
	ck_assert_str_eq(t->redis.path, "/run/redis.sock");
	ck_assert_int_eq(t->redis.db, 4);
	config_free(&cfg);
}
END_TEST

/* Two targets on one Redis, prefix and format are fine: keys carry the route's name. */
START_TEST(same_server_twice_is_fine)
{
	struct config cfg;

	load_ok(&cfg, ARGV("--redis-url", "redis://h:6379/0", "--route", "a qa --redis-url redis://h:6379/0", "--route",
			   "b qb --redis-url redis://h:6379/0 --format activejob"));
	ck_assert_uint_eq(cfg.routes.n, 3);
	config_free(&cfg);
}
END_TEST

/* Overlapping globs are fine when neither provably takes all of the other. */
START_TEST(overlapping_globs_are_fine)
{
	struct config cfg;

	load_ok(&cfg,
		ARGV("--route", "a crit?,*-*,[ab]* --redis-url redis://h", "--route",
		     "b crit*,x[b-c],ct,c\\d --redis-url redis://h", "--route", "c crisp,x*]y --redis-url redis://h"));
	ck_assert_uint_eq(cfg.routes.nrules, 9);
	config_free(&cfg);
}
END_TEST

/* --help and --version read no route, so a broken one cannot hide them. */
START_TEST(help_ignores_routes)
{
	struct config cfg;

	setenv("STAGEDRAIN_ROUTE", "broken", 1);
	load_ok(&cfg, ARGV("--help", "--route-file", "/nonexistent/routes"));
	ck_assert(cfg.help);
	config_free(&cfg);
}
END_TEST

/* ---- routes_find ---- */

static size_t find(const struct config *cfg, const char *queue, const char *route)
{
	return routes_find(&cfg->routes, queue, strlen(queue), route, route ? strlen(route) : 0);
}

START_TEST(find_targets)
{
	struct config cfg;

	load_ok(&cfg,
		ARGV("--route", "exact critical,mail* --redis-url redis://h1", "--route",
		     "glob m*s,*-low,crit* --redis-url redis://h2", "--route", "hidden - --redis-url redis://h3"));
	ck_assert_uint_eq(find(&cfg, "critical", NULL), 1);
	ck_assert_uint_eq(find(&cfg, "mail", NULL), 1);
	/* The first matching rule wins: mail* before m*s. */
	ck_assert_uint_eq(find(&cfg, "mailers", NULL), 1);
	ck_assert_uint_eq(find(&cfg, "mops", NULL), 2);
	ck_assert_uint_eq(find(&cfg, "bulk-low", NULL), 2);
	ck_assert_uint_eq(find(&cfg, "critter", NULL), 2);
	ck_assert_uint_eq(find(&cfg, "criticals", NULL), 2);
	ck_assert_uint_eq(find(&cfg, "default", NULL), 0);
	ck_assert_uint_eq(find(&cfg, "", NULL), 0);
	/* The route column beats the rules and reaches a route with no queues. */
	ck_assert_uint_eq(find(&cfg, "critical", "hidden"), 3);
	ck_assert_uint_eq(find(&cfg, "critical", "glob"), 2);
	ck_assert_uint_eq(find(&cfg, "critical", "default"), 0);
	ck_assert_uint_eq(find(&cfg, "critical", "nowhere"), ROUTES_NONE);
	ck_assert_uint_eq(find(&cfg, "critical", "hidde"), ROUTES_NONE);
	ck_assert_uint_eq(find(&cfg, "critical", ""), ROUTES_NONE);
	/* queue is not NUL-terminated: only qlen bytes count. */
	ck_assert_uint_eq(routes_find(&cfg.routes, "criticalXYZ", 8, NULL, 0), 1);
	ck_assert_uint_eq(routes_find(&cfg.routes, "x-lowXYZ", 5, NULL, 0), 2);
	config_free(&cfg);
}
END_TEST

/* A glob matches a queue of any length a row may have (JOB_MAX_NAME_BYTES),
 * and one longer still: none goes to the default target for its length. */
START_TEST(find_long_queues)
{
	static const size_t lens[] = { 255, 256, 305, 1023, 1024, 1025, 4000 };
	struct config cfg;
	char queue[4001];

	load_ok(&cfg, ARGV("--route", "glob *-low,bulk-* --redis-url redis://h1"));
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		size_t n = lens[i];

		memset(queue, 'a', n);
		memcpy(queue + n - 4, "-low", 4);
		queue[n] = '\0';
		ck_assert_msg(find(&cfg, queue, NULL) == 1, "a %zu-byte *-low queue went to target %zu", n,
			      find(&cfg, queue, NULL));
		memcpy(queue, "bulk-", 5);
		memcpy(queue + n - 4, "xxxx", 4);
		ck_assert_msg(find(&cfg, queue, NULL) == 1, "a %zu-byte bulk-* queue went to target %zu", n,
			      find(&cfg, queue, NULL));
		/* only qlen bytes count, past the buffer too */
		ck_assert_uint_eq(routes_find(&cfg.routes, queue, n - 1, NULL, 0), 1);
		queue[0] = 'c';
		ck_assert_uint_eq(find(&cfg, queue, NULL), 0);
	}
	config_free(&cfg);
}
END_TEST

Suite *routes_suite(void)
{
	Suite *s = suite_create("routes");
	TCase *errors = tcase_create("errors"), *good = tcase_create("good"), *lookup = tcase_create("find");

	tcase_add_checked_fixture(errors, setup, teardown);
	tcase_add_checked_fixture(good, setup, teardown);
	tcase_add_checked_fixture(lookup, setup, teardown);
	tcase_add_loop_test(errors, error_messages, 0, (int)(sizeof(err_cases) / sizeof(err_cases[0])));
	tcase_add_test(errors, error_from_the_variable);
	tcase_add_test(errors, error_in_the_file);
	tcase_add_test(errors, no_password_in_any_message);
	tcase_add_test(good, semicolon_in_a_password_splits_nothing);
	tcase_add_test(errors, file_missing_or_refused);
	tcase_add_test(errors, error_message_is_bounded);
	tcase_add_test(good, no_routes);
	tcase_add_test(good, flags_then_file_in_order);
	tcase_add_test(good, variable_then_file);
	tcase_add_test(good, inherits_all_but_redis);
	tcase_add_test(good, format_settings_follow_the_format);
	tcase_add_test(good, redis_settings_per_route);
	tcase_add_test(good, same_server_twice_is_fine);
	tcase_add_test(good, overlapping_globs_are_fine);
	tcase_add_test(good, help_ignores_routes);
	tcase_add_test(lookup, find_targets);
	tcase_add_test(lookup, find_long_queues);
	suite_add_tcase(s, errors);
	suite_add_tcase(s, good);
	suite_add_tcase(s, lookup);
	return s;
}
