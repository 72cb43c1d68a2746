/* The one table of settings, read by loading (config.c) and by --help and the man page (usage.c). */
#include "fmacros.h"

#include <stddef.h>
#include <string.h>

#include "keys.h"
#include "settings.h"

const struct choice settings_commands[] = {
	{ "run", CMD_RUN, "relay staged jobs to redis until stopped (default)" },
	{ "migrate", CMD_MIGRATE, "create or upgrade the staged_jobs table, then exit" },
	{ "status", CMD_STATUS, "say whether the relay works and how far behind it is, then exit" },
	{ "dead", CMD_DEAD, "list, show, replay or purge dead-lettered jobs" },
	{ "held", CMD_HELD, "list held jobs; release or dead-letter a removed target's" },
	{ "help", CMD_HELP, "print this, or one command's options (help dead), then exit" },
	{ NULL, 0, NULL },
};
static const struct choice formats[] = {
	{ "sidekiq", FORMAT_SIDEKIQ, NULL },
	{ "resque", FORMAT_RESQUE, NULL },
	{ "activejob", FORMAT_ACTIVEJOB, NULL },
	{ "celery", FORMAT_CELERY, NULL },
	{ "laravel", FORMAT_LARAVEL, NULL },
	{ "bullmq", FORMAT_BULLMQ, NULL },
	{ NULL, 0, NULL },
};
static const struct choice sidekiq_versions[] = {
	{ "auto", SIDEKIQ_VERSION_AUTO, NULL }, { "6", 6, NULL }, { "7", 7, NULL }, { "8", 8, NULL }, { NULL, 0, NULL },
};
/* 7.0 writes what 6.1 does; 7.2 and 8 what 7.1 does. */
static const struct choice rails_versions[] = {
	{ "6.1", RAILS_6_1, NULL }, { "7.0", RAILS_6_1, NULL }, { "7.1", RAILS_7_1, NULL },
	{ "7.2", RAILS_7_1, NULL }, { "8.0", RAILS_7_1, NULL }, { NULL, 0, NULL },
};
static const struct choice log_formats[] = {
	{ "kv", LOG_FORMAT_KV, NULL },
	{ "json", LOG_FORMAT_JSON, NULL },
	{ NULL, 0, NULL },
};
static const struct choice log_levels[] = {
	{ "debug", LOG_DEBUG, NULL }, { "info", LOG_INFO, NULL }, { "warn", LOG_WARN, NULL },
	{ "error", LOG_ERROR, NULL }, { NULL, 0, NULL },
};
static const struct choice bool_words[] = {
	{ "true", 1, NULL }, { "false", 0, NULL }, { "1", 1, NULL },   { "0", 0, NULL },  { "yes", 1, NULL },
	{ "no", 0, NULL },   { "on", 1, NULL },    { "off", 0, NULL }, { NULL, 0, NULL },
};

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
/* Sidekiq's settings serve ActiveJob too, and a sidekiq relay writes a row
 * whose options say "activejob": true as ActiveJob does. */
#define SIDEKIQ_FAMILY (SETTING_FORMAT(FORMAT_SIDEKIQ) | SETTING_FORMAT(FORMAT_ACTIVEJOB))

/*
 * Applied in this order, except that V_SECRET files go first (the redis url
 * needs to know whether its password is replaced): --format comes before
 * --namespace, whose default needs it.
 */
/* Laid out by hand: one setting per paragraph, its identity first and its help
 * last, reads better than clang-format's one designator per line. */
