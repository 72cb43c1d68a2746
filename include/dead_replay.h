/* `stagedrain dead replay`: dead-lettered rows staged again, each checked
 * as the relay would build it first (relay/dead_replay.c). */
#ifndef STAGEDRAIN_DEAD_REPLAY_H
#define STAGEDRAIN_DEAD_REPLAY_H

#include "dead_cmd.h"

int dead_replay(struct dead_cmd *d);

#endif
