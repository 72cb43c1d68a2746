/* `stagedrain dead replay`: moves dead-lettered rows back into staged_jobs in
 * one transaction, in their original order, checked first by the relay's own
 * code so a row that would only be dead-lettered again stays where it is. */
#include "fmacros.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "dead_list.h"
#include "dead_replay.h"
#include "dead_text.h"
#include "job.h"
#include "job_build.h"
#include "payload.h"
#include "pg_read.h"
#include "routes.h"
#include "sidekiq_probe.h"
#include "values.h"

/* A dead row d's options as the replay leaves them: $2's keys and $1's
 * removed, then $1's added after the rest, each value's text as written and
 * the keys in their order. Options that are not an object (no job can carry
 * them) become $1's keys alone; without edits they stay as they are. */
#define EDITED_OPTIONS                                                                                                 \
	"CASE WHEN $1::json IS NULL AND $2::json IS NULL THEN d.options"                                               \
	" ELSE (SELECT coalesce(json_object_agg(e.key, e.value ORDER BY e.n), '{}') FROM ("                            \
	"SELECT o.key, o.value, o.n FROM json_each(CASE WHEN json_typeof(d.options) = 'object'"                        \
	" THEN d.options ELSE '{}' END) WITH ORDINALITY o(key, value, n)"                                              \
	" WHERE o.key NOT IN (SELECT json_array_elements_text(coalesce($2::json, '[]')))"                              \
	" AND o.key NOT IN (SELECT json_object_keys(coalesce($1::json, '{}')))"                                        \
	" UNION ALL SELECT s.key, s.value, 1e18 + s.n FROM json_each(coalesce($1::json, '{}'))"                        \
	" WITH ORDINALITY s(key, value, n)) e) END"
/* A dead row d's route as the replay leaves it, by parameter $n (--set-route,
 * --unset-route): NULL keeps it, '' clears it (the rules pick), else that name. */
#define EDITED_ROUTE(n) "CASE WHEN $" n "::text IS NULL THEN d.route WHEN $" n " = '' THEN NULL ELSE $" n " END"
/* The rows picked, for the filters $3-$6 or the dead_ids $7. */
#define PICKED                                                                                                         \
	"staged_jobs_dead d WHERE " DEAD_WHERE("3", "4", "5", "6") " AND ($7::int8[] IS NULL OR d.dead_id = ANY($7))"

/* The rows picked, as the relay's read would see them (read_bounds' wrapper:
 * the same bounds, the same reasons). A NULL jid or uuid (rows dead-lettered
 * before they existed) gets a new one on the way; a stand-in passes the check. */
#define PICK_SQL                                                                                                       \
	", s.dead_id, s.reason FROM (SELECT d.dead_id, d.id, d.queue, d.job_class, d.args,"                            \
	" " EDITED_OPTIONS " AS options, coalesce(d.jid, '000000000000000000000000') AS jid,"                          \
	" d.created_at, d.run_at, coalesce(d.uuid, '00000000-0000-4000-8000-000000000000'::uuid) AS uuid,"             \
	" d.tenant, " EDITED_ROUTE("8") " AS route, d.reason FROM " PICKED ") s"
#define ORDER "id, dead_id"
enum { COL_DEAD_ID = READ_BOUNDS_NCOLS, COL_REASON };

/*
 * One row moved: deleting it is what claims it (a second replay's DELETE waits
 * for ours, then finds nothing), and its id comes from the column's default,
 * one statement per row, so ids follow the rows' order. DELETE ... RETURNING
 * needs no UPDATE privilege, as SELECT ... FOR UPDATE would.
 */
#define MOVE_SQL                                                                                                       \
	"WITH d AS (DELETE FROM staged_jobs_dead WHERE dead_id = $3::int8 RETURNING *)"                                \
	" INSERT INTO staged_jobs (queue, job_class, args, run_at, options, created_at, jid, uuid, tenant, route)"     \
	" SELECT d.queue, d.job_class, d.args, d.run_at, " EDITED_OPTIONS ", d.created_at,"                            \
	" coalesce(d.jid, substr(replace(gen_random_uuid()::text, '-', ''), 1, 24)),"                                  \
	" coalesce(d.uuid, gen_random_uuid()), d.tenant, " EDITED_ROUTE("4") " FROM d RETURNING id"

/* The option edits as JSON parameters: set, an object; unset, an array of keys. */
struct edits {
	struct buf set, unset;
	int nset, nunset;
};

