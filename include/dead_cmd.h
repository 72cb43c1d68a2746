/* One run of an operator command over the dead-letter or held table
 * (`stagedrain dead ...`, `stagedrain held ...`): its arguments, its
 * session, the filters, and how it says what went wrong. */
#ifndef STAGEDRAIN_DEAD_CMD_H
#define STAGEDRAIN_DEAD_CMD_H

#include <libpq-fe.h>

#include "cmd_args.h"
#include "fmacros.h"

/* One dead command's run: its arguments and its session. */
struct dead_cmd {
	struct cmd_args a;
	const struct command_doc *doc;
	PGconn *conn;
	/* --queue, --class, --reason and --since (in milliseconds) as query
	 * parameters, in that order; NULL where not given. */
	const char *filter[4];
	char since_ms[24];
};

/* The filters as SQL over staged_jobs_dead's columns, parameters $q, $c, $r
 * and $s (the order of dead_cmd.filter); a NULL parameter passes every row. */
#define DEAD_WHERE(q, c, r, s)                                                                                         \
	"($" q "::text IS NULL OR queue = $" q ") AND ($" c "::text IS NULL OR job_class = $" c ")"                    \
	" AND ($" r "::text IS NULL OR strpos(lower(reason), lower($" r ")) > 0)"                                      \
	" AND ($" s "::int8 IS NULL OR failed_at >= now() - $" s "::int8 * interval '1 millisecond')"

/* One sub-command of an operator command group (dead, held). */
struct dead_sub {
	const char *word;
	const char *doc; /* its name in commands.c's table */
	int (*run)(struct dead_cmd *d);
};

/* `stagedrain GROUP WORD ...` (argv[1] is group): finds the sub-command,
 * parses its arguments, runs prepare (NULL: none) and it, and closes its
 * session; words lists the sub-commands for the messages. CMD_EXIT_*. */
int dead_cmd_dispatch(const char *group, const char *words, const struct dead_sub *subs, size_t n,
		      int (*prepare)(struct dead_cmd *d), int argc, char **argv);

/* Whether any filter was given. */
int dead_filtered(const struct dead_cmd *d);
/* Runs sql with n text parameters; on failure prints one line (what, the
 * server's message, and the role to use when it lacks a privilege) and
 * returns NULL. */
PGresult *dead_exec(struct dead_cmd *d, const char *sql, int n, const char *const *params, ExecStatusType want,
		    const char *what);
/* Prints "stagedrain: <message>" on stderr; returns status. */
int dead_say(int status, const char *fmt, ...) SD_PRINTF(2, 3);
#endif
