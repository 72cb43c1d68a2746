/* --help and the manual page: one walk over the settings table, two writers of what it yields. */
#include "fmacros.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "settings.h"
#include "usage.h"
#include "values.h"

/* What --help and the man page both say about a setting, besides its flag and help. */
struct doc {
	char meta[64];  /* after the flag: its choices joined by the separator, or its metavar */
	char words[64]; /* V_BOOL: the words its variable takes, joined by the separator; else "" */
	bool ranged;    /* a number: lo and hi are its bounds */
	char lo[32], hi[32];
	const char *def; /* its default as shown */
};

static void describe(const struct setting *s, const char *sep, struct doc *d)
{
	if (s->choices && s->type == V_CHOICE)
		value_join_choices(s->choices, sep, d->meta, sizeof(d->meta));
	else
		snprintf(d->meta, sizeof(d->meta), "%s", s->metavar ? s->metavar : "");
	d->words[0] = '\0';
	if (s->type == V_BOOL)
		value_join_choices(s->choices, sep, d->words, sizeof(d->words));
	d->ranged = s->num != NULL;
	if (d->ranged) {
		value_format_amount(s->num, s->min, d->lo, sizeof(d->lo));
		value_format_amount(s->num, s->max, d->hi, sizeof(d->hi));
	}
	d->def = s->def_doc ? s->def_doc : s->def;
}

typedef void emit_fn(FILE *out, const struct setting *s, const struct doc *d);

/* The one walk over the table: --help and the man page differ only in emit and sep. */
static void each_setting(FILE *out, const char *sep, emit_fn *emit)
{
	struct doc d;

	for (size_t i = 0; i < settings_count; i++) {
		describe(&settings[i], sep, &d);
		emit(out, &settings[i], &d);
	}
}

/* ---- --help ---- */

/* Prints text word-wrapped to 78 columns, every line indented. */
static void wrap(FILE *out, const char *text, int indent)
{
	const int width = 78 - indent;

	while (*text) {
		int cut = (int)strlen(text);

		if (cut > width) {
			for (cut = width; cut > 0 && text[cut] != ' '; cut--)
				;
			if (cut == 0)
				cut = (int)strcspn(text, " ");
		}
		fprintf(out, "%*s%.*s\n", indent, "", cut, text);
		for (text += cut; *text == ' '; text++)
			;
	}
}

static void usage_setting(FILE *out, const struct setting *s, const struct doc *d)
{
	char text[512];

	if (s->short_name)
		fprintf(out, "  -%c, --%s\n", s->short_name, s->flag);
	else
		fprintf(out, "  --%s%s%s\n", s->flag, *d->meta ? " " : "", d->meta);
	if (d->ranged) {
		snprintf(text, sizeof(text), "%s (%s to %s)", s->help, d->lo, d->hi);
		wrap(out, text, 6);
	} else {
		wrap(out, s->help, 6);
	}
	if (!s->env)
		return;
	snprintf(text, sizeof(text), "env %s%s%s%s%s%s; default %s", s->env, s->env_fallback ? ", then " : "",
		 s->env_fallback ? s->env_fallback : "", *d->words ? " (" : "", d->words, *d->words ? ")" : "", d->def);
	wrap(out, text, 6);
}

void config_usage(FILE *out)
{
	char names[64];

	value_join_choices(settings_commands, "|", names, sizeof(names));
	fprintf(out, "usage: stagedrain [%s] [options]\n\ncommands:\n", names);
	for (const struct choice *c = settings_commands; c->name; c++)
		fprintf(out, "  %-9s %s\n", c->name, c->help);
	fputs("\noptions (a flag overrides its variable, which overrides the default; give each\n"
	      "once, but --route may repeat):\n",
	      out);
	each_setting(out, "|", usage_setting);
	fputs("\nstatus and dead take these options too (the URLs above, --namespace ...);\n"
	      "`stagedrain help status` and `stagedrain help dead` list their own.\n",
	      out);
}

void command_usage(FILE *out, const struct command_doc *c)
{
	fprintf(out, "usage: stagedrain %s %s\n", c->name, c->synopsis);
	wrap(out, c->summary, 2);
	for (const struct cmd_opt *o = c->opts; o->flag; o++) {
		fprintf(out, "  --%s%s%s\n", o->flag, o->metavar ? " " : "", o->metavar ? o->metavar : "");
		wrap(out, o->help, 6);
	}
}

int commands_usage(FILE *out, const char *prefix)
{
	size_t n = strlen(prefix);
	int found = 0;

	for (const struct command_doc *c = operator_commands; c->name; c++) {
		if (strncmp(c->name, prefix, n) != 0 || (c->name[n] != '\0' && c->name[n] != ' '))
			continue;
		fputs(found++ ? "\n" : "", out);
		command_usage(out, c);
	}
	return found;
}

/* ---- the manual page ---- */

/* Writes s as mdoc text: a backslash is \e, no line starts with a control
 * character, and each sentence starts a new line, as mdoc asks ("e.g." ends
 * none: \& after it keeps the single space). */
