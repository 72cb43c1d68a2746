/* Prints `stagedrain status`'s facts: the table, and the JSON object (docs/status.md). */
#include "fmacros.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status_print.h"

/* The width of the table's first column. */
#define LABEL "%-9s "

static const char *const holder_kinds[] = { "none", "relay", "foreign" };

/* A part that was not read, and why when a privilege is the reason (a failure is on the last line). */
static void print_unknown(FILE *out, const char *label, const char *why)
{
	fprintf(out, LABEL "unknown%s%s\n", label, *why ? ": " : "", why);
}

static void print_leader(FILE *out, const struct status *s)
{
	const struct lock_holder *h = &s->leader;
	char age[32], epoch[32] = "", last[40] = "";

	if (s->epoch >= 0) {
		snprintf(epoch, sizeof(epoch), ", epoch %lld", s->epoch);
		snprintf(last, sizeof(last), " (last epoch %lld)", s->epoch);
	}
	if (!s->leader_read) {
		fprintf(out, LABEL "unknown: postgres was not read%s\n", "leader", last);
		return;
	}
	if (h->kind == LOCK_HOLDER_NONE) {
		fprintf(out, LABEL "none: no relay holds the leader lock (none runs, or none reaches postgres)%s\n",
			"leader", last);
		return;
	}
	if (h->pid == 0) {
		fprintf(out, LABEL "a prepared transaction holds the leader lock (see pg_prepared_xacts)\n", "leader");
		return;
	}
	fprintf(out, LABEL "%s at %s (backend pid %d, application_name \"%s\"%s), connected since %s", "leader",
		h->kind == LOCK_HOLDER_RELAY ? "relay" : "a session that is not a relay", h->addr, h->pid, h->app,
		epoch, h->since);
	if (s->leader_age_s >= 0) {
		status_age(s->leader_age_s, age, sizeof(age));
		fprintf(out, " (%s ago)", age);
	}
	fputc('\n', out);
}

/* The oldest job waiting, staged or held, by when it was staged; NAN unknown. */
static double oldest_waiting(const struct status *s)
{
	bool held = s->queues_read && s->held > 0;

	if (s->staged > 0 || s->staged_estimated)
		return held && !(s->staged_oldest_s >= s->held_oldest_s) && !isnan(s->staged_oldest_s)
			       ? s->held_oldest_s
			       : s->staged_oldest_s;
	return held ? s->held_oldest_s : 0;
}

static void print_backlog(FILE *out, const struct status *s)
{
	char n[32], h[32], age[32];
	double oldest = oldest_waiting(s);

	if (!s->backlog_read) {
		print_unknown(out, "backlog", s->backlog_why);
		return;
	}
	status_count(s->staged, n, sizeof(n));
	status_count(s->held, h, sizeof(h));
	status_age(oldest, age, sizeof(age));
	fprintf(out, LABEL "%s%s staged", "backlog", s->staged_estimated ? "about " : "", n);
	if (s->queues_read && s->held > 0)
		fprintf(out, ", %s held", h);
	if (s->staged > 0 || s->staged_estimated || (s->queues_read && s->held > 0))
		fprintf(out, ", oldest %s", isnan(oldest) ? "unknown" : age);
	if (s->staged_estimated)
		fputs(" (an estimate: the count outlasted the statement timeout)", out);
	fputc('\n', out);
}

static void print_gaps(FILE *out, const struct status *s)
{
	char n[32], age[32];

	if (!s->gaps_read) {
		fprintf(out, LABEL "unknown\n", "gaps");
		return;
	}
	if (s->staging_xacts == 0) {
		fprintf(out, LABEL "none open (no staging transaction is running)\n", "gaps");
		return;
	}
	status_count(s->staging_xacts, n, sizeof(n));
	status_age(s->staging_oldest_s, age, sizeof(age));
	fprintf(out, LABEL "%s staging transaction%s running, oldest %s ", "gaps", n, s->staging_xacts == 1 ? "" : "s",
		age);
	if (s->staging_oldest_pid > 0)
		fprintf(out, "(pid %d)\n", s->staging_oldest_pid);
	else if (*s->staging_oldest_gid) /* only COMMIT PREPARED or ROLLBACK PREPARED with its gid ends it */
		fprintf(out, "(prepared transaction \"%s\", see pg_prepared_xacts)\n", s->staging_oldest_gid);
	else
		fputs("(a session this role cannot see)\n", out);
}

