/* A libpq session as the relay opens one, and libpq's errors as one log line. */
#include "fmacros.h"

#include <stdio.h>
#include <string.h>

#include "pg_conn.h"

PGconn *pg_conn_open(const struct config *cfg, const char *name, bool name_wins)
{
	/* Ours come before dbname, so the same settings in the URL win. Client-side
	 * keepalives notice a vanished server as the server notices us (the
	 * server's side is the session's business: pg_source's set_session). */
	const char *keys[] = { "connect_timeout",
			       "fallback_application_name",
			       "keepalives",
			       "keepalives_idle",
			       "keepalives_interval",
			       "keepalives_count",
			       "tcp_user_timeout",
			       "dbname",
			       NULL,
			       NULL,
			       NULL };
	const char *vals[] = { "10", name, "1", "5", "2", "3", "10000", cfg->pg_url, NULL, NULL, NULL };
	int n = 8;

	/* After dbname: the password file's password beats one in the URL, and
	 * a name that must win names the session whatever the URL says. */
	if (cfg->pg_password) {
		keys[n] = "password";
		vals[n++] = cfg->pg_password;
	}
	if (name_wins) {
		keys[n] = "application_name";
		vals[n++] = name;
	}
	return PQconnectdbParams(keys, vals, 1);
}

/* Pieces of the messages of libpq and of the server (lc_messages C) for a
 * connection that no retry can make work. */
static const char *const fatal_words[] = {
	"authentication failed", /* password, scram, md5, peer, ident, gss, cert */
	"no pg_hba.conf entry",  /* the server's access rules refuse us */
	"does not exist",        /* database or role */
	"is not permitted to log in",
	"permission denied for database",
	"no password supplied",
	"server does not support SSL",
	"certificate", /* verify failed, wrong name, missing root file */
	"sslmode value",
	"invalid connection option",
	"invalid port",
	"invalid integer value",
	"invalid URI",
	"invalid sslmode",
};

bool pg_conn_fatal(const char *msg)
{
	for (size_t i = 0; i < sizeof(fatal_words) / sizeof(fatal_words[0]); i++)
		if (strstr(msg, fatal_words[i]))
			return true;
	return false;
}

void pg_conn_one_line(char *str)
{
	char *out = str;
	bool space = false;

	for (const char *s = str; *s; s++) {
		bool ws = *s == '\n' || *s == '\t' || *s == ' ';
		if (!ws || !space)
			*out++ = ws ? ' ' : *s;
		space = ws;
	}
	while (out > str && out[-1] == ' ')
		out--;
	*out = '\0';
}

void pg_conn_error(char *out, size_t outlen, const PGconn *conn, const PGresult *res, const char *what)
{
	const char *msg = res ? PQresultErrorMessage(res) : "";

	if (!*msg)
		msg = conn ? PQerrorMessage(conn) : "out of memory";
	snprintf(out, outlen, "%s: %s", what, *msg ? msg : "no message");
	pg_conn_one_line(out);
}