/* Appends key (n bytes) as a JSON string, after open ("{" or "[") if it is
 * the first, else after a comma. */
static int add_key(struct buf *b, int *count, const char *open, const char *key, size_t n, const char *flag,
		   const char *given)
{
	json_t *k = n ? json_stringn(key, n) : NULL;
	char *text = k ? json_dumps(k, JSON_ENCODE_ANY) : NULL, shown[64];
	int rc;

	json_decref(k);
	if (!text)
		return dead_say(CMD_EXIT_USAGE, "--%s \"%s\": the key is empty or not utf-8", flag,
				value_printable(given, shown, sizeof(shown)));
	rc = buf_puts(b, (*count)++ ? "," : open);
	if (rc == 0)
		rc = buf_puts(b, text);
	free(text);
	return rc ? dead_say(CMD_EXIT_ATTENTION, "out of memory") : 0;
}

/* --set-option KEY=JSON (the value checked as the relay reads JSON: numbers
 * of any size) and --unset-option KEY, into e. */
static int read_edits(const struct dead_cmd *d, struct edits *e)
{
	for (int i = 0; i < d->a.ngiven; i++) {
		const char *flag = d->a.given[i].opt->flag, *v = d->a.given[i].val, *eq = strchr(v, '=');
		bool set = strcmp(flag, "set-option") == 0;
		json_error_t err;
		json_t *val = NULL;
		char shown[64];
		int rc;

		if (!set && strcmp(flag, "unset-option") != 0)
			continue;
		value_printable(v, shown, sizeof(shown));
		if (set && !eq)
			return dead_say(CMD_EXIT_USAGE, "--set-option \"%s\" is not KEY=JSON", shown);
		if (set && payload_load(span_of(eq + 1, strlen(eq + 1)), JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &val,
					&err) < 0)
			return dead_say(CMD_EXIT_ATTENTION, "out of memory");
		if (set && !val)
			return dead_say(CMD_EXIT_USAGE, "--set-option \"%s\": the value is not json: %s", shown,
					err.text);
		json_decref(val);
		if (set)
			rc = add_key(&e->set, &e->nset, "{", v, (size_t)(eq - v), flag, v);
		else
			rc = add_key(&e->unset, &e->nunset, "[", v, strlen(v), flag, v);
		if (rc == 0 && set && (buf_puts(&e->set, ":") < 0 || buf_puts(&e->set, eq + 1) < 0))
			rc = dead_say(CMD_EXIT_ATTENTION, "out of memory");
		if (rc)
			return rc;
	}
	return 0;
}

/* The edits as parameters $1 and $2: NULL where there are none. */
static int edit_params(struct edits *e, const char **params)
{
	int rc = 0;

	if (e->nset && (rc = buf_puts(&e->set, "}")) == 0)
		rc = buf_append(&e->set, "", 1);
	if (rc == 0 && e->nunset && (rc = buf_puts(&e->unset, "]")) == 0)
		rc = buf_append(&e->unset, "", 1);
	if (rc)
		return dead_say(CMD_EXIT_ATTENTION, "out of memory");
	params[0] = e->nset ? e->set.data : NULL;
	params[1] = e->nunset ? e->unset.data : NULL;
	return 0;
}

/* How many times flag was given. */
static int given(const struct dead_cmd *d, const char *flag)
{
	int n = 0;

	for (int i = 0; i < d->a.ngiven; i++)
		n += strcmp(d->a.given[i].opt->flag, flag) == 0;
	return n;
}

/*
 * --set-route NAME or --unset-route as the parameter EDITED_ROUTE reads:
 * NULL (neither), "" (unset) or NAME, which must name a route of the
 * settings given (the relay's --route ...) or "default", as the relay
 * would otherwise dead-letter the row again. 0, or CMD_EXIT_USAGE.
 */
