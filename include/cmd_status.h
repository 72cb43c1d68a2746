/* `stagedrain status`: is the relay working, and how far behind is it (docs/status.md). */
#ifndef STAGEDRAIN_CMD_STATUS_H
#define STAGEDRAIN_CMD_STATUS_H

#include "fmacros.h"

/* argv[1] is "status". Returns the exit status: CMD_EXIT_OK when healthy,
 * CMD_EXIT_ATTENTION when something needs a person, CMD_EXIT_USAGE. */
int cmd_status_main(int argc, char **argv);

#endif
