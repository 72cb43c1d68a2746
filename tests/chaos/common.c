/* What the chaos programs share: see common.h. */
#include "fmacros.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"
#include "support/redis.h"
#include "support/relay_keys.h"
#include "support/sql.h"

const char *const queues[NQUEUES] = { "chaos_a", "chaos_b", "chaos_c", "chaos_d" };

/* The checker's tables (see struct results in common.h). */
static const char checker_sql[] =
	"CREATE TABLE chaos_committed (jid text PRIMARY KEY, id bigint NOT NULL, queue text NOT NULL,"
	" args jsonb NOT NULL, scheduled bool NOT NULL, tx bigint);"
	"CREATE TABLE chaos_rolledback (jid text PRIMARY KEY);"
	"CREATE TABLE chaos_seen (src text NOT NULL, target text NOT NULL, list text, pos int NOT NULL, jid text,"
	" queue text, class text, args text, enq text, enq_us bigint);"
	"CREATE TABLE chaos_routed (queue text NOT NULL, target text NOT NULL, PRIMARY KEY (queue, target));";

/* ---- randomness, small helpers ---- */

unsigned long long rnd(unsigned long long *s)
{
	unsigned long long z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

long long rnd_range(unsigned long long *s, long long lo, long long hi)
{
	return lo + (long long)(rnd(s) % (unsigned long long)(hi - lo + 1));
}

void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("chaos: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

long long sum_field(const void *base, size_t stride, int n, size_t off)
{
	long long sum = 0;

	for (int i = 0; i < n; i++)
		sum += atomic_load((_Atomic long long *)((char *)base + stride * (size_t)i + off));
	return sum;
}

int parse_flags(int argc, char **argv, const struct flag *flags, size_t nflags, bool *keep)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		size_t f = 0;
		if (strcmp(a, "--keep") == 0) {
			*keep = true;
			continue;
		}
		while (f < nflags && strcmp(a + (a[0] == '-' && a[1] == '-' ? 2 : 0), flags[f].name) != 0)
			f++;
		if (!v || f == nflags || strncmp(a, "--", 2) != 0)
			return -1;
		i++;
		if (flags[f].type == FLAG_INT)
			*(int *)flags[f].to = atoi(v);
		else if (flags[f].type == FLAG_LL)
			*(long long *)flags[f].to = atoll(v);
		else if (flags[f].type == FLAG_UINT)
			*(unsigned *)flags[f].to = (unsigned)strtoul(v, NULL, 10);
		else
			*(const char **)flags[f].to = v;
	}
	return 0;
}

void *chaos_begin(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	catch_signals();
	if (p == MAP_FAILED) {
		perror("chaos: mmap");
		return NULL;
	}
	return p;
}

int usage(const char *text)
{
	fputs(text, stderr);
	return 2;
}

bool report_end(bool ok, const char *self_test, long long start_ms)
{
	printf("  checker self-test            %s\n", self_test ? self_test : "could not run");
	printf("  total time                   %.1f s\n", (double)(mono_ms() - start_ms) / 1000.0);
	printf("%s\n", ok ? "PASS" : "FAIL");
	return ok;
}

/* ---- the throwaway servers, sessions, relays ---- */

static void query_failed(const char *msg)
{
	say("query failed: %s", msg);
}

PGconn *env_pg_connect(const struct env *e, const char *name)
{
	char url[1200], err[SQL_ERRLEN];
	PGconn *conn;

	snprintf(url, sizeof(url), "%s?application_name=%s&connect_timeout=10", e->srv.pg_url, name);
	if (!(conn = sql_connect(url, err))) {
		say("%s", err);
		return NULL;
	}
	if (sql_or(conn, query_failed, "SET statement_timeout = '120s'") < 0) {
		PQfinish(conn);
		return NULL;
	}
	return conn;
}

long long env_val(struct env *e, const char *sql)
{
	return sql_or(e->pg, query_failed, "%s", sql);
}

void env_text(struct env *e, const char *sql, char *out, size_t outlen)
{
	char err[SQL_ERRLEN];

	if (sql_text(e->pg, out, outlen, err, sql) < 0)
		say("query failed: %s", err);
}

