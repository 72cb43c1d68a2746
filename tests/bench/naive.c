/* Baselines written plainly in the bench: the seed design's naive loop, and
 * the raw limit (COPY out, redis-cli --pipe, one DELETE, one transaction). */
#include "bench.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"

/* Appends s as a JSON string, quotes included. */
static int json_str(struct buf *b, const char *s, size_t len)
{
	int rc = buf_puts(b, "\"");

	for (size_t i = 0; rc == 0 && i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			rc = buf_printf(b, "\\%c", c);
		else if (c < 0x20)
			rc = buf_printf(b, "\\u%04x", c);
		else
			rc = buf_append(b, &s[i], 1);
	}
	return rc ? rc : buf_puts(b, "\"");
}

/* The minimal Sidekiq job hash: what Sidekiq::Client writes for a plain job. */
static int sidekiq_job(struct buf *b, const char *queue, size_t qlen, const char *klass, size_t klen, const char *args,
		       size_t alen, const char *jid, const char *created, double enqueued)
{
	int rc = buf_puts(b, "{\"class\":");

	rc = rc ? rc : json_str(b, klass, klen);
	rc = rc ? rc : buf_puts(b, ",\"args\":");
	rc = rc ? rc : buf_append(b, args, alen);
	rc = rc ? rc : buf_puts(b, ",\"queue\":");
	rc = rc ? rc : json_str(b, queue, qlen);
	return rc ? rc
		  : buf_printf(b, ",\"jid\":\"%s\",\"retry\":true,\"created_at\":%s,\"enqueued_at\":%.6f}", jid,
			       created, enqueued);
}

#define NAIVE_SQL                                                                                                      \
	"BEGIN ISOLATION LEVEL REPEATABLE READ;"                                                                       \
	"SELECT id, queue, job_class, args::text, jid, extract(epoch FROM created_at)::text"                           \
	" FROM staged_jobs ORDER BY id LIMIT %d"

enum { N_ID, N_QUEUE, N_CLASS, N_ARGS, N_JID, N_CREATED };

/* One MULTI/EXEC: per run of rows on one queue, SADD queues and one LPUSH. */
static int naive_push(redisContext *r, PGresult *rows, struct buf *jobs, size_t *offs, const char **argv, size_t *argl,
		      char *err, size_t errlen)
{
	int n = PQntuples(rows), sent = 0, rc = 0;
	char key[300];
	double now = (double)wall_us() / 1e6;

	buf_reset(jobs);
	for (int i = 0; i < n; i++) {
		offs[i] = jobs->len;
		if (sidekiq_job(jobs, PQgetvalue(rows, i, N_QUEUE), (size_t)PQgetlength(rows, i, N_QUEUE),
				PQgetvalue(rows, i, N_CLASS), (size_t)PQgetlength(rows, i, N_CLASS),
				PQgetvalue(rows, i, N_ARGS), (size_t)PQgetlength(rows, i, N_ARGS),
				PQgetvalue(rows, i, N_JID), PQgetvalue(rows, i, N_CREATED), now) < 0) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
	}
	offs[n] = jobs->len;
	redisAppendCommand(r, "MULTI");
	sent++;
	for (int i = 0; i < n;) {
		const char *q = PQgetvalue(rows, i, N_QUEUE);
		int j = i, k = 0;
		snprintf(key, sizeof(key), "queue:%s", q);
		argv[k] = "LPUSH";
		argl[k++] = 5;
		argv[k] = key;
		argl[k++] = strlen(key);
		for (; j < n && strcmp(PQgetvalue(rows, j, N_QUEUE), q) == 0; j++) {
			argv[k] = jobs->data + offs[j];
			argl[k++] = offs[j + 1] - offs[j];
		}
		redisAppendCommand(r, "SADD queues %s", q);
		redisAppendCommandArgv(r, k, argv, argl);
		sent += 2;
		i = j;
	}
	redisAppendCommand(r, "EXEC");
	sent++;
	for (int i = 0; i < sent; i++) {
		redisReply *rep;
		if (redisGetReply(r, (void **)&rep) != REDIS_OK) {
			snprintf(err, errlen, "redis: %s", r->errstr);
			return -EIO;
		}
		if (rep->type == REDIS_REPLY_ERROR || (i == sent - 1 && rep->type != REDIS_REPLY_ARRAY)) {
			snprintf(err, errlen, "redis refused the batch: %s",
				 rep->type == REDIS_REPLY_ERROR ? rep->str : "EXEC aborted");
			rc = -EIO;
		}
		freeReplyObject(rep);
	}
	return rc;
}

