/* Splits an operator command's argv into its own options, its words and the daemon's settings. */
#include "fmacros.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_args.h"
#include "settings.h"
#include "values.h"

/* Spans an operator gives: a unit is required, since a bare number could mean anything. */
static const struct unit span_units[] = {
	{ "ms", 1 }, { "s", 1000 }, { "min", 60000 }, { "h", 3600000 }, { "d", 86400000 }, { NULL, 0 },
};

/* A setting listed among the command's options is still config_load's. */
static const struct cmd_opt *find_opt(const struct cmd_opt *opts, const char *name, size_t n)
{
	for (; opts->flag; opts++)
		if (!opts->setting && strlen(opts->flag) == n && strncmp(opts->flag, name, n) == 0)
			return opts;
	return NULL;
}

/* What help says of an option is what its parser does (commands.h). */
static bool repeatable(const struct cmd_opt *o)
{
	static const char mark[] = "(repeatable)";
	size_t n = strlen(o->help), k = sizeof(mark) - 1;

	return n >= k && strcmp(o->help + n - k, mark) == 0;
}

/* Takes argv[*i], one of the command's own options, and its value. */
static int take_opt(struct cmd_args *a, const struct cmd_opt *o, int argc, char **argv, int *i, char *err,
		    size_t errlen)
{
	const char *eq = strchr(argv[*i], '=');
	const char *val = "";

	if (!o->metavar && eq)
		return value_fail(err, errlen, -EINVAL, "--%s takes no value", o->flag);
	for (int k = 0; k < a->ngiven && !repeatable(o); k++)
		if (a->given[k].opt == o)
			return value_fail(err, errlen, -EINVAL, "--%s given twice: give it once", o->flag);
	if (o->metavar) {
		if (eq)
			val = eq + 1;
		else if (*i + 1 < argc)
			val = argv[++*i];
		else
			return value_fail(err, errlen, -EINVAL, "--%s needs a value (%s)", o->flag, o->metavar);
	}
	a->given[a->ngiven++] = (struct cmd_given){ .opt = o, .val = val };
	return 0;
}

/* A daemon setting: it goes to config_load with its value, which may be the next word. */
static void take_setting(char **rest, int *nrest, int argc, char **argv, int *i)
{
	const char *arg = argv[*i];
	size_t n = strcspn(arg, "=");
	const struct setting *s = settings_find_flag(arg, n);

	rest[(*nrest)++] = argv[*i];
	if (s && !arg[n] && s->type != V_BOOL && s->type != V_ACTION && *i + 1 < argc)
		rest[(*nrest)++] = argv[++*i];
}

int cmd_args_parse(struct cmd_args *a, const struct cmd_opt *opts, int argc, char **argv, int first, char *err,
		   size_t errlen)
{
	char **rest;
	int nrest = 0, rc;

	memset(a, 0, sizeof(*a));
	a->opts = opts;
	a->words = calloc((size_t)argc, sizeof(*a->words));
	a->given = calloc((size_t)argc, sizeof(*a->given));
	rest = calloc((size_t)argc + 1, sizeof(*rest));
	if (!a->words || !a->given || !rest) {
		free(rest);
		return value_fail(err, errlen, -ENOMEM, "out of memory reading the arguments");
	}
	rest[nrest++] = argv[0];
	rc = 0;
	for (int i = first; i < argc && rc == 0; i++) {
		const char *arg = argv[i];
		const struct cmd_opt *o = NULL;

		if (strncmp(arg, "--", 2) == 0)
			o = find_opt(opts, arg + 2, strcspn(arg + 2, "="));
		if (o)
			rc = take_opt(a, o, argc, argv, &i, err, errlen);
		else if (arg[0] == '-' && arg[1] != '\0')
			take_setting(rest, &nrest, argc, argv, &i);
		else
			a->words[a->nwords++] = arg;
	}
	if (rc == 0)
		rc = config_load(&a->cfg, nrest, rest, err, errlen);
	free(rest);
	return rc;
}

void cmd_args_free(struct cmd_args *a)
{
	if (!a)
		return;
	free(a->words);
	free(a->given);
	config_free(&a->cfg);
	memset(a, 0, sizeof(*a));
}

const char *cmd_args_last(const struct cmd_args *a, const char *flag)
{
	for (int i = a->ngiven - 1; i >= 0; i--)
		if (strcmp(a->given[i].opt->flag, flag) == 0)
			return a->given[i].val;
	return NULL;
}

bool cmd_args_has(const struct cmd_args *a, const char *flag)
{
	return cmd_args_last(a, flag) != NULL;
}

int cmd_args_span(const char *flag, const char *s, long long *ms, char *err, size_t errlen)
{
	char shown[64];

	value_printable(s, shown, sizeof(shown));
	if (value_parse_scaled(s, span_units, ms) < 0 || *ms < 0)
		return value_fail(err, errlen, -EINVAL, "--%s \"%s\" is not a span (e.g. 90s, 15min, 2h or 7d)", flag,
				  shown);
	/* A larger one fails in Postgres's interval arithmetic, which would be
	 * exit 1 for what is a usage error. */
	if (*ms > CMD_SPAN_MAX_MS)
		return value_fail(err, errlen, -EINVAL, "--%s \"%s\" is longer than %lld days (100 years)", flag, shown,
				  CMD_SPAN_MAX_MS / 86400000);
	return 0;
}