static int route_param(const struct dead_cmd *d, const char **param)
{
	const char *name = cmd_args_last(&d->a, "set-route");
	int nset = given(d, "set-route"), nunset = given(d, "unset-route");
	char shown[80];

	*param = NULL;
	if (nset + nunset > 1)
		return dead_say(CMD_EXIT_USAGE, nset && nunset ? "--set-route or --unset-route, not both"
							       : "--set-route or --unset-route is given twice");
	if (nunset) {
		*param = "";
		return 0;
	}
	if (!name)
		return 0;
	if (!*name)
		return dead_say(CMD_EXIT_USAGE, "--set-route needs a route's name (--unset-route clears the route)");
	if (routes_find(&d->a.cfg.routes, "", 0, name, strlen(name)) == ROUTES_NONE)
		return dead_say(CMD_EXIT_USAGE,
				"--set-route \"%s\" is not a route of these settings: give the replay the relay's"
				" --route, --route-file or STAGEDRAIN_ROUTE, or name default",
				value_printable(name, shown, sizeof(shown)));
	*param = name;
	return 0;
}

/* The DEAD_ID words as an array parameter ("{1,2}"), or NULL without any. */
static int id_param(const struct dead_cmd *d, struct buf *ids, const char **param)
{
	long long id;
	int rc = buf_puts(ids, "{");

	*param = NULL;
	for (int i = 0; rc == 0 && i < d->a.nwords; i++) {
		if (dead_parse_id(d->a.words[i], &id) != 0)
			return CMD_EXIT_USAGE;
		rc = buf_printf(ids, "%s%lld", i ? "," : "", id);
	}
	if (rc == 0)
		rc = buf_append(ids, "}", 2);
	if (rc)
		return dead_say(CMD_EXIT_ATTENTION, "out of memory");
	*param = d->a.nwords ? ids->data : NULL;
	return 0;
}

/* What to do with each row picked. */
enum verdict { V_MOVE, V_REFUSED, V_GONE };

struct replay {
	struct dead_cmd *d;
	const char *params[8];
	PGresult *rows; /* the rows picked, in order */
	enum verdict *verdict;
	char (*reason)[JOB_REASON_SIZE]; /* why the relay would dead-letter each again; "" if it would not */
	struct buf out;                  /* what is printed once the transaction has ended */
	int moved;
};

/* Picks the rows as the relay would read them: 0, or an exit status. */
static int pick(struct replay *r)
{
	const struct config *cfg = &r->d->a.cfg;
	struct buf sql;
	int rc;

	buf_init(&sql);
	rc = read_bounds_head(&sql, cfg->max_job_bytes, ", dead_id, reason", false);
	if (rc == 0 && (rc = buf_printf(&sql, "SELECT %s", read_bounds_columns)) == 0)
		rc = buf_puts(&sql, PICK_SQL);
	if (rc == 0)
		rc = read_bounds_tail_n(&sql, LONG_MAX, ORDER);
	if (rc == 0)
		r->rows = dead_exec(r->d, sql.data, 8, r->params, PGRES_TUPLES_OK, "could not read staged_jobs_dead");
	buf_free(&sql);
	if (rc)
		return dead_say(CMD_EXIT_ATTENTION, "out of memory");
	return r->rows ? 0 : CMD_EXIT_ATTENTION;
}

/* Every DEAD_ID asked for was found: 0, or the first that was not. */
static long long missing_id(const struct replay *r)
{
	for (int w = 0; w < r->d->a.nwords; w++) {
		long long id = strtoll(r->d->a.words[w], NULL, 10);
		bool found = false;

		for (int i = 0; !found && i < PQntuples(r->rows); i++)
			found = strtoll(PQgetvalue(r->rows, i, COL_DEAD_ID), NULL, 10) == id;
		if (!found)
			return id;
	}
	return 0;
}

/* Each target's job_opts, as the relay's drain sets them for a batch (its
 * Sidekiq version without Redis: the one configured, or the safe one). */
static struct job_opts *target_opts(const struct config *cfg)
{
	const struct routes *routes = &cfg->routes;
	struct job_opts *opts = calloc(routes->n, sizeof(*opts));
	long long now_us = clock_wall_us();

	for (size_t i = 0; opts && i < routes->n; i++) {
		const struct config *t = routes->t[i].cfg;
		struct sidekiq_probe probe;

		sidekiq_probe_init(&probe, t);
		opts[i] = (struct job_opts){ .format = t->format,
					     .sidekiq_version = probe.version,
					     .max_job_bytes = cfg->max_job_bytes,
					     .now_us = now_us,
					     .rails_version = t->rails_version,
					     .target = i,
					     .key_prefix = t->key_prefix };
	}
	return opts;
}

/*
 * The target the relay would send row to, as its drain resolves it: the
 * route column first (empty names none), else the queue rules, else the
 * default. A route no target has: the default's opts, and the row unfit
 * with the relay's own reason (drain_add_row's), in why.
 */
