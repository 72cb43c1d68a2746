/* Gap bookkeeping: what the cursor skipped stays tracked until no transaction
 * that could commit it is running, and never longer than needed; kept rows
 * stay until they move; old gaps are read on the timer only. */
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

/* A read of every gap at time now, nothing held, not cut short. */
static struct gaps_read rd(const long long *ids, size_t n, uint64_t xmin, uint64_t bound, long long now)
{
	return (struct gaps_read){ .ids = ids,
				   .n = n,
				   .xmin = xmin,
				   .bound = bound,
				   .young_since = GAP_OLD,
				   .retire_below = NO_CUT,
				   .now_ms = now };
}

static void adv(const long long *ids, size_t n, uint64_t xmin, uint64_t bound)
{
	struct gaps_read r = rd(ids, n, xmin, bound, 1000);

	ck_assert_int_eq(gaps_advance(&g, &r), 0);
}

static void assert_gap(size_t i, long long lo, long long hi, uint64_t bound)
{
	ck_assert_uint_lt(i, g.n);
	ck_assert_int_eq(g.v[i].lo, lo);
	ck_assert_int_eq(g.v[i].hi, hi);
	ck_assert_uint_eq(g.v[i].bound, bound);
}

START_TEST(skipped_ids_become_gaps_and_the_cursor_moves)
{
	const long long ids[] = { 3, 4, 7, 10 };

	adv(ids, 4, 100, 105);
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

	/* bound == xmin: every xid below the bound had ended before the snapshot,
	 * so a filler's row would have been visible: the holes were rolled back. */
	adv(ids, 2, 105, 105);
	ck_assert_int_eq(g.cursor, 10);
	ck_assert_uint_eq(g.n, 0);
}
END_TEST

START_TEST(a_late_commit_leaves_its_gap)
{
	const long long first[] = { 5 }, late[] = { 2, 9 };

	adv(first, 1, 100, 105);
	assert_gap(0, 1, 4, 105);
	/* id 2 committed late; 9 is new; 6..8 skipped under a newer snapshot. */
	adv(late, 2, 101, 110);
	ck_assert_int_eq(g.cursor, 9);
	ck_assert_uint_eq(g.n, 3);
	assert_gap(0, 1, 1, 105);
	assert_gap(1, 3, 4, 105);
	assert_gap(2, 6, 8, 110);
}
END_TEST

START_TEST(gaps_retire_once_xmin_reaches_their_bound)
{
	const long long a[] = { 5 }, b[] = { 9 };

	adv(a, 1, 100, 105);
	adv(b, 1, 104, 110);
	ck_assert_uint_eq(g.n, 2);
	/* An empty read still retires: xmin 105 reaches the first bound only. */
	adv(NULL, 0, 105, 111);
	ck_assert_int_eq(g.cursor, 9);
	ck_assert_uint_eq(g.n, 1);
	assert_gap(0, 6, 8, 110);
	adv(NULL, 0, 110, 112);
	ck_assert_uint_eq(g.n, 0);
}
END_TEST

/* The defect this bound fixes: the snapshot of the read that opened the gap
 * had xmin = xmax = 100 while the filler held xid 103, which no snapshot
 * showed. Retiring at that xmax would lose its row; the bound (the reader's
 * own xid, 107) keeps the gap until the filler has ended. */
START_TEST(the_bound_outlives_a_filler_the_snapshot_did_not_show)
{
	const long long a[] = { 5 };

	adv(a, 1, 100, 107);
	adv(NULL, 0, 101, 108);
	adv(NULL, 0, 103, 109);
	ck_assert_uint_eq(g.n, 1);
	assert_gap(0, 1, 4, 107);
	adv(NULL, 0, 107, 110);
	ck_assert_uint_eq(g.n, 0);
}
END_TEST

START_TEST(a_cut_short_gap_read_keeps_what_it_did_not_reach)
{
	const long long a[] = { 20 }, b[] = { 5 };
	struct gaps_read r;

	adv(a, 1, 100, 105);
	assert_gap(0, 1, 19, 105);
	/* The gap read stopped at id 5 (its limit): 6..19 may hold rows not read yet,
	 * so they stay although xmin has passed; 1..4 had nothing visible. */
	r = rd(b, 1, 106, 107, 1000);
	r.retire_below = 5;
	ck_assert_int_eq(gaps_advance(&g, &r), 0);
	ck_assert_uint_eq(g.n, 1);
	assert_gap(0, 6, 19, 105);
	ck_assert_int_eq(g.cursor, 20);
}
END_TEST

START_TEST(at_the_bound_the_closest_neighbours_merge)
{
	const long long ids[] = { 5, 6, 7, 8, 10, 12, 13, 14, 16 };
	struct gaps two;
	struct gaps_read r = rd(ids, 9, 100, 105, 1000);

	/* Holes 1..4, 9, 11, 15; neighbours 5, 2 and 4 ids apart; bound two. The
	 * closest pair merges first (9 and 11), then 9..11 with 15: merging the
	 * first pair would have swallowed 5..8 instead. */
	gaps_init(&two, 2);
	ck_assert_int_eq(gaps_advance(&two, &r), 0);
	ck_assert_uint_eq(two.n, 2);
	ck_assert_int_eq(two.v[0].lo, 1);
	ck_assert_int_eq(two.v[0].hi, 4);
	ck_assert_int_eq(two.v[1].lo, 9);
	ck_assert_int_eq(two.v[1].hi, 15);
	gaps_free(&two);
}
END_TEST

