/* The harnesses' relay command line (tests/support/relay_argv.c): the last
 * of a flag given twice wins, --route repeats, and a line too long is an
 * error rather than a relay started without its last flags. */
#include "fmacros.h"

#include <check.h>
#include <errno.h>
#include <string.h>

#include "suites.h"
#include "support/relay_argv.h"

/* The words after bin, joined by spaces. */
static const char *joined(const struct relay_argv *a)
{
	static char out[1024];

	out[0] = '\0';
	for (int i = 1; i < a->n; i++) {
		strcat(out, i > 1 ? " " : "");
		strcat(out, a->argv[i]);
	}
	ck_assert_ptr_null(a->argv[a->n]);
	return out;
}

START_TEST(later_flags_win_and_routes_repeat)
{
	struct relay_argv a;

	relay_argv_init(&a, "relay", "pg", "redis");
	ck_assert_int_eq(relay_argv_add(&a, "--batch-size", "500"), 0);
	ck_assert_int_eq(relay_argv_add(&a, "--route", "a q1"), 0);
	ck_assert_int_eq(relay_argv_words(&a, "--batch-size 10 --once --log-level=debug"), 0);
	ck_assert_int_eq(relay_argv_add_list(&a,
					     (const char *const[]){ "--route", "b q2", "--log-level", "warn", NULL }),
			 0);
	relay_argv_keep_last(&a);
	ck_assert_str_eq(joined(&a), "--pg-url pg --redis-url redis --route a q1 --batch-size 10 --once --route b q2 "
				     "--log-level warn");
	relay_argv_free(&a);
}
END_TEST

START_TEST(too_many_words_is_an_error)
{
	struct relay_argv a;
	int rc = 0;

	relay_argv_init(&a, "relay", "pg", "redis");
	for (int i = 0; i < RELAY_ARGV_MAX && rc == 0; i++)
		rc = relay_argv_add(&a, "--once", NULL);
	ck_assert_int_eq(rc, -E2BIG);
	ck_assert_int_eq(a.n, RELAY_ARGV_MAX);
	ck_assert_int_eq(relay_argv_add(&a, "--batch-size", "1"), -E2BIG);
	ck_assert_int_eq(a.n, RELAY_ARGV_MAX);
	ck_assert_ptr_null(a.argv[a.n]);
	relay_argv_free(&a);
}
END_TEST

START_TEST(words_twice_is_an_error)
{
	struct relay_argv a;

	relay_argv_init(&a, "relay", "pg", "redis");
	ck_assert_int_eq(relay_argv_words(&a, ""), 0);
	ck_assert_int_eq(relay_argv_words(&a, "--once"), 0);
	ck_assert_int_eq(relay_argv_words(&a, "--once"), -EALREADY);
	relay_argv_free(&a);
}
END_TEST

Suite *relay_argv_suite(void)
{
	Suite *s = suite_create("relay_argv");
	TCase *tc = tcase_create("relay_argv");

	tcase_add_test(tc, later_flags_win_and_routes_repeat);
	tcase_add_test(tc, too_many_words_is_an_error);
	tcase_add_test(tc, words_twice_is_an_error);
	suite_add_tcase(s, tc);
	return s;
}
