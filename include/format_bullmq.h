/* BullMQ's layout (relay/format_bullmq.c) and the push script's procedure
 * that adds its jobs as BullMQ's own Queue.add does (format_bullmq_script.c). */
#ifndef STAGEDRAIN_FORMAT_BULLMQ_H
#define STAGEDRAIN_FORMAT_BULLMQ_H

#include <stdbool.h>
#include <stddef.h>

/* The Lua that defines procedure "bullmq.add" (push_script.h). */
extern const char format_bullmq_script[];

/* Whether BullMQ takes id (n bytes) for an integer: its custom ids must not
 * be, since its own counter's are (`${parseInt(id, 10)}` === id in JS). */
bool bullmq_integer_id(const char *id, size_t n);

#endif
