/* The operator commands' arguments: their options, their words and the settings taken apart. */
#include "fmacros.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_args.h"
#include "suites.h"
#include "usage.h"

/* config_load takes char **, as main gets it; nothing writes through it. */
#define ARGV(...) ((char **)(const char *const[]){ "stagedrain", "dead", "replay", __VA_ARGS__, NULL })

static int argc_of(char **argv)
{
	int n = 0;

	while (argv[n])
		n++;
	return n;
}

static const struct command_doc *replay(void)
{
	const struct command_doc *c = commands_find("dead replay");

	ck_assert_ptr_nonnull(c);
	return c;
}

/* Options, words and settings may come in any order; a setting's value may be the next word. */
START_TEST(split_in_any_order)
{
	char **argv = ARGV("12", "--pg-url", "dbname=x", "--set-option", "queue=\"low\"", "14", "--dry-run",
			   "--set-option=retry=3", "--namespace", "app", "--unset-option", "tags");
	struct cmd_args a;
	char err[256] = "";

	ck_assert_int_eq(cmd_args_parse(&a, replay()->opts, argc_of(argv), argv, 3, err, sizeof(err)), 0);
	ck_assert_int_eq(a.nwords, 2);
	ck_assert_str_eq(a.words[0], "12");
	ck_assert_str_eq(a.words[1], "14");
	ck_assert_int_eq(a.ngiven, 4);
	ck_assert_str_eq(a.given[0].opt->flag, "set-option");
	ck_assert_str_eq(a.given[0].val, "queue=\"low\"");
	ck_assert_str_eq(a.given[2].val, "retry=3");
	ck_assert_str_eq(cmd_args_last(&a, "set-option"), "retry=3");
	ck_assert(cmd_args_has(&a, "dry-run"));
	ck_assert(!cmd_args_has(&a, "force"));
	ck_assert_ptr_null(cmd_args_last(&a, "queue"));
	ck_assert_str_eq(a.cfg.pg_url, "dbname=x");
	ck_assert_str_eq(a.cfg.key_prefix, "app:");
	cmd_args_free(&a);
}
END_TEST

/* Bad arguments: one line that names the flag, and the parse fails. */
static const struct {
	const char *args[6]; /* NULL-terminated: one more than the longest row */
	const char *expect;
} bad[] = {
	{ { "--dry-run=yes" }, "--dry-run takes no value" },
	{ { "--set-option" }, "--set-option needs a value (KEY=JSON)" },
	{ { "--frob" }, "unknown option --frob" },
	{ { "--batch-size", "0" }, "--batch-size" },
	/* an option or setting given twice: refused, not the last one taken */
	{ { "--class", "A", "--class=B" }, "--class given twice: give it once" },
	{ { "--dry-run", "--dry-run" }, "--dry-run given twice: give it once" },
	{ { "--pg-url", "dbname=a", "--pg-url=dbname=b" }, "--pg-url given twice: give it once" },
	{ { "--set-route", "a", "--unset-route", "--set-route", "b" }, "--set-route given twice: give it once" },
};

START_TEST(bad_arguments)
{
	const char *argv[10] = { "stagedrain", "dead", "replay" };
	int argc = 3;
	struct cmd_args a;
	char err[256] = "";

	for (int i = 0; bad[_i].args[i]; i++)
		argv[argc++] = bad[_i].args[i];
	ck_assert_int_lt(cmd_args_parse(&a, replay()->opts, argc, (char **)argv, 3, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, bad[_i].expect), "got \"%s\"", err);
	ck_assert_ptr_null(strchr(err, '\n'));
	cmd_args_free(&a);
}
END_TEST

/* -h reaches the settings, so a command can print its own usage. */
START_TEST(help_flag_reaches_the_settings)
{
	char **argv = ARGV("-h");
	struct cmd_args a;
	char err[256] = "";

	ck_assert_int_eq(cmd_args_parse(&a, replay()->opts, argc_of(argv), argv, 3, err, sizeof(err)), 0);
	ck_assert(a.cfg.help);
	cmd_args_free(&a);
}
END_TEST

