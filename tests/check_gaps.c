/* Gap bookkeeping: what the cursor skipped stays tracked until no transaction
 * that could commit it is running, and never longer than needed; kept rows
 * stay until they move; old gaps are read on the timer, and by the read that
 * first sees one of their fillers ended (the snapshot parsing and the ended
 * xids that decide it, in tcase "due"). */
#include "fmacros.h"

#include <check.h>
#include <errno.h>
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

/* A read of every gap at time now, nothing kept, not cut short. */
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

/* ---- which old gaps a read must read too: their fillers ended since ---- */

static struct snapshot snap_of(const char *text)
{
	struct snapshot s;

	snapshot_init(&s);
	ck_assert_int_eq(snapshot_parse(&s, text), 0);
	return s;
}

START_TEST(a_snapshot_is_parsed_as_postgres_prints_it)
{
	struct snapshot s = snap_of("100:105:101,103");
	static const char *const bad[] = { "",         "x",     "100:105",  "100:105:101,",
					   "105:100:", "1:2:a", "1:2:3,,4", "99999999999999999999:1:" };

	ck_assert_uint_eq(s.xmin, 100);
	ck_assert_uint_eq(s.xmax, 105);
	ck_assert_uint_eq(s.n, 2);
	ck_assert_uint_eq(s.xip[0], 101);
	ck_assert_uint_eq(s.xip[1], 103);
	ck_assert_int_eq(snapshot_parse(&s, "7:7:"), 0);
	ck_assert_uint_eq(s.n, 0);
	ck_assert_uint_eq(s.xmax, 7);
	ck_assert_int_eq(snapshot_parse(&s, "1:9:8,2,5"), 0); /* sorted, whatever the order given */
	ck_assert_uint_eq(s.xip[0], 2);
	ck_assert_uint_eq(s.xip[2], 8);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(snapshot_parse(&s, bad[i]) == -EINVAL, "accepted \"%s\"", bad[i]);
		ck_assert_uint_eq(s.xmax, 0);
	}
	snapshot_free(&s);
}
END_TEST

START_TEST(ended_xids_are_those_running_before_and_ended_now)
{
	struct snapshot prev = snap_of("100:105:101,103"), cur = snap_of("102:110:103,107"), none;
	struct snapshot_ended e;

	ck_assert_int_eq(snapshot_ended_init(&e, &prev, &cur), 0);
	ck_assert(snapshot_ended_within(&e, 101, 102));  /* in prev's xip, ended */
	ck_assert(!snapshot_ended_within(&e, 103, 104)); /* still running */
	ck_assert(!snapshot_ended_within(&e, 100, 101)); /* had ended before prev */
	ck_assert(!snapshot_ended_within(&e, 104, 105));
	ck_assert(snapshot_ended_within(&e, 105, 106));  /* at or above prev's xmax, ended */
	ck_assert(!snapshot_ended_within(&e, 107, 108)); /* running in cur */
	ck_assert(!snapshot_ended_within(&e, 110, 200)); /* not ended by cur */
	ck_assert(snapshot_ended_within(&e, 0, 1000));
	snapshot_ended_free(&e);
	/* Measured from the empty snapshot, every xid cur shows ended counts. */
	snapshot_init(&none);
	ck_assert_int_eq(snapshot_ended_init(&e, &none, &cur), 0);
	ck_assert(snapshot_ended_within(&e, 50, 51));
	ck_assert(!snapshot_ended_within(&e, 103, 104));
	snapshot_ended_free(&e);
	snapshot_free(&prev);
	snapshot_free(&cur);
}
END_TEST

/* A read at time now under snapshot s (its xmin), every gap read, not cut. */
static void adv_snap(const long long *ids, size_t n, const struct snapshot *s, uint64_t bound, long long now)
{
	struct gaps_read r = rd(ids, n, s->xmin, bound, now);

	r.snap = s;
	ck_assert_int_eq(gaps_advance(&g, &r), 0);
}

/* T (xid 101) took ids 1..4 and is still running when the first read sees 5:
 * gap 1..4, old at once, window 100..104 (xmin 100, bound 105). */
