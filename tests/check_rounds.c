/* Fair release's bookkeeping: rounds, the cursor, tenants, rollback. */
#include "fmacros.h"

#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "rounds.h"
#include "suites.h"

/* A model of the held table: what rounds.c assigned, released in
 * (round, hold_id) order from the cursor, as the release query reads it. */
struct row {
	long long round, hid;
	char tenant[16];
	bool gone;
};

struct model {
	struct rounds r;
	long qi;
	struct row rows[4096];
	int n;
	long long next_hid;
};

static void model_init(struct model *m, long cap, long long base)
{
	rounds_init(&m->r, ROUNDS_MAX_TENANTS);
	rounds_reset(&m->r, base);
	m->qi = rounds_queue(&m->r, "default", 7, cap);
	ck_assert_int_ge(m->qi, 0);
	m->n = 0;
	m->next_hid = base;
}

/* Holds one job of tenant (NULL: the NULL tenant) in its own batch. */
static void hold(struct model *m, const char *tenant)
{
	long long round;

	rounds_begin(&m->r);
	ck_assert_int_eq(rounds_hold(&m->r, (size_t)m->qi, tenant, tenant ? strlen(tenant) : 0, &round), 0);
	rounds_commit(&m->r);
	m->rows[m->n] = (struct row){ .round = round, .hid = ++m->next_hid };
	strcpy(m->rows[m->n].tenant, tenant ? tenant : "-");
	/* A round is never above its row's hold_id: what a new leader relies on. */
	ck_assert_int_le(round, m->rows[m->n].hid);
	m->n++;
}

/* Releases the next row after the cursor; its tenant, or NULL if none. */
static const char *release_one(struct model *m, bool commit)
{
	const struct rounds_queue *q = &m->r.q[m->qi];
	struct row *best = NULL;

	for (int i = 0; i < m->n; i++) {
		struct row *w = &m->rows[i];
		bool after = w->round > q->now.round || (w->round == q->now.round && w->hid > q->now.hid);
		if (w->gone)
			continue;
		/* Nothing live may sit behind the cursor: it would never be released. */
		ck_assert_msg(after, "row (%lld,%lld) is behind the cursor (%lld,%lld)", w->round, w->hid, q->now.round,
			      q->now.hid);
		if (!best || w->round < best->round || (w->round == best->round && w->hid < best->hid))
			best = w;
	}
	if (!best)
		return NULL;
	rounds_begin(&m->r);
	rounds_released(&m->r, (size_t)m->qi, best->round, best->hid);
	if (!commit)
		return best->tenant;
	rounds_commit(&m->r);
	best->gone = true;
	return best->tenant;
}

START_TEST(a_newcomer_is_released_second_behind_a_flood)
{
	struct model m;

	model_init(&m, 100, 1);
	for (int i = 0; i < 50; i++)
		hold(&m, "A");
	hold(&m, "B");
	ck_assert_str_eq(release_one(&m, true), "A");
	ck_assert_str_eq(release_one(&m, true), "B");
	for (int i = 0; i < 49; i++)
		ck_assert_str_eq(release_one(&m, true), "A");
	ck_assert_ptr_null(release_one(&m, true));
	ck_assert_int_eq(m.r.q[m.qi].now.held, 0);
	rounds_free(&m.r);
}
END_TEST

/*
 * The trap the issue names: when every poll frees one slot, ranking within
 * tenants from the start would put the lowest-id tenant first every time.
 * Here a newcomer turns up after every few releases, and each is reached
 * within two releases of turning up.
 */
START_TEST(one_slot_per_poll_still_reaches_every_newcomer)
{
	struct model m;
	char name[16];

	model_init(&m, 100, 1);
	for (int i = 0; i < 1000; i++)
		hold(&m, "A");
	for (int k = 0; k < 50; k++) {
		snprintf(name, sizeof(name), "N%d", k);
		for (int s = 0; s < k % 3; s++)
			ck_assert_str_eq(release_one(&m, true), "A");
		hold(&m, name);
		const char *first = release_one(&m, true), *second = release_one(&m, true);
		ck_assert_msg(strcmp(first, name) == 0 || strcmp(second, name) == 0,
			      "newcomer %s not among the two released after it (%s, %s)", name, first, second);
	}
	rounds_free(&m.r);
}
END_TEST

