/* config: defaults, flags, environment, files, precedence, every error, --help and the man page. */
#include "fmacros.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "suites.h"
#include "usage.h"

/* Written out here rather than taken from config.c, so a renamed variable fails a test. */
/* clang-format off */
static const char *const all_vars[] = {
	"STAGEDRAIN_PG_URL",         "DATABASE_URL",          "STAGEDRAIN_REDIS_URL",
	"REDIS_URL",                 "STAGEDRAIN_FORMAT",     "STAGEDRAIN_SIDEKIQ_VERSION",
	"STAGEDRAIN_NAMESPACE",      "STAGEDRAIN_BATCH_SIZE", "STAGEDRAIN_MAX_JOB_BYTES",
	"STAGEDRAIN_POLL_INTERVAL",  "STAGEDRAIN_REDIS_TIMEOUT", "STAGEDRAIN_LOCK_KEY",
	"STAGEDRAIN_LOG_FORMAT",     "STAGEDRAIN_LOG_LEVEL",  "STAGEDRAIN_ONCE",
	"STAGEDRAIN_PG_URL_FILE",    "STAGEDRAIN_PG_PASSWORD_FILE", "STAGEDRAIN_REDIS_URL_FILE",
	"STAGEDRAIN_REDIS_PASSWORD_FILE", "STAGEDRAIN_HTTP_ADDR", "STAGEDRAIN_WARN_XACT_AGE",
	"STAGEDRAIN_WATCH_INTERVAL", "STAGEDRAIN_RAILS_VERSION", "STAGEDRAIN_LARAVEL_PREFIX",
	"STAGEDRAIN_MAX_QUEUE_LENGTH", "STAGEDRAIN_QUEUE_LIMIT", "STAGEDRAIN_MAX_REDIS_MEMORY",
	"STAGEDRAIN_STOP_TIMEOUT", "STAGEDRAIN_READYZ_DETAIL", "STAGEDRAIN_ROUTE",
	"STAGEDRAIN_ROUTE_FILE",  NULL,
};

static const char *const all_flags[] = {
	"--pg-url",     "--redis-url",     "--format",   "--sidekiq-version", "--namespace",
	"--batch-size", "--max-job-bytes", "--poll-interval", "--redis-timeout", "--lock-key",
	"--log-format", "--log-level",     "--once",     "--help",            "-h",
	"--version",    "-V",              "--pg-url-file", "--pg-password-file", "--redis-url-file",
	"--redis-password-file", "--http-addr", "--warn-xact-age", "--watch-interval", "--route",
	"--route-file", NULL,
};
/* clang-format on */

/* The developer's or CI's own DATABASE_URL must not leak into the tests,
 * nor one test's variables into the next under CK_FORK=no. */
