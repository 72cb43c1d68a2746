/* The operator commands' table: what `stagedrain help`, the manual page and their parsers share. */
#include "fmacros.h"

#include <string.h>

#include "commands.h"

/* The filters that pick dead rows, shared by list, replay and purge. */
#define DEAD_FILTERS                                                                                                   \
	{ "queue", "QUEUE", "only rows of this queue", false },                                                        \
		{ "class", "CLASS", "only rows of this job class", false },                                            \
		{ "reason", "TEXT", "only rows whose reason contains this text (any case)", false },                   \
	{                                                                                                              \
		"since", "SPAN", "only rows dead-lettered within this span (e.g. 90s, 15min, 2h or 7d)", false         \
	}

static const struct cmd_opt status_opts[] = {
	{ "json", NULL, "print one JSON object instead of the table", false },
	{ "max-age", "SPAN", "a job waiting longer than this, staged or held, needs a person (default 5min)", false },
	{ "warn-xact-age", "DURATION",
	  "the relay's own setting, reused: a transaction, standby query, replication slot or prepared transaction "
	  "holding the xmin horizon longer than this needs a person (default 5min; 0 never)",
	  true },
	{ NULL, NULL, NULL, false },
};

static const struct cmd_opt dead_list_opts[] = {
	DEAD_FILTERS,
	{ "limit", "N", "print at most N rows, oldest first (default 100)", false },
	{ "json", NULL, "print one JSON object a line instead of the table", false },
	{ NULL, NULL, NULL, false },
};

static const struct cmd_opt dead_show_opts[] = {
	{ "json", NULL, "print the row as one JSON object", false },
	{ NULL, NULL, NULL, false },
};

static const struct cmd_opt dead_replay_opts[] = {
	DEAD_FILTERS,
	{ "dry-run", NULL, "print what would move, and move nothing", false },
	{ "force", NULL, "move rows the relay's own checks would dead-letter again", false },
	{ "set-option", "KEY=JSON", "set this key of each row's options on the way, after the removals (repeatable)",
	  false },
	{ "unset-option", "KEY", "remove this key from each row's options on the way (repeatable)", false },
	{ "set-route", "NAME", "set each row's route on the way: a route of the settings (--route ...), or default",
	  false },
	{ "unset-route", NULL, "clear each row's route on the way: the route rules pick its target by queue", false },
	{ NULL, NULL, NULL, false },
};

static const struct cmd_opt dead_purge_opts[] = {
	{ "older-than", "SPAN", "delete the rows dead-lettered longer ago than this (required)", false },
	{ "dry-run", NULL, "print how many rows would go, and delete nothing", false },
	{ NULL, NULL, NULL, false },
};

static const struct cmd_opt held_list_opts[] = {
	{ "target", "NAME", "only rows held for this target (default: every target)", false },
	{ NULL, NULL, NULL, false },
};

static const struct cmd_opt held_move_opts[] = {
	{ "target", "NAME", "the target no route has now whose rows move (required)", false },
	{ "dry-run", NULL, "print how many rows would move, and move nothing", false },
	{ NULL, NULL, NULL, false },
};

static const struct cmd_opt move_opts[] = {
	{ "from-prefix", "PREFIX",
	  "the key prefix the stranded jobs' keys start with, as --namespace or --laravel-prefix made it (e.g. "
	  "laravel_database_, or shop: for namespace shop; default: the relay's)",
	  false },
	{ "from-db", "N", "the Redis database they are in (default: the one --redis-url names)", false },
	{ "queue", "NAME",
	  "only this queue; celery's must each be named, its lists cannot be found by name (repeatable)", false },
	{ NULL, NULL, NULL, false },
};

const struct command_doc operator_commands[] = {
	{ "status", "[--json] [--max-age SPAN] [--warn-xact-age DURATION]",
	  "say whether the relay works and how far behind it is", status_opts },
	{ "dead list", "[filters] [--limit N] [--json]", "list dead-lettered jobs, oldest first", dead_list_opts },
	{ "dead show", "DEAD_ID [--json]", "print one dead-lettered job whole", dead_show_opts },
	{ "dead replay",
	  "(DEAD_ID... | filters) [--dry-run] [--force] [--set-option KEY=JSON] [--unset-option KEY]"
	  " [--set-route NAME | --unset-route]",
	  "move dead-lettered jobs back into staged_jobs, in their original order, in one transaction",
	  dead_replay_opts },
	{ "dead purge", "--older-than SPAN [--dry-run]", "delete old dead-lettered jobs", dead_purge_opts },
	{ "held list", "[--target NAME]", "list the jobs waiting in staged_jobs_held, by target and queue",
	  held_list_opts },
	{ "held release", "--target NAME [--dry-run]",
	  "stage again, in the order they were held, the jobs held for a target no route has now: the relay sends"
	  " them where its rules say",
	  held_move_opts },
	{ "held dead", "--target NAME [--dry-run]",
	  "move the jobs held for a target no route has now to staged_jobs_dead", held_move_opts },
	{ "move", "(--from-prefix PREFIX | --from-db N) [--queue NAME]...",
	  "move jobs pushed under a key prefix or database no worker reads to where the settings push now, each"
	  " queue in one script, ahead of jobs pushed there since",
	  move_opts },
	{ NULL, NULL, NULL, NULL },
};

const struct command_doc *commands_find(const char *name)
{
	for (const struct command_doc *c = operator_commands; c->name; c++)
		if (strcmp(c->name, name) == 0)
			return c;
	return NULL;
}