static void print_dead(FILE *out, const struct status *s)
{
	char n[32], age[32];

	if (!s->dead_read) {
		print_unknown(out, "dead", s->dead_why);
		return;
	}
	status_count(s->dead, n, sizeof(n));
	status_age(s->dead_oldest_s, age, sizeof(age));
	if (s->dead == 0)
		fprintf(out, LABEL "0 rows\n", "dead");
	else
		fprintf(out, LABEL "%s row%s, oldest %s (stagedrain dead list)\n", "dead", n, s->dead == 1 ? "" : "s",
			age);
}

static void print_redis(FILE *out, const struct status *s)
{
	fprintf(out, LABEL "%s", "redis", s->redis_where);
	if (s->master_name)
		fprintf(out, " (sentinel master %s)", s->master_name);
	fprintf(out, ", tls %s%s", s->redis_tls ? "on" : "off", s->redis_ok ? "" : ", not reachable");
	if (s->ntargets > 0 && s->targets[0].cluster[0])
		fprintf(out, ", %s", s->targets[0].cluster);
	fputc('\n', out);
}

/* One line per target, when there are several (routes, or held rows a route since removed waits for). */
static void print_target(FILE *out, const struct status_target *t)
{
	char held[32], age[32];

	status_count(t->held, held, sizeof(held));
	status_age(t->held_oldest_s, age, sizeof(age));
	fprintf(out, LABEL "%s: ", "target", t->name);
	if (!t->cfg)
		fputs("no route of this name now", out);
	else
		fprintf(out, "%s, %s", t->where, t->reached ? "reachable" : "not reachable");
	if (t->cluster[0])
		fprintf(out, ", %s", t->cluster);
	fprintf(out, ", %s held", held);
	if (t->held > 0)
		fprintf(out, ", oldest %s", age);
	fputc('\n', out);
}

static void print_queue(FILE *out, const struct status *s, const struct status_queue *q)
{
	char len[32], cap[32], held[32], age[32];

	status_count(q->length, len, sizeof(len));
	status_count(q->cap, cap, sizeof(cap));
	status_count(q->held, held, sizeof(held));
	fprintf(out, LABEL "%s", "queue", q->name);
	if (q->target > 0)
		fprintf(out, " (target %s)", s->targets[q->target].name);
	fprintf(out, ": list %s", q->length >= 0 ? len : "unknown");
	if (q->cap > 0)
		fprintf(out, " of cap %s", cap);
	else
		fputs(", not capped now", out);
	fprintf(out, ", %s held", held);
	if (q->held > 0) {
		status_age(q->held_oldest_s, age, sizeof(age));
		fprintf(out, ", oldest %s", age);
	}
	fputc('\n', out);
}

static void print_horizon(FILE *out, const struct status *s)
{
	char age[64], n[32];

	if (!s->horizon_read)
		print_unknown(out, "horizon", s->horizon_why);
	else if (!s->horizon.held)
		fprintf(out, LABEL "not held by any transaction\n", "horizon");
	else {
		if (s->horizon.timed) {
			status_age(s->horizon.age_s, age, sizeof(age));
		} else { /* Postgres keeps no time for a standby's feedback or a slot */
			status_count(s->horizon.xids, n, sizeof(n));
			snprintf(age, sizeof(age), "%s transactions back", n);
		}
		fprintf(out, LABEL "held %s by a %s (%s)\n", "horizon", age, s->horizon.kind, s->horizon.name);
		fprintf(out, LABEL "%s\n", "", s->horizon.end_it);
	}
}

