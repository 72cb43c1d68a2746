/* Reading a process's log file: how many lines say something, and waiting
 * until enough do. */
#ifndef STAGEDRAIN_SUPPORT_LOGS_H
#define STAGEDRAIN_SUPPORT_LOGS_H

#include "fmacros.h"

#include <stdbool.h>

#include "support/proc.h"

/* Lines of the file that contain text; -errno if it cannot be read. */
int logs_count(const char *path, const char *text);
/* Lines that contain both a and b (b NULL: a alone); -errno if it cannot be read. */
int logs_count_both(const char *path, const char *a, const char *b);
bool logs_contains(const char *path, const char *text);
/* True once at least n lines contain text; false after timeout_ms, once
 * `interrupted` is set, or once writer (if not NULL) has exited without them. */
bool logs_wait(const char *path, const char *text, int n, int timeout_ms, const struct proc *writer);

#endif
