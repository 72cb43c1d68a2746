/* Chaos with a Redis Cluster target, the checker's side (cluster.h): the
 * cluster's jobs read back into chaos_seen, and the self-test that breaks
 * them in known ways. */
#include "fmacros.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "support/redis.h"
#include "support/timing.h"

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
		bool named = cluster_jid_of(job, jid);
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
		redisReply *page = cluster_cmd(r, "XRANGE " PREFIX ":%s:events %s + COUNT %d", queue, from, PAGE);
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
		bool queued = strcmp(src, "queue") == 0, named = cluster_jid_of(id, jid);
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

	if (!(r = cluster_master_open(cc, cc->slot[q], &port)))
		return -1;
	if (events_load(ev, r, queue) < 0 || !(rep = cluster_cmd(r, "LLEN " PREFIX ":%s:wait", queue))) {
		redisFree(r);
		return -1;
	}
	llen = rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
	freeReplyObject(rep);
	for (long long from = 0; rc == 0 && from < llen; from += PAGE) {
		rep = cluster_cmd(r, "LRANGE " PREFIX ":%s:wait %lld %lld", queue, from, from + PAGE - 1);
		rc = rep && rep->type == REDIS_REPLY_ARRAY ? jobs_copy(e, r, queue, ev, "queue", rep, from, llen, l)
							   : -1;
		cc->waiting += rep ? (long long)rep->elements : 0;
		*entries += rep ? (long long)rep->elements : 0;
		freeReplyObject(rep);
	}
	if (rc == 0) {
		rep = cluster_cmd(r, "ZRANGE " PREFIX ":%s:delayed 0 -1", queue);
		rc = rep && rep->type == REDIS_REPLY_ARRAY ? jobs_copy(e, r, queue, ev, "schedule", rep, 0, 0, l) : -1;
		cc->delayed += rep ? (long long)rep->elements : 0;
		*entries += rep ? (long long)rep->elements : 0;
		freeReplyObject(rep);
	}
	redisFree(r);
	return rc;
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
		fault_causes(cc->env, "SELECT t_us FROM chaos_repushed", cc->causes, sizeof(cc->causes));
	return rc;
}

/* The self-test's changes, one a count: a job of {c1} removed (missing),
 * {c2}'s newest pushed again (duplicates, order), a non-job and a
 * rolled-back job's id on {c4} (phantoms, rolled back), {c1}'s newest
 * job's data changed (wrong content), a "duplicated" event (re-pushes). */
static int tamper(redisContext *r[CLUSTER_NQUEUES], const char *rolled_uuid)
{
	redisReply *newest[2] = { cluster_cmd(r[1], "LINDEX " PREFIX ":%s:wait 0", cluster_queues[1]),
				  cluster_cmd(r[0], "LINDEX " PREFIX ":%s:wait 1", cluster_queues[0]) };
	redisReply *x[6] = { 0 };
	int rc = 0;

	for (int i = 0; i < 2; i++)
		if (!newest[i] || newest[i]->type != REDIS_REPLY_STRING)
			rc = -1;
	if (rc == 0) {
		x[0] = cluster_cmd(r[0], "RPOP " PREFIX ":%s:wait", cluster_queues[0]);
		x[1] = cluster_cmd(r[1], "LPUSH " PREFIX ":%s:wait %s", cluster_queues[1], newest[0]->str);
		x[2] = cluster_cmd(r[2], "LPUSH " PREFIX ":%s:wait not-a-job", cluster_queues[2]);
		x[3] = cluster_cmd(r[2], "LPUSH " PREFIX ":%s:wait %s", cluster_queues[2], rolled_uuid);
		x[4] = cluster_cmd(r[0], "HSET " PREFIX ":%s:%s data [99,99]", cluster_queues[0], newest[1]->str);
		x[5] = cluster_cmd(r[2], "XADD " PREFIX ":%s:events * event duplicated jobId %s", cluster_queues[2],
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
		if (!(r[q] = cluster_master_open(cc, cc->slot[q], &port)))
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
