/* `stagedrain dead list|show|replay|purge`: arguments, the session, errors, and purge. */
#include "fmacros.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_dead.h"
#include "dead_list.h"
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

/* The filters as parameters: 0, or CMD_EXIT_USAGE after saying why. */
static int read_filters(struct dead_cmd *d)
{
	static const char *const flags[] = { "queue", "class", "reason" };
	const char *since = cmd_args_last(&d->a, "since");
	char err[256];
	long long ms;

	for (int i = 0; i < 3; i++)
		d->filter[i] = cmd_args_last(&d->a, flags[i]);
	if (!since)
		return 0;
	if (cmd_args_span("since", since, &ms, err, sizeof(err)) < 0)
		return dead_say(CMD_EXIT_USAGE, "%s", err);
	snprintf(d->since_ms, sizeof(d->since_ms), "%lld", ms);
	d->filter[3] = d->since_ms;
	return 0;
}

/* `dead purge --older-than SPAN [--dry-run]`: deleting nothing is no failure (a
 * daily purge mostly finds nothing to do). */
static int run_purge(struct dead_cmd *d)
{
	const char *span = cmd_args_last(&d->a, "older-than");
	bool dry = cmd_args_has(&d->a, "dry-run");
	const char *params[1];
	char err[256], ms_text[24];
	long long ms;
	PGresult *res;

	if (d->a.nwords > 0)
		return dead_say(CMD_EXIT_USAGE, "dead purge takes no DEAD_ID: it deletes by age (--older-than SPAN)");
	if (!span)
		return dead_say(CMD_EXIT_USAGE, "dead purge needs --older-than SPAN (e.g. 30d)");
	if (cmd_args_span("older-than", span, &ms, err, sizeof(err)) < 0)
		return dead_say(CMD_EXIT_USAGE, "%s", err);
	snprintf(ms_text, sizeof(ms_text), "%lld", ms);
	params[0] = ms_text;
	res = dead_exec(d,
			dry ? "SELECT count(*) FROM staged_jobs_dead"
			      " WHERE failed_at < now() - $1::int8 * interval '1 millisecond'"
			    : "WITH gone AS (DELETE FROM staged_jobs_dead"
			      " WHERE failed_at < now() - $1::int8 * interval '1 millisecond' RETURNING 1)"
			      " SELECT count(*) FROM gone",
			1, params, PGRES_TUPLES_OK,
			dry ? "could not count old dead-lettered jobs" : "could not purge dead-lettered jobs");
	if (!res)
		return CMD_EXIT_ATTENTION;
	printf("%s %s dead-lettered jobs older than %s\n", dry ? "would purge" : "purged", PQgetvalue(res, 0, 0), span);
	PQclear(res);
	return CMD_EXIT_OK;
}

static const struct dead_sub subs[] = {
	{ "list", "dead list", dead_list },
	{ "show", "dead show", dead_show },
	{ "replay", "dead replay", dead_replay },
	{ "purge", "dead purge", run_purge },
};

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

int cmd_dead_main(int argc, char **argv)
{
	return dead_cmd_dispatch("dead", "list, show, replay or purge", subs, sizeof(subs) / sizeof(subs[0]),
				 read_filters, argc, argv);
}
