/* Grouping a batch by queue: every layout's commands for batches of many
 * queues (each job once, in its list, in id order), and the work it takes. */
#include "fmacros.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "formats.h"
#include "job.h"
#include "job_build.h"
#include "queue_groups.h"
#include "redis_cmds.h"
#include "suites.h"
#include "support/job_rows.h"

#define UUID "0b7e3c7e-8a52-4d1c-9f0e-3c2f6a1b9d44"
#define JID "0123456789abcdef01234567"
#define NOW_US 1700000000000000LL

static const enum job_format all_formats[] = { FORMAT_SIDEKIQ, FORMAT_RESQUE, FORMAT_ACTIVEJOB, FORMAT_CELERY,
					       FORMAT_LARAVEL };
#define NFORMATS (int)(sizeof(all_formats) / sizeof(all_formats[0]))

/* Celery rows carry a priority (0-9 by id), so its lists split by step. */
static const char *const priorities[] = {
	"{\"priority\": 0}", "{\"priority\": 1}", "{\"priority\": 2}", "{\"priority\": 3}", "{\"priority\": 4}",
	"{\"priority\": 5}", "{\"priority\": 6}", "{\"priority\": 7}", "{\"priority\": 8}", "{\"priority\": 9}",
};

/* A batch of n jobs: job i in queue "q<i % nq>", every later_every-th one
 * scheduled (0: none), celery's with priority i % 10. */
struct many {
	enum job_format f;
	size_t n, nq;
	char (*names)[24];
	struct batch b;
	struct redis_cmds c;
};

static bool is_later(size_t i, size_t later_every)
{
	return later_every && i % later_every == later_every - 1;
}

static void many_build(struct many *m, enum job_format f, size_t n, size_t nq, size_t later_every)
{
	struct job_opts o = { .format = f, .sidekiq_version = 7, .max_job_bytes = 1 << 20, .now_us = NOW_US };

	m->f = f;
	m->n = n;
	m->nq = nq;
	m->names = calloc(nq, sizeof(*m->names));
	ck_assert_ptr_nonnull(m->names);
	for (size_t q = 0; q < nq; q++)
		snprintf(m->names[q], sizeof(m->names[q]), "q%zu", q);
	batch_init(&m->b);
	cmds_init(&m->c);
	ck_assert_int_eq(batch_reset(&m->b, n), 0);
	for (size_t i = 0; i < n; i++) {
		struct job_row r = job_row_of(m->names[i % nq], "App\\Jobs\\W@handle", "[1]",
					      f == FORMAT_CELERY ? priorities[i % 10] : NULL);
		r.id = (long long)i + 1;
		r.jid = JID;
		r.jid_len = strlen(JID);
		r.uuid = UUID;
		r.uuid_len = strlen(UUID);
		r.created_at_us = NOW_US;
		r.has_run_at = is_later(i, later_every);
		r.run_at_us = NOW_US + 1000000LL * (long long)(1 + i % 3);
		ck_assert_int_eq(job_build_add(&m->b, &r, &o, 0), 0);
	}
	ck_assert_uint_eq(m->b.njobs, n);
}

static void many_free(struct many *m)
{
	cmds_free(&m->c);
	batch_free(&m->b);
	free(m->names);
}

/* The list job i belongs in (no prefix), as each worker library reads it. */
static size_t list_of(const struct many *m, size_t i, char *key, size_t size)
{
	const struct batch_job *j = &m->b.jobs[i];
	int step = (int)(i % 10) / 3 * 3, n = 0;
	const char *q = j->queue;

	switch (m->f) {
	case FORMAT_SIDEKIQ:
	case FORMAT_ACTIVEJOB:
		n = j->out.scheduled ? snprintf(key, size, "schedule") : snprintf(key, size, "queue:%s", q);
		break;
	case FORMAT_RESQUE:
		n = j->out.scheduled ? snprintf(key, size, "delayed:%lld", j->out.run_at_us / 1000000)
				     : snprintf(key, size, "queue:%s", q);
		break;
	case FORMAT_CELERY:
		n = step ? snprintf(key, size, "%s\x06\x16%d", q, step) : snprintf(key, size, "%s", q);
		break;
	case FORMAT_LARAVEL:
		n = snprintf(key, size, j->out.scheduled ? "queues:%s:delayed" : "queues:%s", q);
		break;
	case FORMAT_BULLMQ: /* one command a queue, its keys in its head: tests/check_format_bullmq.c */
		break;
	}
	return (size_t)n;
}

/* One payload in the commands: the list it went to, where, and which job. */
struct pushed {
	const char *key;
	size_t klen, pos, job;
};