static void clear_env(void)
{
	for (const char *const *v = all_vars; *v; v++)
		unsetenv(*v);
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

/* A failed load reports msg and leaves cfg freed, and freeing again is harmless. */
static void expect_error(const char *const *argv, const char *msg)
{
	struct config cfg;
	char err[CONFIG_ERR_SIZE];

	ck_assert_int_eq(load(&cfg, err, argv), -EINVAL);
	ck_assert_str_eq(err, msg);
	/* Every password in these cases is hunter2: no message may show it. */
	ck_assert_ptr_null(strstr(err, "hunter2"));
	ck_assert_ptr_null(cfg.pg_url);
	ck_assert_ptr_null(cfg.redis_url);
	ck_assert_ptr_null(cfg.key_prefix);
	ck_assert_ptr_null(cfg.redis.host);
	config_free(&cfg);
}

/* Every converted field on one line, so forms of the same setting compare equal. */
static void summarize(const struct config *c, char *out, size_t len)
{
	char where[128];

	redis_target_describe(&c->redis, where, sizeof(where));
	snprintf(out, len,
		 "|pg_url=%s|redis=%s|format=%d|key_prefix=%s|sidekiq_version=%d|batch_size=%d"
		 "|max_job_bytes=%ld|batch_max_bytes=%ld|poll=%d|redis_timeout=%d|lock_key=%lld|log_format=%d"
		 "|log_level=%d|once=%d|http=%s|http_host=%s|http_port=%d|warn_xact=%d|watch=%d|stop=%d|detail=%d|",
		 c->pg_url, where, (int)c->format, c->key_prefix, c->sidekiq_version, c->batch_size, c->max_job_bytes,
		 c->batch_max_bytes, c->poll_interval_ms, c->redis_timeout_ms, c->lock_key, (int)c->log_format,
		 (int)c->log_level, (int)c->once, c->http_addr, c->http_host, c->http_port, c->warn_xact_age_ms,
		 c->watch_interval_ms, c->stop_timeout_ms, (int)c->readyz_detail);
}

/* A password inside a URL flag is noted for main's warning; the same URL
 * from the environment, or a URL without one, is not. */
START_TEST(a_password_in_a_url_flag_is_noted)
{
	struct config cfg;

	load_ok(&cfg, ARGV("--pg-url", "postgresql://u:pw@h/db", "--redis-url", "redis://:pw@h:6379/0"));
	ck_assert(cfg.pg_url_argv_password && cfg.redis_url_argv_password);
	config_free(&cfg);
	load_ok(&cfg, ARGV("--pg-url", "host=h password=pw dbname=db"));
	ck_assert(cfg.pg_url_argv_password && !cfg.redis_url_argv_password);
	config_free(&cfg);
	load_ok(&cfg, ARGV("--pg-url", "postgresql://u@h/db", "--redis-url", "redis://h:6379/0"));
	ck_assert(!cfg.pg_url_argv_password && !cfg.redis_url_argv_password);
	config_free(&cfg);
	setenv("STAGEDRAIN_PG_URL", "postgresql://u:pw@h/db", 1);
	setenv("REDIS_URL", "redis://:pw@h:6379/0", 1);
	load_ok(&cfg, ARGV(NULL));
	ck_assert(!cfg.pg_url_argv_password && !cfg.redis_url_argv_password);
	config_free(&cfg);
}
END_TEST

START_TEST(defaults)
{
	struct config cfg;

	load_ok(&cfg, ARGV(NULL));
	ck_assert_int_eq(cfg.command, CMD_RUN);
	ck_assert_str_eq(cfg.pg_url, "");
	ck_assert_str_eq(cfg.redis_url, "redis://127.0.0.1:6379/0");
	ck_assert(!cfg.redis.is_unix);
	ck_assert_str_eq(cfg.redis.host, "127.0.0.1");
	ck_assert_int_eq(cfg.redis.port, 6379);
	ck_assert_int_eq(cfg.redis.db, 0);
	ck_assert_ptr_null(cfg.redis.user);
	ck_assert_ptr_null(cfg.redis.password);
	ck_assert_int_eq(cfg.format, FORMAT_SIDEKIQ);
	ck_assert_int_eq(cfg.sidekiq_version, SIDEKIQ_VERSION_AUTO);
	ck_assert_int_eq(cfg.rails_version, RAILS_7_1);
	ck_assert_str_eq(cfg.key_prefix, "");
	ck_assert_int_eq(cfg.batch_size, 1000);
	ck_assert_int_eq(cfg.max_job_bytes, 1048576);
	ck_assert_int_eq(cfg.batch_max_bytes, 64L * 1048576);
	ck_assert_int_eq(cfg.poll_interval_ms, 100);
	ck_assert_int_eq(cfg.redis_timeout_ms, 5000);
	ck_assert_int_eq(cfg.stop_timeout_ms, 5000);
	ck_assert(!cfg.readyz_detail);
	ck_assert(!cfg.pg_url_argv_password && !cfg.redis_url_argv_password);
	ck_assert_int_eq(cfg.lock_key, 0x73746764726eLL); /* "stgdrn" */
	ck_assert_int_eq(cfg.log_level, LOG_INFO);
	ck_assert_int_eq(cfg.log_format, LOG_FORMAT_KV);
	ck_assert(!cfg.once && !cfg.help && !cfg.version);
	ck_assert_str_eq(cfg.http_addr, ""); /* the endpoint is off unless asked for */
	ck_assert_str_eq(cfg.http_host, "");
	ck_assert_int_eq(cfg.warn_xact_age_ms, 5 * 60 * 1000);
	ck_assert_int_eq(cfg.watch_interval_ms, 5000);
	config_free(&cfg);
}
END_TEST

START_TEST(no_arguments_at_all)
{
	struct config cfg;
	char err[CONFIG_ERR_SIZE];
	const char *argv[] = { NULL };

	ck_assert_int_eq(config_load(&cfg, 0, (char **)argv, err, sizeof(err)), 0);
	ck_assert_int_eq(cfg.batch_size, 1000);
	config_free(&cfg);
}
END_TEST

/* Each setting given as "--flag value", "--flag=value" and its variable. */
static const struct form_case {
	const char *flag, *env, *value, *expect;
} form_cases[] = {
	{ "--pg-url", "STAGEDRAIN_PG_URL", "host=db user=app", "|pg_url=host=db user=app|" },
	{ "--redis-url", "STAGEDRAIN_REDIS_URL", "redis://cache:7000/3", "|redis=cache:7000/3|" },
	{ "--format", "STAGEDRAIN_FORMAT", "resque", "|format=1|key_prefix=resque:|" },
	{ "--format", "STAGEDRAIN_FORMAT", "RESQUE", "|format=1|" },
	{ "--sidekiq-version", "STAGEDRAIN_SIDEKIQ_VERSION", "8", "|sidekiq_version=8|" },
	{ "--sidekiq-version", "STAGEDRAIN_SIDEKIQ_VERSION", "6", "|sidekiq_version=6|" },
	{ "--namespace", "STAGEDRAIN_NAMESPACE", "myapp", "|key_prefix=myapp:|" },
	{ "--namespace", "STAGEDRAIN_NAMESPACE", "a:b", "|key_prefix=a:b:|" },
	{ "--batch-size", "STAGEDRAIN_BATCH_SIZE", "42", "|batch_size=42|" },
	{ "--batch-size", "STAGEDRAIN_BATCH_SIZE", "100000", "|batch_size=100000|" },
	{ "--max-job-bytes", "STAGEDRAIN_MAX_JOB_BYTES", "512k", "|max_job_bytes=524288|" },
	{ "--batch-max-bytes", "STAGEDRAIN_BATCH_MAX_BYTES", "8M", "|batch_max_bytes=8388608|" },
	{ "--max-job-bytes", "STAGEDRAIN_MAX_JOB_BYTES", "512K", "|max_job_bytes=524288|" },
	{ "--max-job-bytes", "STAGEDRAIN_MAX_JOB_BYTES", "2m", "|max_job_bytes=2097152|" },
	{ "--max-job-bytes", "STAGEDRAIN_MAX_JOB_BYTES", "512M", "|max_job_bytes=536870912|" },
	{ "--max-job-bytes", "STAGEDRAIN_MAX_JOB_BYTES", "64", "|max_job_bytes=64|" },
	{ "--poll-interval", "STAGEDRAIN_POLL_INTERVAL", "2s", "|poll=2000|" },
	{ "--poll-interval", "STAGEDRAIN_POLL_INTERVAL", "250ms", "|poll=250|" },
	{ "--poll-interval", "STAGEDRAIN_POLL_INTERVAL", "250", "|poll=250|" },
	{ "--poll-interval", "STAGEDRAIN_POLL_INTERVAL", "1ms", "|poll=1|" },
	{ "--poll-interval", "STAGEDRAIN_POLL_INTERVAL", "60s", "|poll=60000|" },
	{ "--redis-timeout", "STAGEDRAIN_REDIS_TIMEOUT", "250ms", "|redis_timeout=250|" },
	{ "--redis-timeout", "STAGEDRAIN_REDIS_TIMEOUT", "10ms", "|redis_timeout=10|" },
	{ "--redis-timeout", "STAGEDRAIN_REDIS_TIMEOUT", "300s", "|redis_timeout=300000|" },
	{ "--lock-key", "STAGEDRAIN_LOCK_KEY", "-42", "|lock_key=-42|" },
	{ "--lock-key", "STAGEDRAIN_LOCK_KEY", "0x10", "|lock_key=16|" },
	{ "--lock-key", "STAGEDRAIN_LOCK_KEY", "-0X1f", "|lock_key=-31|" },
	{ "--lock-key", "STAGEDRAIN_LOCK_KEY", "010", "|lock_key=10|" },
	{ "--lock-key", "STAGEDRAIN_LOCK_KEY", "9223372036854775807", "|lock_key=9223372036854775807|" },
	{ "--lock-key", "STAGEDRAIN_LOCK_KEY", "-9223372036854775808", "|lock_key=-9223372036854775808|" },
	{ "--log-format", "STAGEDRAIN_LOG_FORMAT", "json", "|log_format=1|" },
	{ "--log-level", "STAGEDRAIN_LOG_LEVEL", "debug", "|log_level=0|" },
	{ "--log-level", "STAGEDRAIN_LOG_LEVEL", "Warn", "|log_level=2|" },
	{ "--log-level", "STAGEDRAIN_LOG_LEVEL", "error", "|log_level=3|" },
	{ "--http-addr", "STAGEDRAIN_HTTP_ADDR", "127.0.0.1:9187",
	  "|http=127.0.0.1:9187|http_host=127.0.0.1|http_port=9187|" },
	{ "--http-addr", "STAGEDRAIN_HTTP_ADDR", ":9187", "|http=:9187|http_host=|http_port=9187|" },
	{ "--http-addr", "STAGEDRAIN_HTTP_ADDR", "[::1]:0", "|http_host=::1|http_port=0|" },
	{ "--http-addr", "STAGEDRAIN_HTTP_ADDR", "metrics.local:65535", "|http_host=metrics.local|http_port=65535|" },
	{ "--http-addr", "STAGEDRAIN_HTTP_ADDR", "[fe80::1%eth0]:80", "|http_host=fe80::1%eth0|http_port=80|" },
	{ "--warn-xact-age", "STAGEDRAIN_WARN_XACT_AGE", "10min", "|warn_xact=600000|" },
	{ "--warn-xact-age", "STAGEDRAIN_WARN_XACT_AGE", "90s", "|warn_xact=90000|" },
	{ "--warn-xact-age", "STAGEDRAIN_WARN_XACT_AGE", "24h", "|warn_xact=86400000|" },
	{ "--warn-xact-age", "STAGEDRAIN_WARN_XACT_AGE", "0", "|warn_xact=0|" },
	{ "--warn-xact-age", "STAGEDRAIN_WARN_XACT_AGE", "1500ms", "|warn_xact=1500|" },
	{ "--watch-interval", "STAGEDRAIN_WATCH_INTERVAL", "100ms", "|watch=100|" },
	{ "--watch-interval", "STAGEDRAIN_WATCH_INTERVAL", "1h", "|watch=3600000|" },
	{ "--watch-interval", "STAGEDRAIN_WATCH_INTERVAL", "2min", "|watch=120000|" },
	{ "--stop-timeout", "STAGEDRAIN_STOP_TIMEOUT", "0", "|stop=0|" },
	{ "--stop-timeout", "STAGEDRAIN_STOP_TIMEOUT", "300s", "|stop=300000|" },
};

START_TEST(flag_forms_and_env_agree)
{
	const struct form_case *fc = &form_cases[_i];
	struct config cfg;
	char joined[128], base[512], sep[512], eq[512], env[512];

	load_ok(&cfg, ARGV(NULL));
	summarize(&cfg, base, sizeof(base));
	config_free(&cfg);
	ck_assert_msg(!strstr(base, fc->expect), "%s is the default already", fc->expect);

	load_ok(&cfg, ARGV(fc->flag, fc->value));
	summarize(&cfg, sep, sizeof(sep));
	config_free(&cfg);
	snprintf(joined, sizeof(joined), "%s=%s", fc->flag, fc->value);
	load_ok(&cfg, ARGV(joined));
	summarize(&cfg, eq, sizeof(eq));
	config_free(&cfg);
	setenv(fc->env, fc->value, 1);
	load_ok(&cfg, ARGV(NULL));
	summarize(&cfg, env, sizeof(env));
	config_free(&cfg);

	ck_assert_msg(strstr(sep, fc->expect), "%s %s gave %s", fc->flag, fc->value, sep);
	ck_assert_str_eq(eq, sep);
	ck_assert_str_eq(env, sep);
}
END_TEST

START_TEST(commands)
{
	struct config cfg;

	load_ok(&cfg, ARGV("run"));
	ck_assert_int_eq(cfg.command, CMD_RUN);
	config_free(&cfg);
	load_ok(&cfg, ARGV("migrate", "--pg-url", "dbname=x"));
	ck_assert_int_eq(cfg.command, CMD_MIGRATE);
	ck_assert_str_eq(cfg.pg_url, "dbname=x");
	config_free(&cfg);
}
END_TEST

/* The forms libpq takes are still taken as they are: conninfo, both URL
 * schemes, query parameters, and empty for libpq's PG* defaults. */
START_TEST(pg_url_forms_accepted)
{
	static const char *const good[] = {
		"dbname=x host=y",
		"host=h port=5432 dbname=d user=u password='p w' sslmode=verify-full",
		"",
		"postgresql://",
		"postgres://u:p@h:5432/db",
		"postgresql://h/db?sslmode=require&application_name=x",
		"postgresql:///db?host=/var/run/postgresql",
		"postgresql://[::1]:5432/db",
	};
	struct config cfg;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		load_ok(&cfg, ARGV("--pg-url", good[i]));
		ck_assert_str_eq(cfg.pg_url, good[i]);
		config_free(&cfg);
	}
}
END_TEST