/* Reconnects once if Redis was restarted under the connection; NULL (and no
 * reconnect storm) while Redis is down. */
redisReply *env_cmd(struct env *e, const char *fmt, ...)
{
	char err[REDIS_ERRLEN] = "";
	redisReply *r = NULL;
	va_list ap;

	for (int attempt = 0; attempt < 2 && !r; attempt++) {
		if (!e->redis || e->redis->err) {
			if (e->redis)
				redisFree(e->redis);
			if (!(e->redis = redis_open(e->srv.redis_port, 2000, err)))
				continue;
		}
		va_start(ap, fmt);
		r = redis_vcmd(e->redis, err, fmt, ap);
		va_end(ap);
		if (!r && !e->redis->err)
			break; /* an error reply: reconnecting would not help */
	}
	if (!r && *err && e->redis && !e->redis->err)
		say("%s", err);
	return r;
}

/* The child names its Postgres session after its own pid, so the killer can
 * map the backend holding the advisory lock to the process to SIGKILL. */
struct relay_url {
	const char *pg_url;
	struct relay *r;
};

static void name_session(void *arg)
{
	struct relay_url *u = arg;

	snprintf(u->r->pg_url, sizeof(u->r->pg_url), "%s?application_name=stagedrain-%ld", u->pg_url, (long)getpid());
}

void env_relay_argv(struct env *e, struct relay *r, struct relay_argv *a)
{
	*r->pg_url = '\0';
	relay_argv_init(a, e->bin, r->pg_url, e->srv.redis_url);
}

int env_relay_start(struct env *e, struct relay *r, const struct relay_argv *a, const char *ready, int timeout_ms)
{
	struct relay_url u = { e->srv.pg_url, r };
	struct proc_opts o = { .argv = a->argv, .log = r->log, .child_setup = name_session, .child_arg = &u };
	int rc;

	if (a->err) {
		say("could not build a relay's command line: %s", strerror(-a->err));
		return a->err;
	}
	if ((rc = proc_start(&r->proc, &o)) < 0)
		return rc;
	if (logs_wait(r->log, ready, 1, timeout_ms, &r->proc))
		return 0;
	if (proc_exited(&r->proc)) {
		say("a relay exited while starting (status %d); see %s", proc_wait(&r->proc, 0), r->log);
		return -ECHILD;
	}
	say("a relay did not log %s within %d ms; see %s", ready, timeout_ms, r->log);
	return -ETIMEDOUT;
}

int kids_start(struct kids *k, struct env *e, int n, int (*fn)(void *arg, int i), void *arg)
{
	for (int i = 0; i < n && i < (int)(sizeof(k->p) / sizeof(k->p[0])); i++) {
		pid_t pid = fork();
		if (pid < 0)
			return -errno;
		if (pid == 0) {
			e->pg = NULL;
			e->redis = NULL;
			_exit(fn(arg, i));
		}
		k->p[i] = (struct proc){ .pid = pid, .status = -1 };
		k->n = i + 1;
	}
	return 0;
}

int kids_reap(struct kids *k, bool block, const char *what)
{
	int running = 0;

	for (int i = 0; i < k->n; i++) {
		int st;
		if (k->p[i].pid <= 0)
			continue;
		if ((st = proc_wait(&k->p[i], block ? -1 : 0)) < 0) {
			running += k->p[i].pid > 0;
		} else if (st != 0) {
			say("%s %d failed (status %d)", what, i, st);
			k->failures++;
		}
	}
	return running;
}

void kids_kill(struct kids *k)
{
	for (int i = 0; i < k->n; i++)
		(void)proc_stop(&k->p[i], SIGKILL, -1);
}

/* Grows b to hold n more bytes and a terminator. */
static void strbuf_reserve(struct strbuf *b, size_t n)
{
	size_t cap = b->cap ? b->cap : 256;
	char *d;

	if (b->len + n + 1 <= b->cap)
		return;
	while (cap < b->len + n + 1)
		cap *= 2;
	if (!(d = realloc(b->data, cap)))
		abort();
	b->data = d;
	b->cap = cap;
}