static bool exec_ok(PGconn *c, const char *q, char *err, size_t errlen)
{
	PGresult *res = PQexec(c, q);
	bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;

	if (!ok)
		snprintf(err, errlen, "%s: %s", q, PQresultErrorMessage(res));
	PQclear(res);
	return ok;
}

long long naive_drain(struct naive *n)
{
	PGconn *c = PQconnectdb(n->env->srv.pg_url);
	redisContext *r = redisConnect("127.0.0.1", n->env->srv.redis_port);
	size_t *offs = calloc((size_t)n->batch_size + 1, sizeof(*offs));
	const char **argv = calloc((size_t)n->batch_size + 2, sizeof(*argv));
	size_t *argl = calloc((size_t)n->batch_size + 2, sizeof(*argl));
	char q[sizeof(NAIVE_SQL) + 16], del[64];
	struct buf jobs;
	double self0 = thread_cpu_s(), backend0 = proc_cpu_s(PQbackendPID(c));

	buf_init(&jobs);
	n->moved = 0;
	if (!offs || !argv || !argl) {
		snprintf(n->err, sizeof(n->err), "out of memory");
		goto fail;
	}
	if (PQstatus(c) != CONNECTION_OK || !r || r->err) {
		snprintf(n->err, sizeof(n->err), "could not connect: %s",
			 PQstatus(c) != CONNECTION_OK ? PQerrorMessage(c)
			 : r                          ? r->errstr
						      : "no memory");
		goto fail;
	}
	snprintf(q, sizeof(q), NAIVE_SQL, n->batch_size);
	while (!interrupted && !n->stop) {
		long long t0 = mono_us(), t1, t2, t3, t4;
		PGresult *rows = PQexec(c, q);
		int nrows;
		t1 = mono_us();
		if (PQresultStatus(rows) != PGRES_TUPLES_OK) {
			snprintf(n->err, sizeof(n->err), "select: %s", PQresultErrorMessage(rows));
			PQclear(rows);
			goto fail;
		}
		nrows = PQntuples(rows);
		if (nrows == 0) {
			PQclear(rows);
			if (!exec_ok(c, "ROLLBACK", n->err, sizeof(n->err)))
				goto fail;
			if (!n->per_minute)
				break;
			sleep_ms(n->poll_ms);
			continue;
		}
		if (naive_push(r, rows, &jobs, offs, argv, argl, n->err, sizeof(n->err)) < 0) {
			PQclear(rows);
			goto fail;
		}
		t2 = mono_us();
		snprintf(del, sizeof(del), "DELETE FROM staged_jobs WHERE id <= %s", PQgetvalue(rows, nrows - 1, N_ID));
		PQclear(rows);
		if (!exec_ok(c, del, n->err, sizeof(n->err)))
			goto fail;
		t3 = mono_us();
		if (!exec_ok(c, "COMMIT", n->err, sizeof(n->err)))
			goto fail;
		t4 = mono_us();
		n->moved += nrows;
		if (n->per_minute) {
			long long m = (t0 - n->t0_us) / 60000000;
			if (m >= 0 && m < n->minutes) {
				struct naive_stats *s = &n->per_minute[m];
				s->batches++;
				s->jobs += nrows;
				s->select_us += t1 - t0;
				s->push_us += t2 - t1;
				s->delete_us += t3 - t2;
				s->commit_us += t4 - t3;
			}
		}
	}
	goto out;
fail:
	n->moved = -1;
out:
	n->cpu.self = thread_cpu_s() - self0;
	n->cpu.backend = proc_cpu_s(PQbackendPID(c)) - backend0;
	buf_free(&jobs);
	free(offs);
	free(argv);
	free(argl);
	redisFree(r);
	PQfinish(c);
	return n->moved;
}

static void *naive_thread(void *arg)
{
	naive_drain(arg);
	return NULL;
}