START_TEST(flag_beats_env_beats_default)
{
	struct config cfg;

	setenv("STAGEDRAIN_BATCH_SIZE", "5", 1);
	load_ok(&cfg, ARGV(NULL));
	ck_assert_int_eq(cfg.batch_size, 5);
	config_free(&cfg);
	load_ok(&cfg, ARGV("--batch-size", "6"));
	ck_assert_int_eq(cfg.batch_size, 6);
	config_free(&cfg);
}
END_TEST

/* A flag given twice is refused (err_cases); a flag with its variable is no
 * repeat (the flag wins), --route repeats, and -h with --help is help. */
START_TEST(repeats_that_are_fine)
{
	struct config cfg;

	setenv("STAGEDRAIN_BATCH_SIZE", "5", 1);
	load_ok(&cfg, ARGV("--batch-size", "6"));
	ck_assert_int_eq(cfg.batch_size, 6);
	config_free(&cfg);
	load_ok(&cfg, ARGV("--route", "a q1 --redis-url redis://h", "--route", "b q2 --redis-url redis://h"));
	ck_assert_uint_eq(cfg.routes.n, 3);
	config_free(&cfg);
	load_ok(&cfg, ARGV("-h", "--help"));
	ck_assert(cfg.help);
	config_free(&cfg);
}
END_TEST

START_TEST(database_url_fallback)
{
	struct config cfg;

	setenv("DATABASE_URL", "postgresql://fallback/db", 1);
	load_ok(&cfg, ARGV(NULL));
	ck_assert_str_eq(cfg.pg_url, "postgresql://fallback/db");
	config_free(&cfg);

	setenv("STAGEDRAIN_PG_URL", "postgresql://own/db", 1);
	load_ok(&cfg, ARGV(NULL));
	ck_assert_str_eq(cfg.pg_url, "postgresql://own/db");
	config_free(&cfg);

	load_ok(&cfg, ARGV("--pg-url=host=flag"));
	ck_assert_str_eq(cfg.pg_url, "host=flag");
	config_free(&cfg);

	/* Set but empty still counts, and means libpq's PG* defaults. */
	setenv("STAGEDRAIN_PG_URL", "", 1);
	load_ok(&cfg, ARGV(NULL));
	ck_assert_str_eq(cfg.pg_url, "");
	config_free(&cfg);
}
END_TEST

START_TEST(redis_url_fallback)
{
	struct config cfg;

	setenv("REDIS_URL", "redis://fallback:6390/4", 1);
	load_ok(&cfg, ARGV(NULL));
	ck_assert_str_eq(cfg.redis_url, "redis://fallback:6390/4");
	ck_assert_str_eq(cfg.redis.host, "fallback");
	ck_assert_int_eq(cfg.redis.port, 6390);
	ck_assert_int_eq(cfg.redis.db, 4);
	config_free(&cfg);

	setenv("STAGEDRAIN_REDIS_URL", "unix:///run/redis.sock?db=2", 1);
	load_ok(&cfg, ARGV(NULL));
	ck_assert(cfg.redis.is_unix);
	ck_assert_str_eq(cfg.redis.path, "/run/redis.sock");
	config_free(&cfg);

	load_ok(&cfg, ARGV("--redis-url", "redis://:pw@flag"));
	ck_assert_str_eq(cfg.redis.host, "flag");
	ck_assert_str_eq(cfg.redis.password, "pw");
	config_free(&cfg);
}
END_TEST

START_TEST(namespace_defaults_follow_format)
{
	struct config cfg;

	load_ok(&cfg, ARGV("--format", "resque"));
	ck_assert_str_eq(cfg.key_prefix, "resque:");
	config_free(&cfg);
	load_ok(&cfg, ARGV("--format", "resque", "--namespace", ""));
	ck_assert_str_eq(cfg.key_prefix, "");
	config_free(&cfg);
	load_ok(&cfg, ARGV("--format=resque", "--namespace=jobs"));
	ck_assert_str_eq(cfg.key_prefix, "jobs:");
	config_free(&cfg);
	load_ok(&cfg, ARGV("--namespace", "jobs"));
	ck_assert_str_eq(cfg.key_prefix, "jobs:");
	config_free(&cfg);
	/* Laravel's connection prefix is written as given, with no colon added. */
	load_ok(&cfg, ARGV("--format", "laravel"));
	ck_assert_str_eq(cfg.key_prefix, "laravel_database_");
	config_free(&cfg);
	load_ok(&cfg, ARGV("--format", "laravel", "--laravel-prefix", "shop_"));
	ck_assert_str_eq(cfg.key_prefix, "shop_");
	config_free(&cfg);
	load_ok(&cfg, ARGV("--format", "laravel", "--laravel-prefix", ""));
	ck_assert_str_eq(cfg.key_prefix, "");
	config_free(&cfg);
	/* BullMQ's keys are PREFIX:QUEUE:..., its prefix "bull" unless given; a hash tag is kept. */
	load_ok(&cfg, ARGV("--format", "bullmq"));
	ck_assert_str_eq(cfg.key_prefix, "bull:");
	config_free(&cfg);
	load_ok(&cfg, ARGV("--format", "bullmq", "--bullmq-prefix", "{bull}"));
	ck_assert_str_eq(cfg.key_prefix, "{bull}:");
	config_free(&cfg);
}
END_TEST

/* Sidekiq's settings serve ActiveJob, and a sidekiq relay writes a row marked
 * "activejob": true as ActiveJob does: both formats take both settings. */
START_TEST(format_settings_with_their_formats)
{
	struct config cfg;

	load_ok(&cfg, ARGV("--rails-version", "6.1", "--sidekiq-version", "7"));
	ck_assert_int_eq(cfg.rails_version, RAILS_6_1);
	config_free(&cfg);
	load_ok(&cfg, ARGV("--format", "activejob", "--rails-version", "6.1", "--sidekiq-version", "8"));
	ck_assert_int_eq(cfg.sidekiq_version, 8);
	config_free(&cfg);
}
END_TEST

START_TEST(namespace_from_env)
{
	struct config cfg;

	setenv("STAGEDRAIN_FORMAT", "resque", 1);
	load_ok(&cfg, ARGV(NULL));
	ck_assert_str_eq(cfg.key_prefix, "resque:");
	config_free(&cfg);
	/* An empty variable is how a compose file says "no prefix" for resque. */
	setenv("STAGEDRAIN_NAMESPACE", "", 1);
	load_ok(&cfg, ARGV(NULL));
	ck_assert_str_eq(cfg.key_prefix, "");
	config_free(&cfg);
}
END_TEST

START_TEST(once_flag)
{
	struct config cfg;

	load_ok(&cfg, ARGV("--once"));
	ck_assert(cfg.once);
	config_free(&cfg);
	load_ok(&cfg, ARGV("--once=yes"));
	ck_assert(cfg.once);
	config_free(&cfg);
	setenv("STAGEDRAIN_ONCE", "1", 1);
	load_ok(&cfg, ARGV("--once=false"));
	ck_assert(!cfg.once);
	config_free(&cfg);
}
END_TEST

static const struct bool_case {
	const char *word;
	bool value;
} bool_cases[] = {
	{ "1", true },  { "0", false },   { "true", true }, { "false", false }, { "yes", true }, { "no", false },
	{ "on", true }, { "off", false }, { "TRUE", true }, { "Off", false },   { "Yes", true }, { "NO", false },
};

START_TEST(once_env_words)
{
	struct config cfg;

	setenv("STAGEDRAIN_ONCE", bool_cases[_i].word, 1);
	load_ok(&cfg, ARGV(NULL));
	ck_assert_int_eq(cfg.once, bool_cases[_i].value);
	config_free(&cfg);
}
END_TEST