static size_t row_target(const struct routes *routes, struct job_row *row, char *why, size_t len)
{
	bool named = row->route && row->route_len > 0;
	size_t ti = routes_find(routes, row->queue, row->queue_len, named ? row->route : NULL, row->route_len);

	if (ti != ROUTES_NONE)
		return ti;
	if (!row->unfit) {
		snprintf(why, len, "route \"%.*s\" is not a route of this relay (--route)",
			 (int)(row->route_len < 100 ? row->route_len : 100), row->route);
		row->unfit = why;
	}
	return 0;
}

/* Builds each row into a job with the relay's own code and settings, for
 * the target it would go to (its format and options; --max-job-bytes ...):
 * a row it would reject stays, unless --force. */
static int judge(struct replay *r)
{
	const struct config *cfg = &r->d->a.cfg;
	struct job_opts *opts = target_opts(cfg);
	bool force = cmd_args_has(&r->d->a, "force");
	int n = PQntuples(r->rows), rc = 0;
	struct buf payload;

	r->verdict = calloc((size_t)n + 1, sizeof(*r->verdict));
	r->reason = calloc((size_t)n + 1, sizeof(*r->reason));
	if (!opts || !r->verdict || !r->reason) {
		free(opts);
		return dead_say(CMD_EXIT_ATTENTION, "out of memory");
	}
	buf_init(&payload);
	for (int i = 0; rc >= 0 && i < n; i++) {
		char why[JOB_REASON_SIZE];
		struct job_row row;
		struct job_out out;
		size_t ti;

		pg_read_row_of(r->rows, i, strtoll(PQgetvalue(r->rows, i, 0), NULL, 10), &row);
		ti = row_target(&cfg->routes, &row, why, sizeof(why));
		buf_reset(&payload);
		rc = job_build(&row, &opts[ti], &payload, &out, r->reason[i], sizeof(r->reason[i]));
		if (rc == 0)
			r->reason[i][0] = '\0';
		r->verdict[i] = rc == JOB_REJECT && !force ? V_REFUSED : V_MOVE;
	}
	buf_free(&payload);
	free(opts);
	return rc < 0 ? dead_say(CMD_EXIT_ATTENTION, "out of memory") : 0;
}

/* Appends "<text of column col>", visible and at most 60 characters. */
static int put_text(struct buf *out, const PGresult *res, int i, int col)
{
	size_t w;

	return dead_text_visible(out, PQgetvalue(res, i, col), (size_t)PQgetlength(res, i, col), 60, &w);
}

/* One line of the report: what happened to row i (new_id when it moved). */
static int report(struct replay *r, int i, const char *new_id, bool dry)
{
	const PGresult *res = r->rows;
	const char *dead_id = PQgetvalue(res, i, COL_DEAD_ID);
	struct buf *out = &r->out;
	struct job_row row;
	size_t w;
	int rc;

	if (r->verdict[i] == V_REFUSED)
		return buf_printf(out,
				  "not moved dead_id %s: it would be dead-lettered again: %s; fix it with"
				  " --set-option/--unset-option, or move it anyway with --force\n",
				  dead_id, r->reason[i]);
	if (r->verdict[i] == V_GONE)
		return buf_printf(out, "not moved dead_id %s: it is gone (another replay or a purge took it)\n",
				  dead_id);
	if (dry)
		rc = buf_printf(out, "would move dead_id %s: queue ", dead_id);
	else
		rc = buf_printf(out, "moved dead_id %s -> id %s: queue ", dead_id, new_id);
	if (rc == 0)
		rc = put_text(out, res, i, 1);
	if (rc == 0 && (rc = buf_puts(out, ", class ")) == 0)
		rc = put_text(out, res, i, 2);
	if (rc == 0 && (rc = buf_puts(out, ", jid ")) == 0)
		rc = put_text(out, res, i, 5);
	pg_read_row_of(res, i, 0, &row);
	if (rc == 0 && row.route && (rc = buf_puts(out, ", route ")) == 0)
		rc = dead_text_visible(out, row.route, row.route_len, 60, &w);
	if (rc == 0 && r->reason[i][0])
		rc = buf_printf(out, " (forced: it would be dead-lettered again: %s)", r->reason[i]);
	return rc ? rc : buf_puts(out, "\n");
}