START_TEST(round_robin_across_tenants_fifo_within_each)
{
	struct model m;
	static const char *const expect[3] = { "A", "B", "-" };
	const char *order[12];
	long long last[3] = { LLONG_MIN, LLONG_MIN, LLONG_MIN };

	model_init(&m, 10, 1);
	for (int i = 0; i < 4; i++)
		hold(&m, "A");
	for (int i = 0; i < 4; i++)
		hold(&m, "B");
	for (int i = 0; i < 4; i++)
		hold(&m, NULL);
	for (int i = 0; i < 12; i++)
		order[i] = release_one(&m, true);
	/* Each round: one of each, in the order the tenants were first held. */
	for (int i = 0; i < 12; i++)
		ck_assert_str_eq(order[i], expect[i % 3]);
	/* Within a tenant, the rows come in the order they were held. */
	for (int i = 0; i < m.n; i++) {
		int t = m.rows[i].tenant[0] == 'A' ? 0 : m.rows[i].tenant[0] == 'B' ? 1 : 2;
		ck_assert_int_gt(m.rows[i].round, last[t]);
		last[t] = m.rows[i].round;
	}
	rounds_free(&m.r);
}
END_TEST

START_TEST(the_null_tenant_is_not_the_empty_one)
{
	struct model m;

	model_init(&m, 10, 1);
	hold(&m, NULL);
	hold(&m, NULL);
	hold(&m, "");
	ck_assert_int_eq(m.rows[0].round, m.rows[2].round);
	ck_assert_int_eq(m.rows[1].round, m.rows[0].round + 1);
	rounds_free(&m.r);
}
END_TEST

/* A batch that rolls back leaves no trace: the same hold gets the same round. */
START_TEST(a_rolled_back_batch_changes_nothing)
{
	struct model m;
	long long r1, r2;

	model_init(&m, 10, 1);
	hold(&m, "A");
	hold(&m, "A");
	rounds_begin(&m.r);
	ck_assert_int_eq(rounds_hold(&m.r, (size_t)m.qi, "A", 1, &r1), 0);
	ck_assert_int_eq(rounds_hold(&m.r, (size_t)m.qi, "A", 1, &r2), 0);
	ck_assert_int_eq(r2, r1 + 1);
	ck_assert_int_eq(m.r.q[m.qi].pend.held, 4);
	/* not committed */
	release_one(&m, false);
	rounds_begin(&m.r);
	ck_assert_int_eq(m.r.q[m.qi].pend.held, 2);
	ck_assert_int_eq(rounds_hold(&m.r, (size_t)m.qi, "A", 1, &r2), 0);
	ck_assert_int_eq(r2, r1);
	ck_assert_int_eq(m.r.q[m.qi].pend.round, m.r.q[m.qi].now.round);
	rounds_free(&m.r);
}
END_TEST

/* Direct pushes: only while nothing is held, and only into room. */
START_TEST(admit_takes_room_only_with_nothing_held)
{
	struct rounds r;
	long long round;
	long qi, open;

	rounds_init(&r, ROUNDS_MAX_TENANTS);
	rounds_reset(&r, 1);
	qi = rounds_queue(&r, "capped", 6, 2);
	open = rounds_queue(&r, "open", 4, 0);
	rounds_begin(&r);
	r.q[qi].room = 2;
	ck_assert(rounds_admit(&r, (size_t)qi));
	ck_assert(rounds_admit(&r, (size_t)qi));
	ck_assert(!rounds_admit(&r, (size_t)qi));
	ck_assert(rounds_admit(&r, (size_t)open));
	ck_assert_int_eq(rounds_hold(&r, (size_t)qi, "t", 1, &round), 0);
	r.q[qi].room = 5; /* room again, but a job held first goes first */
	ck_assert(!rounds_admit(&r, (size_t)qi));
	/* An uncapped queue with held rows (its cap was removed) holds too, behind them. */
	ck_assert_int_eq(rounds_hold(&r, (size_t)open, NULL, 0, &round), 0);
	ck_assert(!rounds_admit(&r, (size_t)open));
	rounds_commit(&r);
	ck_assert_int_eq(rounds_held(&r), 2);
	rounds_free(&r);
}
END_TEST