START_TEST(help_and_version)
{
	struct config cfg;

	load_ok(&cfg, ARGV("-h"));
	ck_assert(cfg.help && !cfg.version);
	config_free(&cfg);
	load_ok(&cfg, ARGV("--help"));
	ck_assert(cfg.help);
	config_free(&cfg);
	load_ok(&cfg, ARGV("-V"));
	ck_assert(cfg.version && !cfg.help);
	config_free(&cfg);
	load_ok(&cfg, ARGV("migrate", "--version"));
	ck_assert(cfg.version);
	ck_assert_int_eq(cfg.command, CMD_MIGRATE);
	config_free(&cfg);
}
END_TEST

/* --help must work however broken the rest of the configuration is; the
 * struct is still filled, from defaults. */
START_TEST(help_ignores_bad_settings)
{
	struct config cfg;

	setenv("STAGEDRAIN_BATCH_SIZE", "abc", 1);
	setenv("REDIS_URL", "gopher://x", 1);
	load_ok(&cfg, ARGV("--poll-interval", "forever", "--help"));
	ck_assert(cfg.help);
	ck_assert_int_eq(cfg.batch_size, 1000);
	ck_assert_int_eq(cfg.poll_interval_ms, 100);
	ck_assert_str_eq(cfg.redis.host, "127.0.0.1");
	config_free(&cfg);
}
END_TEST

START_TEST(negative_value_is_not_an_option)
{
	struct config cfg;

	load_ok(&cfg, ARGV("--lock-key", "-5"));
	ck_assert_int_eq(cfg.lock_key, -5);
	config_free(&cfg);
	/* A value that starts with -- needs the = form. */
	load_ok(&cfg, ARGV("--namespace=--odd"));
	ck_assert_str_eq(cfg.key_prefix, "--odd:");
	config_free(&cfg);
}
END_TEST

