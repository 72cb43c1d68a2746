/* Back-off: grows, stays within its cap, jitters, resets. */
#include "fmacros.h"

#include <check.h>

#include "backoff.h"
#include "suites.h"

START_TEST(grows_to_cap_with_jitter)
{
	struct backoff b;
	int prev_ceiling = 100;

	backoff_init(&b, 100, 5000, 42);
	for (int i = 0; i < 20; i++) {
		int d = backoff_next(&b);
		int ceiling = prev_ceiling;
		ck_assert_int_ge(d, ceiling / 2);
		ck_assert_int_le(d, ceiling);
		ck_assert_int_le(d, 5000);
		prev_ceiling = ceiling * 2 > 5000 ? 5000 : ceiling * 2;
	}
}
END_TEST

START_TEST(jitter_varies)
{
	struct backoff b;
	int seen_different = 0, first;

	backoff_init(&b, 1000, 1000, 7);
	first = backoff_next(&b);
	for (int i = 0; i < 50; i++)
		if (backoff_next(&b) != first)
			seen_different = 1;
	ck_assert_int_eq(seen_different, 1);
}
END_TEST

START_TEST(reset_starts_over)
{
	struct backoff b;

	backoff_init(&b, 10, 100000, 1);
	for (int i = 0; i < 10; i++)
		(void)backoff_next(&b);
	backoff_reset(&b);
	ck_assert_int_le(backoff_next(&b), 10);
}
END_TEST

Suite *backoff_suite(void)
{
	Suite *s = suite_create("backoff");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, grows_to_cap_with_jitter);
	tcase_add_test(tc, jitter_varies);
	tcase_add_test(tc, reset_starts_over);
	suite_add_tcase(s, tc);
	return s;
}