void strbuf_put(struct strbuf *b, const char *s, size_t n)
{
	strbuf_reserve(b, n);
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void strbuf_printf(struct strbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		abort();
	strbuf_reserve(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void strbuf_reset(struct strbuf *b)
{
	b->len = 0;
	if (b->data)
		*b->data = '\0';
}

void strbuf_free(struct strbuf *b)
{
	free(b->data);
	*b = (struct strbuf){ 0 };
}

/* COPY text format: backslash, tab, newline and carriage return are escaped. */
static void copy_field(struct strbuf *l, const char *s)
{
	if (l->len)
		strbuf_put(l, "\t", 1);
	if (!s) {
		strbuf_put(l, "\\N", 2);
		return;
	}
	for (; *s; s++) {
		const char *esc = *s == '\\'   ? "\\\\"
				  : *s == '\t' ? "\\t"
				  : *s == '\n' ? "\\n"
				  : *s == '\r' ? "\\r"
					       : NULL;
		strbuf_put(l, esc ? esc : s, esc ? 2 : 1);
	}
}

/* enqueued_at exactly as written: a JSON number parsed to double would lose
 * microseconds, and microseconds are what tell batches apart. */
static bool raw_enqueued_at(const char *payload, size_t len, char *out, size_t outlen, long long *us)
{
	const char *p = strstr(payload, "\"enqueued_at\":"), *end = payload + len;
	size_t n = 0;
	long long sec = 0, frac = 0;
	int digits = 0;

	if (!p)
		return false;
	p += strlen("\"enqueued_at\":");
	while (p + n < end && n + 1 < outlen && strchr("0123456789.", p[n]))
		n++;
	memcpy(out, p, n);
	out[n] = '\0';
	p = out;
	while (*p >= '0' && *p <= '9')
		sec = sec * 10 + (*p++ - '0');
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9' && digits < 6; p++, digits++)
			frac = frac * 10 + (*p - '0');
	for (; digits < 6; digits++)
		frac *= 10;
	*us = sec * 1000000 + frac;
	return n > 0;
}

void seen_line(struct strbuf *l, const char *const f[SEEN_FIELDS])
{
	strbuf_reset(l);
	for (int i = 0; i < SEEN_FIELDS; i++)
		copy_field(l, f[i]);
	strbuf_put(l, "\n", 1);
}

/* One Redis entry as a chaos_seen row: where it was, and what it says. */
static void seen_row(struct strbuf *l, const char *src, const char *target, const char *list, long long pos,
		     const char *payload, size_t len)
{
	json_t *job = json_loadb(payload, len, 0, NULL);
	char posbuf[32], enq[64], enq_us[32], *args = NULL;
	long long us = 0;
	bool has_enq = raw_enqueued_at(payload, len, enq, sizeof(enq), &us);

	snprintf(posbuf, sizeof(posbuf), "%lld", pos);
	snprintf(enq_us, sizeof(enq_us), "%lld", us);
	if (job && json_object_get(job, "args"))
		args = json_dumps(json_object_get(job, "args"), JSON_COMPACT | JSON_ENCODE_ANY);
	seen_line(l, (const char *const[SEEN_FIELDS]){ src, target, list, posbuf,
						       json_string_value(json_object_get(job, "jid")),
						       json_string_value(json_object_get(job, "queue")),
						       json_string_value(json_object_get(job, "class")), args,
						       has_enq ? enq : NULL, has_enq ? enq_us : NULL });
	free(args);
	json_decref(job);
}

static int copy_reply(struct env *e, struct strbuf *l, const char *src, const char *list, long long base,
		      long long llen, const redisReply *r)
{
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *el = r->element[i];
		/* LPUSH puts the newest at index 0: position in push order counts from the tail. */
		long long pos = list ? llen - 1 - (base + (long long)i) : base + (long long)i;
		if (el->type != REDIS_REPLY_STRING)
			continue;
		seen_row(l, src, e->seen_target ? e->seen_target : "default", list, pos, el->str, el->len);
		if (seen_copy_put(e, l) < 0)
			return -1;
	}
	return 0;
}

int seen_copy_begin(struct env *e)
{
	PGresult *res =
		PQexec(e->pg,
		       "COPY chaos_seen (src, target, list, pos, jid, queue, class, args, enq, enq_us) FROM STDIN");
	int rc = PQresultStatus(res) == PGRES_COPY_IN ? 0 : -1;

	if (rc < 0)
		say("copy failed: %s", PQerrorMessage(e->pg));
	PQclear(res);
	return rc;
}

int seen_copy_put(struct env *e, const struct strbuf *l)
{
	return PQputCopyData(e->pg, l->data, (int)l->len) == 1 ? 0 : -1;
}

int seen_copy_end(struct env *e, int rc)
{
	PGresult *res;

	if (PQputCopyEnd(e->pg, rc == 0 ? NULL : "reading redis failed") != 1)
		rc = -1;
	while ((res = PQgetResult(e->pg)) != NULL) {
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			say("copy failed: %s", PQerrorMessage(e->pg));
			rc = -1;
		}
		PQclear(res);
	}
	/* Statistics, so that the checks' self-joins are planned as hash joins
	 * (a guess of a few rows for one list made a nested loop of seconds). */
	return rc == 0 && env_val(e, "ANALYZE chaos_seen") < 0 ? -1 : rc;
}

/* Loads every job in Redis (queue:* lists and the schedule zset) into chaos_seen. */
int seen_load(struct env *e, long long *entries)
{
	struct strbuf l = { 0 };
	char cursor[32] = "0";
	int rc = 0;

	if (seen_copy_begin(e) < 0)
		return -1;
	*entries = 0;
	do {
		redisReply *scan = env_cmd(e, "SCAN %s MATCH queue:* COUNT 1000", cursor);
		if (!scan || scan->type != REDIS_REPLY_ARRAY || scan->elements != 2) {
			rc = -1;
			freeReplyObject(scan);
			break;
		}
		snprintf(cursor, sizeof(cursor), "%s", scan->element[0]->str);
		for (size_t k = 0; rc == 0 && k < scan->element[1]->elements; k++) {
			const char *key = scan->element[1]->element[k]->str;
			redisReply *len = env_cmd(e, "LLEN %s", key);
			long long llen = len && len->type == REDIS_REPLY_INTEGER ? len->integer : 0;
			freeReplyObject(len);
			for (long long from = 0; rc == 0 && from < llen; from += 10000) {
				redisReply *r = env_cmd(e, "LRANGE %s %lld %lld", key, from, from + 9999);
				rc = r && r->type == REDIS_REPLY_ARRAY
					     ? copy_reply(e, &l, "queue", key + 6, from, llen, r)
					     : -1;
				*entries += r ? (long long)r->elements : 0;
				freeReplyObject(r);
			}
		}
		freeReplyObject(scan);
	} while (rc == 0 && strcmp(cursor, "0") != 0);
	if (rc == 0) {
		redisReply *z = env_cmd(e, "ZRANGE schedule 0 -1");
		rc = z && z->type == REDIS_REPLY_ARRAY ? copy_reply(e, &l, "schedule", NULL, 0, 0, z) : -1;
		*entries += z ? (long long)z->elements : 0;
		freeReplyObject(z);
	}
	strbuf_free(&l);
	return seen_copy_end(e, rc);
}

/* " AND <col> = '<list>'" when only one list's order is checked, else "". */
static void ordered_filter(const struct env *e, const char *col, char *out, size_t len)
{
	if (e->ordered)
		snprintf(out, len, " AND %s = '%s'", col, e->ordered);
	else
		*out = '\0';
}

/* Each check is one query; the comments say what each proves. */
int check_redis(struct env *e, struct results *res)
{
	char filter[160], order_sql[1024];

	ordered_filter(e, "s.list", filter, sizeof(filter));
	/* The order check (see below), in every list or in one. */
	if (e->by_producer)
		snprintf(
			order_sql, sizeof(order_sql),
			"WITH j AS (SELECT s.target, s.list, s.pos, s.args::jsonb->>0 AS producer,"
			"   (s.args::jsonb->>1)::int8 AS seq"
			"   FROM chaos_seen s JOIN chaos_committed c USING (jid) WHERE s.src = 'queue'),"
			" o AS (SELECT seq, lag(seq) OVER (PARTITION BY target, list, producer ORDER BY pos) AS prev FROM j)"
			" SELECT count(*) FROM o WHERE prev >= seq");
	else
		snprintf(order_sql, sizeof(order_sql),
			 "WITH j AS (SELECT s.target, s.list, s.enq, s.pos, c.id,"
			 "   s.pos - row_number() OVER (PARTITION BY s.target, s.list, s.enq ORDER BY s.pos) AS island"
			 "   FROM chaos_seen s LEFT JOIN chaos_committed c USING (jid) WHERE s.src = 'queue'%s),"
			 " o AS (SELECT id, lag(id) OVER (PARTITION BY target, list, enq, island ORDER BY pos) AS prev"
			 "   FROM j WHERE id IS NOT NULL)"
			 " SELECT count(*) FROM o WHERE prev >= id",
			 filter);
	const struct {
		long long *out;
		const char *sql;
	} q[] = {
		/* Committed jobs found in Redis. */
		{ &res->present, "SELECT count(DISTINCT jid) FROM chaos_seen JOIN chaos_committed USING (jid)" },
		/* Committed jobs not in Redis. */
		{ &res->missing, "SELECT count(*) FROM chaos_committed c"
				 " WHERE NOT EXISTS (SELECT 1 FROM chaos_seen s WHERE s.jid = c.jid)" },
		/* Extra copies of a jid, anywhere in any Redis. */
		{ &res->duplicates, "SELECT coalesce(sum(n - 1), 0) FROM"
				    " (SELECT count(*) AS n FROM chaos_seen GROUP BY jid HAVING count(*) > 1) d" },
		/* Jobs whose transaction rolled back. */
		{ &res->rolled_back, "SELECT count(*) FROM chaos_seen JOIN chaos_rolledback USING (jid)" },
		/* Entries that are no job we staged (unparseable, no jid, unknown jid). */
		{ &res->phantoms, "SELECT count(*) FROM chaos_seen s WHERE s.jid IS NULL"
				  " OR (NOT EXISTS (SELECT 1 FROM chaos_committed c WHERE c.jid = s.jid)"
				  " AND NOT EXISTS (SELECT 1 FROM chaos_rolledback r WHERE r.jid = s.jid))" },
		/* A committed job in the wrong place or with other content than staged:
		 * another list, the zset although not scheduled (or the reverse), a queue,
		 * class or args different from the row, or a queued job without enqueued_at. */
		{ &res->mismatched, "SELECT count(*) FROM chaos_seen s JOIN chaos_committed c USING (jid)"
				    " WHERE s.queue IS DISTINCT FROM c.queue OR s.class IS DISTINCT FROM 'ChaosJob'"
				    " OR s.args IS NULL OR s.args::jsonb <> c.args"
				    " OR (s.src = 'queue') = c.scheduled"
				    " OR (s.src = 'queue' AND (s.list IS DISTINCT FROM c.queue OR s.enq IS NULL))"
				    " OR (s.src = 'schedule' AND s.enq IS NOT NULL)" },
		/* A committed job on a target its queue was never routed to during
		 * the run (a queue may have gone to two: chaos --routes removes a
		 * route at some relay starts). */
		{ &res->misrouted, "SELECT count(*) FROM chaos_seen s JOIN chaos_committed c USING (jid)"
				   " WHERE NOT EXISTS (SELECT 1 FROM chaos_routed r"
				   " WHERE r.queue = c.queue AND r.target = s.target)" },
		/*
		 * Order: the jobs of one batch share enqueued_at (one clock reading per
		 * batch) and sit together in their queue's list, one LPUSH per queue.
		 * Within each such run, push order must be id order. Runs are split by
		 * position too (gaps and islands), so even two batches that formatted
		 * the same microsecond count as one only if they are adjacent in the list.
		 */
		{ &res->order_violations, order_sql },
		{ &res->committed_rows, "SELECT count(*) FROM chaos_committed" },
		{ &res->batches, "SELECT count(DISTINCT enq) FROM chaos_seen WHERE src = 'queue'" },
		{ &res->dead, "SELECT count(*) FROM staged_jobs_dead" },
		{ &res->left_staged, "SELECT count(*) FROM staged_jobs" },
		/* Jobs a cap held back and no relay released (migration 005). */
		{ &res->left_held, "SELECT count(*) FROM staged_jobs_held" },
	};

	for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++)
		if ((*q[i].out = env_val(e, q[i].sql)) < 0)
			return -1;
	/* Sidekiq's web UI and API find queues through the `queues` set. */
	res->unregistered = 0;
	for (int i = 0; i < NQUEUES; i++) {
		redisReply *r = e->queue_redis[i] ? redisCommand(e->queue_redis[i], "SISMEMBER queues %s", queues[i])
						  : env_cmd(e, "SISMEMBER queues %s", queues[i]);
		if (!r || r->type != REDIS_REPLY_INTEGER || r->integer != 1)
			res->unregistered++;
		freeReplyObject(r);
	}
	return 0;
}