/* Every error config_load can report, with the variable that caused it. */
/* clang-format off */
static const struct err_case {
	const char *env, *env_value;
	const char *args[4];
	const char *msg;
} err_cases[] = {
	/* command line shape */
	{ NULL, NULL, { "--frobnicate" }, "unknown option --frobnicate (see --help)" },
	{ NULL, NULL, { "--frobnicate=1" }, "unknown option --frobnicate (see --help)" },
	{ NULL, NULL, { "-x" }, "unknown option -x (see --help)" },
	{ NULL, NULL, { "-hV" }, "unknown option -hV (see --help)" },
	{ NULL, NULL, { "--" }, "unknown option -- (see --help)" },
	{ NULL, NULL, { "--batch-size" }, "--batch-size needs a value" },
	{ NULL, NULL, { "--batch-size", "--once" }, "--batch-size needs a value" },
	{ NULL, NULL, { "--help=yes" }, "--help takes no value" },
	{ NULL, NULL, { "-h=1" }, "-h takes no value" },
	{ NULL, NULL, { "frob" }, "unknown command \"frob\": must be one of run, migrate, status, dead, held, help" },
	{ NULL, NULL, { "--once", "migrate" }, "unexpected argument \"migrate\" (the command goes first)" },
	{ NULL, NULL, { "run", "extra" }, "unexpected argument \"extra\"" },
	{ NULL, NULL, { "-" }, "unexpected argument \"-\"" },
	{ NULL, NULL, { "--once", "false" }, "unexpected argument \"false\"" },
	/* a word that may hold a password is masked wherever it is quoted */
	{ NULL, NULL, { "--once", "redis://u:hunter2@h/0" }, "unexpected argument \"redis://...@h/0\"" },
	{ NULL, NULL, { "run", "u:hunter2@h" }, "unexpected argument \"...@h\"" },
	{ NULL, NULL, { "run", "x?password=hunter2&db=1" }, "unexpected argument \"x?password=...&db=1\"" },
	{ NULL, NULL, { "redis://u:hunter2@h/0" },
	  "unknown command \"redis://...@h/0\": must be one of run, migrate, status, dead, held, help" },
	{ NULL, NULL, { "--u:hunter2@h" }, "unknown option ...@h (see --help)" },
	{ NULL, NULL, { "--queue-limit", "u:hunter2@h" },
	  "invalid --queue-limit \"...@h\": \"...@h\" is not QUEUE=N" },
	{ "STAGEDRAIN_NAMESPACE", "u:hunter2@h:", { NULL },
	  "invalid --namespace \"...@h:\" (from STAGEDRAIN_NAMESPACE): must not end with ':' (the colon is added)" },
	/* a flag given twice: refused, not the last one taken */
	{ NULL, NULL, { "--batch-size", "6", "--batch-size=7" }, "--batch-size given twice: give it once" },
	{ NULL, NULL, { "--once", "--once" }, "--once given twice: give it once" },
	{ NULL, NULL, { "--queue-limit", "a=1", "--queue-limit", "b=1" }, "--queue-limit given twice: give it once" },
	{ NULL, NULL, { "--redis-url", "redis://h", "--redis-url", "redis://:hunter2@h2" },
	  "--redis-url given twice: give it once" },
	/* whole numbers */
	{ "STAGEDRAIN_BATCH_SIZE", "abc", { NULL },
	  "invalid --batch-size \"abc\" (from STAGEDRAIN_BATCH_SIZE): not a whole number" },
	{ "STAGEDRAIN_BATCH_SIZE", "", { NULL },
	  "invalid --batch-size \"\" (from STAGEDRAIN_BATCH_SIZE): not a whole number" },
	{ NULL, NULL, { "--batch-size", "0" }, "invalid --batch-size \"0\": must be between 1 and 100000" },
	{ NULL, NULL, { "--batch-size=100001" },
	  "invalid --batch-size \"100001\": must be between 1 and 100000" },
	{ NULL, NULL, { "--batch-size", "-5" }, "invalid --batch-size \"-5\": must be between 1 and 100000" },
	{ NULL, NULL, { "--batch-size", "99999999999999999999999" },
	  "invalid --batch-size \"99999999999999999999999\": must be between 1 and 100000" },
	{ NULL, NULL, { "--batch-size", "12x" }, "invalid --batch-size \"12x\": not a whole number" },
	{ NULL, NULL, { "--batch-size", " 5" }, "invalid --batch-size \" 5\": not a whole number" },
	{ NULL, NULL, { "--batch-size", "+5" }, "invalid --batch-size \"+5\": not a whole number" },
	{ NULL, NULL, { "--batch-size=" }, "invalid --batch-size \"\": not a whole number" },
	/* sizes */
	{ NULL, NULL, { "--max-job-bytes", "63" },
	  "invalid --max-job-bytes \"63\": must be between 64 and 512M" },
	{ NULL, NULL, { "--max-job-bytes", "513M" },
	  "invalid --max-job-bytes \"513M\": must be between 64 and 512M" },
	{ NULL, NULL, { "--max-job-bytes", "1G" },
	  "invalid --max-job-bytes \"1G\": not a size (e.g. 65536, 512k or 1M)" },
	{ "STAGEDRAIN_MAX_JOB_BYTES", "1.5M", { NULL },
	  "invalid --max-job-bytes \"1.5M\" (from STAGEDRAIN_MAX_JOB_BYTES): not a size (e.g. 65536, "
	  "512k or 1M)" },
	{ NULL, NULL, { "--max-job-bytes", "99999999999999999999M" },
	  "invalid --max-job-bytes \"99999999999999999999M\": must be between 64 and 512M" },
	/* durations */
	{ NULL, NULL, { "--poll-interval", "0" }, "invalid --poll-interval \"0\": must be between 1ms and 60s" },
	{ NULL, NULL, { "--poll-interval", "61s" },
	  "invalid --poll-interval \"61s\": must be between 1ms and 60s" },
	{ NULL, NULL, { "--poll-interval", "2m" },
	  "invalid --poll-interval \"2m\": not a duration (e.g. 250ms or 2s; a bare number is "
	  "milliseconds)" },
	{ NULL, NULL, { "--poll-interval", "1.5s" },
	  "invalid --poll-interval \"1.5s\": not a duration (e.g. 250ms or 2s; a bare number is "
	  "milliseconds)" },
	{ "STAGEDRAIN_REDIS_TIMEOUT", "9ms", { NULL },
	  "invalid --redis-timeout \"9ms\" (from STAGEDRAIN_REDIS_TIMEOUT): must be between 10ms and "
	  "300s" },
	{ NULL, NULL, { "--redis-timeout", "301s" },
	  "invalid --redis-timeout \"301s\": must be between 10ms and 300s" },
	/* lock key */
	{ NULL, NULL, { "--lock-key", "9223372036854775808" },
	  "invalid --lock-key \"9223372036854775808\": not a signed 64-bit integer (decimal, or hex "
	  "with 0x)" },
	{ NULL, NULL, { "--lock-key", "0x8000000000000000" },
	  "invalid --lock-key \"0x8000000000000000\": not a signed 64-bit integer (decimal, or hex "
	  "with 0x)" },
	{ NULL, NULL, { "--lock-key", "0x" },
	  "invalid --lock-key \"0x\": not a signed 64-bit integer (decimal, or hex with 0x)" },
	{ "STAGEDRAIN_LOCK_KEY", "12abc", { NULL },
	  "invalid --lock-key \"12abc\" (from STAGEDRAIN_LOCK_KEY): not a signed 64-bit integer "
	  "(decimal, or hex with 0x)" },
	{ NULL, NULL, { "--lock-key", " 5" },
	  "invalid --lock-key \" 5\": not a signed 64-bit integer (decimal, or hex with 0x)" },
	/* choices */
	{ NULL, NULL, { "--format", "rq" },
	  "invalid --format \"rq\": must be one of sidekiq, resque, activejob, celery, laravel, bullmq" },
	{ NULL, NULL, { "--rails-version", "6.0" },
	  "invalid --rails-version \"6.0\": must be one of 6.1, 7.0, 7.1, 7.2, 8.0" },
	{ NULL, NULL, { "--format", "laravel", "--namespace", "app" },
	  "invalid --namespace \"app\": is not used with --format laravel: set --laravel-prefix instead" },
	{ "STAGEDRAIN_SIDEKIQ_VERSION", "5", { NULL },
	  "invalid --sidekiq-version \"5\" (from STAGEDRAIN_SIDEKIQ_VERSION): must be one of auto, 6, 7, 8" },
	{ NULL, NULL, { "--sidekiq-version", "07" },
	  "invalid --sidekiq-version \"07\": must be one of auto, 6, 7, 8" },
	{ NULL, NULL, { "--format", "bullmq", "--namespace", "app" },
	  "invalid --namespace \"app\": is not used with --format bullmq: set --bullmq-prefix instead" },
	/* settings of another format */
	{ NULL, NULL, { "--laravel-prefix", "shop_" },
	  "--laravel-prefix is only used with --format laravel, not sidekiq" },
	/* a Redis Cluster target */
	{ NULL, NULL, { "--redis-url", "redis-cluster://h1:7000" },
	  "--redis-url: a redis-cluster:// target takes --format bullmq or laravel, whose workers read a cluster; "
	  "sidekiq keeps keys every queue shares, which a cluster spreads over its masters" },
	{ NULL, NULL, { "--redis-url", "redis-cluster://h1:7000", "--format", "celery" },
	  "--redis-url: a redis-cluster:// target takes --format bullmq or laravel, whose workers read a cluster; "
	  "celery keeps keys every queue shares, which a cluster spreads over its masters" },
	{ "STAGEDRAIN_FORMAT", "bullmq", { "--redis-url", "redis-cluster://h1:7000", "--max-queue-length", "9" },
	  "--max-queue-length and --queue-limits are not supported on a redis-cluster:// target yet" },
	{ "STAGEDRAIN_MAX_REDIS_MEMORY", "90", { "--redis-url", "redis-cluster://h1", "--format", "laravel" },
	  "--max-redis-memory is not supported on a redis-cluster:// target yet" },
	{ NULL, NULL, { "--format", "laravel", "--bullmq-prefix", "q" },
	  "--bullmq-prefix is only used with --format bullmq, not laravel" },
	{ "STAGEDRAIN_SIDEKIQ_VERSION", "8", { "--format", "celery" },
	  "--sidekiq-version (from STAGEDRAIN_SIDEKIQ_VERSION) is only used with --format sidekiq or activejob, "
	  "not celery" },
	{ NULL, NULL, { "--format", "resque", "--rails-version", "7.1" },
	  "--rails-version is only used with --format sidekiq or activejob, not resque" },
	{ NULL, NULL, { "--log-format=xml" }, "invalid --log-format \"xml\": must be one of kv, json" },
	{ "STAGEDRAIN_LOG_LEVEL", "verbose", { NULL },
	  "invalid --log-level \"verbose\" (from STAGEDRAIN_LOG_LEVEL): must be one of debug, info, "
	  "warn, error" },
	{ "STAGEDRAIN_ONCE", "maybe", { NULL },
	  "invalid --once \"maybe\" (from STAGEDRAIN_ONCE): must be one of true, false, 1, 0, yes, no, "
	  "on, off" },
	{ NULL, NULL, { "--once=nah" },
	  "invalid --once \"nah\": must be one of true, false, 1, 0, yes, no, on, off" },
	/* a newline from the environment cannot split the message */
	{ "STAGEDRAIN_FORMAT", "a\nb", { NULL },
	  "invalid --format \"a?b\" (from STAGEDRAIN_FORMAT): must be one of sidekiq, resque, activejob, "
	  "celery, laravel, bullmq" },
	/* namespace */
	{ NULL, NULL, { "--namespace", "app:" },
	  "invalid --namespace \"app:\": must not end with ':' (the colon is added)" },
	{ NULL, NULL, { "--namespace", "my app" },
	  "invalid --namespace \"my app\": must not contain whitespace or control characters" },
	{ "STAGEDRAIN_NAMESPACE", "a\tb", { NULL },
	  "invalid --namespace \"a?b\" (from STAGEDRAIN_NAMESPACE): must not contain whitespace or "
	  "control characters" },
	/* the http endpoint's address */
	{ NULL, NULL, { "--http-addr", "9187" },
	  "invalid --http-addr \"9187\": must be HOST:PORT, e.g. 127.0.0.1:9187, or :9187 for every "
	  "interface" },
	{ NULL, NULL, { "--http-addr", "127.0.0.1:" },
	  "invalid --http-addr \"127.0.0.1:\": port must be a number from 0 to 65535" },
	{ "STAGEDRAIN_HTTP_ADDR", "127.0.0.1:65536", { NULL },
	  "invalid --http-addr \"127.0.0.1:65536\" (from STAGEDRAIN_HTTP_ADDR): port must be a number "
	  "from 0 to 65535" },
	{ NULL, NULL, { "--http-addr", "localhost:http" },
	  "invalid --http-addr \"localhost:http\": port must be a number from 0 to 65535" },
	{ NULL, NULL, { "--http-addr", "::1:9187" },
	  "invalid --http-addr \"::1:9187\": an IPv6 address goes in brackets: [::1]:9187" },
	{ NULL, NULL, { "--http-addr", "[::1:9187" },
	  "invalid --http-addr \"[::1:9187\": an IPv6 address goes in brackets: [::1]:9187" },
	{ NULL, NULL, { "--http-addr", "my host:80" }, "invalid --http-addr \"my host:80\": bad host name" },
	{ NULL, NULL, { "--http-addr", "http://127.0.0.1:80" },
	  "invalid --http-addr \"http://127.0.0.1:80\": must be HOST:PORT, e.g. 127.0.0.1:9187, or :9187 "
	  "for every interface" },
	/* long durations */
	{ NULL, NULL, { "--warn-xact-age", "25h" }, "invalid --warn-xact-age \"25h\": must be between 0 and 24h" },
	{ NULL, NULL, { "--warn-xact-age", "-1s" }, "invalid --warn-xact-age \"-1s\": must be between 0 and 24h" },
	{ "STAGEDRAIN_WARN_XACT_AGE", "5m", { NULL },
	  "invalid --warn-xact-age \"5m\" (from STAGEDRAIN_WARN_XACT_AGE): not a duration (e.g. 30s, "
	  "5min or 1h; a bare number is milliseconds)" },
	{ NULL, NULL, { "--watch-interval", "99ms" },
	  "invalid --watch-interval \"99ms\": must be between 100ms and 1h" },
	{ NULL, NULL, { "--watch-interval", "61min" },
	  "invalid --watch-interval \"61min\": must be between 100ms and 1h" },
	{ NULL, NULL, { "--watch-interval", "soon" },
	  "invalid --watch-interval \"soon\": not a duration (e.g. 30s, 5min or 1h; a bare number is "
	  "milliseconds)" },
	/* queue caps */
	{ NULL, NULL, { "--queue-limit", "default=5000,,critical=0" },
	  "invalid --queue-limit \"default=5000,,critical=0\": an empty item (two commas in a row, or one first)" },
	{ NULL, NULL, { "--queue-limit", "default=5000," },
	  "invalid --queue-limit \"default=5000,\": an empty item after the last comma" },
	{ NULL, NULL, { "--queue-limit", "default" }, "invalid --queue-limit \"default\": \"default\" is not QUEUE=N" },
	{ NULL, NULL, { "--queue-limit", "=5" }, "invalid --queue-limit \"=5\": \"=5\" is not QUEUE=N" },
	{ "STAGEDRAIN_QUEUE_LIMIT", "default=lots", { NULL },
	  "invalid --queue-limit \"default=lots\" (from STAGEDRAIN_QUEUE_LIMIT): the cap in \"default=lots\" is "
	  "not a whole number from 0 to 1000000000" },
	{ NULL, NULL, { "--queue-limit", "a=-1" },
	  "invalid --queue-limit \"a=-1\": the cap in \"a=-1\" is not a whole number from 0 to 1000000000" },
	{ NULL, NULL, { "--queue-limit", "a=1,b=2,a=3" }, "invalid --queue-limit \"a=1,b=2,a=3\": queue \"a\" is listed twice" },
	{ NULL, NULL, { "--max-queue-length", "-5" },
	  "invalid --max-queue-length \"-5\": must be between 0 and 1000000000" },
	{ NULL, NULL, { "--max-redis-memory", "101" }, "invalid --max-redis-memory \"101\": must be between 0 and 100" },
	/* redis urls are never echoed: they may hold a password */
	{ NULL, NULL, { "--redis-url", "redis://:hunter2@h:99999" },
	  "invalid --redis-url: port must be a number from 1 to 65535" },
	{ "REDIS_URL", "rediss-sentinel://:hunter2@h", { NULL },
	  "invalid --redis-url (from REDIS_URL): missing master name (expected "
	  "redis-sentinel://host1:26379,host2:26379/MASTER_NAME/db)" },
	{ "STAGEDRAIN_REDIS_TLS_CA_FILE", "/ca.pem", { NULL },
	  "--redis-tls-ca-file is set but --redis-url does not use TLS (use rediss:// or rediss-sentinel://)" },
	{ NULL, NULL, { "--redis-url", "unix:///s", "--redis-tls-insecure" },
	  "--redis-tls-insecure is set but --redis-url does not use TLS (use rediss:// or rediss-sentinel://)" },
	{ NULL, NULL, { "--redis-url", "rediss://h", "--redis-tls-cert-file", "c.pem" },
	  "--redis-tls-cert-file and --redis-tls-key-file go together: set both or neither" },
	{ NULL, NULL, { "--redis-url", "rediss://h", "--redis-wait-replicas", "-1" },
	  "invalid --redis-wait-replicas \"-1\": must be between 0 and 100" },
	{ "STAGEDRAIN_REDIS_URL", "", { NULL }, "invalid --redis-url (from STAGEDRAIN_REDIS_URL): empty url" },
	/* nor are postgres urls, though libpq's own message would quote the password */
	{ NULL, NULL, { "--pg-url", "postgresql://u:hunter2%zz@h/db" },
	  "invalid --pg-url: invalid percent-encoded token: \"...\"" },
	{ "DATABASE_URL", "host=h password hunter2", { NULL },
	  "invalid --pg-url (from DATABASE_URL): missing \"...\" after \"...\" in connection info "
	  "string" },
	{ NULL, NULL, { "--pg-url", "postgresql://h/db?hunter2=1" },
	  "invalid --pg-url: invalid URI query parameter: \"...\"" },
	/* another scheme, or none: named for what it is, the rest never shown */
	{ NULL, NULL, { "--pg-url", "mysql://u:hunter2@h/db" },
	  "invalid --pg-url: \"mysql://\" is not a postgres URL: use postgresql://, postgres:// or a "
	  "conninfo string (key=value pairs)" },
	{ "DATABASE_URL", "http://h/x?password=hunter2", { NULL },
	  "invalid --pg-url (from DATABASE_URL): \"http://\" is not a postgres URL: use postgresql://, "
	  "postgres:// or a conninfo string (key=value pairs)" },
	{ "STAGEDRAIN_PG_URL", "redis://:hunter2@h:6379/0", { NULL },
	  "invalid --pg-url (from STAGEDRAIN_PG_URL): \"redis://\" is not a postgres URL: use "
	  "postgresql://, postgres:// or a conninfo string (key=value pairs)" },
	{ NULL, NULL, { "--pg-url", "jdbc:postgresql://h/db?password=hunter2" },
	  "invalid --pg-url: \"jdbc:postgresql://\" is not a postgres URL: use postgresql://, postgres:// "
	  "or a conninfo string (key=value pairs)" },
	{ NULL, NULL, { "--pg-url", "POSTGRESQL://u:hunter2@h/db" },
	  "invalid --pg-url: \"POSTGRESQL://\" is not a postgres URL: use postgresql://, postgres:// "
	  "or a conninfo string (key=value pairs)" },
	{ NULL, NULL, { "--pg-url", "u:hunter2@h:5432/db" },
	  "invalid --pg-url: neither a postgresql:// or postgres:// URL nor a conninfo string (key=value "
	  "pairs): write postgresql://HOST:PORT/DB" },
	{ NULL, NULL, { "--pg-url", "h:5432/hunter2" },
	  "invalid --pg-url: neither a postgresql:// or postgres:// URL nor a conninfo string (key=value "
	  "pairs): write postgresql://HOST:PORT/DB" },
	{ NULL, NULL, { "--pg-url", "h:5432/db?password=hunter2" },
	  "invalid --pg-url: neither a postgresql:// or postgres:// URL nor a conninfo string (key=value "
	  "pairs): write postgresql://HOST:PORT/DB" },
	{ "DATABASE_URL", "hunter2", { NULL },
	  "invalid --pg-url (from DATABASE_URL): neither a postgresql:// or postgres:// URL nor a conninfo "
	  "string (key=value pairs): a database name alone is written dbname=NAME" },
	{ NULL, NULL, { "--pg-url", "host hunter2" },
	  "invalid --pg-url: neither a postgresql:// or postgres:// URL nor a conninfo string (key=value "
	  "pairs)" },
};
/* clang-format on */

