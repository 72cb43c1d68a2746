/* Load generators: producers committing staged jobs at a set rate, and a
 * consumer that BRPOPs them from Redis and notes when each became visible. */
#include "bench.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PRODUCERS 8

struct load_priv {
	pthread_t prod[MAX_PRODUCERS];
	pthread_t cons;
	int index[MAX_PRODUCERS];
	struct load *l;
	atomic_llong committed, consumed, rolled_back;
	atomic_int stop_consumer;
	atomic_int failed;
	bool joined;
	pthread_mutex_t err_lock;
};

struct prod_arg {
	struct load_priv *p;
	int k;
};

static struct prod_arg prod_args[MAX_PRODUCERS];

static void fail(struct load_priv *p, const char *what, const char *why)
{
	pthread_mutex_lock(&p->err_lock);
	if (!p->l->failed)
		snprintf(p->l->err, sizeof(p->l->err), "%s: %s", what, why);
	p->l->failed = 1;
	pthread_mutex_unlock(&p->err_lock);
	atomic_store(&p->failed, 1);
}

/* Whether transaction i rolls back: Fibonacci hashing scatters them, so
 * rolled-back ids are seldom neighbours and each leaves its own gap. */
static bool rolls_back(long long i, int pct)
{
	return pct > 0 && ((unsigned long long)(i + 1) * 11400714819323198485ull >> 40) % 100 < (unsigned)pct;
}

/* Stages transaction i's rows and rolls them back, in one round trip. */
static PGresult *stage_and_roll_back(PGconn *c, const struct load *l, long long seq)
{
	char q[512];

	if (l->rows_per_tx == 1)
		snprintf(q, sizeof(q),
			 "BEGIN; INSERT INTO %s (queue, job_class, args)"
			 " VALUES ('%s', 'BenchJob', jsonb_build_array(%lld::int8)); ROLLBACK",
			 l->table, l->queue, seq);
	else
		snprintf(q, sizeof(q),
			 "BEGIN; INSERT INTO %s (queue, job_class, args) SELECT '%s', 'BenchJob', "
			 "jsonb_build_array(g)"
			 " FROM generate_series(%lld::int8, %lld::int8) g; ROLLBACK",
			 l->table, l->queue, seq, seq + l->rows_per_tx - 1);
	return PQexec(c, q);
}

/*
 * Producer k commits transactions k, k+P, k+2P, ... each at its scheduled
 * time (start + i / tx rate); one that falls behind does not sleep, so the
 * offered rate holds unless Postgres cannot take it. The commit time is
 * taken after COMMIT returns: that is when the application knows.
 */
static void *producer(void *arg)
{
	struct prod_arg *a = arg;
	struct load_priv *p = a->p;
	struct load *l = p->l;
	PGconn *c = PQconnectdb(l->env->srv.pg_url);
	char q[512], seqa[32], seqb[32];
	const char *params[3] = { l->queue, seqa, seqb };
	long long ntx = l->rate > 0 ? (long long)l->rate * l->seconds / l->rows_per_tx : -1;
	double tx_us = l->rate > 0 ? 1e6 * l->rows_per_tx / l->rate : 0;
	long long end_us = l->start_us + (long long)l->seconds * 1000000;
	PGresult *res;
	bool rollback;

	if (PQstatus(c) != CONNECTION_OK) {
		fail(p, "producer could not connect", PQerrorMessage(c));
		PQfinish(c);
		return NULL;
	}
	if (l->rows_per_tx == 1)
		snprintf(q, sizeof(q),
			 "INSERT INTO %s (queue, job_class, args)"
			 " VALUES ($1, 'BenchJob', jsonb_build_array($2::int8))",
			 l->table);
	else
		snprintf(q, sizeof(q),
			 "INSERT INTO %s (queue, job_class, args) SELECT $1, 'BenchJob', jsonb_build_array(g)"
			 " FROM generate_series($2::int8, $3::int8) g",
			 l->table);
	res = PQprepare(c, "ins", q, 0, NULL);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		fail(p, "producer could not prepare", PQresultErrorMessage(res));
	PQclear(res);
	for (long long i = a->k; !atomic_load(&p->failed) && !interrupted; i += l->producers) {
		long long seq = i * l->rows_per_tx, now;
		if (ntx >= 0 && i >= ntx)
			break;
		if (ntx < 0 && mono_us() >= end_us)
			break;
		if (ntx >= 0) {
			long long due = l->start_us + (long long)(tx_us * (double)i);
			while ((now = mono_us()) < due && !interrupted) {
				long long wait = due - now;
				struct timespec ts = { 0, (long)(wait > 100000 ? 100000 : wait) * 1000L };
				nanosleep(&ts, NULL);
			}
		}
		snprintf(seqa, sizeof(seqa), "%lld", seq);
		snprintf(seqb, sizeof(seqb), "%lld", seq + l->rows_per_tx - 1);
		rollback = rolls_back(i, l->rollback_pct);
		if (rollback)
			res = stage_and_roll_back(c, l, seq);
		else
			res = PQexecPrepared(c, "ins", l->rows_per_tx == 1 ? 2 : 3, params, NULL, NULL, 0);
		now = mono_us();
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			fail(p, "producer insert failed", PQresultErrorMessage(res));
			PQclear(res);
			break;
		}
		PQclear(res);
		if (rollback) {
			atomic_fetch_add(&p->rolled_back, 1);
			continue;
		}
		if (l->commit_us)
			for (int j = 0; j < l->rows_per_tx && seq + j < l->nseq; j++)
				l->commit_us[seq + j] = now;
		atomic_fetch_add(&p->committed, l->rows_per_tx);
	}
	PQfinish(c);
	return NULL;
}