/* A new leader starts each queue's cursor at its lowest held round, keeps
 * each tenant's last round, and starts queues with nothing held at base. */
START_TEST(a_new_leader_carries_the_rounds_over)
{
	struct rounds r;
	long long round;
	long qi;

	rounds_init(&r, ROUNDS_MAX_TENANTS);
	rounds_reset(&r, 5001);
	ck_assert_int_eq(rounds_load(&r, "default", 7, "A", 1, 300, 40, 339), 0);
	ck_assert_int_eq(rounds_load(&r, "default", 7, NULL, 0, 2, 41, 42), 0);
	qi = rounds_queue(&r, "default", 7, 100);
	ck_assert_int_eq(r.q[qi].now.held, 302);
	ck_assert_int_eq(r.q[qi].now.round, 40);
	ck_assert_int_eq(r.q[qi].now.hid, 0);
	rounds_begin(&r);
	ck_assert_int_eq(rounds_hold(&r, (size_t)qi, "A", 1, &round), 0);
	ck_assert_int_eq(round, 340);
	ck_assert_int_eq(rounds_hold(&r, (size_t)qi, NULL, 0, &round), 0);
	ck_assert_int_eq(round, 43);
	ck_assert_int_eq(rounds_hold(&r, (size_t)qi, "B", 1, &round), 0);
	ck_assert_int_eq(round, 40);
	qi = rounds_queue(&r, "other", 5, 10);
	ck_assert_int_eq(rounds_hold(&r, (size_t)qi, "A", 1, &round), 0);
	ck_assert_int_eq(round, 5001);
	rounds_free(&r);
}
END_TEST

/* Past the tenant bound a new tenant goes to the end: still after its own
 * earlier jobs, so its order holds. Released tenants make room again. */
START_TEST(past_the_tenant_bound_new_tenants_go_last)
{
	struct model m;

	model_init(&m, 10, 1);
	m.r.max_tenants = 2;
	for (int i = 0; i < 3; i++)
		hold(&m, "A");
	hold(&m, "B");
	hold(&m, "C");
	hold(&m, "C");
	ck_assert_int_eq(m.rows[4].round, m.rows[2].round + 1);
	ck_assert_int_eq(m.rows[5].round, m.rows[4].round + 1);
	while (release_one(&m, true))
		;
	hold(&m, "D");
	hold(&m, "E");
	ck_assert_int_eq(m.rows[6].round, m.rows[7].round);
	rounds_free(&m.r);
}
END_TEST

START_TEST(unreleased_rows_stay_ahead_of_the_cursor)
{
	struct model m;
	const char *t;

	model_init(&m, 10, 1);
	hold(&m, "A");
	hold(&m, "A");
	rounds_begin(&m.r);
	rounds_released(&m.r, (size_t)m.qi, m.rows[0].round, m.rows[0].hid);
	rounds_unrelease(&m.r, (size_t)m.qi, 1, 12345);
	rounds_commit(&m.r);
	ck_assert_int_eq(m.r.q[m.qi].now.held, 2);
	ck_assert_int_eq(m.r.q[m.qi].retry_ms, 12345);
	t = release_one(&m, true);
	ck_assert_str_eq(t, "A");
	ck_assert(m.rows[0].gone);
	rounds_free(&m.r);
}
END_TEST