/* clang-format off */
const struct setting settings[] = {
	{ .flag = "pg-url", .env = "STAGEDRAIN_PG_URL", .env_fallback = "DATABASE_URL",
	  .type = V_PG, .metavar = "URL", .def = "", .off = OFF(pg_url), .secret = true,
	  .def_doc = "empty, so libpq uses PGHOST, PGDATABASE and its other PG* variables",
	  .help = "postgres holding the staged_jobs table: a libpq conninfo string or "
		  "postgresql:// (or postgres://) URI, passed to libpq unchanged; TLS with "
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
	  .off = OFF(redis_url), .secret = true, .route = ROUTE_OWN,
	  .help = "redis to push jobs to: redis://[[user]:password@]host[:port][/db], "
		  "rediss://... for TLS, unix://[[user]:password@]/path/to/redis.sock[?db=N], "
		  "through sentinels: redis-sentinel://[[user]:password@]h1[:p1],h2[:p2]/MASTER[/db] "
		  "(rediss-sentinel:// for TLS), or a Redis Cluster (--format bullmq or laravel): "
		  "redis-cluster://[[user]:password@]h1[:p1],h2[:p2] (rediss-cluster:// for TLS)" },
	{ .flag = "redis-url-file", .env = "STAGEDRAIN_REDIS_URL_FILE", .type = V_FILE,
	  .metavar = "PATH", .def_doc = "none", .file_for = "redis-url",
	  .help = "read --redis-url from this file, e.g. a mounted secret; one trailing "
		  "newline is ignored" },
	{ .flag = "redis-password-file", .env = "STAGEDRAIN_REDIS_PASSWORD_FILE",
	  .type = V_SECRET, .metavar = "PATH", .def_doc = "none", .off = OFF(redis_password),
	  .route = ROUTE_OWN,
	  .help = "read the redis password (AUTH) from this file; it replaces any "
		  "password in --redis-url" },
	{ .flag = "redis-tls-ca-file", .env = "STAGEDRAIN_REDIS_TLS_CA_FILE", .type = V_STR,
	  .metavar = "PATH", .def_doc = "the system's CA certificates", .off = OFF(redis_tls_ca_file),
	  .route = ROUTE_OWN,
	  .help = "CA certificates (PEM) that verify a rediss:// server's certificate" },
	{ .flag = "redis-tls-cert-file", .env = "STAGEDRAIN_REDIS_TLS_CERT_FILE", .type = V_STR,
	  .metavar = "PATH", .def_doc = "none", .off = OFF(redis_tls_cert_file), .route = ROUTE_OWN,
	  .help = "client certificate (PEM) for a server that requires one; needs "
		  "--redis-tls-key-file" },
	{ .flag = "redis-tls-key-file", .env = "STAGEDRAIN_REDIS_TLS_KEY_FILE", .type = V_STR,
	  .metavar = "PATH", .def_doc = "none", .off = OFF(redis_tls_key_file), .route = ROUTE_OWN,
	  .help = "private key (PEM) of --redis-tls-cert-file" },
	{ .flag = "redis-tls-server-name", .env = "STAGEDRAIN_REDIS_TLS_SERVER_NAME", .type = V_STR,
	  .metavar = "NAME", .def_doc = "the url's host, or the address a sentinel gave",
	  .off = OFF(redis_tls_server_name), .route = ROUTE_OWN,
	  .help = "name sent as SNI and required in the server's certificate" },
	{ .flag = "redis-tls-insecure", .env = "STAGEDRAIN_REDIS_TLS_INSECURE", .type = V_BOOL,
	  .def = "off", .choices = bool_words, .off = OFF(redis_tls_insecure), .route = ROUTE_OWN,
	  .help = "encrypt but do not verify the server's certificate (a warning at start); "
		  "anyone on the path can then read and change the jobs" },
	{ .flag = "redis-wait-replicas", .env = "STAGEDRAIN_REDIS_WAIT_REPLICAS", .type = V_INT,
	  .metavar = "N", .def = "0", .num = &value_count, .min = 0, .max = 100,
	  .off = OFF(redis_wait_replicas), .route = ROUTE_OWN,
	  .help = "delete a batch's rows only after N replicas acknowledged its push (WAIT); "
		  "fewer within --redis-wait-timeout and the batch is rolled back and tried "
		  "again; 0 trusts the primary's acknowledgement alone" },
	{ .flag = "redis-wait-timeout", .env = "STAGEDRAIN_REDIS_WAIT_TIMEOUT", .type = V_INT,
	  .metavar = "DURATION", .def = "1s", .num = &duration, .min = 1, .max = 60000,
	  .off = OFF(redis_wait_timeout_ms), .route = ROUTE_OWN,
	  .help = "how long a batch waits for --redis-wait-replicas to acknowledge it" },
	{ .flag = "format", .env = "STAGEDRAIN_FORMAT", .type = V_CHOICE, .def = "sidekiq",
	  .choices = formats, .off = OFF(format), .route = ROUTE_FORMAT,
	  .help = "job layout in redis, as the worker library writes it" },
	{ .flag = "sidekiq-version", .env = "STAGEDRAIN_SIDEKIQ_VERSION", .type = V_CHOICE,
	  .def = "auto", .choices = sidekiq_versions, .off = OFF(sidekiq_version), .route = ROUTE_FORMAT,
	  .formats = SIDEKIQ_FAMILY,
	  .help = "sidekiq major version: 6 and 7 store timestamps as float seconds, "
		  "8 as integer milliseconds; auto reads the running Sidekiq processes' "
		  "versions from redis and writes milliseconds only while every one is 8" },
	{ .flag = "rails-version", .env = "STAGEDRAIN_RAILS_VERSION", .type = V_CHOICE,
	  .def = "7.1", .choices = rails_versions, .off = OFF(rails_version), .route = ROUTE_FORMAT,
	  .formats = SIDEKIQ_FAMILY,
	  .help = "rails version whose ActiveJob payload to write: 6.1 and 7.0 write "
		  "times to the second, 7.1 and later to the nanosecond with scheduled_at "
		  "(which 6.1 and 7.0 workers ignore)" },
	{ .flag = "laravel-prefix", .env = "STAGEDRAIN_LARAVEL_PREFIX", .type = V_STR,
	  .metavar = "PREFIX", .def = "laravel_database_", .off = OFF(laravel_prefix), .route = ROUTE_FORMAT,
	  .formats = SETTING_FORMAT(FORMAT_LARAVEL),
	  .help = "--format laravel: the redis connection's prefix (config/database.php, "
		  "REDIS_PREFIX), written before queues:NAME as is; empty for none" },
	{ .flag = "bullmq-prefix", .env = "STAGEDRAIN_BULLMQ_PREFIX", .type = V_STR,
	  .metavar = "PREFIX", .def = "bull", .off = OFF(bullmq_prefix), .route = ROUTE_FORMAT,
	  .formats = SETTING_FORMAT(FORMAT_BULLMQ),
	  .help = "--format bullmq: BullMQ's prefix option (a hash tag such as {bull} included); "
		  "the keys are PREFIX:QUEUE:..." },
	{ .flag = "namespace", .env = "STAGEDRAIN_NAMESPACE", .type = V_NS, .metavar = "NAME",
	  .off = OFF(key_prefix), .def_doc = "none (\"resque\" for resque)", .route = ROUTE_FORMAT,
	  .help = "key prefix as redis-namespace writes it: NAME:queue:default; the colon "
		  "is added, and an empty NAME means no prefix (laravel: --laravel-prefix; bullmq: "
		  "--bullmq-prefix)" },
	{ .flag = "route", .env = "STAGEDRAIN_ROUTE", .type = V_ROUTE, .metavar = "ROUTE", .def_doc = "none",
	  .help = "send some queues to another redis or format: \"NAME QUEUES [--SETTING VALUE ...]\", e.g. "
		  "\"bulk bulk,report-* --redis-url redis://r2:6379/0\"; QUEUES are comma-separated names "
		  "or globs (*, ?, [...]), or - for none, and a row's route column may name the route too; "
		  "SETTINGS are --redis-url (required), --redis-password-file, --redis-tls-*, "
		  "--redis-wait-*, --max-redis-memory, --format, --namespace, --sidekiq-version, "
		  "--rails-version, --laravel-prefix and --bullmq-prefix (without --format: the relay's format and its "
		  "settings; redis settings are never the relay's); the first matching pattern wins, "
		  "other queues go to --redis-url; repeat for more routes, or separate them with "
		  "newlines or ; in the variable (a ; in a url's password does not separate)" },
	{ .flag = "route-file", .env = "STAGEDRAIN_ROUTE_FILE", .type = V_STR, .metavar = "PATH",
	  .def_doc = "none", .off = OFF(route_file),
	  .help = "more routes (see --route), one per line, after --route's; blank lines and lines "
		  "starting with # are skipped" },
	{ .flag = "batch-size", .env = "STAGEDRAIN_BATCH_SIZE", .type = V_INT, .metavar = "N",
	  .def = "1000", .num = &value_count, .min = 1, .max = 100000, .off = OFF(batch_size),
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
	{ .flag = "max-queue-length", .env = "STAGEDRAIN_MAX_QUEUE_LENGTH", .type = V_LONG, .metavar = "N",
	  .def = "0", .def_doc = "0 (none)", .num = &value_count, .min = 0, .max = QUEUE_LIMIT_MAX,
	  .off = OFF(max_queue_length),
	  .help = "keep each queue's redis list at or below N jobs (a batch may overshoot by "
		  "what it carries); the rest wait in postgres (staged_jobs_held) and are released "
		  "round-robin across tenants as workers pop; 0: no cap" },
	{ .flag = "queue-limit", .env = "STAGEDRAIN_QUEUE_LIMIT", .type = V_LIMITS, .metavar = "Q=N,...",
	  .def = "", .def_doc = "none", .off = OFF(queue_limits),
	  .help = "per-queue caps that override --max-queue-length, e.g. default=5000,critical=0 "
		  "(0: that queue uncapped); a name is what comes before the last =" },
	{ .flag = "max-redis-memory", .env = "STAGEDRAIN_MAX_REDIS_MEMORY", .type = V_INT,
	  .metavar = "PERCENT", .def = "0", .def_doc = "0 (off)", .num = &value_count, .min = 0, .max = 100,
	  .off = OFF(max_redis_memory), .route = ROUTE_INHERIT,
	  .help = "push nothing while redis uses PERCENT of its maxmemory or more; resume "
		  "below PERCENT - 5; no effect where maxmemory is 0" },
	{ .flag = "poll-interval", .env = "STAGEDRAIN_POLL_INTERVAL", .type = V_INT,
	  .metavar = "DURATION", .def = "100ms", .num = &duration, .min = 1, .max = 60000,
	  .off = OFF(poll_interval_ms),
	  .help = "longest an idle relay waits before looking again (it waits 1ms after a "
		  "batch, doubling while reads find nothing); 250ms, 2s, or a bare number of "
		  "milliseconds" },
	{ .flag = "redis-timeout", .env = "STAGEDRAIN_REDIS_TIMEOUT", .type = V_INT,
	  .metavar = "DURATION", .def = "5s", .num = &duration, .min = 10, .max = 300000,
	  .off = OFF(redis_timeout_ms), .help = "connect and command timeout for redis" },
	{ .flag = "stop-timeout", .env = "STAGEDRAIN_STOP_TIMEOUT", .type = V_INT,
	  .metavar = "DURATION", .def = "5s", .num = &duration, .min = 0, .max = 300000,
	  .off = OFF(stop_timeout_ms),
	  .help = "after SIGTERM or SIGINT, how long the batch in flight may still take to "
		  "finish; past it the batch is abandoned (redis socket closed, postgres statement "
		  "cancelled, transaction rolled back; the fence decides what the next leader "
		  "pushes) and the relay exits at most 1.5s later" },
	{ .flag = "lock-key", .env = "STAGEDRAIN_LOCK_KEY", .type = V_I64, .metavar = "KEY",
	  .def = KEYS_LOCK_DEFAULT_TEXT, .off = OFF(lock_key),
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
	{ .flag = "readyz-detail", .env = "STAGEDRAIN_READYZ_DETAIL", .type = V_BOOL, .def = "off",
	  .choices = bool_words, .off = OFF(readyz_detail),
	  .help = "/readyz, when not ready, quotes the error behind it (server addresses, "
		  "their messages) rather than a short reason; the log has the error either way" },
	{ .flag = "warn-xact-age", .env = "STAGEDRAIN_WARN_XACT_AGE", .type = V_INT,
	  .metavar = "DURATION", .def = "5min", .num = &period, .min = 0, .max = 86400000,
	  .off = OFF(warn_xact_age_ms),
	  .help = "warn, naming it and how to end it, about anything holding back vacuum's xmin "
		  "horizon longer than this: a transaction, a standby's query, a replication slot "
		  "or a prepared transaction; 0 turns the warning off" },
	{ .flag = "watch-interval", .env = "STAGEDRAIN_WATCH_INTERVAL", .type = V_INT,
	  .metavar = "DURATION", .def = "5s", .num = &period, .min = 100, .max = 3600000,
	  .off = OFF(watch_interval_ms),
	  .help = "how often a separate connection reads the backlog (held rows too), the "
		  "oldest transaction and dead rows from postgres, and pings redis, for metrics, "
		  "/readyz and the warning; every sixth round it looks where each target's workers "
		  "register" },
	{ .flag = "once", .env = "STAGEDRAIN_ONCE", .type = V_BOOL, .def = "off",
	  .choices = bool_words, .off = OFF(once),
	  .help = "relay every committed job, then exit: 0 when none is left; 3 when some "
		  "are, held by a cap or for a target that is down, paused by --max-redis-memory, "
		  "kept by a key of the wrong type, or the leader lock is another session's for "
		  "5 s (one line says which, per cause)" },
	{ .flag = "help", .short_name = 'h', .type = V_ACTION, .def = "off",
	  .choices = bool_words, .off = OFF(help), .help = "print this help and exit" },
	{ .flag = "version", .short_name = 'V', .type = V_ACTION, .def = "off",
	  .choices = bool_words, .off = OFF(version), .help = "print the version and exit" },
};
/* clang-format on */

const size_t settings_count = sizeof(settings) / sizeof(settings[0]);

const struct setting *settings_find_flag(const char *arg, size_t n)
{
	for (const struct setting *s = settings; s < settings + settings_count; s++) {
		if (arg[1] != '-' ? n == 2 && arg[1] == s->short_name
				  : n - 2 == strlen(s->flag) && strncmp(arg + 2, s->flag, n - 2) == 0)
			return s;
	}
	return NULL;
}

const struct setting *settings_find(const char *flag)
{
	for (const struct setting *s = settings; s < settings + settings_count; s++)
		if (strcmp(s->flag, flag) == 0)
			return s;
	return NULL;
}
