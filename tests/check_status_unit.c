/* `stagedrain status`'s pure parts: which facts need a person, and how ages and counts read. */
#include "fmacros.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "status.h"
#include "suites.h"

#define MIN_MS (60 * 1000LL)

/* All is well: both servers reached, a relay leads, nothing old anywhere. */
static void healthy(struct status *s)
{
	status_init(s);
	s->pg_ok = s->redis_ok = true;
	s->leader_read = true;
	s->leader.kind = LOCK_HOLDER_RELAY;
	s->leader.pid = 4242;
	s->backlog_read = true;
	s->staged = 3;
	s->staged_oldest_s = 2.5;
	s->horizon_read = true;
}

static bool has(const struct status_problems *p, const char *text)
{
	for (size_t i = 0; i < p->n; i++)
		if (strstr(p->text[i], text))
			return true;
	return false;
}

START_TEST(healthy_has_no_problem)
{
	struct status s;
	struct status_problems p;

	healthy(&s);
	status_judge(&s, 5 * MIN_MS, 5 * MIN_MS, &p);
	ck_assert_uint_eq(p.n, 0);
	/* An empty backlog's oldest age means nothing, however large. */
	s.staged = 0;
	s.staged_oldest_s = 1e9;
	status_judge(&s, 5 * MIN_MS, 5 * MIN_MS, &p);
	ck_assert_uint_eq(p.n, 0);
	status_free(&s);
}
END_TEST

START_TEST(no_leader_needs_a_person)
{
	struct status s;
	struct status_problems p;

	healthy(&s);
	s.leader.kind = LOCK_HOLDER_NONE;
	status_judge(&s, 5 * MIN_MS, 5 * MIN_MS, &p);
	ck_assert_uint_eq(p.n, 1);
	ck_assert_str_eq(p.text[0], "no relay holds the leader lock");
	/* A session that is not a relay keeps every relay waiting. */
	s.leader.kind = LOCK_HOLDER_FOREIGN;
	status_judge(&s, 5 * MIN_MS, 5 * MIN_MS, &p);
	ck_assert_uint_eq(p.n, 1);
	ck_assert(has(&p, "a session that is not a relay holds the leader lock (pid 4242)"));
	status_free(&s);
}
END_TEST

START_TEST(old_staged_job_over_max_age)
{
	struct status s;
	struct status_problems p;

	healthy(&s);
	s.staged_oldest_s = 301;
	status_judge(&s, 5 * MIN_MS, 5 * MIN_MS, &p);
	ck_assert_uint_eq(p.n, 1);
	ck_assert_str_eq(p.text[0], "the oldest staged job is 5m01s old (--max-age 5m00s)");
	status_judge(&s, 6 * MIN_MS, 5 * MIN_MS, &p);
	ck_assert_uint_eq(p.n, 0);
	/* An age that could not be read is no verdict (the failed reading is one). */
	s.staged_oldest_s = NAN;
	status_judge(&s, 1, 5 * MIN_MS, &p);
	ck_assert_uint_eq(p.n, 0);
	status_free(&s);
}
END_TEST

START_TEST(held_horizon_over_threshold_unless_off)
{
	struct status s;
	struct status_problems p;

	healthy(&s);
	s.horizon.held = true;
	s.horizon.timed = true;
	s.horizon.age_s = 600;
	snprintf(s.horizon.kind, sizeof(s.horizon.kind), "backend");
	snprintf(s.horizon.name, sizeof(s.horizon.name), "pid 77");
	status_judge(&s, 5 * MIN_MS, 5 * MIN_MS, &p);
	ck_assert_uint_eq(p.n, 1);
	ck_assert_str_eq(p.text[0], "a backend (pid 77) has held the xmin horizon for 10m00s (--warn-xact-age 5m00s)");
	status_judge(&s, 5 * MIN_MS, 11 * MIN_MS, &p);
	ck_assert_uint_eq(p.n, 0);
	/* --warn-xact-age 0 turns the warning off, and this with it. */
	status_judge(&s, 5 * MIN_MS, 0, &p);
	ck_assert_uint_eq(p.n, 0);
	status_free(&s);
}
END_TEST

