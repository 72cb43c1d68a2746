/* `stagedrain move`: jobs pushed under a key prefix or database no worker
 * reads, moved to where the relay's settings push now (docs/troubleshooting.md). */
#ifndef STAGEDRAIN_CMD_MOVE_H
#define STAGEDRAIN_CMD_MOVE_H

#include "fmacros.h"

/* `stagedrain move ...` (argv[1] is "move"): an exit status, CMD_EXIT_*. */
int cmd_move_main(int argc, char **argv);

#endif
