/* `stagedrain status`: reads the servers, prints the facts, and exits 0 healthy, 1 needs a person, 2 bad usage. */
#include "fmacros.h"

#include <stdio.h>

#include "cmd_args.h"
#include "cmd_status.h"
#include "log.h"
#include "status.h"
#include "status_print.h"
#include "status_read.h"
#include "usage.h"
#include "values.h"

/* --max-age's default: a job staged this long ago and still not in Redis needs a person. */
#define STATUS_MAX_AGE_DEFAULT "5min"

static int usage_error(const char *msg)
{
	fprintf(stderr, "stagedrain status: %s (see stagedrain help status)\n", msg);
	return CMD_EXIT_USAGE;
}

/* Reads, judges and prints: the exit status. */
static int report(const struct cmd_args *a, long long max_age_ms)
{
	const struct config *cfg = &a->cfg;
	struct status s;
	struct status_problems p;
	int rc;

	status_init(&s);
	rc = status_read(&s, cfg);
	if (rc == 0) {
		/* The held horizon's threshold is the relay's own --warn-xact-age: one setting, one meaning. */
		status_judge(&s, max_age_ms, cfg->warn_xact_age_ms, &p);
		if (cmd_args_has(a, "json"))
			rc = status_print_json(stdout, &s, &p, max_age_ms, cfg->warn_xact_age_ms);
		else
			status_print_table(stdout, &s, &p);
	}
	status_free(&s);
	if (rc < 0) {
		fprintf(stderr, "stagedrain status: out of memory\n");
		return CMD_EXIT_ATTENTION;
	}
	return p.n == 0 ? CMD_EXIT_OK : CMD_EXIT_ATTENTION;
}

int cmd_status_main(int argc, char **argv)
{
	const struct command_doc *doc = commands_find("status");
	struct cmd_args a;
	char err[CONFIG_ERR_SIZE], msg[CONFIG_ERR_SIZE + 64], shown[68];
	const char *max_age = NULL;
	long long max_age_ms = 0;
	int status;

	if (cmd_args_parse(&a, doc->opts, argc, argv, 2, err, sizeof(err)) < 0) {
		cmd_args_free(&a);
		return usage_error(err);
	}
	if (a.cfg.help) {
		command_usage(stdout, doc);
		cmd_args_free(&a);
		return CMD_EXIT_OK;
	}
	if (a.nwords > 0) {
		snprintf(msg, sizeof(msg), "unexpected argument \"%s\"",
			 value_printable(a.words[0], shown, sizeof(shown)));
		cmd_args_free(&a);
		return usage_error(msg);
	}
	max_age = cmd_args_last(&a, "max-age");
	if (cmd_args_span("max-age", max_age ? max_age : STATUS_MAX_AGE_DEFAULT, &max_age_ms, err, sizeof(err)) < 0) {
		cmd_args_free(&a);
		return usage_error(err);
	}
	log_setup(a.cfg.log_level, a.cfg.log_format);
	status = report(&a, max_age_ms);
	cmd_args_free(&a);
	return status;
}