START_TEST(spans)
{
	long long ms = -1;
	char err[256] = "";

	ck_assert_int_eq(cmd_args_span("since", "90s", &ms, err, sizeof(err)), 0);
	ck_assert_int_eq(ms, 90000);
	ck_assert_int_eq(cmd_args_span("since", "15min", &ms, err, sizeof(err)), 0);
	ck_assert_int_eq(ms, 900000);
	ck_assert_int_eq(cmd_args_span("older-than", "7d", &ms, err, sizeof(err)), 0);
	ck_assert_int_eq(ms, 7LL * 86400000);
	/* A bare number could be seconds or days: refused. */
	ck_assert_int_eq(cmd_args_span("older-than", "7", &ms, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "--older-than \"7\" is not a span (e.g. 90s, 15min, 2h or 7d)");
	ck_assert_int_eq(cmd_args_span("since", "-2h", &ms, err, sizeof(err)), -EINVAL);
	/* At most 100 years: a longer span fails here, not in Postgres's interval arithmetic (exit 1 there). */
	ck_assert_int_eq(cmd_args_span("since", "36500d", &ms, err, sizeof(err)), 0);
	ck_assert_int_eq(ms, CMD_SPAN_MAX_MS);
	ck_assert_int_eq(cmd_args_span("since", "36501d", &ms, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "--since \"36501d\" is longer than 36500 days (100 years)");
	ck_assert_int_eq(cmd_args_span("older-than", "99999999999d", &ms, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "--older-than \"99999999999d\" is longer than 36500 days (100 years)");
	ck_assert_int_eq(cmd_args_span("since", "99999999999999999999999ms", &ms, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(cmd_args_span("since", "redis://:hunter2@h", &ms, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "--since \"redis://...@h\" is not a span (e.g. 90s, 15min, 2h or 7d)");
}
END_TEST

/* Options whose help says "(repeatable)" take every value; a setting listed
 * for help (status's --warn-xact-age) is still the settings', once. */
START_TEST(repeatable_options_and_listed_settings)
{
	char **argv = ARGV("--set-option", "a=1", "--unset-option", "b", "--set-option=c=2", "--unset-option", "d");
	char **st = (char **)(const char *const[]){ "stagedrain", "status", "--warn-xact-age", "1h", NULL };
	char **st2 = (char **)(const char *const[]){ "stagedrain",         "status", "--warn-xact-age", "1h",
						     "--warn-xact-age=2h", NULL };
	const struct command_doc *status = commands_find("status");
	struct cmd_args a;
	char err[256] = "";

	ck_assert_int_eq(cmd_args_parse(&a, replay()->opts, argc_of(argv), argv, 3, err, sizeof(err)), 0);
	ck_assert_int_eq(a.ngiven, 4);
	cmd_args_free(&a);
	ck_assert_int_eq(cmd_args_parse(&a, status->opts, argc_of(st), st, 2, err, sizeof(err)), 0);
	ck_assert_int_eq(a.cfg.warn_xact_age_ms, 3600000);
	ck_assert_int_eq(a.ngiven, 0);
	cmd_args_free(&a);
	ck_assert_int_eq(cmd_args_parse(&a, status->opts, argc_of(st2), st2, 2, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "--warn-xact-age given twice: give it once");
	cmd_args_free(&a);
}
END_TEST

/* `stagedrain help dead` prints every dead command; the man page lists every command's options. */
START_TEST(help_and_man_list_the_commands)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);

	ck_assert_int_eq(commands_usage(out, "dead"), 4);
	ck_assert_int_eq(commands_usage(out, "status"), 1);
	ck_assert_int_eq(commands_usage(out, "dea"), 0);
	fclose(out);
	ck_assert(strstr(text, "usage: stagedrain dead purge --older-than SPAN [--dry-run]\n"));
	ck_assert(strstr(text, "usage: stagedrain status [--json] [--max-age SPAN] [--warn-xact-age DURATION]\n"));
	ck_assert(strstr(text, "\n  --warn-xact-age DURATION\n      the relay's own setting, reused"));
	free(text);
	text = NULL;
	out = open_memstream(&text, &len);
	config_man(out, "January 2, 2026", "9.9.9");
	fclose(out);
	for (const struct command_doc *c = operator_commands; c->name; c++) {
		char item[64];

		snprintf(item, sizeof(item), ".It Cm %s\n", c->name);
		const char *at = strstr(strstr(text, ".Ss Operator commands"), item), *next;

		ck_assert_msg(at, "man page lacks %s", c->name);
		next = strstr(at + 1, ".It Cm ");
		/* each option within its command's entry, not only among the relay's settings */
		for (const struct cmd_opt *o = c->opts; o->flag; o++) {
			const char *opt;

			snprintf(item, sizeof(item), ".It Fl -%s", o->flag);
			opt = strstr(at, item);
			ck_assert_msg(opt && (!next || opt < next), "man page lacks %s --%s", c->name, o->flag);
		}
	}
	free(text);
}
END_TEST

Suite *cmd_args_suite(void)
{
	Suite *s = suite_create("cmd_args");
	TCase *tc = tcase_create("cmd_args");

	tcase_add_test(tc, split_in_any_order);
	tcase_add_loop_test(tc, bad_arguments, 0, (int)(sizeof(bad) / sizeof(bad[0])));
	tcase_add_test(tc, help_flag_reaches_the_settings);
	tcase_add_test(tc, spans);
	tcase_add_test(tc, repeatable_options_and_listed_settings);
	tcase_add_test(tc, help_and_man_list_the_commands);
	suite_add_tcase(s, tc);
	return s;
}
