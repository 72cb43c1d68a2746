/* One run of a dead or held command: its session, its errors, its dispatch (dead_cmd.h). */
#include "fmacros.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dead_cmd.h"
#include "pg_conn.h"
#include "usage.h"
#include "values.h"

/* A role without the grants gets the Postgres message and where the grants are. */
#define PRIVILEGE_HINT                                                                                                 \
	"the dead and held commands need the role stagedrain_admin (GRANT stagedrain_admin TO you; sql/roles.sql creates it)"
#define INSUFFICIENT_PRIVILEGE "42501"

int dead_say(int status, const char *fmt, ...)
{
	va_list ap;

	fputs("stagedrain: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return status;
}

/* The session, opened at the first statement: a usage error needs no server. */
static int connect_db(struct dead_cmd *d)
{
	char line[1024];

	d->conn = pg_conn_open(&d->a.cfg, "stagedrain dead", false);
	if (!d->conn)
		return dead_say(CMD_EXIT_ATTENTION, "out of memory connecting to postgres");
	if (PQstatus(d->conn) == CONNECTION_OK)
		return 0;
	pg_conn_error(line, sizeof(line), d->conn, NULL, "could not connect to postgres");
	return dead_say(CMD_EXIT_ATTENTION, "%s", line);
}

PGresult *dead_exec(struct dead_cmd *d, const char *sql, int n, const char *const *params, ExecStatusType want,
		    const char *what)
{
	const char *state;
	char line[1024];
	PGresult *res;

	if (!d->conn && connect_db(d) != 0)
		return NULL;
	res = PQexecParams(d->conn, sql, n, NULL, params, NULL, NULL, 0);

	if (PQresultStatus(res) == want)
		return res;
	pg_conn_error(line, sizeof(line), d->conn, res, what);
	state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	if (state && strcmp(state, INSUFFICIENT_PRIVILEGE) == 0)
		dead_say(CMD_EXIT_ATTENTION, "%s; %s", line, PRIVILEGE_HINT);
	else
		dead_say(CMD_EXIT_ATTENTION, "%s", line);
	PQclear(res);
	return NULL;
}

int dead_filtered(const struct dead_cmd *d)
{
	for (int i = 0; i < 4; i++)
		if (d->filter[i])
			return 1;
	return 0;
}

/* The sub-command's arguments, then prepare (the filters), then its run. */
static int run_sub(struct dead_cmd *d, const struct dead_sub *sub, int (*prepare)(struct dead_cmd *d), int argc,
		   char **argv)
{
	char err[CONFIG_ERR_SIZE];
	int rc;

	d->doc = commands_find(sub->doc);
	if (cmd_args_parse(&d->a, d->doc->opts, argc, argv, 3, err, sizeof(err)) < 0)
		return dead_say(CMD_EXIT_USAGE, "%s", err);
	if (d->a.cfg.help) {
		command_usage(stdout, d->doc);
		return CMD_EXIT_OK;
	}
	if (prepare && (rc = prepare(d)) != 0)
		return rc;
	return sub->run(d);
}

int dead_cmd_dispatch(const char *group, const char *words, const struct dead_sub *subs, size_t n,
		      int (*prepare)(struct dead_cmd *d), int argc, char **argv)
{
	struct dead_cmd d;
	char shown[68];
	int rc;

	memset(&d, 0, sizeof(d));
	if (argc < 3)
		return dead_say(CMD_EXIT_USAGE, "%s needs a command: %s (stagedrain help %s)", group, words, group);
	if (strcmp(argv[2], "-h") == 0 || strcmp(argv[2], "--help") == 0) {
		commands_usage(stdout, group);
		return CMD_EXIT_OK;
	}
	for (size_t i = 0; i < n; i++) {
		if (strcmp(argv[2], subs[i].word) != 0)
			continue;
		rc = run_sub(&d, &subs[i], prepare, argc, argv);
		PQfinish(d.conn);
		cmd_args_free(&d.a);
		return rc;
	}
	return dead_say(CMD_EXIT_USAGE, "no command \"%s %s\": %s takes %s", group,
			value_printable(argv[2], shown, sizeof(shown)), group, words);
}
