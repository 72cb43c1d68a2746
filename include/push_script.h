/* The script a target's batch is pushed with: the epoch check, the type check
 * of every key it writes, then its commands, and the procedures a format adds. */
#ifndef STAGEDRAIN_PUSH_SCRIPT_H
#define STAGEDRAIN_PUSH_SCRIPT_H

#include <stddef.h>

#include <hiredis/hiredis.h>

#include "buf.h"
#include "fmacros.h"
#include "redis_cmds.h"

/*
 * Writes the push script into out: KEYS the epoch's two keys, ARGV[1] the
 * epoch's value, then each command as name, argument count, arguments.
 *
 * procs (a format's script, or NULL) runs first and may add procedures:
 * procs[NAME] = { check = f(i, n), run = f(i, n) }, given the index of the
 * command's first argument in ARGV and their count. A command named NAME
 * then runs as run, after every command's check passed. check names a key
 * of the wrong type with check_type(key, want), which returns the key's type
 * (read once a script), or one whose value the
 * procedure cannot use with refuse(key, what): the script then writes
 * nothing and answers WRONGTYPE with those keys. 0 or -ENOMEM.
 */
int push_script_build(struct buf *out, const char *procs) SD_MUSTCHECK;

/* An EVAL of the push script as argument vectors: a head (EVAL, the
 * script, its keys, the epoch), then each command as name, argument count,
 * arguments. The vectors point into the commands' memory: valid until
 * those change. */
struct push_argv {
	const char **argv;
	size_t *len;
	size_t n, cap;
};

void push_argv_free(struct push_argv *a);
/* The EVAL: head's arguments as they are (EVAL, the script, its keys, the
 * epoch), then each of body's commands as name, count (written into body's
 * scratch), arguments. 0 or -ENOMEM. */
int push_argv_build(struct push_argv *a, const struct redis_cmds *head, struct redis_cmds *body) SD_MUSTCHECK;
/* A new epoch token (keys.h), which the script compares with the epoch's:
 * KEYS_EPOCH_TOKEN_LEN random lower-case hex digits and a NUL into out.
 * 0, or -errno when no random bytes could be drawn. */
int push_script_token(char *out) SD_MUSTCHECK;
/* One of the relay's own keys (KEYS_EPOCH, KEYS_EPOCH_TOKEN, KEYS_FENCE) as
 * c's next argument: under prefix and the lock key, with the route's name
 * for a route's target (keys.h), behind "{tag}:" on a cluster so that it
 * lands in tag's hash slot (tag NULL: none). 0 or -ENOMEM. */
int push_own_key(struct redis_cmds *c, const char *tag, const char *prefix, long long lock_key, const char *route,
		 const char *name) SD_MUSTCHECK;
/* Appends a's command to out in RESP, as a client sends it. 0 or -ENOMEM. */
int push_argv_resp(const struct push_argv *a, struct buf *out) SD_MUSTCHECK;

/* redis_sink_push found keys of the wrong type and wrote nothing. */
#define REDIS_SINK_WRONGTYPE 1
/* Redis refused the push for what it holds, it seems: an error reply that is
 * not about Redis's state (OOM, READONLY, LOADING ...), or a connection
 * dropped before the reply (not a timeout). errstr says which; the connection
 * is closed and the push's outcome is as after -EIO. */
#define REDIS_SINK_REFUSED 2

/* An error answer to the push script: -ESTALE (a newer epoch was taken),
 * -EIO (one of Redis's state, whatever the batch holds: OOM, READONLY,
 * LOADING ...), or REDIS_SINK_REFUSED (the batch itself may have caused it:
 * worth narrowing). */
int push_script_error(const char *err);
/* Keeps the bad keys of a WRONGTYPE answer (key, type, key, type ...) in
 * bad as "key\0type\0" each, their number in *nbad: 0, -ENOMEM, or -EINVAL
 * when it names none. */
int push_script_wrongtype(const redisReply *r, struct buf *bad, size_t *nbad) SD_MUSTCHECK;

#endif