/* The job's first argument is its sequence number: "args":[123]. */
static long long job_seq(const char *job)
{
	const char *a = strstr(job, "\"args\":[");

	return a ? strtoll(a + 8, NULL, 10) : -1;
}

static void record(struct load_priv *p, const redisReply *job, long long now)
{
	struct load *l = p->l;
	long long seq;

	if (job->type != REDIS_REPLY_STRING)
		return;
	seq = job_seq(job->str);
	if (seq < 0 || seq >= l->nseq)
		return;
	if (l->seen[seq] == 0) {
		l->visible_us[seq] = now;
		atomic_fetch_add(&p->consumed, 1);
	}
	if (l->seen[seq] < 255)
		l->seen[seq]++;
}

/*
 * BRPOP wakes on the first job; RPOP with a count then takes whatever else
 * is already there in one round trip, so the consumer keeps up with 20,000
 * jobs/s. A job's visibility time is when its reply arrived (an upper bound).
 */
static void *consumer(void *arg)
{
	struct load_priv *p = arg;
	struct load *l = p->l;
	redisContext *r = redisConnect("127.0.0.1", l->env->srv.redis_port);
	char key[128];

	if (!r || r->err) {
		fail(p, "consumer could not connect", r ? r->errstr : "out of memory");
		redisFree(r);
		return NULL;
	}
	snprintf(key, sizeof(key), "queue:%s", l->queue);
	while (!atomic_load(&p->stop_consumer) && !interrupted) {
		redisReply *rep = redisCommand(r, "BRPOP %s 1", key);
		long long now = mono_us();
		if (!rep) {
			fail(p, "consumer lost redis", r->errstr);
			break;
		}
		if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2)
			record(p, rep->element[1], now);
		freeReplyObject(rep);
		for (;;) {
			rep = redisCommand(r, "RPOP %s 1000", key);
			now = mono_us();
			if (!rep) {
				fail(p, "consumer lost redis", r->errstr);
				break;
			}
			if (rep->type != REDIS_REPLY_ARRAY || rep->elements == 0) {
				freeReplyObject(rep);
				break;
			}
			for (size_t i = 0; i < rep->elements; i++)
				record(p, rep->element[i], now);
			freeReplyObject(rep);
		}
		if (atomic_load(&p->failed))
			break;
	}
	redisFree(r);
	return NULL;
}

void load_start(struct load *l)
{
	struct load_priv *p = calloc(1, sizeof(*p));

	if (!p || l->producers < 1 || l->producers > MAX_PRODUCERS)
		die("bad load settings");
	l->priv = p;
	p->l = l;
	pthread_mutex_init(&p->err_lock, NULL);
	l->failed = 0;
	l->err[0] = '\0';
	l->nseq = l->rate > 0 ? (long long)l->rate * l->seconds : 0;
	if (l->consume && l->nseq > 0) {
		l->commit_us = calloc((size_t)l->nseq, sizeof(*l->commit_us));
		l->visible_us = calloc((size_t)l->nseq, sizeof(*l->visible_us));
		l->seen = calloc((size_t)l->nseq, 1);
		if (!l->commit_us || !l->visible_us || !l->seen)
			die("out of memory");
		if (pthread_create(&p->cons, NULL, consumer, p))
			die("cannot start the consumer thread");
	}
	l->start_us = mono_us() + 20000;
	for (int k = 0; k < l->producers; k++) {
		prod_args[k].p = p;
		prod_args[k].k = k;
		if (pthread_create(&p->prod[k], NULL, producer, &prod_args[k]))
			die("cannot start a producer thread");
	}
}

long long load_committed(const struct load *l)
{
	return atomic_load(&((struct load_priv *)l->priv)->committed);
}

long long load_consumed(const struct load *l)
{
	return atomic_load(&((struct load_priv *)l->priv)->consumed);
}

void load_join_producers(struct load *l)
{
	struct load_priv *p = l->priv;

	if (p->joined)
		return;
	for (int k = 0; k < l->producers; k++)
		pthread_join(p->prod[k], NULL);
	p->joined = true;
	l->end_us = mono_us();
	l->committed = atomic_load(&p->committed);
	l->rolled_back = atomic_load(&p->rolled_back);
}

void load_finish(struct load *l, int drain_timeout_s)
{
	struct load_priv *p = l->priv;
	long long last = -1, progress_us;

	load_join_producers(l);
	progress_us = mono_us();
	if (l->consume && l->nseq > 0) {
		/* Lossless means every committed job arrives; wait while it still trickles in. */
		while (!interrupted && !atomic_load(&p->failed) && atomic_load(&p->consumed) < l->committed) {
			long long c = atomic_load(&p->consumed);
			if (c != last) {
				last = c;
				progress_us = mono_us();
			} else if (mono_us() - progress_us > (long long)drain_timeout_s * 1000000) {
				break;
			}
			sleep_ms(20);
		}
		/* A moment more, so a duplicate pushed after the last new job is counted. */
		sleep_ms(300);
		atomic_store(&p->stop_consumer, 1);
		pthread_join(p->cons, NULL);
	}
	l->consumed = atomic_load(&p->consumed);
}

void load_free(struct load *l)
{
	struct load_priv *p = l->priv;

	if (p)
		pthread_mutex_destroy(&p->err_lock);
	free(p);
	free(l->commit_us);
	free(l->visible_us);
	free(l->seen);
	l->priv = NULL;
	l->commit_us = l->visible_us = NULL;
	l->seen = NULL;
}