void status_print_table(FILE *out, const struct status *s, const struct status_problems *p)
{
	print_leader(out, s);
	print_backlog(out, s);
	print_gaps(out, s);
	print_dead(out, s);
	if (s->privileges_read)
		fprintf(out, LABEL "%s\n", "roles",
			s->privileges.n == 0 ? "only the owner and the relay may change staged rows"
					     : "others may change staged rows (below)");
	print_redis(out, s);
	for (size_t i = 0; s->ntargets > 1 && i < s->ntargets; i++)
		print_target(out, &s->targets[i]);
	if (*s->queues_why)
		print_unknown(out, "held", s->queues_why);
	if (s->nqueues == 0)
		fprintf(out, LABEL "none capped (--max-queue-length, --queue-limit)\n", "queues");
	for (size_t i = 0; i < s->nqueues; i++)
		print_queue(out, s, &s->queues[i]);
	print_horizon(out, s);
	if (p->n == 0) {
		fputs("healthy\n", out);
		return;
	}
	fputs("needs attention: ", out);
	for (size_t i = 0; i < p->n; i++)
		fprintf(out, "%s%s", i ? "; " : "", p->text[i]);
	fputc('\n', out);
}

/* ---- JSON: every value a "_new" (the object steals it); NULL from jansson only when out of memory ---- */

static json_t *str_or_null(bool have, const char *v)
{
	return have ? json_string(v) : json_null();
}

static json_t *real_or_null(bool have, double v)
{
	return have ? json_real(v) : json_null();
}

static json_t *int_or_null(bool have, long long v)
{
	return have ? json_integer(v) : json_null();
}

static json_t *leader_json(const struct status *s)
{
	const struct lock_holder *h = &s->leader;
	bool session = s->leader_read && h->kind != LOCK_HOLDER_NONE && h->pid > 0;

	return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "holder",
			 str_or_null(s->leader_read, holder_kinds[h->kind]), "host", str_or_null(session, h->addr),
			 "backend_pid", int_or_null(session, h->pid), "application_name", str_or_null(session, h->app),
			 "user", str_or_null(session, h->user), "since", str_or_null(session, h->since), "age_seconds",
			 real_or_null(session && s->leader_age_s >= 0, s->leader_age_s), "epoch",
			 int_or_null(s->epoch >= 0, s->epoch));
}

static json_t *backlog_json(const struct status *s)
{
	if (!s->backlog_read)
		return json_null();
	double oldest = oldest_waiting(s);
	bool any = s->staged > 0 || s->staged_estimated || (s->queues_read && s->held > 0);

	return json_pack("{s:I, s:b, s:o, s:o, s:o, s:o}", "staged", (json_int_t)s->staged, "estimated",
			 s->staged_estimated, "held", int_or_null(s->queues_read, s->held), "oldest_age_seconds",
			 real_or_null(any && !isnan(oldest), oldest), "oldest_staged_age_seconds",
			 real_or_null((s->staged > 0 || s->staged_estimated) && !isnan(s->staged_oldest_s),
				      s->staged_oldest_s),
			 "oldest_held_age_seconds", real_or_null(s->queues_read && s->held > 0, s->held_oldest_s));
}