/* A standby's feedback and an active slot have no time in Postgres: shown, not judged by age.
 * An inactive slot holds the horizon until someone drops it: always a problem. */
START_TEST(untimed_holders_and_inactive_slots)
{
	struct status s;
	struct status_problems p;

	healthy(&s);
	s.horizon.held = true;
	s.horizon.xids = 5000000;
	snprintf(s.horizon.kind, sizeof(s.horizon.kind), "standby");
	snprintf(s.horizon.name, sizeof(s.horizon.name), "standby \"replica1\"");
	status_judge(&s, 5 * MIN_MS, 5 * MIN_MS, &p);
	ck_assert_uint_eq(p.n, 0);
	s.horizon.forever = true;
	snprintf(s.horizon.kind, sizeof(s.horizon.kind), "slot");
	snprintf(s.horizon.name, sizeof(s.horizon.name), "logical slot \"cdc\", inactive");
	status_judge(&s, 5 * MIN_MS, 0, &p);
	ck_assert_uint_eq(p.n, 1);
	ck_assert_str_eq(p.text[0], "an inactive replication slot (logical slot \"cdc\", inactive) holds the xmin "
				    "horizon until it is dropped");
	status_free(&s);
}
END_TEST

/* A server down is named with its error; what it alone tells is not judged. */
START_TEST(unreachable_servers_are_named)
{
	struct status s;
	struct status_problems p;

	status_init(&s);
	s.pg_ok = false;
	snprintf(s.pg_err, sizeof(s.pg_err), "could not connect to postgres: refused");
	s.redis_ok = false;
	snprintf(s.redis_err, sizeof(s.redis_err), "could not connect to redis at 127.0.0.1:1/0: refused");
	status_judge(&s, 5 * MIN_MS, 5 * MIN_MS, &p);
	ck_assert_uint_eq(p.n, 2);
	ck_assert_str_eq(p.text[0], "postgres: could not connect to postgres: refused");
	ck_assert_str_eq(p.text[1], "redis: could not connect to redis at 127.0.0.1:1/0: refused");
	status_free(&s);
}
END_TEST

START_TEST(every_problem_at_once)
{
	struct status s;
	struct status_problems p;

	healthy(&s);
	s.redis_ok = false;
	s.leader.kind = LOCK_HOLDER_NONE;
	s.staged_oldest_s = 3600;
	s.horizon.held = true;
	s.horizon.timed = true;
	s.horizon.age_s = 3600;
	status_judge(&s, 5 * MIN_MS, 5 * MIN_MS, &p);
	ck_assert_uint_eq(p.n, 4);
	status_free(&s);
}
END_TEST

START_TEST(ages_read_short)
{
	static const struct {
		double s;
		const char *want;
	} cases[] = {
		{ 0, "0.0s" },      { 0.44, "0.4s" },  { 2.15, "2.1s" },  { 9.96, "9.9s" },
		{ 12.7, "12s" },    { 59.9, "59s" },   { 60, "1m00s" },   { 185, "3m05s" },
		{ 3599, "59m59s" }, { 3600, "1h00m" }, { 7620, "2h07m" }, { 86400 + 4 * 3600, "1d04h" },
		{ -3, "0.0s" }, /* clocks a little apart: never a negative age */
	};
	char out[32];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		status_age(cases[i].s, out, sizeof(out));
		ck_assert_msg(strcmp(out, cases[i].want) == 0, "%g s: got %s, want %s", cases[i].s, out, cases[i].want);
	}
}
END_TEST

START_TEST(counts_have_separators)
{
	char out[32];

	status_count(0, out, sizeof(out));
	ck_assert_str_eq(out, "0");
	status_count(999, out, sizeof(out));
	ck_assert_str_eq(out, "999");
	status_count(1204, out, sizeof(out));
	ck_assert_str_eq(out, "1,204");
	status_count(1234567890, out, sizeof(out));
	ck_assert_str_eq(out, "1,234,567,890");
	status_count(-1204, out, sizeof(out));
	ck_assert_str_eq(out, "-1,204");
}
END_TEST

