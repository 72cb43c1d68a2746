/*
 * `stagedrain held list|release|dead`: what waits in staged_jobs_held, by
 * target and queue, and the one decision the relay leaves to a person: rows
 * held for a target no configured route has now. Their old Redis may hold a
 * late copy of a push that timed out, so the relay keeps them held; release
 * sends them where today's rules say (staged again, in the order they were
 * held), dead moves them to staged_jobs_dead with the reason. A configured
 * target's rows are the relay's to release, and refused here.
 */
#include "fmacros.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dead_cmd.h"
#include "cmd_held.h"
#include "routes.h"
#include "status.h"

/* By target (NULL: the default one) and queue: the rows, and how long ago
 * the oldest was held and staged. */
#define LIST_SQL                                                                                                       \
	"SELECT coalesce(target, 'default'), queue, count(*),"                                                         \
	" greatest(0, extract(epoch FROM clock_timestamp() - min(held_at)))::float8,"                                  \
	" greatest(0, extract(epoch FROM clock_timestamp() - min(created_at)))::float8"                                \
	" FROM staged_jobs_held WHERE $1::text IS NULL OR coalesce(target, 'default') = $1"                            \
	" GROUP BY 1, 2 ORDER BY 1, 2"

/* The target's rows, claimed by deleting them (a second run finds none). */
#define CLAIM_SQL "WITH h AS (DELETE FROM staged_jobs_held WHERE target = $1 RETURNING *)"

/* Staged again as an application stages a row (a new id from the default),
 * in the order they were held: the relay sends each where today's rules
 * say, by its route column, else its queue. */
#define RELEASE_SQL                                                                                                    \
	CLAIM_SQL ", s AS (INSERT INTO staged_jobs (queue, job_class, args, run_at, options, created_at, jid, uuid,"   \
		  " tenant, route) SELECT queue, job_class, args, run_at, options, created_at, jid, uuid, tenant,"     \
		  " route FROM h ORDER BY hold_id RETURNING 1) SELECT count(*) FROM s"

#define DEAD_SQL                                                                                                       \
	CLAIM_SQL                                                                                                      \
	", s AS (INSERT INTO staged_jobs_dead (id, queue, job_class, args, run_at, options, created_at, jid,"          \
	" uuid, tenant, route, reason) SELECT id, queue, job_class, args, run_at, options, created_at, jid,"           \
	" uuid, tenant, route, 'held for target \"' || left(target, 100) || '\", which no route has now;"              \
	" dead-lettered by stagedrain held dead' FROM h ORDER BY hold_id RETURNING 1) SELECT count(*) FROM s"

#define COUNT_SQL "SELECT count(*) FROM staged_jobs_held WHERE target = $1"

/* Whether name is a target of the settings given (the relay's own). */
static bool configured(const struct dead_cmd *d, const char *name)
{
	const struct routes *r = &d->a.cfg.routes;

	for (size_t i = 0; i < r->n; i++)
		if (strcmp(r->t[i].name, name) == 0)
			return true;
	return false;
}

static int run_list(struct dead_cmd *d)
{
	const char *params[1] = { cmd_args_last(&d->a, "target") };
	char held[32], staged[32];
	PGresult *res;

	if (d->a.nwords > 0)
		return dead_say(CMD_EXIT_USAGE, "held list takes no words; --target NAME picks one target");
	res = dead_exec(d, LIST_SQL, 1, params, PGRES_TUPLES_OK, "could not read staged_jobs_held");
	if (!res)
		return CMD_EXIT_ATTENTION;
	printf("%-20s %-24s %8s %8s %8s  %s\n", "TARGET", "QUEUE", "JOBS", "HELD", "STAGED", "NOW");
	for (int i = 0; i < PQntuples(res); i++) {
		status_age(strtod(PQgetvalue(res, i, 3), NULL), held, sizeof(held));
		status_age(strtod(PQgetvalue(res, i, 4), NULL), staged, sizeof(staged));
		printf("%-20s %-24s %8s %8s %8s  %s\n", PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
		       PQgetvalue(res, i, 2), held, staged,
		       configured(d, PQgetvalue(res, i, 0)) ? "configured: the relay releases them"
							    : "no route of this name: held release|dead --target");
	}
	PQclear(res);
	return CMD_EXIT_OK;
}

/* release and dead: one statement, so all of the target's rows move or none. */
static int move(struct dead_cmd *d, bool release)
{
	const char *target = cmd_args_last(&d->a, "target");
	bool dry = cmd_args_has(&d->a, "dry-run");
	const char *params[1] = { target };
	PGresult *res;

	if (d->a.nwords > 0 || !target)
		return dead_say(CMD_EXIT_USAGE, "held %s takes --target NAME and no words",
				release ? "release" : "dead");
	if (configured(d, target))
		return dead_say(CMD_EXIT_USAGE,
				"target \"%.100s\" is configured (--route): the relay releases its rows itself;"
				" held %s is for a target no route has now",
				target, release ? "release" : "dead");
	res = dead_exec(d,
			dry       ? COUNT_SQL
			: release ? RELEASE_SQL
				  : DEAD_SQL,
			1, params, PGRES_TUPLES_OK,
			release ? "could not release held rows" : "could not dead-letter held rows");
	if (!res)
		return CMD_EXIT_ATTENTION;
	if (dry)
		printf("would %s %s jobs held for target %s\n", release ? "release" : "dead-letter",
		       PQgetvalue(res, 0, 0), target);
	else if (release)
		printf("released %s jobs held for target %s into staged_jobs; the relay sends them where its rules say\n",
		       PQgetvalue(res, 0, 0), target);
	else
		printf("moved %s jobs held for target %s to staged_jobs_dead\n", PQgetvalue(res, 0, 0), target);
	PQclear(res);
	return CMD_EXIT_OK;
}

static int run_release(struct dead_cmd *d)
{
	return move(d, true);
}

static int run_dead(struct dead_cmd *d)
{
	return move(d, false);
}

static const struct dead_sub subs[] = {
	{ "list", "held list", run_list },
	{ "release", "held release", run_release },
	{ "dead", "held dead", run_dead },
};

int cmd_held_main(int argc, char **argv)
{
	return dead_cmd_dispatch("held", "list, release or dead", subs, sizeof(subs) / sizeof(subs[0]), NULL, argc,
				 argv);
}