/* Caps per queue: the last = splits name from cap, spaces around items go,
 * and a queue not listed takes --max-queue-length. */
START_TEST(queue_limits_parse_and_apply)
{
	const char *argv[] = {
		"stagedrain", "--max-queue-length", "500", "--queue-limit", " default=5000 , critical=0,a=b=7", NULL
	};
	struct config cfg;

	load_ok(&cfg, argv);
	ck_assert_int_eq(cfg.max_queue_length, 500);
	ck_assert_uint_eq(cfg.queue_limits.n, 3);
	ck_assert_int_eq(queue_limits_cap(&cfg.queue_limits, "default", 7, cfg.max_queue_length), 5000);
	ck_assert_int_eq(queue_limits_cap(&cfg.queue_limits, "critical", 8, cfg.max_queue_length), 0);
	ck_assert_int_eq(queue_limits_cap(&cfg.queue_limits, "a=b", 3, cfg.max_queue_length), 7);
	ck_assert_int_eq(queue_limits_cap(&cfg.queue_limits, "mailers", 7, cfg.max_queue_length), 500);
	ck_assert_int_eq(queue_limits_cap(&cfg.queue_limits, "defaul", 6, cfg.max_queue_length), 500);
	config_free(&cfg);
}
END_TEST

START_TEST(error_messages)
{
	const struct err_case *ec = &err_cases[_i];
	const char *argv[6] = { "stagedrain" };

	for (int k = 0; k < 4 && ec->args[k]; k++)
		argv[k + 1] = ec->args[k];
	if (ec->env)
		setenv(ec->env, ec->env_value, 1);
	expect_error(argv, ec->msg);
}
END_TEST

START_TEST(error_message_is_bounded)
{
	struct config cfg;
	char value[300], err[CONFIG_ERR_SIZE], tiny[16];

	memset(value, 'x', sizeof(value) - 1);
	value[sizeof(value) - 1] = '\0';
	ck_assert_int_eq(load(&cfg, err, ARGV("--format", value)), -EINVAL);
	ck_assert(strstr(err, "...\": must be one of sidekiq, resque, activejob, celery, laravel, bullmq"));
	ck_assert_uint_lt(strlen(err), 200);
	/* A short or missing err buffer is truncated or skipped, never overrun. */
	ck_assert_int_eq(config_load(&cfg, 3, (char **)ARGV("--format", value), tiny, sizeof(tiny)), -EINVAL);
	ck_assert_uint_eq(strlen(tiny), sizeof(tiny) - 1);
	ck_assert_int_eq(config_load(&cfg, 2, (char **)ARGV("--nope"), NULL, 0), -EINVAL);
}
END_TEST