START_TEST(queues_are_added_once)
{
	struct status s;
	struct status_queue *a, *b;

	status_init(&s);
	a = status_queue_add(&s, 0, "default", 10);
	ck_assert_ptr_nonnull(a);
	a->held = 3;
	b = status_queue_add(&s, 0, "critical", 5);
	ck_assert_ptr_nonnull(b);
	ck_assert_ptr_eq(status_queue_add(&s, 0, "default", 10), &s.queues[0]);
	ck_assert_uint_eq(s.nqueues, 2);
	ck_assert_int_eq(s.queues[0].held, 3);
	ck_assert_int_eq(s.queues[1].length, -1);
	status_free(&s);
	status_free(&s); /* twice: a no-op */
}
END_TEST

/* Held rows wait as staged ones do: the oldest held job, by when it was
 * staged, is judged against --max-age, named by its target; an unreached
 * route target is a problem of its own. */
START_TEST(held_jobs_and_route_targets_are_judged)
{
	struct status s;
	struct status_problems p;
	int b;

	healthy(&s);
	ck_assert_int_eq(status_target_add(&s, "default", NULL), 0);
	b = status_target_add(&s, "b", NULL);
	ck_assert_int_eq(b, 1);
	ck_assert_int_eq(status_target_add(&s, "b", NULL), 1);
	s.queues_read = true;
	s.targets[1].held = s.held = 2;
	s.targets[1].held_oldest_s = s.held_oldest_s = 6.5;
	status_judge(&s, 2000, 5 * MIN_MS, &p);
	ck_assert_uint_eq(p.n, 1);
	ck_assert_str_eq(p.text[0], "the oldest held job (target b) is 6.5s old (--max-age 2.0s)");
	/* A staged job older still is the one named. */
	s.staged_oldest_s = 9;
	status_judge(&s, 2000, 5 * MIN_MS, &p);
	ck_assert_uint_eq(p.n, 1);
	ck_assert_str_eq(p.text[0], "the oldest staged job is 9.0s old (--max-age 2.0s)");
	status_judge(&s, 10000, 5 * MIN_MS, &p);
	ck_assert_uint_eq(p.n, 0);
	/* No staged rows at all: the held ones alone. */
	s.staged = 0;
	status_judge(&s, 2000, 5 * MIN_MS, &p);
	ck_assert(has(&p, "the oldest held job (target b) is 6.5s old"));
	s.targets[1].tried = true;
	snprintf(s.targets[1].err, sizeof(s.targets[1].err), "could not connect to redis at 127.0.0.1:1/0");
	status_judge(&s, 10000, 5 * MIN_MS, &p);
	ck_assert_uint_eq(p.n, 1);
	ck_assert_str_eq(p.text[0], "target b: could not connect to redis at 127.0.0.1:1/0");
	status_free(&s);
}
END_TEST

Suite *status_unit_suite(void)
{
	Suite *s = suite_create("status_unit");
	TCase *tc = tcase_create("judge");

	tcase_add_test(tc, healthy_has_no_problem);
	tcase_add_test(tc, no_leader_needs_a_person);
	tcase_add_test(tc, old_staged_job_over_max_age);
	tcase_add_test(tc, held_horizon_over_threshold_unless_off);
	tcase_add_test(tc, untimed_holders_and_inactive_slots);
	tcase_add_test(tc, unreachable_servers_are_named);
	tcase_add_test(tc, every_problem_at_once);
	tcase_add_test(tc, ages_read_short);
	tcase_add_test(tc, counts_have_separators);
	tcase_add_test(tc, queues_are_added_once);
	tcase_add_test(tc, held_jobs_and_route_targets_are_judged);
	suite_add_tcase(s, tc);
	return s;
}
