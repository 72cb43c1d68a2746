/* The script a target's batch is pushed with: the epoch check, the type check
 * of every key it writes, then its commands, and the procedures a format adds. */
#ifndef STAGEDRAIN_PUSH_SCRIPT_H
#define STAGEDRAIN_PUSH_SCRIPT_H

#include "buf.h"
#include "fmacros.h"

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

#endif