void naive_start(struct naive *n)
{
	pthread_t *t = malloc(sizeof(*t));

	if (!t || pthread_create(t, NULL, naive_thread, n))
		die("cannot start the naive loop's thread");
	n->priv = t;
}

void naive_join(struct naive *n)
{
	pthread_t *t = n->priv;

	if (!t)
		return;
	pthread_join(*t, NULL);
	free(t);
	n->priv = NULL;
}

/* ---- the raw limit ---- */

/* Undoes COPY's text escapes in place; returns the new length. */
static size_t copy_unescape(char *s, size_t len)
{
	size_t w = 0;

	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (c != '\\' || i + 1 == len) {
			s[w++] = c;
			continue;
		}
		c = s[++i];
		switch (c) {
		case 'b':
			s[w++] = '\b';
			break;
		case 'f':
			s[w++] = '\f';
			break;
		case 'n':
			s[w++] = '\n';
			break;
		case 'r':
			s[w++] = '\r';
			break;
		case 't':
			s[w++] = '\t';
			break;
		case 'v':
			s[w++] = '\v';
			break;
		case 'x': {
			int v = 0, k = 0;
			for (; k < 2 && i + 1 < len && strchr("0123456789abcdefABCDEF", s[i + 1]) && s[i + 1]; k++) {
				char h = s[++i];
				v = v * 16 + (h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
			}
			s[w++] = (char)v;
			break;
		}
		default:
			if (c >= '0' && c <= '7') {
				int v = c - '0';
				for (int k = 0; k < 2 && i + 1 < len && s[i + 1] >= '0' && s[i + 1] <= '7'; k++)
					v = v * 8 + (s[++i] - '0');
				s[w++] = (char)v;
			} else {
				s[w++] = c;
			}
		}
	}
	return w;
}

/* Jobs of one queue waiting to become one LPUSH. */
struct group {
	char queue[256];
	struct buf jobs;
	size_t *offs;
	int n, cap;
};

static int put_bulk(struct buf *out, const char *s, size_t len)
{
	int rc = buf_printf(out, "$%zu\r\n", len);

	rc = rc ? rc : buf_append(out, s, len);
	return rc ? rc : buf_puts(out, "\r\n");
}

/* SADD queues q, then LPUSH queue:q with the group's jobs, in RESP. */
static int flush_group(struct group *g, struct buf *out, long long *commands)
{
	char key[300];
	int rc;

	if (g->n == 0)
		return 0;
	snprintf(key, sizeof(key), "queue:%s", g->queue);
	rc = buf_puts(out, "*3\r\n$4\r\nSADD\r\n$6\r\nqueues\r\n");
	rc = rc ? rc : put_bulk(out, g->queue, strlen(g->queue));
	rc = rc ? rc : buf_printf(out, "*%d\r\n$5\r\nLPUSH\r\n", g->n + 2);
	rc = rc ? rc : put_bulk(out, key, strlen(key));
	for (int i = 0; rc == 0 && i < g->n; i++) {
		size_t end = i + 1 < g->n ? g->offs[i + 1] : g->jobs.len;
		rc = put_bulk(out, g->jobs.data + g->offs[i], end - g->offs[i]);
	}
	buf_reset(&g->jobs);
	g->n = 0;
	*commands += 2;
	return rc;
}

static int write_all(int fd, struct buf *out)
{
	size_t done = 0;

	while (done < out->len) {
		ssize_t w = write(fd, out->data + done, out->len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		done += (size_t)w;
	}
	buf_reset(out);
	return 0;
}

/* Splits a COPY line into n tab-separated fields, unescaping each. */
static int split_copy(char *line, int len, char **f, size_t *fl, int n)
{
	int k = 0;
	char *p = line, *end = line + len;

	if (len > 0 && end[-1] == '\n')
		end--;
	while (k < n) {
		char *t = memchr(p, '\t', (size_t)(end - p));
		char *stop = t ? t : end;
		f[k] = p;
		fl[k] = copy_unescape(p, (size_t)(stop - p));
		p[fl[k]] = '\0';
		k++;
		if (!t)
			break;
		p = t + 1;
	}
	return k == n ? 0 : -EINVAL;
}

/* Reads redis-cli --pipe's summary line: "errors: 0, replies: 2000". */
static int pipe_summary(const char *path, long long *errors, long long *replies)
{
	char line[512];
	FILE *f = fopen(path, "r");
	int found = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		const char *e = strstr(line, "errors: ");
		if (e && sscanf(e, "errors: %lld, replies: %lld", errors, replies) == 2)
			found = 0;
	}
	fclose(f);
	return found;
}