START_TEST(merging_keeps_the_later_bound_and_the_earlier_opening)
{
	const long long a[] = { 2 }, b[] = { 4, 6, 8, 10 };
	struct gaps_read r = rd(b, 4, 100, 120, 5000);

	adv(a, 1, 100, 105);
	ck_assert_int_eq(gaps_advance(&g, &r), 0);
	/* 1 (105) and 3, 5, 7, 9 (120): 1 and 3 merge, and wait for the later bound. */
	ck_assert_uint_eq(g.n, 4);
	assert_gap(0, 1, 3, 120);
	ck_assert_int_eq(g.v[0].opened_ms, GAP_OLD);
	adv(NULL, 0, 106, 121);
	ck_assert_uint_eq(g.n, 4);
	adv(NULL, 0, 120, 121);
	ck_assert_uint_eq(g.n, 0);
}
END_TEST

START_TEST(old_gaps_wait_for_a_read_of_every_gap)
{
	const long long a[] = { 5 }, b[] = { 9 };
	struct gaps_read r;

	adv(a, 1, 100, 105); /* from cursor 0: 1..4 is old at once */
	r = rd(b, 1, 100, 106, 2000);
	ck_assert_int_eq(gaps_advance(&g, &r), 0);
	ck_assert_int_eq(g.v[1].opened_ms, 2000);
	ck_assert(!gaps_reads(&g, 0, 1900));
	ck_assert(gaps_reads(&g, 1, 1900));
	/* A read of the young gaps only: 6..8 retires, 1..4 was not read and stays. */
	r = rd(NULL, 0, 200, 201, 2050);
	r.young_since = 1900;
	ck_assert_int_eq(gaps_advance(&g, &r), 0);
	ck_assert_uint_eq(g.n, 1);
	assert_gap(0, 1, 4, 105);
	adv(NULL, 0, 200, 202);
	ck_assert_uint_eq(g.n, 0);
}
END_TEST

START_TEST(a_kept_row_stays_until_it_moves)
{
	const long long a[] = { 3, 5 }, kept[] = { 3 }, again[] = { 3 };
	struct gaps_read r = rd(a, 2, 100, 101, 1000);

	r.kept = kept;
	r.nkept = 1;
	ck_assert_int_eq(gaps_advance(&g, &r), 0);
	ck_assert_uint_eq(g.n, 3);
	assert_gap(1, 3, 3, GAP_KEPT);
	ck_assert_uint_eq(gaps_kept(&g), 1);
	/* No xmin retires it; read and kept again, it stays. */
	r = rd(again, 1, 1000, 1001, 2000);
	r.kept = kept;
	r.nkept = 1;
	ck_assert_int_eq(gaps_advance(&g, &r), 0);
	ck_assert_uint_eq(g.n, 1);
	assert_gap(0, 3, 3, GAP_KEPT);
	/* Read and moved: gone. */
	adv(again, 1, 1002, 1003);
	ck_assert_uint_eq(g.n, 0);
}
END_TEST

START_TEST(a_kept_row_deleted_by_someone_else_retires_like_a_gap)
{
	const long long a[] = { 3, 5 }, kept[] = { 3 };
	struct gaps_read r = rd(a, 2, 100, 101, 1000);

	r.kept = kept;
	r.nkept = 1;
	ck_assert_int_eq(gaps_advance(&g, &r), 0);
	/* The read finds no row 3: what is left waits for this read's bound. */
	adv(NULL, 0, 150, 160);
	ck_assert_uint_eq(g.n, 1);
	assert_gap(0, 3, 3, 160);
	adv(NULL, 0, 160, 161);
	ck_assert_uint_eq(g.n, 0);
}
END_TEST

START_TEST(a_first_read_that_finds_nothing_skips_to_the_sequence)
{
	struct gaps_read r = rd(NULL, 0, 100, 105, 1000);

	r.skip_to = 50;
	ck_assert_int_eq(gaps_advance(&g, &r), 0);
	ck_assert_int_eq(g.cursor, 50);
	assert_gap(0, 1, 50, 105);
	ck_assert_int_eq(g.v[0].opened_ms, GAP_OLD);
}
END_TEST

START_TEST(reset_forgets_everything)
{
	const long long ids[] = { 7 };

	adv(ids, 1, 100, 105);
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
	tcase_add_test(tc, gaps_retire_once_xmin_reaches_their_bound);
	tcase_add_test(tc, the_bound_outlives_a_filler_the_snapshot_did_not_show);
	tcase_add_test(tc, a_cut_short_gap_read_keeps_what_it_did_not_reach);
	tcase_add_test(tc, at_the_bound_the_closest_neighbours_merge);
	tcase_add_test(tc, merging_keeps_the_later_bound_and_the_earlier_opening);
	tcase_add_test(tc, old_gaps_wait_for_a_read_of_every_gap);
	tcase_add_test(tc, a_kept_row_stays_until_it_moves);
	tcase_add_test(tc, a_kept_row_deleted_by_someone_else_retires_like_a_gap);
	tcase_add_test(tc, a_first_read_that_finds_nothing_skips_to_the_sequence);
	tcase_add_test(tc, reset_forgets_everything);
	suite_add_tcase(s, tc);
	return s;
}