/* LSETs the entries at two indexes of a list to each other's value. */
static int swap_entries(struct env *e, const char *key, long long i, long long j)
{
	redisReply *a = env_cmd(e, "LINDEX %s %lld", key, i), *b = env_cmd(e, "LINDEX %s %lld", key, j), *r1 = NULL,
		   *r2 = NULL;
	int rc = -1;

	if (a && b && a->type == REDIS_REPLY_STRING && b->type == REDIS_REPLY_STRING) {
		r1 = env_cmd(e, "LSET %s %lld %b", key, i, b->str, b->len);
		r2 = env_cmd(e, "LSET %s %lld %b", key, j, a->str, a->len);
		rc = r1 && r2 ? 0 : -1;
	}
	freeReplyObject(a);
	freeReplyObject(b);
	freeReplyObject(r1);
	freeReplyObject(r2);
	return rc;
}

/*
 * Proves the checker is not vacuous: after the real check, breaks Redis in five
 * known ways (drop the oldest job of a queue, copy a job, to another target's
 * Redis if there is one, push a rolled-back job and a non-job, swap two jobs
 * of one batch, of one producer with by_producer), checks again, and requires
 * each count to have grown (misrouted too if the copy went to another target); the order count must change (a swap inside an already
 * reversed batch mends one violation; the two are in the list whose order is
 * checked). Costs a second load of Redis, a second or so.
 */