long long raw_drain(const struct bench_env *env, struct drain_cpu *cpu)
{
	PGconn *c = pg_connect(env);
	double self0 = thread_cpu_s(), backend0 = proc_cpu_s(PQbackendPID(c)), cli0;
	char port[16], outlog[600];
	const char *argv[] = { "redis-cli", "-h", "127.0.0.1", "-p", port, "--pipe", NULL };
	struct group g = { .n = 0 };
	struct buf out;
	long long rows = 0, commands = 0, errors = -1, replies = -1;
	double now = (double)wall_us() / 1e6;
	PGresult *res;
	char *line;
	int len, wfd = -1, st;
	struct proc cli;
	struct proc_opts o = { .argv = argv, .log = outlog, .stdin_pipe = &wfd };

	snprintf(port, sizeof(port), "%d", env->srv.redis_port);
	snprintf(outlog, sizeof(outlog), "%s/redis-pipe.out", env->srv.dir);
	buf_init(&out);
	buf_init(&g.jobs);
	g.cap = 1000;
	g.offs = calloc((size_t)g.cap, sizeof(*g.offs));
	if (!g.offs)
		die("out of memory");
	sql(c, "BEGIN ISOLATION LEVEL REPEATABLE READ");
	child_start(&cli, &o);
	res = PQexec(c, "COPY (SELECT queue, job_class, args::text, jid, extract(epoch FROM created_at)"
			" FROM staged_jobs ORDER BY id) TO STDOUT");
	if (PQresultStatus(res) != PGRES_COPY_OUT)
		die("copy out: %s", PQresultErrorMessage(res));
	PQclear(res);
	while ((len = PQgetCopyData(c, &line, 0)) > 0) {
		char *f[5];
		size_t fl[5];
		if (split_copy(line, len, f, fl, 5) < 0)
			die("copy out: a row without 5 fields");
		if (g.n == g.cap || (g.n && strcmp(g.queue, f[0]) != 0))
			if (flush_group(&g, &out, &commands) < 0)
				die("out of memory");
		if (g.n == 0)
			snprintf(g.queue, sizeof(g.queue), "%s", f[0]);
		g.offs[g.n++] = g.jobs.len;
		if (sidekiq_job(&g.jobs, f[0], fl[0], f[1], fl[1], f[2], fl[2], f[3], f[4], now) < 0)
			die("out of memory");
		PQfreemem(line);
		rows++;
		if (out.len >= 65536 && write_all(wfd, &out) < 0)
			die("writing to redis-cli --pipe: %s", strerror(errno));
	}
	if (len == -2)
		die("copy out: %s", PQerrorMessage(c));
	while ((res = PQgetResult(c)) != NULL) {
		if (PQresultStatus(res) != PGRES_COMMAND_OK)
			die("copy out: %s", PQresultErrorMessage(res));
		PQclear(res);
	}
	if (flush_group(&g, &out, &commands) < 0 || write_all(wfd, &out) < 0)
		die("writing to redis-cli --pipe failed");
	close(wfd);
	/* The only child reaped here: what the reaped children's CPU grows by is redis-cli's. */
	cli0 = children_cpu_s();
	st = child_wait(&cli, 600000);
	if (st != 0 || pipe_summary(outlog, &errors, &replies) < 0 || errors != 0 || replies != commands)
		die("redis-cli --pipe failed (exit %d, errors %lld, replies %lld of %lld); see %s", st, errors, replies,
		    commands, outlog);
	sql(c, "DELETE FROM staged_jobs");
	sql(c, "COMMIT");
	if (cpu) {
		cpu->self = thread_cpu_s() - self0 + children_cpu_s() - cli0;
		cpu->backend = proc_cpu_s(PQbackendPID(c)) - backend0;
	}
	buf_free(&out);
	buf_free(&g.jobs);
	free(g.offs);
	PQfinish(c);
	return rows;
}
