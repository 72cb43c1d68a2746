/* Gap bookkeeping: what the cursor skipped stays tracked until no transaction
 * that could commit it is running, and never longer than needed. */
#include "fmacros.h"

#include <check.h>
#include <limits.h>

#include "gaps.h"
#include "suites.h"

#define NO_CUT LLONG_MAX

static struct gaps g;

static void setup(void)
{
	gaps_init(&g, 4);
}

static void teardown(void)
{
	gaps_free(&g);
}

static void assert_gap(size_t i, long long lo, long long hi, uint64_t xmax)
{
	ck_assert_uint_lt(i, g.n);
	ck_assert_int_eq(g.v[i].lo, lo);
	ck_assert_int_eq(g.v[i].hi, hi);
	ck_assert_uint_eq(g.v[i].xmax, xmax);
}

START_TEST(skipped_ids_become_gaps_and_the_cursor_moves)
{
	const long long ids[] = { 3, 4, 7, 10 };

	ck_assert_int_eq(gaps_advance(&g, ids, 4, 100, 105, NO_CUT), 0);
	ck_assert_int_eq(g.cursor, 10);
	ck_assert_uint_eq(g.n, 3);
	assert_gap(0, 1, 2, 105);
	assert_gap(1, 5, 6, 105);
	assert_gap(2, 8, 9, 105);
	ck_assert_int_eq(gaps_ids(&g), 6);
}
END_TEST

START_TEST(nothing_running_means_nothing_to_wait_for)
{
	const long long ids[] = { 3, 10 };

	/* xmin == xmax: no transaction was running, so the holes can never fill. */
	ck_assert_int_eq(gaps_advance(&g, ids, 2, 105, 105, NO_CUT), 0);
	ck_assert_int_eq(g.cursor, 10);
	ck_assert_uint_eq(g.n, 0);
}
END_TEST

START_TEST(a_late_commit_leaves_its_gap)
{
	const long long first[] = { 5 }, late[] = { 2, 9 };

	ck_assert_int_eq(gaps_advance(&g, first, 1, 100, 105, NO_CUT), 0);
	assert_gap(0, 1, 4, 105);
	/* id 2 committed late; 9 is new; 6..8 skipped under a newer snapshot. */
	ck_assert_int_eq(gaps_advance(&g, late, 2, 101, 110, NO_CUT), 0);
	ck_assert_int_eq(g.cursor, 9);
	ck_assert_uint_eq(g.n, 3);
	assert_gap(0, 1, 1, 105);
	assert_gap(1, 3, 4, 105);
	assert_gap(2, 6, 8, 110);
}
END_TEST

START_TEST(gaps_retire_once_xmin_passes_their_xmax)
{
	const long long a[] = { 5 }, b[] = { 9 };

	ck_assert_int_eq(gaps_advance(&g, a, 1, 100, 105, NO_CUT), 0);
	ck_assert_int_eq(gaps_advance(&g, b, 1, 104, 110, NO_CUT), 0);
	ck_assert_uint_eq(g.n, 2);
	/* An empty read still retires: xmin 105 passes the first gap only. */
	ck_assert_int_eq(gaps_advance(&g, NULL, 0, 105, 111, NO_CUT), 0);
	ck_assert_int_eq(g.cursor, 9);
	ck_assert_uint_eq(g.n, 1);
	assert_gap(0, 6, 8, 110);
	ck_assert_int_eq(gaps_advance(&g, NULL, 0, 111, 111, NO_CUT), 0);
	ck_assert_uint_eq(g.n, 0);
}
END_TEST

START_TEST(a_cut_short_gap_read_keeps_what_it_did_not_reach)
{
	const long long a[] = { 20 }, b[] = { 5 };

	ck_assert_int_eq(gaps_advance(&g, a, 1, 100, 105, NO_CUT), 0);
	assert_gap(0, 1, 19, 105);
	/* The gap read stopped at id 5 (its limit): 6..19 may hold rows not read yet,
	 * so they stay although xmin has passed; 1..4 had nothing visible. */
	ck_assert_int_eq(gaps_advance(&g, b, 1, 106, 106, 5), 0);
	ck_assert_uint_eq(g.n, 1);
	assert_gap(0, 6, 19, 105);
	ck_assert_int_eq(g.cursor, 20);
}
END_TEST

START_TEST(at_the_bound_the_closest_gaps_merge)
{
	const long long ids[] = { 2, 4, 6, 20, 22, 30 };

	/* Holes 1, 3, 5, 7..19, 21, 23..29: six ranges, bound four. */
	ck_assert_int_eq(gaps_advance(&g, ids, 6, 100, 105, NO_CUT), 0);
	ck_assert_uint_eq(g.n, 4);
	assert_gap(0, 1, 5, 105);
	assert_gap(1, 7, 19, 105);
	assert_gap(2, 21, 21, 105);
	assert_gap(3, 23, 29, 105);
	/* Nothing that was a gap is lost: 1, 3 and 5 are still covered. */
	ck_assert_int_eq(gaps_ids(&g), 5 + 13 + 1 + 7);
}
END_TEST

START_TEST(merging_keeps_the_later_xmax)
{
	const long long a[] = { 2 }, b[] = { 4, 6, 8, 10 };

	ck_assert_int_eq(gaps_advance(&g, a, 1, 100, 105, NO_CUT), 0);
	ck_assert_int_eq(gaps_advance(&g, b, 4, 100, 120, NO_CUT), 0);
	/* 1 (105) and 3, 5, 7, 9 (120): 1 and 3 merge, and wait for the later xmax. */
	ck_assert_uint_eq(g.n, 4);
	assert_gap(0, 1, 3, 120);
	ck_assert_int_eq(gaps_advance(&g, NULL, 0, 106, 121, NO_CUT), 0);
	ck_assert_uint_eq(g.n, 4);
	ck_assert_int_eq(gaps_advance(&g, NULL, 0, 120, 121, NO_CUT), 0);
	ck_assert_uint_eq(g.n, 0);
}
END_TEST

START_TEST(reset_forgets_everything)
{
	const long long ids[] = { 7 };

	ck_assert_int_eq(gaps_advance(&g, ids, 1, 100, 105, NO_CUT), 0);
	gaps_reset(&g);
	ck_assert_int_eq(g.cursor, 0);
	ck_assert_uint_eq(g.n, 0);
}
END_TEST

Suite *gaps_suite(void)
{
	Suite *s = suite_create("gaps");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, skipped_ids_become_gaps_and_the_cursor_moves);
	tcase_add_test(tc, nothing_running_means_nothing_to_wait_for);
	tcase_add_test(tc, a_late_commit_leaves_its_gap);
	tcase_add_test(tc, gaps_retire_once_xmin_passes_their_xmax);
	tcase_add_test(tc, a_cut_short_gap_read_keeps_what_it_did_not_reach);
	tcase_add_test(tc, at_the_bound_the_closest_gaps_merge);
	tcase_add_test(tc, merging_keeps_the_later_xmax);
	tcase_add_test(tc, reset_forgets_everything);
	suite_add_tcase(s, tc);
	return s;
}