START_TEST(queues_are_bounded_unless_they_hold_rows)
{
	struct rounds r;
	char name[16];

	rounds_init(&r, ROUNDS_MAX_TENANTS);
	rounds_reset(&r, 1);
	for (int i = 0; i < ROUNDS_MAX_QUEUES; i++) {
		snprintf(name, sizeof(name), "q%d", i);
		ck_assert_int_eq(rounds_queue(&r, name, strlen(name), 5), i);
	}
	ck_assert_int_eq(rounds_queue(&r, "one more", 8, 5), -ENOSPC);
	ck_assert_int_eq(rounds_queue(&r, "q17", 3, 7), 17);
	ck_assert_int_eq(r.q[17].cap, 7);
	ck_assert_int_eq(rounds_load(&r, "loaded", 6, NULL, 0, 1, 3, 3), 0);
	ck_assert_uint_eq(r.nq, ROUNDS_MAX_QUEUES + 1);
	rounds_free(&r);
}
END_TEST

/* A queue's keys in age order: a loaded key by its oldest rule row, a key
 * that begins holding since above every one before it, even when the hold
 * sequence could not be read (base 1); a rolled-back first hold leaves a
 * key with nothing held, and a key holding rows keeps its place. */
START_TEST(keys_that_begin_holding_are_younger_than_every_loaded_one)
{
	struct rounds r;
	long long round;
	long old, home, other;

	rounds_init(&r, ROUNDS_MAX_TENANTS);
	rounds_reset(&r, 1);
	ck_assert_int_eq(rounds_load(&r, "b\0q", 3, NULL, 0, 3, 7, 9), 0);
	old = rounds_find(&r, "b\0q", 3);
	rounds_by_rule(&r, (size_t)old, 70);
	rounds_by_rule(&r, (size_t)old, 40);
	ck_assert_int_eq(r.q[old].first, 40);
	home = rounds_queue(&r, "q", 1, 0);
	other = rounds_queue(&r, "p", 1, 0);
	rounds_begin(&r);
	ck_assert_int_eq(rounds_hold(&r, (size_t)home, NULL, 0, &round), 0);
	ck_assert_int_eq(rounds_hold(&r, (size_t)home, NULL, 0, &round), 0);
	ck_assert_int_eq(rounds_hold(&r, (size_t)old, NULL, 0, &round), 0);
	rounds_commit(&r);
	ck_assert_int_eq(r.q[home].first, 71);
	ck_assert_int_eq(r.q[old].first, 40);
	rounds_begin(&r);
	ck_assert_int_eq(rounds_hold(&r, (size_t)other, NULL, 0, &round), 0);
	rounds_begin(&r); /* rolled back */
	ck_assert_int_eq(r.q[other].now.held, 0);
	ck_assert_int_eq(rounds_hold(&r, (size_t)other, NULL, 0, &round), 0);
	rounds_commit(&r);
	ck_assert_int_gt(r.q[other].first, r.q[home].first);
	rounds_free(&r);
}
END_TEST

Suite *rounds_suite(void)
{
	Suite *s = suite_create("rounds");
	TCase *tc = tcase_create("rounds");

	tcase_add_test(tc, a_newcomer_is_released_second_behind_a_flood);
	tcase_add_test(tc, one_slot_per_poll_still_reaches_every_newcomer);
	tcase_add_test(tc, round_robin_across_tenants_fifo_within_each);
	tcase_add_test(tc, the_null_tenant_is_not_the_empty_one);
	tcase_add_test(tc, a_rolled_back_batch_changes_nothing);
	tcase_add_test(tc, admit_takes_room_only_with_nothing_held);
	tcase_add_test(tc, a_new_leader_carries_the_rounds_over);
	tcase_add_test(tc, past_the_tenant_bound_new_tenants_go_last);
	tcase_add_test(tc, unreleased_rows_stay_ahead_of_the_cursor);
	tcase_add_test(tc, queues_are_bounded_unless_they_hold_rows);
	tcase_add_test(tc, keys_that_begin_holding_are_younger_than_every_loaded_one);
	suite_add_tcase(s, tc);
	return s;
}
