/* The operator commands (status, dead ...): their names, synopses and options, in one table that
 * their parsers, `stagedrain help` and the manual page all read, so none can drift from another. */
#ifndef STAGEDRAIN_COMMANDS_H
#define STAGEDRAIN_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>

/* One option of a command; a table of them ends at a NULL flag. One whose
 * help ends in "(repeatable)" may be given more than once, each value
 * counting; any other given twice is a usage error (cmd_args.c): which of
 * the two was meant cannot be told. */
struct cmd_opt {
	const char *flag;    /* without the dashes */
	const char *metavar; /* NULL: a bare flag, which takes no value */
	const char *help;
	bool setting; /* the relay's own setting, listed for help: config_load reads it */
};

struct command_doc {
	const char *name;     /* "status", "dead list" */
	const char *synopsis; /* what follows the name: "[--json]" */
	const char *summary;  /* one sentence, lower case, no full stop */
	const struct cmd_opt *opts;
};

/* Every operator command, in the order help shows them; ends at a NULL name. */
extern const struct command_doc operator_commands[];

/* The command named name ("dead list"), or NULL. */
const struct command_doc *commands_find(const char *name);

#endif