void fault_causes(struct env *e, const char *copies, char *out, size_t size)
{
	struct strbuf sql = { 0 };
	PGresult *res;
	size_t len = 0;

	strbuf_printf(&sql,
		      "SELECT coalesce(e.kind, 'none'), count(*) FROM (%s) d"
		      " LEFT JOIN LATERAL (SELECT kind FROM chaos_events"
		      "  WHERE t_us <= d.t_us ORDER BY t_us DESC LIMIT 1) e ON true"
		      " GROUP BY 1 ORDER BY 2 DESC",
		      copies);
	res = PQexec(e->pg, sql.data);
	out[0] = '\0';
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		for (int i = 0; i < PQntuples(res) && len < size; i++)
			len += (size_t)snprintf(out + len, size - len, "    after %-26s %s\n", PQgetvalue(res, i, 0),
						PQgetvalue(res, i, 1));
	PQclear(res);
	strbuf_free(&sql);
}

int check_self_test(struct env *e, const struct results *before, struct results *after)
{
	char list[128], pos[32], jid[64], key[160], other[160], payload[400], filter[160], sql[2][512];
	redisReply *r[5] = { 0 };
	redisContext *elsewhere = NULL; /* another target's Redis, for the copy */
	long long llen;
	int rc = 0;

	ordered_filter(e, "a.list", filter, sizeof(filter));
	for (int i = 0; i < 2; i++)
		snprintf(sql[i], sizeof(sql[i]),
			 "SELECT a.%s FROM chaos_seen a JOIN chaos_seen b ON b.src = 'queue' AND b.target = a.target"
			 " AND b.list = a.list AND b.pos = a.pos + 1 AND b.enq = a.enq%s"
			 " WHERE a.src = 'queue' AND a.target = 'default'%s ORDER BY a.pos, a.list LIMIT 1",
			 i ? "pos" : "list", e->by_producer ? " AND b.args::jsonb->0 = a.args::jsonb->0" : "", filter);
	env_text(e, sql[0], list, sizeof(list));
	env_text(e, sql[1], pos, sizeof(pos));
	env_text(e, "SELECT jid FROM chaos_rolledback LIMIT 1", jid, sizeof(jid));
	if (!*list || !*jid) {
		say("self-test: no batch with two jobs in one queue, or no rolled-back job");
		return -1;
	}
	snprintf(key, sizeof(key), "queue:%s", list);
	snprintf(other, sizeof(other), "queue:%s", strcmp(list, queues[0]) ? queues[0] : queues[1]);
	r[0] = env_cmd(e, "LLEN %s", key);
	llen = r[0] && r[0]->type == REDIS_REPLY_INTEGER ? r[0]->integer : 0;
	/* Position p is index llen-1-p (LPUSH): p and p+1 are indexes i and i-1. */
	if (swap_entries(e, key, llen - 1 - atoll(pos), llen - 2 - atoll(pos)) < 0)
		rc = -1;
	r[1] = env_cmd(e, "RPOP %s", other);
	r[2] = env_cmd(e, "LINDEX %s 0", other);
	for (int i = 0; i < NQUEUES && !elsewhere; i++)
		elsewhere = e->queue_redis[i];
	if (r[2] && r[2]->type == REDIS_REPLY_STRING)
		freeReplyObject(elsewhere ? redisCommand(elsewhere, "LPUSH %s %b", other, r[2]->str, r[2]->len)
					  : env_cmd(e, "RPUSH %s %b", other, r[2]->str, r[2]->len));
	snprintf(payload, sizeof(payload),
		 "{\"class\":\"ChaosJob\",\"args\":[0,0],\"queue\":\"%s\",\"jid\":\"%s\",\"enqueued_at\":1.5}",
		 other + 6, jid);
	r[3] = env_cmd(e, "LPUSH %s %s", other, payload);
	r[4] = env_cmd(e, "LPUSH %s not-a-job", other);
	for (int i = 0; i < 5; i++) {
		if (!r[i])
			rc = -1;
		freeReplyObject(r[i]);
	}
	if (rc < 0 || env_val(e, "TRUNCATE chaos_seen") < 0 || seen_load(e, &after->entries) < 0 ||
	    (e->seen_more && e->seen_more(e, &after->entries, e->seen_more_arg) < 0) || check_redis(e, after) < 0)
		return -1;
	return after->missing > before->missing && after->duplicates > before->duplicates &&
			       after->rolled_back > before->rolled_back && after->phantoms > before->phantoms &&
			       after->order_violations != before->order_violations &&
			       (!elsewhere || after->misrouted > before->misrouted)
		       ? 0
		       : 1;
}