static void man_text(FILE *out, const char *s)
{
	bool line_start = true;
	int col = 0;

	for (const char *p = s; *p; p++, col++) {
		bool abbrev = p - s >= 4 && strncmp(p - 4, "e.g.", 4) == 0;

		if (line_start && (*p == '.' || *p == '\''))
			fputs("\\&", out);
		line_start = false;
		if (*p == '\\') {
			fputs("\\e", out);
		} else if (*p == ' ' && ((p > s && p[-1] == '.' && !abbrev) || (col > 64 && !abbrev))) {
			/* A new sentence, or a long line: roff joins them again. */
			fputc('\n', out);
			line_start = true;
			col = -1;
		} else {
			fputs(*p == ' ' && abbrev ? "\\& " : (char[]){ *p, '\0' }, out);
		}
	}
	fputc('\n', out);
}

static void man_setting(FILE *out, const struct setting *s, const struct doc *d)
{
	char text[1024];

	if (s->short_name)
		fprintf(out, ".It Fl %c , Fl -%s\n", s->short_name, s->flag);
	else
		fprintf(out, ".It Fl -%s%s%s\n", s->flag, *d->meta ? " Ar " : "", d->meta);
	/* Capitalized like a sentence, unless it starts with a name such as pg_advisory_lock. */
	snprintf(text, sizeof(text), "%c%s.",
		 s->help[strcspn(s->help, " _")] == '_' ? s->help[0] : toupper((unsigned char)s->help[0]), s->help + 1);
	man_text(out, text);
	if (d->ranged)
		fprintf(out, "From %s to %s.\n", d->lo, d->hi);
	if (!s->env)
		return;
	fprintf(out, "Environment:\n.Ev %s", s->env);
	if (s->env_fallback)
		fprintf(out, " ,\nthen\n.Ev %s", s->env_fallback);
	fprintf(out, " .\nDefault:\n");
	snprintf(text, sizeof(text), "%s.", d->def);
	man_text(out, text);
}

/* The operator commands with their options; they also read the settings below. */
static void man_commands(FILE *out)
{
	char text[512];

	fputs(".Ss Operator commands\nThey read the same settings as the relay (the URLs,\n.Fl -namespace ,\n"
	      ".Fl -format )\nand need no relay to be running.\nExit status: 0 when all is well, 1 when something "
	      "needs a person or failed, 2 for a usage error.\n.Bl -tag -width Ds\n",
	      out);
	for (const struct command_doc *c = operator_commands; c->name; c++) {
		fprintf(out, ".It Cm %s\n", c->name);
		man_text(out, c->synopsis);
		fputs(".Pp\n", out);
		snprintf(text, sizeof(text), "%c%s.", toupper((unsigned char)c->summary[0]), c->summary + 1);
		man_text(out, text);
		fputs(".Bl -tag -width Ds -compact\n", out);
		for (const struct cmd_opt *o = c->opts; o->flag; o++) {
			fprintf(out, ".It Fl -%s%s%s\n", o->flag, o->metavar ? " Ar " : "",
				o->metavar ? o->metavar : "");
			snprintf(text, sizeof(text), "%c%s.", toupper((unsigned char)o->help[0]), o->help + 1);
			man_text(out, text);
		}
		fputs(".El\n", out);
	}
	fputs(".El\n", out);
}

/* What an operator must know besides the flags: where bad rows go, and who may do what. */
static void man_notes(FILE *out)
{
	fputs(".Ss Dead letters\n"
	      "A row that can never be a job (its args or options do not fit the format, it is too large, or\n"
	      "Redis refused it twice, alone) is moved to\n.Sy staged_jobs_dead\n"
	      "with its\n.Sy reason\nand\n.Sy failed_at ,\n"
	      "in the transaction that deletes it from\n.Sy staged_jobs ,\n"
	      "so the drain goes on; the warning names its dead_id, queue and class.\n"
	      ".Cm dead list\nand\n.Cm dead show\nread them,\n"
	      ".Cm dead replay\nmoves them back (after a fix) keeping jid, uuid, tenant and created_at, and\n"
	      ".Cm dead purge\ndeletes old ones.\n"
	      ".Ss Roles\n"
	      ".Pa sql/roles.sql\n"
	      "creates three NOLOGIN group roles and grants each only what it needs:\n"
	      ".Bl -tag -width stagedrain_admin\n"
	      ".It stagedrain_relay\n"
	      "SELECT and DELETE on staged_jobs; INSERT on staged_jobs_dead; SELECT, INSERT and DELETE on\n"
	      "staged_jobs_held; SELECT on both id sequences.\n"
	      ".It stagedrain_app\n"
	      "INSERT on staged_jobs' columns other than id, USAGE on its sequence, and SELECT on id, uuid,\n"
	      "jid and queue.\n"
	      ".It stagedrain_admin\n"
	      "What the dead commands need: SELECT and DELETE on staged_jobs_dead, INSERT on staged_jobs.\n"
	      ".El\n"
	      "Run it as a superuser (or a role with CREATEROLE that owns the tables) after\n"
	      ".Cm migrate ;\nrunning it again restores exactly these grants.\n",
	      out);
}

