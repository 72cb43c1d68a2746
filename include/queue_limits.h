/* --queue-limit: per-queue caps on the Redis list length, parsed from
 * "default=5000,critical=0". Pure: parsing and lookup, no I/O. */
#ifndef STAGEDRAIN_QUEUE_LIMITS_H
#define STAGEDRAIN_QUEUE_LIMITS_H

#include <stddef.h>

#include "fmacros.h"

/* Largest cap accepted: far beyond any Redis list a worker pool drains. */
#define QUEUE_LIMIT_MAX 1000000000L

struct queue_limit {
	char *queue;
	size_t len;
	long cap; /* 0: uncapped, whatever --max-queue-length says */
};

struct queue_limits {
	struct queue_limit *v;
	size_t n;
};

/*
 * Parses "NAME=N[,NAME=N...]": a queue's name is everything before the last
 * '=' of its item (so it may hold '=' but not ','), spaces around items are
 * dropped, N is 0..QUEUE_LIMIT_MAX. An empty text is no limits. On error
 * returns -EINVAL with the cause in why, and ql is left empty; -ENOMEM.
 */
int queue_limits_parse(struct queue_limits *ql, const char *text, char *why, size_t whylen) SD_MUSTCHECK;
/* The cap of queue: its own limit if listed, else dflt (0: uncapped). */
long queue_limits_cap(const struct queue_limits *ql, const char *queue, size_t len, long dflt);
/* A deep copy of src into dst (empty before): 0, or -ENOMEM with dst left empty. */
int queue_limits_copy(struct queue_limits *dst, const struct queue_limits *src) SD_MUSTCHECK;
void queue_limits_free(struct queue_limits *ql);

#endif