static json_t *queues_json(const struct status *s)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < s->nqueues; i++) {
		const struct status_queue *q = &s->queues[i];
		if (json_array_append_new(a, json_pack("{s:s, s:s, s:I, s:o, s:o, s:o}", "name", q->name, "target",
						       s->targets[q->target].name, "cap", (json_int_t)q->cap, "held",
						       int_or_null(s->queues_read, q->held), "oldest_held_age_seconds",
						       real_or_null(q->held > 0, q->held_oldest_s), "length",
						       int_or_null(q->length >= 0, q->length))) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* Where the target's workers register: "here", "none", "elsewhere", or null (unknown, or they register nothing). */
static json_t *workers_json(const struct readers *r)
{
	static const char *const names[] = {
		[READERS_HERE] = "here", [READERS_NONE] = "none", [READERS_ELSEWHERE] = "elsewhere"
	};

	return r->verdict == READERS_UNKNOWN ? json_null() : json_string(names[r->verdict]);
}

static json_t *targets_json(const struct status *s)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < s->ntargets; i++) {
		const struct status_target *t = &s->targets[i];
		if (json_array_append_new(a, json_pack("{s:s, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "name",
						       t->name, "configured", t->cfg != NULL, "address",
						       str_or_null(t->tried, t->where), "reachable",
						       t->tried ? json_boolean(t->reached) : json_null(), "error",
						       str_or_null(t->tried && !t->reached, t->err), "held",
						       int_or_null(s->queues_read, t->held), "oldest_held_age_seconds",
						       real_or_null(s->queues_read && t->held > 0, t->held_oldest_s),
						       "workers", workers_json(&t->readers), "workers_where",
						       str_or_null(t->readers.verdict == READERS_ELSEWHERE,
								   t->readers.where),
						       "cluster", str_or_null(t->cluster[0], t->cluster))) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *problems_json(const struct status_problems *p)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < p->n; i++)
		if (json_array_append_new(a, json_string(p->text[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

/* Why parts are unread though their server answered: this role's missing privileges. */
static json_t *notes_json(const struct status *s)
{
	const char *const whys[] = { s->backlog_why, s->queues_why, s->dead_why, s->horizon_why };
	json_t *a = json_array();

	for (size_t i = 0; a && i < sizeof(whys) / sizeof(whys[0]); i++)
		if (*whys[i] && json_array_append_new(a, json_string(whys[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static json_t *gaps_json(const struct status *s)
{
	bool any = s->staging_xacts > 0;

	if (!s->gaps_read)
		return json_null();
	return json_pack("{s:I, s:o, s:o, s:o}", "staging_transactions", (json_int_t)s->staging_xacts,
			 "oldest_age_seconds", real_or_null(any, s->staging_oldest_s), "oldest_pid",
			 int_or_null(any && s->staging_oldest_pid > 0, s->staging_oldest_pid), "oldest_gid",
			 str_or_null(any && *s->staging_oldest_gid, s->staging_oldest_gid));
}

static json_t *dead_json(const struct status *s)
{
	if (!s->dead_read)
		return json_null();
	return json_pack("{s:I, s:o, s:I}", "rows", (json_int_t)s->dead, "oldest_age_seconds",
			 real_or_null(s->dead > 0, s->dead_oldest_s), "misdirected", (json_int_t)s->dead_misdirected);
}

static json_t *horizon_json(const struct status *s)
{
	const struct status_horizon *h = &s->horizon;

	if (!s->horizon_read)
		return json_null();
	return json_pack("{s:b, s:o, s:o, s:o, s:o, s:o, s:o}", "held", h->held, "kind", str_or_null(h->held, h->kind),
			 "name", str_or_null(h->held, h->name), "pid", int_or_null(h->held && h->pid > 0, h->pid),
			 "age_seconds", real_or_null(h->held && h->timed, h->age_s), "xids",
			 int_or_null(h->held, h->xids), "end_it", str_or_null(h->held, h->end_it));
}

static json_t *redis_json(const struct status *s)
{
	return json_pack("{s:b, s:o, s:s, s:o, s:b}", "ok", s->redis_ok, "error",
			 str_or_null(!s->redis_ok, s->redis_err), "address", s->redis_where, "master_name",
			 str_or_null(s->master_name != NULL, s->master_name ? s->master_name : ""), "tls",
			 s->redis_tls);
}

/* Who besides the owner and the relay may change staged rows: [] when none, null when unread. */
static json_t *privileges_json(const struct status *s)
{
	json_t *a = s->privileges_read ? json_array() : json_null();

	for (size_t i = 0; a && s->privileges_read && i < s->privileges.n; i++)
		if (json_array_append_new(a, json_string(s->privileges.text[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

int status_print_json(FILE *out, const struct status *s, const struct status_problems *p, long long max_age_ms,
		      long long horizon_ms)
{
	json_t *o;
	char *text;

	o = json_pack("{s:b, s:o, s:o, s:{s:b, s:o}, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:{s:f, s:f}}",
		      "healthy", p->n == 0, "problems", problems_json(p), "notes", notes_json(s), "postgres", "ok",
		      s->pg_ok, "error", str_or_null(!s->pg_ok, s->pg_err), "redis", redis_json(s), "targets",
		      targets_json(s), "leader", leader_json(s), "backlog", backlog_json(s), "gaps", gaps_json(s),
		      "dead", dead_json(s), "queues", queues_json(s), "horizon", horizon_json(s), "privileges",
		      privileges_json(s), "thresholds", "max_age_seconds", (double)max_age_ms / 1000,
		      "warn_xact_age_seconds", (double)horizon_ms / 1000);
	if (!o)
		return -ENOMEM;
	text = json_dumps(o, JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!text)
		return -ENOMEM;
	fprintf(out, "%s\n", text);
	free(text);
	return 0;
}
