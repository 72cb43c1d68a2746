/* Least privilege, checked rather than assumed: who besides the staging
 * tables' owner and the relay may change staged rows, and whether an app
 * connects as the owner. Read by the relay at start and by `status`. */
#ifndef STAGEDRAIN_PG_PRIVILEGES_H
#define STAGEDRAIN_PG_PRIVILEGES_H

#include <stddef.h>

#include <libpq-fe.h>

#include "fmacros.h"

#define PG_PRIVILEGES_MAX 8
#define PG_PRIVILEGE_LEN 400

/* Each finding one sentence, saying what to do about it. */
struct pg_privileges {
	size_t n;
	char text[PG_PRIVILEGES_MAX][PG_PRIVILEGE_LEN];
};

/*
 * Fills p from one statement on conn: every LOGIN role, not a superuser,
 * other than the tables' owner and the session's own role, that may UPDATE,
 * TRUNCATE or DELETE staged_jobs or staged_jobs_held (DELETE is the relay's,
 * and on the held table also stagedrain_admin's); and the owner's sessions in
 * this database, other than relays' and psql's, when the owner is not a
 * superuser (a superuser-owned table is a development set-up, and a superuser
 * may do anything anyway). 0, or -EIO with the server's message in err.
 */
int pg_privileges_read(PGconn *conn, struct pg_privileges *p, char *err, size_t errlen) SD_MUSTCHECK;

#endif