START_TEST(free_is_safe)
{
	struct config cfg;

	memset(&cfg, 0, sizeof(cfg));
	config_free(&cfg);
	config_free(NULL);
	load_ok(&cfg, ARGV(NULL));
	config_free(&cfg);
	config_free(&cfg);
	redis_target_free(NULL);
}
END_TEST

/* The manual page comes from the same table: every flag and variable, in
 * valid mdoc (mandoc -Tlint checks the rest at build time). */
START_TEST(man_page_lists_every_setting)
{
	char *text = NULL, *line, *save = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);

	ck_assert_ptr_nonnull(out);
	config_man(out, "January 2, 2026", "9.9.9");
	fclose(out);
	ck_assert(strstr(text, "\n.Dd January 2, 2026\n.Dt STAGEDRAIN 1\n.Os stagedrain 9.9.9\n"));
	for (const char *const *f = all_flags; *f; f++) {
		char item[64];
		/* -h and -V appear as ".It Fl h , Fl -help" */
		snprintf(item, sizeof(item), "Fl %s", *f + 1);
		ck_assert_msg(strstr(text, item), "man page lacks %s", *f);
	}
	for (const char *const *v = all_vars; *v; v++)
		ck_assert_msg(strstr(text, *v), "man page lacks %s", *v);
	ck_assert(strstr(text, ".It Fl -format Ar sidekiq | resque | activejob | celery | laravel | bullmq\n"));
	ck_assert(strstr(text, "From 100ms to 1h.\n"));
	/* Text never starts a line with a control character, so no sentence
	 * turns into an unknown macro; the one backslash in the examples is escaped. */
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		ck_assert_msg(line[0] != '\'', "line starts with a quote: %s", line);
		ck_assert_msg(line[0] != '.' || (line[1] >= 'A' && line[1] <= 'Z') || line[1] == '\\',
			      "not a macro: %s", line);
	}
	free(text);
}
END_TEST

START_TEST(usage_lists_every_setting)
{
	char *text = NULL, *line, *save = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);

	ck_assert_ptr_nonnull(out);
	config_usage(out);
	fclose(out);
	ck_assert_msg(strncmp(text, "usage: stagedrain [run|migrate|status|dead|held|help] [options]\n", 64) == 0,
		      "%.80s", text);
	for (const char *const *f = all_flags; *f; f++)
		ck_assert_msg(strstr(text, *f), "usage lacks %s", *f);
	for (const char *const *v = all_vars; *v; v++)
		ck_assert_msg(strstr(text, *v), "usage lacks %s", *v);
	ck_assert(strstr(text, "--format sidekiq|resque"));
	ck_assert(strstr(text, "redis://127.0.0.1:6379/0"));
	ck_assert(strstr(text, "default 100ms"));
	ck_assert(strstr(text, "(1 to 100000)"));
	ck_assert(strstr(text, "(64 to 512M)"));
	ck_assert(strstr(text, "(10ms to 300s)"));
	ck_assert(strstr(text, "to 24h)"));
	ck_assert(strstr(text, "(100ms to 1h)"));
	ck_assert(strstr(text, "default 5min"));
	ck_assert(strstr(text, "--http-addr HOST:PORT"));
	ck_assert(strstr(text, "--route ROUTE\n"));
	ck_assert(strstr(text, "give each\nonce, but --route may repeat"));
	ck_assert(strstr(text, "\"NAME QUEUES [--SETTING\n"));
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		ck_assert_msg(strlen(line) <= 80, "line too long: %s", line);
	free(text);
}
END_TEST

/* ---- *-file settings ---- */

static char file_dir[256];

static void files_setup(void)
{
	const char *tmp = getenv("TMPDIR");

	clear_env();
	snprintf(file_dir, sizeof(file_dir), "%s/stagedrain-config.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(file_dir));
}

static const char *const file_names[] = { "a", "b", "c", NULL };

static void files_teardown(void)
{
	char path[300];

	for (const char *const *n = file_names; *n; n++) {
		snprintf(path, sizeof(path), "%s/%s", file_dir, *n);
		unlink(path);
	}
	rmdir(file_dir);
}

/* Writes n bytes to file_dir/name (one of file_names); returns its path. */
static const char *put_file(const char *name, const char *text, size_t n, char *path, size_t len)
{
	FILE *f;

	snprintf(path, len, "%s/%s", file_dir, name);
	f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(text, 1, n, f), n);
	fclose(f);
	return path;
}

#define PUT(name, lit, path) put_file(name, lit, sizeof(lit) - 1, path, sizeof(path))

/* Each *-file setting, a good value for its file, and the value setting it conflicts with. */
static const struct file_setting {
	const char *flag, *env, *good, *value_flag, *value_env;
} file_settings[] = {
	{ "--pg-url-file", "STAGEDRAIN_PG_URL_FILE", "host=db user=app password=pw", "--pg-url", "STAGEDRAIN_PG_URL" },
	{ "--pg-password-file", "STAGEDRAIN_PG_PASSWORD_FILE", "pg pass: \"word\" ", NULL, NULL },
	{ "--redis-url-file", "STAGEDRAIN_REDIS_URL_FILE", "redis://:pw@cache:7000/3", "--redis-url",
	  "STAGEDRAIN_REDIS_URL" },
	{ "--redis-password-file", "STAGEDRAIN_REDIS_PASSWORD_FILE", " redis pass\t", NULL, NULL },
};

#define NFILE_SETTINGS ((int)(sizeof(file_settings) / sizeof(file_settings[0])))

/* What the file set, looked up by the setting's index in file_settings. */
static const char *file_value(const struct config *cfg, int i)
{
	const char *v[] = { cfg->pg_url, cfg->pg_password, cfg->redis_url, cfg->redis.password };

	return v[i];
}

START_TEST(file_is_read)
{
	const struct file_setting *fs = &file_settings[_i];
	char text[128], path[300], joined[400];
	struct config cfg;

	/* One trailing newline, LF or CRLF, is dropped; other spaces are kept. */
	snprintf(text, sizeof(text), "%s\n", fs->good);
	load_ok(&cfg, ARGV(fs->flag, put_file("a", text, strlen(text), path, sizeof(path))));
	ck_assert_str_eq(file_value(&cfg, _i), fs->good);
	config_free(&cfg);

	snprintf(text, sizeof(text), "%s\r\n", fs->good);
	setenv(fs->env, put_file("b", text, strlen(text), path, sizeof(path)), 1);
	load_ok(&cfg, ARGV(NULL));
	ck_assert_str_eq(file_value(&cfg, _i), fs->good);
	config_free(&cfg);
	unsetenv(fs->env);

	snprintf(joined, sizeof(joined), "%s=%s", fs->flag,
		 put_file("c", fs->good, strlen(fs->good), path, sizeof(path)));
	load_ok(&cfg, ARGV(joined));
	ck_assert_str_eq(file_value(&cfg, _i), fs->good);
	config_free(&cfg);
}
END_TEST

/* The message for a *-file setting's error: it names the setting and the path. */
static const char *file_msg(char *out, const char *flag, const char *path, const char *env, const char *why)
{
	char from[64] = "";

	if (env)
		snprintf(from, sizeof(from), " (from %s)", env);
	snprintf(out, CONFIG_ERR_SIZE, "invalid %s \"%s\"%s: %s", flag, path, from, why);
	return out;
}

START_TEST(file_missing_or_unreadable)
{
	const struct file_setting *fs = &file_settings[_i];
	char path[300], msg[CONFIG_ERR_SIZE];

	snprintf(path, sizeof(path), "%s/nope", file_dir);
	expect_error(ARGV(fs->flag, path),
		     file_msg(msg, fs->flag, path, NULL, "could not open the file: No such file or directory"));
	setenv(fs->env, path, 1);
	expect_error(ARGV(NULL),
		     file_msg(msg, fs->flag, path, fs->env, "could not open the file: No such file or directory"));
	unsetenv(fs->env);
	expect_error(ARGV(fs->flag, file_dir),
		     file_msg(msg, fs->flag, file_dir, NULL, "could not read the file: Is a directory"));
}
END_TEST

/* Contents that cannot be one value are refused; expect_error's exact match
 * shows that the message does not quote them. */
static const struct bad_file {
	const char *text;
	size_t len;
	const char *why;
} bad_files[] = {
	{ "", 0, "the file is empty" },
	{ "\n", 1, "the file is empty" },
	{ "\r\n", 2, "the file is empty" },
	{ "hunter2\n\n", 9, "the file holds more than one line" },
	{ "hunter2\nextra\n", 14, "the file holds more than one line" },
	{ "hunter2\r\r\n", 10, "the file holds more than one line" },
	{ "hun\0ter2\n", 9, "the file holds a NUL byte" },
};