void config_man(FILE *out, const char *date, const char *version)
{
	fprintf(out,
		".\\\" Generated from the settings table in relay/settings.c; do not edit.\n"
		".Dd %s\n.Dt STAGEDRAIN 1\n.Os stagedrain %s\n",
		date, version);
	fputs(".Sh NAME\n.Nm stagedrain\n"
	      ".Nd relay jobs staged in PostgreSQL to Sidekiq, Resque, ActiveJob, Celery or Laravel queues in Redis\n"
	      ".Sh SYNOPSIS\n.Nm\n.Op Cm run | migrate\n.Op Ar options\n.Nm\n.Cm status | dead | help\n.Op Ar arguments\n"
	      ".Sh DESCRIPTION\n"
	      "Applications insert jobs into the\n.Sy staged_jobs\n"
	      "table inside their own transactions.\n"
	      ".Nm\nmoves the committed ones to Redis, in batches, as the job library's own\n"
	      "client would write them\n.Pq Fl -format ,\n"
	      "and deletes each batch only after Redis acknowledged it.\n"
	      "Several relays may run: they elect one leader with\n.Fn pg_advisory_lock ;\n"
	      "the others wait as standbys.\n"
	      ".Ss Commands\n.Bl -tag -width migrate\n",
	      out);
	for (const struct choice *c = settings_commands; c->name; c++)
		fprintf(out, ".It Cm %s\n%c%s.\n", c->name, toupper((unsigned char)c->help[0]), c->help + 1);
	fputs(".El\n", out);
	man_commands(out);
	man_notes(out);
	fputs(".Ss HTTP endpoint\nWith\n.Fl -http-addr ,\n"
	      ".Nm\nserves\n.Pa /metrics\nin the Prometheus text format,\n"
	      ".Pa /healthz\n(200 while the process runs) and\n.Pa /readyz\n"
	      "(200 while it reaches both servers, 503 otherwise; the body says whether it\n"
	      "is the leader or a standby).\n"
	      ".Sh OPTIONS\nA flag overrides its environment variable, which overrides the default.\n"
	      "Each flag is given once (a second is an error), but\n.Fl -route\nmay repeat.\n"
	      ".Bl -tag -width Ds\n",
	      out);
	each_setting(out, " | ", man_setting);
	fputs(".El\n.Sh ENVIRONMENT\nEach option above names its variable.\nAlso read:\n"
	      ".Bl -tag -width Ds\n"
	      ".It Ev DATABASE_URL\nUsed for\n.Fl -pg-url\nwhen\n.Ev STAGEDRAIN_PG_URL\nis not set.\n"
	      ".It Ev REDIS_URL\nUsed for\n.Fl -redis-url\nwhen\n.Ev STAGEDRAIN_REDIS_URL\nis not set.\n"
	      ".It Ev PGHOST , Ev PGDATABASE , Ev PGUSER , No ...\n"
	      "Read by libpq when\n.Fl -pg-url\nleaves them out.\n"
	      ".El\n"
	      ".Sh FILES\n.Bl -tag -width Ds\n"
	      ".It Pa share/stagedrain/sql/roles.sql\nThe group roles and their grants, under the install prefix.\n"
	      ".It Pa share/stagedrain/examples/\nA systemd unit and its environment file.\n.El\n"
	      ".Sh EXIT STATUS\n.Bl -tag -width Ds\n"
	      ".It 0\nAfter\n.Fl -once\nleft nothing it could relay, or after SIGTERM or SIGINT.\n"
	      ".It 1\nA setting no retry can fix (authentication, a database or role that does not exist, TLS\n"
	      "verification, a missing or old schema, an address\n.Fl -http-addr\ncannot listen on), or with\n"
	      ".Fl -once\na server that could not be used for 10 seconds (a hot standby too).\n"
	      "A server that is not there yet is waited for.\n"
	      ".It 2\nA bad flag or value.\n"
	      ".It 3\nWith\n.Fl -once :\njobs are left (held by a cap or for a target that is down,\n"
	      "paused by the memory bound, kept by a key of the wrong type, or another\n"
	      "session held the leader lock for 5 seconds); one line names them, per cause.\n.El\n"
	      ".Sh EXAMPLES\nCreate the tables as their owner, then relay to a local Redis and serve metrics:\n"
	      ".Bd -literal -offset indent\n"
	      "stagedrain migrate --pg-url postgresql://postgres@db/app\n"
	      "stagedrain --pg-url postgresql://relay@db/app --pg-password-file relay.pw \\e\n"
	      "    --redis-url redis://redis:6379/0 --http-addr 127.0.0.1:9187\n"
	      ".Ed\n"
	      "Is it working, and what was dead-lettered in the last day?\n"
	      ".Bd -literal -offset indent\n"
	      "stagedrain status\n"
	      "stagedrain dead list --since 1d\n"
	      ".Ed\n"
	      ".Sh SEE ALSO\n.Xr psql 1 ,\n.Xr redis-cli 1\n"
	      ".Pp\nThe project's docs/ pages: operating.md, dead-letters.md, status.md, security.md,\n"
	      "xmin-horizon.md and troubleshooting.md.\n",
	      out);
}