static void split_setup(struct snapshot *s1)
{
	const long long first[] = { 5 };

	*s1 = snap_of("100:103:100,101");
	adv_snap(first, 1, s1, 105, 1000);
	ck_assert_uint_eq(g.n, 1);
	assert_gap(0, 1, 4, 105);
	ck_assert_uint_eq(g.v[0].xid_lo, 100);
	ck_assert_uint_eq(g.v[0].xid_hi, 105);
	ck_assert(!gaps_reads(&g, 0, 800));
}

START_TEST(an_old_gap_whose_filler_ended_is_due)
{
	struct snapshot s1, s2 = snap_of("100:106:100");

	split_setup(&s1);
	/* 101 (T) ended: the next read, of young gaps only, must read 1..4 too. */
	ck_assert_int_eq(gaps_mark_due(&g, &s2, 800), 1);
	ck_assert(g.v[0].due);
	ck_assert(gaps_reads(&g, 0, 800));
	/* Marked once: a second look at the same snapshot marks nothing more. */
	ck_assert_int_eq(gaps_mark_due(&g, &s2, 800), 0);
	snapshot_free(&s1);
	snapshot_free(&s2);
}
END_TEST

START_TEST(an_old_gap_none_of_whose_fillers_ended_is_not_due)
{
	struct snapshot s1, same = snap_of("100:103:100,101"), later = snap_of("100:110:100,101,102,103,104");

	split_setup(&s1);
	ck_assert_int_eq(gaps_mark_due(&g, &same, 800), 0);
	/* Only xids at or above the bound ended (105..109): no filler of 1..4. */
	ck_assert_int_eq(gaps_mark_due(&g, &later, 800), 0);
	ck_assert(!g.v[0].due);
	ck_assert(!gaps_reads(&g, 0, 800));
	snapshot_free(&s1);
	snapshot_free(&same);
	snapshot_free(&later);
}
END_TEST

START_TEST(a_due_gap_stays_due_until_a_read_gets_through_it)
{
	const long long some[] = { 2 }, rest[] = { 3, 4, 6 };
	struct snapshot s1, s2 = snap_of("100:106:100");
	struct gaps_read r;

	split_setup(&s1);
	ck_assert_int_eq(gaps_mark_due(&g, &s2, 800), 1);
	/* The read got to id 2 only (its limit): 3..4 stay due, 1 was passed. */
	r = rd(some, 1, 100, 107, 1100);
	r.snap = &s2;
	r.young_since = 800;
	r.retire_below = 2;
	ck_assert_int_eq(gaps_advance(&g, &r), 0);
	ck_assert_uint_eq(g.n, 2);
	assert_gap(0, 1, 1, 105);
	ck_assert(!g.v[0].due);
	assert_gap(1, 3, 4, 105);
	ck_assert(g.v[1].due);
	/* Nothing ended since s2, but 3..4 are read with the rows above the cursor. */
	ck_assert_int_eq(gaps_mark_due(&g, &s2, 1000), 0);
	ck_assert(gaps_reads(&g, 1, 1000));
	ck_assert(!gaps_reads(&g, 0, 1000));
	r = rd(rest, 3, 100, 108, 1200);
	r.snap = &s2;
	r.young_since = 1000;
	ck_assert_int_eq(gaps_advance(&g, &r), 0);
	ck_assert_int_eq(g.cursor, 6);
	for (size_t i = 0; i < g.n; i++)
		ck_assert(!g.v[i].due);
	snapshot_free(&s1);
	snapshot_free(&s2);
}
END_TEST

START_TEST(a_young_gap_cut_short_is_due_once_old)
{
	const long long a[] = { 2, 10 }, b[] = { 4 };
	struct snapshot s = snap_of("100:103:100,101");
	struct gaps_read r;

	adv_snap(a, 2, &s, 105, 1000); /* cursor 0: old at once, so make it young by hand */
	g.v[1].opened_ms = 1000;       /* 3..9 */
	r = rd(b, 1, 100, 106, 1100);
	r.snap = &s;
	r.young_since = 900; /* reads 3..9, cut at 4 */
	r.retire_below = 4;
	ck_assert_int_eq(gaps_advance(&g, &r), 0);
	assert_gap(2, 5, 9, 105);
	ck_assert(g.v[2].due);
	ck_assert(gaps_reads(&g, 2, 5000)); /* long after it stopped being young */
	snapshot_free(&s);
}
END_TEST