static int by_list_then_pos(const void *a, const void *b)
{
	const struct pushed *x = a, *y = b;
	size_t n = x->klen < y->klen ? x->klen : y->klen;
	int c = memcmp(x->key, y->key, n);

	if (c == 0)
		c = (x->klen > y->klen) - (x->klen < y->klen);
	return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

/* The job whose payload starts at p, or n when p is no payload. */
static size_t job_at(const struct batch *b, const char *p, size_t len)
{
	size_t lo = 0, hi = b->njobs;

	if (p < b->payloads.data || p >= b->payloads.data + b->payloads.len)
		return b->njobs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const char *at = b->payloads.data + b->jobs[mid].out.off;
		if (at == p)
			return len == b->jobs[mid].out.len ? mid : b->njobs;
		if (at < p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return b->njobs;
}

/* The queue index of a name "q<k>" in m. */
static size_t queue_index(const struct many *m, const char *p, size_t len)
{
	char name[16];
	size_t k;

	ck_assert_uint_lt(len, sizeof(name));
	memcpy(name, p, len);
	name[len] = '\0';
	ck_assert_int_eq(sscanf(name, "q%zu", &k), 1);
	ck_assert_uint_lt(k, m->nq);
	return k;
}

/* SADD queues: each queue with a job now, once, in order of its first such job. */
static void check_queue_set(const struct many *m, size_t k, size_t *seen, size_t *last_first)
{
	for (size_t a = 2; a < m->c.cmds[k].argc; a++) {
		size_t len, qi, first = m->n;
		const char *p = cmds_arg(&m->c, k, a, &len);
		qi = queue_index(m, p, len);
		for (size_t i = qi; i < m->n && first == m->n; i += m->nq)
			if (!m->b.jobs[i].out.scheduled)
				first = i;
		ck_assert_uint_lt(first, m->n);
		ck_assert_msg(*seen == 0 || first > *last_first, "queue q%zu out of order in the queues set", qi);
		*last_first = first;
		(*seen)++;
	}
}

/*
 * Replays the commands as the lists would receive them: every job exactly
 * once, in its own list, each list's jobs in id order; the queues set and
 * Laravel's notify lists as they must be.
 */
static void check_commands(struct many *m)
{
	struct pushed *v = calloc(m->n, sizeof(*v));
	size_t nv = 0, pos = 0, nset = 0, last_first = 0, notified = 0, now = 0, queues_now = 0;
	bool *has_now = calloc(m->nq, sizeof(*has_now));
	char want[64];

	ck_assert_ptr_nonnull(v);
	ck_assert_ptr_nonnull(has_now);
	for (size_t k = 0; k < m->c.ncmds; k++) {
		size_t klen, len;
		const char *name = cmds_arg(&m->c, k, 0, &len), *key = cmds_arg(&m->c, k, 1, &klen);
		ck_assert_uint_le(m->c.cmds[k].argc, CMDS_MAX_ARGS);
		if (strcmp(name, "SADD") == 0 && klen == strlen("queues") && memcmp(key, "queues", klen) == 0) {
			check_queue_set(m, k, &nset, &last_first);
			continue;
		}
		if (klen > strlen(":notify") && memcmp(key + klen - 7, ":notify", 7) == 0) {
			notified += m->c.cmds[k].argc - 2;
			continue;
		}
		for (size_t a = 2; a < m->c.cmds[k].argc; a++) {
			const char *p = cmds_arg(&m->c, k, a, &len);
			size_t j = job_at(&m->b, p, len);
			if (j == m->n)
				continue;
			ck_assert_uint_lt(nv, m->n);
			v[nv++] = (struct pushed){ .key = key, .klen = klen, .pos = pos++, .job = j };
			ck_assert_msg(klen == list_of(m, j, want, sizeof(want)) && memcmp(key, want, klen) == 0,
				      "job %zu pushed to %.*s, not %s", j, (int)klen, key, want);
		}
	}
	ck_assert_uint_eq(nv, m->n);
	qsort(v, nv, sizeof(*v), by_list_then_pos);
	for (size_t i = 1; i < nv; i++)
		if (by_list_then_pos(&(struct pushed){ v[i].key, v[i].klen, 0, 0 },
				     &(struct pushed){ v[i - 1].key, v[i - 1].klen, 0, 0 }) == 0)
			ck_assert_msg(v[i].job > v[i - 1].job, "list %.*s: job %zu pushed after job %zu",
				      (int)v[i].klen, v[i].key, v[i].job, v[i - 1].job);
	for (size_t i = 0; i < m->n; i++) {
		if (m->b.jobs[i].out.scheduled)
			continue;
		now++;
		queues_now += !has_now[i % m->nq];
		has_now[i % m->nq] = true;
	}
	if (m->f != FORMAT_CELERY && m->f != FORMAT_LARAVEL)
		ck_assert_uint_eq(nset, queues_now);
	if (m->f == FORMAT_LARAVEL)
		ck_assert_uint_eq(notified, now);
	free(has_now);
	free(v);
}

/* 50,000 jobs in 50,000 queues: each layout's commands, checked whole. */
START_TEST(every_layout_with_a_queue_per_job)
{
	struct many m;

	many_build(&m, all_formats[_i], 50000, 50000, 0);
	ck_assert_int_eq(format_of(m.f)->commands(&m.c, &m.b, ""), 0);
	check_commands(&m);
	many_free(&m);
}
END_TEST

/* 50,000 jobs in 4,999 queues in turn, some scheduled: several jobs a list. */
START_TEST(every_layout_with_many_queues_of_several_jobs)
{
	struct many m;

	many_build(&m, all_formats[_i], 50000, 4999, 7);
	ck_assert_int_eq(format_of(m.f)->commands(&m.c, &m.b, ""), 0);
	check_commands(&m);
	many_free(&m);
}
END_TEST

/* The job whose payload a copied argument ends with (resque's timestamps:<job>), or n. */
static size_t job_ending(const struct many *m, const char *p, size_t len)
{
	for (size_t j = 0; j < m->n; j++) {
		const struct job_out *o = &m->b.jobs[j].out;
		if (len > o->len && memcmp(p + len - o->len, m->b.payloads.data + o->off, o->len) == 0)
			return j;
	}
	return m->n;
}

/* Command k's arguments joined by spaces, payloads shown as J<index>. */
static void assert_cmd(const struct many *m, size_t k, const char *want)
{
	char got[512] = "";
	size_t used = 0;

	ck_assert_uint_lt(k, m->c.ncmds);
	for (size_t a = 0; a < m->c.cmds[k].argc; a++) {
		size_t len, j;
		const char *p = cmds_arg(&m->c, k, a, &len);
		if ((j = job_at(&m->b, p, len)) < m->n)
			used += (size_t)snprintf(got + used, sizeof(got) - used, " J%zu", j);
		else if ((j = job_ending(m, p, len)) < m->n)
			used += (size_t)snprintf(got + used, sizeof(got) - used, " %.*sJ%zu",
						 (int)(len - m->b.jobs[j].out.len), p, j);
		else
			used += (size_t)snprintf(got + used, sizeof(got) - used, " %.*s", (int)len, p);
		ck_assert_uint_lt(used, sizeof(got));
	}
	ck_assert_str_eq(got + 1, want);
}

/* Sidekiq's and Resque's layouts of a small batch, command for command: the
 * queues set, then each queue's list in order of its first job, then the
 * scheduled jobs (jobs 0-6 in queues q0 q1 q2 in turn, 2 and 5 later). */
START_TEST(sidekiq_and_resque_layouts)
{
	struct many m;

	many_build(&m, FORMAT_SIDEKIQ, 7, 3, 3);
	ck_assert_int_eq(format_of(m.f)->commands(&m.c, &m.b, "ns:"), 0);
	ck_assert_uint_eq(m.c.ncmds, 4);
	assert_cmd(&m, 0, "SADD ns:queues q0 q1");
	assert_cmd(&m, 1, "LPUSH ns:queue:q0 J0 J3 J6");
	assert_cmd(&m, 2, "LPUSH ns:queue:q1 J1 J4");
	assert_cmd(&m, 3, "ZADD ns:schedule 1700000003.0 J2 1700000003.0 J5");
	many_free(&m);
	many_build(&m, FORMAT_RESQUE, 7, 3, 3);
	ck_assert_int_eq(format_of(m.f)->commands(&m.c, &m.b, "ns:"), 0);
	ck_assert_uint_eq(m.c.ncmds, 9);
	assert_cmd(&m, 0, "SADD ns:queues q0 q1");
	assert_cmd(&m, 1, "RPUSH ns:queue:q0 J0 J3 J6");
	assert_cmd(&m, 2, "RPUSH ns:queue:q1 J1 J4");
	assert_cmd(&m, 3, "RPUSH ns:delayed:1700000003 J2");
	assert_cmd(&m, 4, "ZADD ns:delayed_queue_schedule 1700000003 1700000003");
	assert_cmd(&m, 5, "SADD ns:timestamps:J2 delayed:1700000003");
	assert_cmd(&m, 6, "RPUSH ns:delayed:1700000003 J5");
	many_free(&m);
}
END_TEST

/* n (log2 n + 1): a merge sort's comparisons and one more per item. */
static unsigned long long n_log_n(size_t n)
{
	unsigned long long bits = 0;

	while (((size_t)1 << bits) < n)
		bits++;
	return (unsigned long long)n * (bits + 1);
}

/* Lists in the order of their first item, each list's items in the order added. */
START_TEST(lists_keep_the_order_of_their_first_job)
{
	static const struct {
		const char *q;
		int sub;
	} in[] = { { "b", 0 }, { "a", 0 }, { "b", 0 }, { "c", 0 }, { "a", 0 }, { "b", 3 }, { "bb", 0 }, { "b", 0 } };
	static const size_t want[] = { 0, 2, 7, 1, 4, 3, 5, 6 };
	static const bool first[] = { true, false, false, true, false, true, true, true };
	struct queue_groups g;

	queue_groups_init(&g);
	for (int round = 0; round < 2; round++) { /* a second grouping reuses the memory */
		queue_groups_reset(&g);
		for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++)
			ck_assert_int_eq(queue_groups_add(&g, in[i].q, strlen(in[i].q), in[i].sub, i * 10), 0);
		ck_assert_int_eq(queue_groups_sort(&g), 0);
		ck_assert_uint_eq(g.n, sizeof(want) / sizeof(want[0]));
		for (size_t i = 0; i < g.n; i++) {
			ck_assert_uint_eq(g.v[i].job, want[i] * 10);
			ck_assert_int_eq(g.v[i].first, first[i]);
		}
	}
	queue_groups_reset(&g);
	ck_assert_int_eq(queue_groups_sort(&g), 0);
	ck_assert_uint_eq(g.n, 0);
	queue_groups_free(&g);
	queue_groups_free(NULL);
}
END_TEST

/*
 * The work, counted rather than timed: grouping n jobs takes at most
 * n (log2 n + 1) comparisons of queue names, whether every job has its own
 * queue or queues have many jobs in turn. Rescanning the batch for each
 * queue took about n^2 / 2: 8 million for these 4,096 jobs.
 */
START_TEST(grouping_compares_n_log_n_names)
{
	enum { N = 4096 };
	static const size_t nqs[] = { N, 64, 1 };
	static char names[N][24];
	struct queue_groups g;

	for (size_t q = 0; q < N; q++)
		snprintf(names[q], sizeof(names[q]), "q%zu", q);
	queue_groups_init(&g);
	for (size_t k = 0; k < sizeof(nqs) / sizeof(nqs[0]); k++) {
		unsigned long long before = g.compares;
		queue_groups_reset(&g);
		for (size_t i = 0; i < N; i++)
			ck_assert_int_eq(queue_groups_add(&g, names[i % nqs[k]], strlen(names[i % nqs[k]]), 0, i), 0);
		ck_assert_int_eq(queue_groups_sort(&g), 0);
		ck_assert_msg(g.compares - before <= n_log_n(N), "%zu jobs in %zu queues: %llu comparisons, over %llu",
			      (size_t)N, nqs[k], g.compares - before, n_log_n(N));
	}
	queue_groups_free(&g);
}
END_TEST

/* The same bound through every layout: at most three groupings a batch. */
START_TEST(every_layout_compares_n_log_n_names)
{
	struct many m;
	unsigned long long bound;

	many_build(&m, all_formats[_i], 4096, 4096, 5);
	ck_assert_int_eq(format_of(m.f)->commands(&m.c, &m.b, ""), 0);
	bound = 3 * n_log_n(m.n);
	ck_assert_msg(m.c.groups.compares <= bound, "%s: %llu comparisons for %zu jobs in as many queues, over %llu",
		      format_of(m.f)->name, m.c.groups.compares, m.n, bound);
	check_commands(&m);
	many_free(&m);
}
END_TEST

Suite *queue_groups_suite(void)
{
	Suite *s = suite_create("queue_groups");
	TCase *work = tcase_create("work");
	TCase *layouts = tcase_create("layouts");

	tcase_add_test(work, lists_keep_the_order_of_their_first_job);
	tcase_add_test(work, sidekiq_and_resque_layouts);
	tcase_add_test(work, grouping_compares_n_log_n_names);
	tcase_add_loop_test(work, every_layout_compares_n_log_n_names, 0, NFORMATS);
	suite_add_tcase(s, work);

	/* Seconds of work on a loaded machine, minutes if grouping were quadratic. */
	tcase_set_timeout(layouts, 120);
	tcase_add_loop_test(layouts, every_layout_with_a_queue_per_job, 0, NFORMATS);
	tcase_add_loop_test(layouts, every_layout_with_many_queues_of_several_jobs, 0, NFORMATS);
	suite_add_tcase(s, layouts);
	return s;
}
