/* `stagedrain dead list|show|replay|purge`: the filters, purge, and the sub-commands. */
#include "fmacros.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_dead.h"
#include "dead_list.h"
#include "dead_replay.h"
#include "values.h"

/* The filters as parameters: 0, or CMD_EXIT_USAGE after saying why. */
static int read_filters(struct dead_cmd *d)
{
	static const char *const flags[] = { "queue", "class", "reason" };
	const char *since = cmd_args_last(&d->a, "since");
	char err[256];
	long long ms;

	for (int i = 0; i < 3; i++)
		d->filter[i] = cmd_args_last(&d->a, flags[i]);
	if (!since)
		return 0;
	if (cmd_args_span("since", since, &ms, err, sizeof(err)) < 0)
		return dead_say(CMD_EXIT_USAGE, "%s", err);
	snprintf(d->since_ms, sizeof(d->since_ms), "%lld", ms);
	d->filter[3] = d->since_ms;
	return 0;
}

/* `dead purge --older-than SPAN [--dry-run]`: deleting nothing is no failure (a
 * daily purge mostly finds nothing to do). */
static int run_purge(struct dead_cmd *d)
{
	const char *span = cmd_args_last(&d->a, "older-than");
	bool dry = cmd_args_has(&d->a, "dry-run");
	const char *params[1];
	char err[256], ms_text[24];
	long long ms;
	PGresult *res;

	if (d->a.nwords > 0)
		return dead_say(CMD_EXIT_USAGE, "dead purge takes no DEAD_ID: it deletes by age (--older-than SPAN)");
	if (!span)
		return dead_say(CMD_EXIT_USAGE, "dead purge needs --older-than SPAN (e.g. 30d)");
	if (cmd_args_span("older-than", span, &ms, err, sizeof(err)) < 0)
		return dead_say(CMD_EXIT_USAGE, "%s", err);
	snprintf(ms_text, sizeof(ms_text), "%lld", ms);
	params[0] = ms_text;
	res = dead_exec(d,
			dry ? "SELECT count(*) FROM staged_jobs_dead"
			      " WHERE failed_at < now() - $1::int8 * interval '1 millisecond'"
			    : "WITH gone AS (DELETE FROM staged_jobs_dead"
			      " WHERE failed_at < now() - $1::int8 * interval '1 millisecond' RETURNING 1)"
			      " SELECT count(*) FROM gone",
			1, params, PGRES_TUPLES_OK,
			dry ? "could not count old dead-lettered jobs" : "could not purge dead-lettered jobs");
	if (!res)
		return CMD_EXIT_ATTENTION;
	printf("%s %s dead-lettered jobs older than %s\n", dry ? "would purge" : "purged", PQgetvalue(res, 0, 0), span);
	PQclear(res);
	return CMD_EXIT_OK;
}

static const struct dead_sub subs[] = {
	{ "list", "dead list", dead_list },
	{ "show", "dead show", dead_show },
	{ "replay", "dead replay", dead_replay },
	{ "purge", "dead purge", run_purge },
};

int cmd_dead_main(int argc, char **argv)
{
	return dead_cmd_dispatch("dead", "list, show, replay or purge", subs, sizeof(subs) / sizeof(subs[0]),
				 read_filters, argc, argv);
}
