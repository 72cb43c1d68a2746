/* The operator commands' own arguments (`stagedrain dead list --queue q`, `stagedrain status --json`):
 * their options and words are taken out, the rest are the daemon's settings, read by config_load. */
#ifndef STAGEDRAIN_CMD_ARGS_H
#define STAGEDRAIN_CMD_ARGS_H

#include <stdbool.h>
#include <stddef.h>

#include "commands.h"
#include "config.h"
#include "fmacros.h"

/* One occurrence of an option, in command-line order (an option may repeat). */
struct cmd_given {
	const struct cmd_opt *opt;
	const char *val; /* "" for a bare flag; points into argv */
};

struct cmd_args {
	const struct cmd_opt *opts;
	const char **words; /* the words that are not options, in order; into argv */
	int nwords;
	struct cmd_given *given;
	int ngiven;
	struct config cfg; /* the settings: URLs, --namespace, --format, -h ... */
};

/*
 * Splits argv[first..] into the command's options, its words and the
 * settings, and loads the settings as the daemon would (flags, then
 * variables, then files). argv[0] is the program. 0, or -errno with one
 * line in err; free with cmd_args_free either way.
 */
int cmd_args_parse(struct cmd_args *a, const struct cmd_opt *opts, int argc, char **argv, int first, char *err,
		   size_t errlen) SD_MUSTCHECK;
void cmd_args_free(struct cmd_args *a);

/* The last value given for flag, or NULL when it was not given. */
const char *cmd_args_last(const struct cmd_args *a, const char *flag);
/* Whether the bare flag was given. */
bool cmd_args_has(const struct cmd_args *a, const char *flag);

/* The longest span an operator may give: 100 years of 365 days, past any
 * row's age and well inside what Postgres's interval and timestamp hold. */
#define CMD_SPAN_MAX_MS (36500LL * 86400000)

/* Parses a span such as 90s, 15min, 2h or 7d into milliseconds, at most
 * CMD_SPAN_MAX_MS: 0 or -EINVAL with one line in err. */
int cmd_args_span(const char *flag, const char *s, long long *ms, char *err, size_t errlen) SD_MUSTCHECK;

/* The exit codes every operator command keeps: 0 fine, 1 something needs a person or failed, 2 bad usage. */
#define CMD_EXIT_OK 0
#define CMD_EXIT_ATTENTION 1
#define CMD_EXIT_USAGE 2

#endif
