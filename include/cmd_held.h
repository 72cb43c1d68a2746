/* `stagedrain held list|release|dead`: rows in staged_jobs_held that wait
 * for a target this relay no longer has (a route since removed or renamed),
 * which the relay never sends elsewhere unasked (docs/topologies.md). */
#ifndef STAGEDRAIN_CMD_HELD_H
#define STAGEDRAIN_CMD_HELD_H

#include "fmacros.h"

/* `stagedrain held ...` (argv[1] is "held"): an exit status, CMD_EXIT_*. */
int cmd_held_main(int argc, char **argv);

#endif
