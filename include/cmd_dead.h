/* `stagedrain dead list|show|replay|purge`: the dead-letter table, for a person
 * and for scripts, over the relay's own settings. */
#ifndef STAGEDRAIN_CMD_DEAD_H
#define STAGEDRAIN_CMD_DEAD_H

/* `stagedrain dead ...` (argv[1] is "dead"): an exit status, CMD_EXIT_*. */
int cmd_dead_main(int argc, char **argv);

#endif
