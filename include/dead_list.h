/* `stagedrain dead list` and `dead show`: the dead-letter table read, for a
 * person (aligned, control characters visible) or for scripts (JSON lines). */
#ifndef STAGEDRAIN_DEAD_LIST_H
#define STAGEDRAIN_DEAD_LIST_H

#include "dead_cmd.h"

int dead_list(struct dead_cmd *d);
int dead_show(struct dead_cmd *d);
/* Parses a DEAD_ID word: 0, or CMD_EXIT_USAGE after saying why. */
int dead_parse_id(const char *word, long long *id);

#endif
