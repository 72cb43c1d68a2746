/* Gathers `stagedrain status`'s facts from Postgres and Redis, each bounded in time. */
#ifndef STAGEDRAIN_STATUS_READ_H
#define STAGEDRAIN_STATUS_READ_H

#include "config.h"
#include "fmacros.h"
#include "status.h"

/* How long one status statement may run (a count over a large backlog included). */
#define STATUS_STATEMENT_TIMEOUT_MS 5000

/*
 * Fills s (status_init'ed) from the servers cfg names: what could be read is
 * read, a server that could not be reached or a statement that failed leaves
 * its parts unread and its error in pg_err or redis_err (pg_ok, redis_ok
 * false). Every connect and statement is bounded: libpq's connect_timeout
 * (10 s), STATUS_STATEMENT_TIMEOUT_MS, --redis-timeout. 0, or -ENOMEM.
 */
int status_read(struct status *s, const struct config *cfg) SD_MUSTCHECK;

#endif