START_TEST(file_contents_refused)
{
	const struct file_setting *fs = &file_settings[_i];
	char path[300], msg[CONFIG_ERR_SIZE], *big;

	for (size_t k = 0; k < sizeof(bad_files) / sizeof(bad_files[0]); k++) {
		put_file("a", bad_files[k].text, bad_files[k].len, path, sizeof(path));
		expect_error(ARGV(fs->flag, path), file_msg(msg, fs->flag, path, NULL, bad_files[k].why));
	}
	/* 64k is plenty for any URL or password; a bigger file is the wrong file. */
	big = malloc(65537);
	ck_assert_ptr_nonnull(big);
	memset(big, 'x', 65537);
	put_file("a", big, 65537, path, sizeof(path));
	free(big);
	expect_error(ARGV(fs->flag, path), file_msg(msg, fs->flag, path, NULL, "the file is larger than 64k"));
}
END_TEST

/* A URL and its file, from any mix of flag and variables, is an error:
 * neither silently wins. */
START_TEST(url_and_its_file_both_given)
{
	const struct file_setting *fs = &file_settings[_i];
	char path[300], msg[CONFIG_ERR_SIZE], joined[400];

	if (!fs->value_flag)
		return;
	PUT("a", "x\n", path);
	snprintf(msg, sizeof(msg), "%s and %s are both set: give one", fs->value_flag, fs->flag);
	expect_error(ARGV(fs->value_flag, fs->good, fs->flag, path), msg);
	snprintf(joined, sizeof(joined), "%s=%s", fs->flag, path);
	expect_error(ARGV(joined, fs->value_flag, fs->good), msg);

	setenv(fs->value_env, fs->good, 1);
	snprintf(msg, sizeof(msg), "%s (from %s) and %s are both set: give one", fs->value_flag, fs->value_env,
		 fs->flag);
	expect_error(ARGV(fs->flag, path), msg);
	unsetenv(fs->value_env);

	/* The generic fallbacks count too. */
	setenv(strstr(fs->flag, "pg") ? "DATABASE_URL" : "REDIS_URL", fs->good, 1);
	setenv(fs->env, path, 1);
	snprintf(msg, sizeof(msg), "%s (from %s) and %s (from %s) are both set: give one", fs->value_flag,
		 strstr(fs->flag, "pg") ? "DATABASE_URL" : "REDIS_URL", fs->flag, fs->env);
	expect_error(ARGV(NULL), msg);
}
END_TEST

START_TEST(password_file_beats_the_urls_password)
{
	struct config cfg;
	char path[300];

	PUT("a", "from-file\n", path);
	load_ok(&cfg, ARGV("--redis-url", "redis://:from-url@h/2", "--redis-password-file", path));
	ck_assert_str_eq(cfg.redis.password, "from-file");
	ck_assert_ptr_null(cfg.redis.user);
	ck_assert_int_eq(cfg.redis.db, 2);
	config_free(&cfg);

	/* An ACL user name in the URL, its password in the file. */
	setenv("STAGEDRAIN_REDIS_PASSWORD_FILE", path, 1);
	load_ok(&cfg, ARGV("--redis-url", "redis://relay@h"));
	ck_assert_str_eq(cfg.redis.user, "relay");
	ck_assert_str_eq(cfg.redis.password, "from-file");
	config_free(&cfg);
	load_ok(&cfg, ARGV("--redis-url", "unix:///s?password=from-url&db=1"));
	ck_assert_str_eq(cfg.redis.password, "from-file");
	config_free(&cfg);
	unsetenv("STAGEDRAIN_REDIS_PASSWORD_FILE");

	/* libpq gets the postgres password after the URL (pg_source), so it wins
	 * there; config keeps both as given. */
	load_ok(&cfg, ARGV("--pg-url", "postgresql://u:from-url@h/db", "--pg-password-file", path));
	ck_assert_str_eq(cfg.pg_url, "postgresql://u:from-url@h/db");
	ck_assert_str_eq(cfg.pg_password, "from-file");
	config_free(&cfg);

	load_ok(&cfg, ARGV(NULL));
	ck_assert_ptr_null(cfg.pg_password);
	ck_assert_ptr_null(cfg.redis_password);
	config_free(&cfg);
}
END_TEST

/* A URL read from a file is checked like any other, and not quoted either. */
START_TEST(url_from_file_is_validated)
{
	char path[300], msg[CONFIG_ERR_SIZE];

	PUT("a", "redis://:hunter2@h:99999\n", path);
	snprintf(msg, sizeof(msg), "invalid --redis-url (from file %s): port must be a number from 1 to 65535", path);
	expect_error(ARGV("--redis-url-file", path), msg);
	PUT("b", "postgresql://u:hunter2%zz@h/db\n", path);
	snprintf(msg, sizeof(msg), "invalid --pg-url (from file %s): invalid percent-encoded token: \"...\"", path);
	expect_error(ARGV("--pg-url-file", path), msg);
	PUT("m", "mysql://u:hunter2@h/db\n", path);
	snprintf(msg, sizeof(msg),
		 "invalid --pg-url (from file %s): \"mysql://\" is not a postgres URL: use postgresql://, "
		 "postgres:// or a conninfo string (key=value pairs)",
		 path);
	expect_error(ARGV("--pg-url-file", path), msg);
	PUT("c", "redis://relay@h\n", path);
	snprintf(msg, sizeof(msg),
		 "invalid --redis-url (from file %s): user name without a password (write :password@ "
		 "for a password alone)",
		 path);
	expect_error(ARGV("--redis-url-file", path), msg);
}
END_TEST

START_TEST(help_ignores_missing_files)
{
	struct config cfg;

	setenv("STAGEDRAIN_REDIS_PASSWORD_FILE", "/nonexistent/stagedrain", 1);
	load_ok(&cfg, ARGV("--pg-url-file", "/nonexistent/stagedrain", "--pg-url", "x", "--help"));
	ck_assert(cfg.help);
	ck_assert_ptr_null(cfg.redis_password);
	config_free(&cfg);
}
END_TEST

Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *load = tcase_create("load");
	TCase *errors = tcase_create("errors");
	TCase *files = tcase_create("files");

	tcase_add_checked_fixture(load, clear_env, NULL);
	tcase_add_checked_fixture(errors, clear_env, NULL);
	tcase_add_test(load, defaults);
	tcase_add_test(load, a_password_in_a_url_flag_is_noted);
	tcase_add_test(load, no_arguments_at_all);
	tcase_add_loop_test(load, flag_forms_and_env_agree, 0, (int)(sizeof(form_cases) / sizeof(form_cases[0])));
	tcase_add_test(load, commands);
	tcase_add_test(load, pg_url_forms_accepted);
	tcase_add_test(load, flag_beats_env_beats_default);
	tcase_add_test(load, repeats_that_are_fine);
	tcase_add_test(load, database_url_fallback);
	tcase_add_test(load, redis_url_fallback);
	tcase_add_test(load, namespace_defaults_follow_format);
	tcase_add_test(load, namespace_from_env);
	tcase_add_test(load, format_settings_with_their_formats);
	tcase_add_test(load, once_flag);
	tcase_add_loop_test(load, once_env_words, 0, (int)(sizeof(bool_cases) / sizeof(bool_cases[0])));
	tcase_add_test(load, help_and_version);
	tcase_add_test(load, help_ignores_bad_settings);
	tcase_add_test(load, negative_value_is_not_an_option);
	tcase_add_test(load, free_is_safe);
	tcase_add_test(load, usage_lists_every_setting);
	tcase_add_test(load, man_page_lists_every_setting);
	tcase_add_test(errors, queue_limits_parse_and_apply);
	tcase_add_loop_test(errors, error_messages, 0, (int)(sizeof(err_cases) / sizeof(err_cases[0])));
	tcase_add_test(errors, error_message_is_bounded);
	tcase_add_checked_fixture(files, files_setup, files_teardown);
	tcase_add_loop_test(files, file_is_read, 0, NFILE_SETTINGS);
	tcase_add_loop_test(files, file_missing_or_unreadable, 0, NFILE_SETTINGS);
	tcase_add_loop_test(files, file_contents_refused, 0, NFILE_SETTINGS);
	tcase_add_loop_test(files, url_and_its_file_both_given, 0, NFILE_SETTINGS);
	tcase_add_test(files, password_file_beats_the_urls_password);
	tcase_add_test(files, url_from_file_is_validated);
	tcase_add_test(files, help_ignores_missing_files);
	suite_add_tcase(s, load);
	suite_add_tcase(s, errors);
	suite_add_tcase(s, files);
	return s;
}
