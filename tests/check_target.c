/* A batch split by target (target_group, target_view), and a held queue's
 * key with its target (rounds_key): pure, no servers. */
#include "fmacros.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "rounds.h"
#include "suites.h"
#include "target.h"

static void make_batch(struct batch *b, const size_t *targets, size_t n)
{
	batch_init(b);
	ck_assert_int_eq(batch_reset(b, n), 0);
	for (size_t i = 0; i < n; i++)
		b->jobs[i] = (struct batch_job){ .id = (long long)i + 1, .target = targets[i] };
	b->njobs = n;
}

START_TEST(each_target_gets_its_own_jobs_in_their_order)
{
	static const size_t targets[] = { 1, 0, 2, 1, 0, 1 };
	struct batch b;
	struct target t[3];
	struct batch_job *scratch = NULL;
	size_t cap = 0;
	const struct batch_job *g;

	make_batch(&b, targets, 6);
	g = target_group(&b, 3, &scratch, &cap);
	ck_assert_ptr_eq(g, scratch); /* mixed: a copy */
	for (size_t i = 0; i < 3; i++) {
		memset(&t[i], 0, sizeof(t[i]));
		t[i].index = i;
		target_view(&t[i], &b, g);
	}
	ck_assert_uint_eq(t[0].part.njobs, 2);
	ck_assert_int_eq(t[0].part.jobs[0].id, 2);
	ck_assert_int_eq(t[0].part.jobs[1].id, 5);
	ck_assert_uint_eq(t[1].part.njobs, 3);
	ck_assert_int_eq(t[1].part.jobs[0].id, 1);
	ck_assert_int_eq(t[1].part.jobs[1].id, 4);
	ck_assert_int_eq(t[1].part.jobs[2].id, 6);
	ck_assert_uint_eq(t[2].part.njobs, 1);
	ck_assert_int_eq(t[2].part.jobs[0].id, 3);
	/* The batch keeps its order: its delete reads the ids in it. */
	ck_assert_int_eq(b.jobs[0].id, 1);
	ck_assert_int_eq(b.jobs[5].id, 6);
	free(scratch);
	batch_free(&b);
}
END_TEST

START_TEST(one_target_needs_no_copy)
{
	static const size_t targets[] = { 0, 0, 0 };
	struct batch b;
	struct target t;
	struct batch_job *scratch = NULL;
	size_t cap = 0;

	make_batch(&b, targets, 3);
	ck_assert_ptr_eq(target_group(&b, 1, &scratch, &cap), b.jobs);
	ck_assert_ptr_null(scratch);
	memset(&t, 0, sizeof(t));
	target_view(&t, &b, b.jobs);
	ck_assert_uint_eq(t.part.njobs, 3);
	batch_free(&b);
}
END_TEST

START_TEST(a_held_queue_key_names_its_target)
{
	struct buf key;
	const char *target, *queue;
	size_t tlen, qlen;

	buf_init(&key);
	ck_assert_int_eq(rounds_key(&key, NULL, 0, "mail", 4), 0);
	ck_assert_uint_eq(key.len, 4);
	rounds_key_split(key.data, key.len, &target, &tlen, &queue, &qlen);
	ck_assert_ptr_null(target);
	ck_assert_uint_eq(qlen, 4);
	ck_assert_int_eq(memcmp(queue, "mail", 4), 0);
	ck_assert_int_eq(rounds_key(&key, "shard2", 6, "mail", 4), 0);
	ck_assert_uint_eq(key.len, 11);
	rounds_key_split(key.data, key.len, &target, &tlen, &queue, &qlen);
	ck_assert_uint_eq(tlen, 6);
	ck_assert_int_eq(memcmp(target, "shard2", 6), 0);
	ck_assert_uint_eq(qlen, 4);
	ck_assert_int_eq(memcmp(queue, "mail", 4), 0);
	buf_free(&key);
}
END_TEST

Suite *target_suite(void)
{
	Suite *s = suite_create("target");
	TCase *tc = tcase_create("split");

	tcase_add_test(tc, each_target_gets_its_own_jobs_in_their_order);
	tcase_add_test(tc, one_target_needs_no_copy);
	tcase_add_test(tc, a_held_queue_key_names_its_target);
	suite_add_tcase(s, tc);
	return s;
}
