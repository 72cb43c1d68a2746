/* The relay's settings, loaded from flags, environment and files (the table is in settings.h). */
#ifndef STAGEDRAIN_CONFIG_H
#define STAGEDRAIN_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "fmacros.h"
#include "job.h"
#include "log.h"
#include "queue_limits.h"
#include "redis_url.h"
#include "routes.h"

/* status, dead and help are taken by main before the settings are read (relay/commands.c). */
enum config_command { CMD_RUN = 0, CMD_MIGRATE, CMD_STATUS, CMD_DEAD, CMD_HELD, CMD_HELP };

/* --sidekiq-version auto: read off the running Sidekiq processes (sidekiq_probe.h). */
#define SIDEKIQ_VERSION_AUTO 0

struct config {
	enum config_command command;
	char *pg_url;         /* libpq conninfo or URI; "" uses libpq's PG* defaults */
	char *pg_password;    /* NULL, or from --pg-password-file: beats one in pg_url */
	char *redis_url;      /* as given, or read from --redis-url-file */
	char *redis_password; /* NULL, or from --redis-password-file: already in redis */
	struct redis_target redis;
	char *redis_tls_ca_file;     /* NULL: the system's CAs */
	char *redis_tls_cert_file;   /* NULL: no client certificate */
	char *redis_tls_key_file;    /* NULL unless redis_tls_cert_file is set */
	char *redis_tls_server_name; /* NULL: the host connected to */
	bool redis_tls_insecure;
	int redis_wait_replicas; /* 0: no WAIT */
	int redis_wait_timeout_ms;
	enum job_format format;
	int sidekiq_version; /* 6 or 7: float seconds; 8: integer milliseconds; SIDEKIQ_VERSION_AUTO */
	enum rails_version rails_version;
	char *laravel_prefix; /* NULL: none; the key prefix of --format laravel */
	char *key_prefix;     /* "" or "ns:"; from --namespace, "resque:" by default for resque */
	int batch_size;
	long max_job_bytes;
	long batch_max_bytes; /* a batch stops taking rows once they hold this much */
	int poll_interval_ms;
	int redis_timeout_ms;
	int stop_timeout_ms; /* after a stop signal, how long the batch in flight may still take */
	long long lock_key;
	enum log_level log_level;
	enum log_format log_format;
	bool once;
	char *http_addr;                  /* "" (off) or HOST:PORT as given */
	char *http_host;                  /* from http_addr: "" for every interface, brackets removed */
	int http_port;                    /* from http_addr: 0 picks a free port */
	bool readyz_detail;               /* /readyz quotes the watcher's errors, not a short reason */
	int warn_xact_age_ms;             /* 0: never warn about long transactions */
	int watch_interval_ms;            /* how often the database and redis are looked at */
	long max_queue_length;            /* every queue's cap on its Redis list; 0: none */
	struct queue_limits queue_limits; /* per-queue caps that override it */
	int max_redis_memory;             /* percent of maxmemory above which nothing is pushed; 0: off */
	bool help;
	bool version;
	bool pg_url_argv_password;    /* --pg-url, given as a flag, holds a password (ps shows it) */
	bool redis_url_argv_password; /* the same for --redis-url */
	char *route_file;             /* NULL, or --route-file: its routes follow --route's (read at load) */
	struct routes routes;         /* the targets rows go to; routes.t[0] is this config's own */
	char *route_name;             /* a route's config: its name, in its own keys' names; NULL: the default */
};

#define CONFIG_ERR_SIZE 512

/*
 * Fills cfg from argv, then STAGEDRAIN_* variables, then DATABASE_URL and
 * REDIS_URL, then defaults; the *-file settings are read here, once. On error
 * returns -EINVAL with one line in err naming the flag, its variable (or
 * file) and the cause, never a password or a secret file's contents; cfg is
 * then freed.
 */
int config_load(struct config *cfg, int argc, char **argv, char *err, size_t errlen) SD_MUSTCHECK;
void config_free(struct config *cfg);

/*
 * A route's config (routes.h): a copy of base owning all its strings, with
 * the route's words ("--SETTING VALUE" or "--SETTING=VALUE") applied as
 * config_load applies flags, and route_name set to name. Only the settings
 * the table lets a route give are taken, and --redis-url is required; the
 * Redis settings it does not give are their defaults, so are the format's
 * when it gives --format, and the rest are base's. On error returns -EINVAL
 * with the cause in why (never a password), and route is then freed.
 */
int config_route(struct config *route, const struct config *base, const char *name, char **words, int nwords, char *why,
		 size_t len) SD_MUSTCHECK;

#endif
