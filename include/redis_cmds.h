/* The Redis commands one batch writes, as the format lays them out; the sink
 * sends them inside its push script. */
#ifndef STAGEDRAIN_REDIS_CMDS_H
#define STAGEDRAIN_REDIS_CMDS_H

#include <stddef.h>

#include "buf.h"
#include "fmacros.h"
#include "queue_groups.h"

/* An argument: ptr, or (ptr NULL) an offset into scratch, which may move
 * while the batch's commands are built. */
struct cmd_arg {
	const char *ptr;
	size_t off;
	size_t len;
};

struct cmd {
	size_t first; /* index of its name in args */
	size_t argc;  /* the name and its arguments */
};

struct redis_cmds {
	struct buf scratch; /* key names and scores */
	struct cmd_arg *args;
	size_t nargs, argcap;
	struct cmd *cmds;
	size_t ncmds, cmdcap;
	struct queue_groups groups; /* the layouts' grouping of a batch by list */
};

/* The push script unpacks each command's arguments, and Lua unpacks at most
 * a few thousand values at once: a longer command continues in a copy of
 * its first head arguments (LPUSH a b then LPUSH a c keeps the order of
 * LPUSH a b c). */
#define CMDS_MAX_ARGS 1000

void cmds_init(struct redis_cmds *c);
void cmds_reset(struct redis_cmds *c);
void cmds_free(struct redis_cmds *c);
/* Starts a command named name (a literal or other memory that stays put). */
int cmds_begin(struct redis_cmds *c, const char *name) SD_MUSTCHECK;
/* An argument that lives elsewhere and stays put until the send: a payload, a queue name. */
int cmds_ref(struct redis_cmds *c, const char *p, size_t len) SD_MUSTCHECK;
/* An argument formatted into scratch: key names and scores. */
int cmds_fmt(struct redis_cmds *c, const char *fmt, ...) SD_PRINTF(2, 3) SD_MUSTCHECK;
/* The bytes written to c->scratch since off (by a writer of its own, such
 * as the fence's) become an argument. */
int cmds_tail(struct redis_cmds *c, size_t off) SD_MUSTCHECK;
/* Before adding a value to a command that may grow long (LPUSH key v v v):
 * continues it in a new command, repeating its first head arguments
 * (name and key: 2), once it reaches CMDS_MAX_ARGS. */
int cmds_room(struct redis_cmds *c, size_t head) SD_MUSTCHECK;
/* Argument a of command k, and its length. */
const char *cmds_arg(const struct redis_cmds *c, size_t k, size_t a, size_t *len);

#define CMDS_LIT(c, s) cmds_ref((c), (s), sizeof(s) - 1)

#endif