/* Moves the rows judged movable, in order, each by one statement. */
static int move(struct replay *r, bool dry)
{
	char dead_id[24];
	const char *params[4] = { r->params[0], r->params[1], dead_id, r->params[7] };
	int rc = 0;

	for (int i = 0; rc == 0 && i < PQntuples(r->rows); i++) {
		PGresult *res = NULL;

		if (r->verdict[i] == V_MOVE && !dry) {
			snprintf(dead_id, sizeof(dead_id), "%s", PQgetvalue(r->rows, i, COL_DEAD_ID));
			res = dead_exec(r->d, MOVE_SQL, 4, params, PGRES_TUPLES_OK,
					"could not move the rows back; nothing was moved");
			if (!res)
				return CMD_EXIT_ATTENTION;
			if (PQntuples(res) == 0)
				r->verdict[i] = V_GONE;
		}
		r->moved += r->verdict[i] == V_MOVE;
		rc = report(r, i, res && PQntuples(res) ? PQgetvalue(res, 0, 0) : "", dry);
		PQclear(res);
	}
	return rc ? dead_say(CMD_EXIT_ATTENTION, "out of memory") : 0;
}

/* The words and options, before anything is read: 0, or an exit status. */
static int check_usage(const struct dead_cmd *d)
{
	if (d->a.nwords == 0 && !dead_filtered(d))
		return dead_say(CMD_EXIT_USAGE, "dead replay needs DEAD_IDs or a filter (--queue, --class, --reason,"
						" --since); dead list shows what is there");
	if (d->a.nwords > 0 && dead_filtered(d))
		return dead_say(CMD_EXIT_USAGE, "dead replay takes DEAD_IDs or filters, not both");
	return 0;
}

static int run(struct replay *r, bool dry)
{
	long long missing;
	int rc, n;

	if ((rc = pick(r)) != 0)
		return rc;
	n = PQntuples(r->rows);
	if ((missing = missing_id(r)) != 0)
		return dead_say(CMD_EXIT_ATTENTION, "no dead-lettered job with dead_id %lld; nothing was moved",
				missing);
	if (n == 0)
		return dead_say(CMD_EXIT_ATTENTION, "no dead-lettered job matches the filters; nothing was moved");
	if ((rc = judge(r)) != 0 || (rc = move(r, dry)) != 0)
		return rc;
	return buf_printf(&r->out, "%s %d of %d dead-lettered jobs\n", dry ? "would move" : "moved", r->moved, n) < 0
		       ? dead_say(CMD_EXIT_ATTENTION, "out of memory")
		       : 0;
}

int dead_replay(struct dead_cmd *d)
{
	struct replay r = { .d = d };
	struct edits e;
	struct buf ids;
	bool dry = cmd_args_has(&d->a, "dry-run");
	PGresult *end;
	int rc;

	memset(&e, 0, sizeof(e));
	buf_init(&e.set);
	buf_init(&e.unset);
	buf_init(&ids);
	buf_init(&r.out);
	if ((rc = check_usage(d)) == 0 && (rc = id_param(d, &ids, &r.params[6])) == 0 &&
	    (rc = route_param(d, &r.params[7])) == 0 && (rc = read_edits(d, &e)) == 0)
		rc = edit_params(&e, r.params);
	for (int i = 0; i < 4; i++)
		r.params[2 + i] = d->filter[i];
	if (rc == 0 && (end = dead_exec(d, "BEGIN", 0, NULL, PGRES_COMMAND_OK, "could not begin")) != NULL) {
		PQclear(end);
		rc = run(&r, dry);
		/* A dry run, or a failure, leaves everything as it was. */
		end = dead_exec(d, rc || dry ? "ROLLBACK" : "COMMIT", 0, NULL, PGRES_COMMAND_OK,
				"could not commit; nothing was moved");
		if (!end && !rc)
			rc = CMD_EXIT_ATTENTION;
		PQclear(end);
		if (rc == 0)
			fwrite(r.out.data, 1, r.out.len, stdout);
		if (rc == 0 && r.moved < PQntuples(r.rows))
			rc = CMD_EXIT_ATTENTION;
	} else if (rc == 0) {
		rc = CMD_EXIT_ATTENTION;
	}
	PQclear(r.rows);
	free(r.verdict);
	free(r.reason);
	buf_free(&r.out);
	buf_free(&ids);
	buf_free(&e.set);
	buf_free(&e.unset);
	return rc;
}
