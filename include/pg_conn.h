/* A libpq session as the relay opens one, and libpq's errors as one log line. */
#ifndef STAGEDRAIN_PG_CONN_H
#define STAGEDRAIN_PG_CONN_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "fmacros.h"

/*
 * Opens a session to --pg-url (and --pg-password-file's password) with the
 * relay's connect timeout and keepalives. name is the application_name: a
 * default the URL may override, or, with name_wins, the name whatever the URL
 * says. NULL only when out of memory; otherwise check PQstatus.
 */
PGconn *pg_conn_open(const struct config *cfg, const char *name, bool name_wins);
/* Writes "what: message" to out: the result's error, else the connection's,
 * on one line. */
void pg_conn_error(char *out, size_t outlen, const PGconn *conn, const PGresult *res, const char *what);
/*
 * Whether a failed connection's message (libpq's, or the server's FATAL it
 * carries) says the settings can never work as given: authentication refused,
 * no pg_hba.conf entry, a database or role that does not exist, a role that
 * may not log in or connect, TLS that cannot be set up or verified, a bad
 * option. Anything else (refused, timed out, a name not resolved, a server
 * starting up or shutting down, too many clients) may pass and is waited for.
 */
bool pg_conn_fatal(const char *msg);
/* Turns libpq's newlines and tabs into single spaces, trailing ones dropped. */
void pg_conn_one_line(char *str);

#endif
