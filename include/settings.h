/* The one table of settings: every flag, its variable, kind of value, default and help. */
#ifndef STAGEDRAIN_SETTINGS_H
#define STAGEDRAIN_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>

#include "values.h"

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