int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

int env_setup(struct env *e, const char *bin, const char *services, const char *extra_sql)
{
	e->bin = bin;
	relay_fence_key(e->fence_key, sizeof(e->fence_key), KEYS_LOCK_DEFAULT);
	relay_epoch_key(e->epoch_key, sizeof(e->epoch_key), KEYS_LOCK_DEFAULT);
	if (services_start(&e->srv, services, "chaos") < 0) {
		say("could not start the throwaway servers");
		return -1;
	}
	if (services_migrate(&e->srv, e->bin) != 0) {
		say("stagedrain migrate failed; see %s/migrate.log", e->srv.dir);
		return -1;
	}
	if (!(e->pg = env_pg_connect(e, "chaos")) || env_val(e, checker_sql) < 0)
		return -1;
	for (int i = 0; i < NQUEUES; i++) {
		char sql[160];
		snprintf(sql, sizeof(sql), "INSERT INTO chaos_routed VALUES ('%s', 'default')", queues[i]);
		if (env_val(e, sql) < 0)
			return -1;
	}
	return extra_sql && env_val(e, extra_sql) < 0 ? -1 : 0;
}

void env_teardown(struct env *e, bool remove_dir)
{
	if (e->pg)
		PQfinish(e->pg);
	e->pg = NULL;
	if (e->redis)
		redisFree(e->redis);
	e->redis = NULL;
	if (services_stop(&e->srv) < 0)
		say("could not stop the servers in %s", e->srv.dir);
	if (remove_dir)
		(void)services_remove(&e->srv);
	else if (*e->srv.dir)
		say("kept %s (relay logs, servers' logs)", e->srv.dir);
}
