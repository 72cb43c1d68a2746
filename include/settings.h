/* The relay's settings: struct config, what they are once loaded (config.h
 * loads them), and the one table of them: every flag, its variable, kind of
 * value, default and help. */
#ifndef STAGEDRAIN_SETTINGS_H
#define STAGEDRAIN_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>

#include "job.h"
#include "log.h"
#include "queue_limits.h"
#include "redis_url.h"
#include "routes.h"
#include "values.h"

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
	char *bullmq_prefix;  /* --format bullmq: BullMQ's prefix option; the keys start PREFIX: */
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
	V_STR,    /* char *, as given (a path, a name); NULL when unset or empty */
	V_LIMITS, /* struct queue_limits, from "NAME=N,NAME=N" */
	V_ROUTE,  /* a route (routes.h); each --route adds one, the variable holds several */
};

/* Whether a route (--route, routes.h) may give a setting, and what its target
 * has when the route does not. */
enum route_scope {
	ROUTE_NO = 0,  /* the relay's alone: every target has the relay's value */
	ROUTE_OWN,     /* the default, never the relay's value: another server's */
	ROUTE_INHERIT, /* the relay's value */
	ROUTE_FORMAT,  /* the relay's value, or the default when the route gives --format */
};

/* struct setting's .formats: the formats a setting means something with. */
#define SETTING_FORMAT(f) (1u << (f))

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
	size_t off; /* where the value goes in struct config */
	const struct choice *choices;
	const struct numkind *num;
	long long min, max;
	bool secret;          /* may hold a password: never echoed in errors */
	const char *file_for; /* V_FILE: the flag whose value the file holds */
	enum route_scope route;
	unsigned formats; /* 0: any; else SETTING_FORMAT bits: given with another format, an error */
};

/* In the order they are applied and shown; settings_count of them. */
extern const struct setting settings[];
extern const size_t settings_count;
/* The commands that may come first on the command line; ends at a NULL name. */
extern const struct choice settings_commands[];

/* The setting for "--name", "--name=value" or "-h", n being the name's length; NULL if none. */
const struct setting *settings_find_flag(const char *arg, size_t n);
/* The setting whose flag (without dashes) is flag; NULL if none. */
const struct setting *settings_find(const char *flag);

#endif
