/* Chaos with a Redis Cluster target: see cluster.h. */
#include "fmacros.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "support/redis.h"
#include "support/timing.h"

/* Tags on the three masters of cluster-start's even split (slots 14347,
 * 2152, 10414); a slot move may later put two on one master. */
const char *const cluster_queues[CLUSTER_NQUEUES] = { "{c1}", "{c2}", "{c4}" };

#define CLUSTER_NODES 6
#define PREFIX "bull"
/* BullMQ trims a queue's events stream to opts.maxLenEvents (10000 unless
 * the Queue's streams.events.maxLen says otherwise): the checker reads every
 * job's "added" event, so the run keeps them all. */
#define EVENTS_MAX "1000000000"
#define PAGE 10000

static void note(struct cluster_chaos *cc, const char *kind, const char *fmt, ...) SD_PRINTF(3, 4);
static void note(struct cluster_chaos *cc, const char *kind, const char *fmt, ...)
{
	char text[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	cc->note(cc->note_arg, kind, text);
}

/* A connection to node N (1..6), or NULL if it does not answer. */
static redisContext *node_open(const struct cluster_chaos *cc, int n, int *port)
{
	char path[PATH_MAX], err[REDIS_ERRLEN];
	FILE *f;

	snprintf(path, sizeof(path), "%s/cluster-n%d.port", cc->env->srv.dir, n);
	if (!(f = fopen(path, "r")))
		return NULL;
	if (fscanf(f, "%d", port) != 1)
		*port = 0;
	fclose(f);
	return *port > 0 ? redis_open(*port, 2000, err) : NULL;
}

/* A connection to the master serving slot now, or NULL (said why). */
static redisContext *master_open(struct cluster_chaos *cc, unsigned slot, int *port)
{
	char err[REDIS_ERRLEN];
	redisContext *r;

	if ((*port = services_cluster_master_of(&cc->env->srv, (int)slot)) < 0) {
		say("cluster: no master serves slot %u", slot);
		return NULL;
	}
	if (!(r = redis_open(*port, 5000, err)))
		say("cluster: %s", err);
	return r;
}

/* A command on r whose reply must not be an error; NULL (said why) if it is. */
static redisReply *cmd(redisContext *r, const char *fmt, ...)
{
	char err[REDIS_ERRLEN];
	redisReply *rep;
	va_list ap;

	va_start(ap, fmt);
	rep = redis_vcmd(r, err, fmt, ap);
	va_end(ap);
	if (!rep)
		say("cluster: %s", err);
	return rep;
}

int cluster_start(struct cluster_chaos *cc, struct env *e, bool full_coverage, cluster_note_fn *note_fn, void *note_arg)
{
	const char *const partial[] = { "no-coverage", NULL };
	char path[PATH_MAX], sql[512];
	redisContext *r = NULL;
	FILE *f;
	int port = 0;

	*cc = (struct cluster_chaos){ .env = e, .full_coverage = full_coverage, .note = note_fn, .note_arg = note_arg };
	if (services_run_args(&e->srv, "cluster-start", full_coverage ? NULL : partial, NULL) != 0) {
		say("cluster: services.sh cluster-start failed");
		return -1;
	}
	snprintf(path, sizeof(path), "%s/cluster.url", e->srv.dir);
	if (!(f = fopen(path, "r")) || !fgets(cc->url, sizeof(cc->url), f)) {
		say("cluster: no %s", path);
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	cc->url[strcspn(cc->url, "\n")] = '\0';
	/* WAIT 1 a part: a master killed before its replica has a push cannot
	 * take an acknowledged job with it (docs/redis.md, WAIT). */
	snprintf(cc->flag, sizeof(cc->flag),
		 CLUSTER_ROUTE " %s,%s,%s --redis-url %s --format bullmq --redis-wait-replicas 1"
			       " --redis-wait-timeout 500ms",
		 cluster_queues[0], cluster_queues[1], cluster_queues[2], cc->url);
	for (int n = 1; n <= CLUSTER_NODES && !r; n++)
		r = node_open(cc, n, &port);
	if (!r)
		return -1;
	for (int q = 0; q < CLUSTER_NQUEUES; q++) {
		redisReply *s = cmd(r, "CLUSTER KEYSLOT " PREFIX ":%s:wait", cluster_queues[q]);
		cc->slot[q] = s && s->type == REDIS_REPLY_INTEGER ? (unsigned)s->integer : 0;
		freeReplyObject(s);
	}
	redisFree(r);
	for (int q = 0; q < CLUSTER_NQUEUES; q++) {
		redisReply *s;
		if (!(r = master_open(cc, cc->slot[q], &port)))
			return -1;
		s = cmd(r, "HSET " PREFIX ":%s:meta opts.maxLenEvents " EVENTS_MAX, cluster_queues[q]);
		redisFree(r);
		if (!s)
			return -1;
		freeReplyObject(s);
		snprintf(sql, sizeof(sql), "INSERT INTO chaos_routed VALUES ('%s', '" CLUSTER_ROUTE "')",
			 cluster_queues[q]);
		if (env_val(e, sql) < 0)
			return -1;
	}
	return env_val(e, "CREATE TABLE chaos_repushed (queue text NOT NULL, id text NOT NULL, jid text,"
			  " t_us bigint NOT NULL)") < 0
		       ? -1
		       : 0;
}

void cluster_args(const struct cluster_chaos *cc, struct relay_argv *a)
{
	(void)relay_argv_add(a, "--route", cc->flag);
}

void cluster_uuid(const char *jid, char out[37])
{
	char hex[33];

	snprintf(hex, sizeof(hex), "%.24s00000000", jid);
	snprintf(out, 37, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16, hex + 20);
}

/* The jid a job id names (cluster_uuid's inverse); false for any other id. */
static bool jid_of(const char *id, char out[25])
{
	char hex[33];
	size_t n = 0;

	if (strlen(id) != 36 || id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-')
		return false;
	for (const char *p = id; *p; p++)
		if (*p != '-')
			hex[n++] = *p;
	hex[n] = '\0';
	if (n != 32 || strspn(hex, "0123456789abcdef") != 32 || strcmp(hex + 24, "00000000") != 0)
		return false;
	memcpy(out, hex, 24);
	out[24] = '\0';
	return true;
}

/* ---- faults ---- */

int cluster_kill(struct cluster_chaos *cc, unsigned long long *rng)
{
	int q = (int)(rnd(rng) % CLUSTER_NQUEUES), port;
	char arg[16], promoted[64];
	const char *const args[] = { arg, NULL };
	long long t0;

	if ((port = services_cluster_master_of(&cc->env->srv, (int)cc->slot[q])) < 0)
		return -1;
	snprintf(arg, sizeof(arg), "%d", port);
	note(cc, "cluster master SIGKILL", "the master of %s (slot %u) on port %d", cluster_queues[q], cc->slot[q],
	     port);
	if (services_run_args(&cc->env->srv, "cluster-kill", args, NULL) != 0)
		return -1;
	t0 = mono_ms();
	if (services_output(&cc->env->srv, "cluster-wait-promoted", args, promoted, sizeof(promoted)) < 0)
		return -1;
	for (char *p = promoted; (p = strchr(p, '\n'));)
		*p = ' ';
	if (cc->kills < (int)(sizeof(cc->promote_ms) / sizeof(cc->promote_ms[0])))
		cc->promote_ms[cc->kills] = mono_ms() - t0;
	cc->kills++;
	cc->killed_port = port;
	note(cc, "cluster failover", "port %s serves its slots, %lld ms after the SIGKILL", promoted, mono_ms() - t0);
	return 0;
}

int cluster_revive(struct cluster_chaos *cc)
{
	char arg[16];
	const char *const args[] = { arg, NULL };
	long long held = env_val(cc->env, "SELECT count(*) FROM staged_jobs_held WHERE target = '" CLUSTER_ROUTE "'");

	if (cc->killed_port <= 0)
		return 0;
	snprintf(arg, sizeof(arg), "%d", cc->killed_port);
	if (services_run_args(&cc->env->srv, "cluster-revive", args, NULL) != 0)
		return -1;
	cc->held_at_revive += held > 0 ? held : 0;
	cc->revives++;
	note(cc, "cluster master revived", "port %d rejoined as a replica (%lld rows were held for the cluster)",
	     cc->killed_port, held);
	cc->killed_port = 0;
	return 0;
}

/* The masters' ports (ROLE master), at most CLUSTER_NODES; how many. */
static int masters(struct cluster_chaos *cc, int *ports)
{
	int n = 0;

	for (int i = 1; i <= CLUSTER_NODES; i++) {
		int port = 0;
		redisContext *r = node_open(cc, i, &port);
		redisReply *role = r ? redisCommand(r, "ROLE") : NULL;
		if (role && role->type == REDIS_REPLY_ARRAY && role->elements > 0 &&
		    role->element[0]->type == REDIS_REPLY_STRING && strcmp(role->element[0]->str, "master") == 0)
			ports[n++] = port;
		freeReplyObject(role);
		if (r)
			redisFree(r);
	}
	return n;
}

int cluster_move(struct cluster_chaos *cc, unsigned long long *rng)
{
	int q = (int)(rnd(rng) % CLUSTER_NQUEUES), ports[CLUSTER_NODES], n = masters(cc, ports), from, to = -1;
	unsigned slot = cc->slot[q];
	char slot_arg[16], to_arg[16], count[24], pause[24];
	const char *const args[] = { slot_arg, to_arg, NULL };
	long long keys = 0, t0, ms;
	redisContext *r;
	redisReply *k;
	int rc;

	if (!(r = master_open(cc, slot, &from)))
		return -1;
	k = cmd(r, "CLUSTER COUNTKEYSINSLOT %u", slot);
	keys = k && k->type == REDIS_REPLY_INTEGER ? k->integer : 0;
	freeReplyObject(k);
	redisFree(r);
	for (int tries = 0; tries < 16 && (to < 0 || to == from) && n > 0; tries++)
		to = ports[rnd(rng) % (unsigned)n];
	if (to < 0 || to == from) {
		say("cluster: no master but %d to move slot %u to", from, slot);
		return -1;
	}
	/* About 40 MIGRATEs whatever the slot holds, each a pause apart: ASK
	 * and TRYAGAIN answers for a second or more while jobs flow. */
	snprintf(count, sizeof(count), "%lld", keys / 40 > 20 ? keys / 40 : 20);
	snprintf(pause, sizeof(pause), "%lld", rnd_range(rng, 20, 60));
	snprintf(slot_arg, sizeof(slot_arg), "%u", slot);
	snprintf(to_arg, sizeof(to_arg), "%d", to);
	setenv("CLUSTER_MIGRATE_COUNT", count, 1);
	setenv("CLUSTER_MIGRATE_PAUSE_MS", pause, 1);
	note(cc, "slot migration", "slot %u (%s, %lld keys) from port %d to %d, %s keys a MIGRATE, %s ms apart", slot,
	     cluster_queues[q], keys, from, to, count, pause);
	t0 = mono_ms();
	rc = services_run_args(&cc->env->srv, "cluster-move-slot", args, NULL);
	ms = mono_ms() - t0;
	unsetenv("CLUSTER_MIGRATE_COUNT");
	unsetenv("CLUSTER_MIGRATE_PAUSE_MS");
	if (rc != 0)
		return -1;
	if (cc->moves < (int)(sizeof(cc->move_ms) / sizeof(cc->move_ms[0]))) {
		cc->move_ms[cc->moves] = ms;
		cc->move_keys[cc->moves] = keys;
	}
	cc->moves++;
	note(cc, "slot migrated", "slot %u now on port %d, after %lld ms", slot, to, ms);
	return 0;
}

/* ---- the checker ---- */

/* A job id and the time of its "added" event. */
struct added {
	char *id;
	long long ms;
};

static int cmp_added(const void *a, const void *b)
{
	return strcmp(((const struct added *)a)->id, ((const struct added *)b)->id);
}

/* What one queue's events stream says: each job's "added" time (sorted by
 * id), and its "duplicated" events as VALUES for chaos_repushed. */
struct events {
	struct added *a;
	size_t n, cap;
	struct strbuf repushed;
	long long repushes;
};

static void events_free(struct events *ev)
{
	for (size_t i = 0; i < ev->n; i++)
		free(ev->a[i].id);
	free(ev->a);
	strbuf_free(&ev->repushed);
	*ev = (struct events){ 0 };
}

/* One event: [id, [field, value, ...]]. */
static int event_read(struct events *ev, const char *queue, const redisReply *e)
{
	const redisReply *f = e->element[1];
	const char *kind = NULL, *job = NULL;
	long long ms = strtoll(e->element[0]->str, NULL, 10);
	char jid[25];

	for (size_t i = 0; i + 1 < f->elements; i += 2) {
		if (strcmp(f->element[i]->str, "event") == 0)
			kind = f->element[i + 1]->str;
		else if (strcmp(f->element[i]->str, "jobId") == 0)
			job = f->element[i + 1]->str;
	}
	if (!kind || !job)
		return 0;
	if (strcmp(kind, "added") == 0) {
		if (ev->n == ev->cap) {
			struct added *a = realloc(ev->a, (ev->cap = ev->cap ? ev->cap * 2 : 1024) * sizeof(*a));
			if (!a)
				return -1;
			ev->a = a;
		}
		ev->a[ev->n++] = (struct added){ .id = strdup(job), .ms = ms };
		return ev->a[ev->n - 1].id ? 0 : -1;
	}
	if (strcmp(kind, "duplicated") == 0) {
		/* Ids are uuids or the self-test's own: nothing to quote. */
		bool named = jid_of(job, jid);
		strbuf_printf(&ev->repushed, "%s('%s', '%.60s', %s%s%s, %lld)", ev->repushes ? "," : "", queue, job,
			      named ? "'" : "", named ? jid : "NULL", named ? "'" : "", ms * 1000);
		ev->repushes++;
	}
	return 0;
}

/* Reads queue's events stream on r, a page at a time. */
static int events_load(struct events *ev, redisContext *r, const char *queue)
{
	char from[64] = "-";

	for (;;) {
		redisReply *page = cmd(r, "XRANGE " PREFIX ":%s:events %s + COUNT %d", queue, from, PAGE);
		size_t n = page && page->type == REDIS_REPLY_ARRAY ? page->elements : 0;
		int rc = page ? 0 : -1;
		for (size_t i = 0; rc == 0 && i < n; i++)
			rc = event_read(ev, queue, page->element[i]);
		if (n > 0)
			snprintf(from, sizeof(from), "(%s", page->element[n - 1]->element[0]->str);
		freeReplyObject(page);
		if (rc < 0)
			return -1;
		if (n < PAGE)
			break;
	}
	qsort(ev->a, ev->n, sizeof(*ev->a), cmp_added);
	return 0;
}

/* The chaos_seen rows of ids (a page of a wait list or the delayed set):
 * each job hash's name and data, pipelined. */
static int jobs_copy(struct env *e, redisContext *r, const char *queue, const struct events *ev, const char *src,
		     const redisReply *ids, long long first, long long llen, struct strbuf *l)
{
	int rc = 0;

	for (size_t i = 0; i < ids->elements; i++)
		redisAppendCommand(r, "HMGET " PREFIX ":%s:%s name data", queue, ids->element[i]->str);
	for (size_t i = 0; i < ids->elements; i++) {
		const char *id = ids->element[i]->str;
		redisReply *h = NULL;
		struct added key = { .id = (char *)id }, *a;
		char jid[25], pos[32], enq[32], enq_us[32];
		bool queued = strcmp(src, "queue") == 0, named = jid_of(id, jid);
		/* LPUSH puts the newest at index 0: a wait list's push order counts from the tail. */
		snprintf(pos, sizeof(pos), "%lld", queued ? llen - 1 - (first + (long long)i) : first + (long long)i);
		if (redisGetReply(r, (void **)&h) != REDIS_OK || !h || h->type != REDIS_REPLY_ARRAY ||
		    h->elements != 2) {
			freeReplyObject(h);
			return -1;
		}
		a = queued ? bsearch(&key, ev->a, ev->n, sizeof(*ev->a), cmp_added) : NULL;
		if (a) {
			snprintf(enq, sizeof(enq), "%lld.%03lld", a->ms / 1000, a->ms % 1000);
			snprintf(enq_us, sizeof(enq_us), "%lld", a->ms * 1000);
		}
		seen_line(l, (const char *const[SEEN_FIELDS]){
				     src, CLUSTER_ROUTE, queued ? queue : NULL, pos, named ? jid : NULL, queue,
				     h->element[0]->type == REDIS_REPLY_STRING ? h->element[0]->str : NULL,
				     h->element[1]->type == REDIS_REPLY_STRING ? h->element[1]->str : NULL,
				     a ? enq : NULL, a ? enq_us : NULL });
		freeReplyObject(h);
		if (rc == 0 && seen_copy_put(e, l) < 0)
			rc = -1;
	}
	return rc;
}

/* One queue, at its slot's master: the wait list, then the delayed set. */
static int queue_load(struct cluster_chaos *cc, struct env *e, int q, struct events *ev, long long *entries,
		      struct strbuf *l)
{
	const char *queue = cluster_queues[q];
	redisContext *r;
	redisReply *rep;
	long long llen;
	int port, rc = 0;

	if (!(r = master_open(cc, cc->slot[q], &port)))
		return -1;
	if (events_load(ev, r, queue) < 0 || !(rep = cmd(r, "LLEN " PREFIX ":%s:wait", queue))) {
		redisFree(r);
		return -1;
	}
	llen = rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
	freeReplyObject(rep);
	for (long long from = 0; rc == 0 && from < llen; from += PAGE) {
		rep = cmd(r, "LRANGE " PREFIX ":%s:wait %lld %lld", queue, from, from + PAGE - 1);
		rc = rep && rep->type == REDIS_REPLY_ARRAY ? jobs_copy(e, r, queue, ev, "queue", rep, from, llen, l)
							   : -1;
		cc->waiting += rep ? (long long)rep->elements : 0;
		*entries += rep ? (long long)rep->elements : 0;
		freeReplyObject(rep);
	}
	if (rc == 0) {
		rep = cmd(r, "ZRANGE " PREFIX ":%s:delayed 0 -1", queue);
		rc = rep && rep->type == REDIS_REPLY_ARRAY ? jobs_copy(e, r, queue, ev, "schedule", rep, 0, 0, l) : -1;
		cc->delayed += rep ? (long long)rep->elements : 0;
		*entries += rep ? (long long)rep->elements : 0;
		freeReplyObject(rep);
	}
	redisFree(r);
	return rc;
}

/* Each re-push by the fault that preceded it, as report lines into cc->causes. */
static void repush_causes(struct cluster_chaos *cc)
{
	PGresult *res = PQexec(cc->env->pg, "SELECT coalesce(e.kind, 'none'), count(*) FROM chaos_repushed d"
					    " LEFT JOIN LATERAL (SELECT kind FROM chaos_events"
					    "  WHERE t_us <= d.t_us ORDER BY t_us DESC LIMIT 1) e ON true"
					    " GROUP BY 1 ORDER BY 2 DESC");
	size_t len = 0;

	cc->causes[0] = '\0';
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		for (int i = 0; i < PQntuples(res) && len < sizeof(cc->causes); i++)
			len += (size_t)snprintf(cc->causes + len, sizeof(cc->causes) - len, "    after %-26s %s\n",
						PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
	PQclear(res);
}

int cluster_seen_load(struct cluster_chaos *cc, struct env *e, long long *entries)
{
	struct events ev[CLUSTER_NQUEUES] = { 0 };
	struct strbuf l = { 0 };
	int rc = 0;

	cc->waiting = cc->delayed = cc->repushes = 0;
	if (env_val(e, "TRUNCATE chaos_repushed") < 0 || seen_copy_begin(e) < 0)
		return -1;
	for (int q = 0; rc == 0 && q < CLUSTER_NQUEUES; q++)
		rc = queue_load(cc, e, q, &ev[q], entries, &l);
	rc = seen_copy_end(e, rc);
	for (int q = 0; q < CLUSTER_NQUEUES; q++) {
		cc->repushes += ev[q].repushes;
		if (rc == 0 && ev[q].repushes > 0) {
			strbuf_reset(&l);
			strbuf_printf(&l, "INSERT INTO chaos_repushed VALUES %s", ev[q].repushed.data);
			rc = env_val(e, l.data) < 0 ? -1 : 0;
		}
		events_free(&ev[q]);
	}
	strbuf_free(&l);
	if (rc == 0 && cc->repushes > 0)
		repush_causes(cc);
	return rc;
}

/* The self-test's changes, one a count: a job of {c1} removed (missing),
 * {c2}'s newest pushed again (duplicates, order), a non-job and a
 * rolled-back job's id on {c4} (phantoms, rolled back), {c1}'s newest
 * job's data changed (wrong content), a "duplicated" event (re-pushes). */
static int tamper(redisContext *r[CLUSTER_NQUEUES], const char *rolled_uuid)
{
	redisReply *newest[2] = { cmd(r[1], "LINDEX " PREFIX ":%s:wait 0", cluster_queues[1]),
				  cmd(r[0], "LINDEX " PREFIX ":%s:wait 1", cluster_queues[0]) };
	redisReply *x[6] = { 0 };
	int rc = 0;

	for (int i = 0; i < 2; i++)
		if (!newest[i] || newest[i]->type != REDIS_REPLY_STRING)
			rc = -1;
	if (rc == 0) {
		x[0] = cmd(r[0], "RPOP " PREFIX ":%s:wait", cluster_queues[0]);
		x[1] = cmd(r[1], "LPUSH " PREFIX ":%s:wait %s", cluster_queues[1], newest[0]->str);
		x[2] = cmd(r[2], "LPUSH " PREFIX ":%s:wait not-a-job", cluster_queues[2]);
		x[3] = cmd(r[2], "LPUSH " PREFIX ":%s:wait %s", cluster_queues[2], rolled_uuid);
		x[4] = cmd(r[0], "HSET " PREFIX ":%s:%s data [99,99]", cluster_queues[0], newest[1]->str);
		x[5] = cmd(r[2], "XADD " PREFIX ":%s:events * event duplicated jobId %s", cluster_queues[2],
			   rolled_uuid);
	}
	for (int i = 0; i < 6; i++) {
		rc = x[i] ? rc : -1;
		freeReplyObject(x[i]);
	}
	freeReplyObject(newest[0]);
	freeReplyObject(newest[1]);
	return rc;
}

int cluster_self_test(struct cluster_chaos *cc, const struct results *before, struct results *after)
{
	struct env *e = cc->env;
	long long waiting = cc->waiting, delayed = cc->delayed, repushes = cc->repushes;
	char causes[sizeof(cc->causes)];
	redisContext *r[CLUSTER_NQUEUES] = { 0 };
	char rolled[64] = "", uuid[37];
	int port, rc = 0;

	memcpy(causes, cc->causes, sizeof(causes));
	env_text(e, "SELECT jid FROM chaos_rolledback LIMIT 1", rolled, sizeof(rolled));
	cluster_uuid(rolled, uuid);
	for (int q = 0; q < CLUSTER_NQUEUES; q++)
		if (!(r[q] = master_open(cc, cc->slot[q], &port)))
			rc = -1;
	if (rc == 0 && (!*rolled || tamper(r, uuid) < 0))
		rc = -1;
	for (int q = 0; q < CLUSTER_NQUEUES; q++)
		if (r[q])
			redisFree(r[q]);
	if (rc < 0 || env_val(e, "TRUNCATE chaos_seen") < 0 || seen_load(e, &after->entries) < 0 ||
	    (e->seen_more && e->seen_more(e, &after->entries, e->seen_more_arg) < 0) || check_redis(e, after) < 0)
		return -1;
	rc = after->missing > before->missing && after->duplicates > before->duplicates &&
			     after->phantoms > before->phantoms && after->rolled_back > before->rolled_back &&
			     after->mismatched > before->mismatched &&
			     after->order_violations > before->order_violations && cc->repushes > repushes
		     ? 0
		     : 1;
	snprintf(cc->self_test, sizeof(cc->self_test),
		 "injected 6 faults; counts moved: missing %+lld, duplicates %+lld,\n"
		 "                               order %+lld, phantoms %+lld, rolled back %+lld,\n"
		 "                               wrong content %+lld, pushed again %+lld: %s",
		 after->missing - before->missing, after->duplicates - before->duplicates,
		 after->order_violations - before->order_violations, after->phantoms - before->phantoms,
		 after->rolled_back - before->rolled_back, after->mismatched - before->mismatched,
		 cc->repushes - repushes, rc == 0 ? "all caught" : "NOT ALL CAUGHT");
	cc->waiting = waiting;
	cc->delayed = delayed;
	cc->repushes = repushes;
	memcpy(cc->causes, causes, sizeof(causes));
	return rc;
}

/* The relays' log lines (relay-001.log ...) where the cluster target waited
 * out --redis-timeout for an answer that never came: no node of a healthy
 * cluster (a killed one closes its sockets) leaves a command unanswered, so
 * each is a stall. The first goes to first. */
static long long unanswered(const struct cluster_chaos *cc, int relay_logs, char *first, size_t len)
{
	char path[PATH_MAX + 32], line[2048];
	long long n = 0;

	*first = '\0';
	for (int i = 1; i <= relay_logs; i++) {
		FILE *f;
		snprintf(path, sizeof(path), "%s/relay-%03d.log", cc->env->srv.dir, i);
		if (!(f = fopen(path, "r")))
			continue;
		while (fgets(line, sizeof(line), f))
			if (strstr(line, "no reply within") && strstr(line, "target=" CLUSTER_ROUTE) && n++ == 0)
				snprintf(first, len, "relay-%03d.log: %.400s", i, line);
		fclose(f);
	}
	return n;
}

bool cluster_report(struct cluster_chaos *cc, int want_kills, int want_moves, int relay_logs)
{
	char first[600];
	long long stalls = unanswered(cc, relay_logs, first, sizeof(first));
	long long max_promote = 0, max_move = 0, keys = 0;
	int nk = cc->kills < 64 ? cc->kills : 64, nm = cc->moves < 64 ? cc->moves : 64;

	for (int i = 0; i < nk; i++)
		max_promote = cc->promote_ms[i] > max_promote ? cc->promote_ms[i] : max_promote;
	for (int i = 0; i < nm; i++) {
		max_move = cc->move_ms[i] > max_move ? cc->move_ms[i] : max_move;
		keys += cc->move_keys[i];
	}
	printf("  cluster target \"" CLUSTER_ROUTE "\"         3 masters, a replica each, full coverage %s;"
	       " %s %s %s, bullmq, WAIT 1\n",
	       cc->full_coverage ? "yes" : "no", cluster_queues[0], cluster_queues[1], cluster_queues[2]);
	printf("  cluster jobs                 %lld in wait lists, %lld delayed\n", cc->waiting, cc->delayed);
	printf("  cluster masters SIGKILLed    %d (promoted within %lld ms at most), revived %d;"
	       " %lld rows held for the cluster at the revives\n",
	       cc->kills, max_promote, cc->revives, cc->held_at_revive);
	printf("  slot migrations              %d (%lld keys moved, the longest took %lld ms)\n", cc->moves, keys,
	       max_move);
	printf("  pushed again (BullMQ kept 1) %lld (\"duplicated\" events: the relay pushed a job twice)\n",
	       cc->repushes);
	if (cc->repushes > 0)
		fputs(cc->causes, stdout);
	printf("  cluster answers never came   %lld (relay log lines: --redis-timeout waited out)\n", stalls);
	if (stalls > 0)
		printf("    first: %s%s", first, strchr(first, '\n') ? "" : "\n");
	if (*cc->self_test)
		printf("  cluster self-test            %s\n", cc->self_test);
	return cc->kills >= want_kills && cc->revives == cc->kills && cc->moves >= want_moves && cc->waiting > 0 &&
	       cc->repushes == 0 && stalls == 0;
}

void cluster_stop(struct cluster_chaos *cc)
{
	if (cc->env && services_run(&cc->env->srv, "cluster-stop", NULL) != 0)
		say("cluster: services.sh cluster-stop failed");
}
