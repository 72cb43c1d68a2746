/* buf: appends, formats, resets without losing capacity. */
#include "fmacros.h"

#include <check.h>
#include <string.h>

#include "buf.h"
#include "suites.h"

START_TEST(append_and_reset)
{
	struct buf b;
	size_t cap;

	buf_init(&b);
	ck_assert_int_eq(buf_puts(&b, "hello"), 0);
	ck_assert_int_eq(buf_printf(&b, " %d-%s", 42, "x"), 0);
	ck_assert_str_eq(b.data, "hello 42-x");
	ck_assert_uint_eq(b.len, 10);
	for (int i = 0; i < 1000; i++)
		ck_assert_int_eq(buf_append(&b, "0123456789", 10), 0);
	ck_assert_uint_eq(b.len, 10010);
	cap = b.cap;
	buf_reset(&b);
	ck_assert_uint_eq(b.len, 0);
	ck_assert_uint_eq(b.cap, cap);
	ck_assert_str_eq(b.data, "");
	buf_free(&b);
	ck_assert_ptr_null(b.data);
	buf_free(&b);
	buf_free(NULL);
}
END_TEST

START_TEST(binary_bytes)
{
	struct buf b;

	buf_init(&b);
	ck_assert_int_eq(buf_append(&b, "a\0b", 3), 0);
	ck_assert_uint_eq(b.len, 3);
	ck_assert_int_eq(memcmp(b.data, "a\0b", 3), 0);
	buf_free(&b);
}
END_TEST

Suite *buf_suite(void)
{
	Suite *s = suite_create("buf");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, append_and_reset);
	tcase_add_test(tc, binary_bytes);
	suite_add_tcase(s, tc);
	return s;
}