START_TEST(a_failed_batch_keeps_the_previous_snapshot)
{
	struct snapshot s1, s2 = snap_of("100:106:100");

	split_setup(&s1);
	/* Marking reads prev, never moves it: a batch that fails after it leaves
	 * prev at s1, and the next read measures from there again. */
	ck_assert_int_eq(gaps_mark_due(&g, &s2, 800), 1);
	ck_assert_uint_eq(g.prev.xmax, 103);
	ck_assert_uint_eq(g.prev.n, 2);
	/* A batch that commits moves prev to its snapshot. */
	adv_snap(NULL, 0, &s2, 107, 1200);
	ck_assert_uint_eq(g.prev.xmax, 106);
	ck_assert_uint_eq(g.prev.n, 1);
	snapshot_free(&s1);
	snapshot_free(&s2);
}
END_TEST

START_TEST(kept_gaps_are_never_due_and_merges_keep_the_window)
{
	const long long a[] = { 3, 5 }, kept[] = { 3 };
	struct snapshot s1 = snap_of("100:103:100,101"), s2 = snap_of("102:130:");
	struct gaps_read r = rd(a, 2, 100, 105, 1000);
	struct gaps two;

	r.snap = &s1;
	r.kept = kept;
	r.nkept = 1;
	/* 1..2 and 4 (window 100..104) and 3, kept (no window): 100 and 101
	 * ended, so the two gaps are due and the kept row is not. */
	ck_assert_int_eq(gaps_advance(&g, &r), 0);
	ck_assert_uint_eq(g.n, 3);
	ck_assert_int_eq(gaps_mark_due(&g, &s2, 900), 2);
	ck_assert(g.v[0].due);
	ck_assert_uint_eq(g.v[1].bound, GAP_KEPT);
	ck_assert(!g.v[1].due);
	ck_assert(g.v[2].due);
	/* With room for two ranges, 1..2 and 3 merge: the hull keeps the window. */
	gaps_init(&two, 2);
	ck_assert_int_eq(gaps_advance(&two, &r), 0);
	ck_assert_uint_eq(two.n, 2);
	ck_assert_int_eq(two.v[0].lo, 1);
	ck_assert_int_eq(two.v[0].hi, 3);
	ck_assert_uint_eq(two.v[0].bound, GAP_KEPT);
	ck_assert_uint_eq(two.v[0].xid_lo, 100);
	ck_assert_uint_eq(two.v[0].xid_hi, 105);
	ck_assert_int_eq(gaps_mark_due(&two, &s2, 900), 2);
	gaps_free(&two);
	snapshot_free(&s1);
	snapshot_free(&s2);
}
END_TEST

Suite *gaps_suite(void)
{
	Suite *s = suite_create("gaps");
	TCase *tc = tcase_create("core"), *due;

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
	due = tcase_create("due");
	tcase_add_checked_fixture(due, setup, teardown);
	tcase_add_test(due, a_snapshot_is_parsed_as_postgres_prints_it);
	tcase_add_test(due, ended_xids_are_those_running_before_and_ended_now);
	tcase_add_test(due, an_old_gap_whose_filler_ended_is_due);
	tcase_add_test(due, an_old_gap_none_of_whose_fillers_ended_is_not_due);
	tcase_add_test(due, a_due_gap_stays_due_until_a_read_gets_through_it);
	tcase_add_test(due, a_young_gap_cut_short_is_due_once_old);
	tcase_add_test(due, a_failed_batch_keeps_the_previous_snapshot);
	tcase_add_test(due, kept_gaps_are_never_due_and_merges_keep_the_window);
	suite_add_tcase(s, due);
	return s;
}
