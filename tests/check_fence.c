/* The crash fence's text: what a batch writes is what a new leader reads back,
 * and nothing else gets near the SQL it builds. */
#include "fmacros.h"

#include <check.h>
#include <stdint.h>
#include <string.h>

#include "fence.h"
#include "suites.h"

static const char *const jids[] = { "0123456789abcdef01234567", "aaaaaaaaaaaaaaaaaaaaaaaa",
				    "ffffffffffffffffffffffff" };

START_TEST(round_trip)
{
	struct batch_job jobs[3] = { { .id = 7, .jid = jids[0] },
				     { .id = 8, .jid = jids[1] },
				     { .id = 123456789012, .jid = jids[2] } };
	struct batch b = { .jobs = jobs, .njobs = 3 };
	struct buf text;
	struct fence f;

	buf_init(&text);
	fence_init(&f);
	ck_assert_int_eq(fence_write(&text, 42, &b), 0);
	ck_assert_str_eq(text.data, "epoch=42 jobs=7:0123456789abcdef01234567,8:aaaaaaaaaaaaaaaaaaaaaaaa,"
				    "123456789012:ffffffffffffffffffffffff");
	ck_assert_int_eq(fence_parse(&f, text.data, text.len), 0);
	ck_assert_int_eq(f.epoch, 42);
	ck_assert_uint_eq(f.n, 3);
	ck_assert_str_eq(f.ids.data, "{7,8,123456789012}");
	ck_assert_str_eq(f.jids.data, "{0123456789abcdef01234567,aaaaaaaaaaaaaaaaaaaaaaaa,ffffffffffffffffffffffff}");
	/* Parsing again reuses the buffers. */
	ck_assert_int_eq(fence_parse(&f, "epoch=1 jobs=", 13), 0);
	ck_assert_uint_eq(f.n, 0);
	ck_assert_str_eq(f.ids.data, "{}");
	buf_free(&text);
	fence_free(&f);
}
END_TEST

/* A transaction's later batches append to the first one's fence: the
 * whole text names every batch, as one fence. */
START_TEST(later_batches_append_and_the_whole_round_trips)
{
	struct batch_job first[1] = { { .id = 7, .jid = jids[0] } };
	struct batch_job later[2] = { { .id = 8, .jid = jids[1] }, { .id = 9, .jid = jids[2] } };
	struct batch a = { .jobs = first, .njobs = 1 }, b = { .jobs = later, .njobs = 2 };
	struct buf text;
	struct fence f;

	buf_init(&text);
	fence_init(&f);
	ck_assert_int_eq(fence_write(&text, 3, &a), 0);
	ck_assert_int_eq(fence_write_more(&text, &b), 0);
	ck_assert_str_eq(text.data, "epoch=3 jobs=7:0123456789abcdef01234567,8:aaaaaaaaaaaaaaaaaaaaaaaa,"
				    "9:ffffffffffffffffffffffff");
	ck_assert_int_eq(fence_parse(&f, text.data, text.len), 0);
	ck_assert_uint_eq(f.n, 3);
	ck_assert_str_eq(f.ids.data, "{7,8,9}");
	buf_free(&text);
	fence_free(&f);
}
END_TEST

/* Ids are bigserial: every positive int8 must come back as written, the
 * 19-digit ones too, or a new leader would push a committed batch again. */
START_TEST(largest_ids_round_trip)
{
	struct batch_job jobs[3] = { { .id = 1000000000000000000LL, .jid = jids[0] },
				     { .id = 999999999999999999LL, .jid = jids[1] },
				     { .id = INT64_MAX, .jid = jids[2] } };
	struct batch b = { .jobs = jobs, .njobs = 3 };
	struct buf text;
	struct fence f;

	buf_init(&text);
	fence_init(&f);
	ck_assert_int_eq(fence_write(&text, INT64_MAX, &b), 0);
	ck_assert_int_eq(fence_parse(&f, text.data, text.len), 0);
	ck_assert(f.epoch == INT64_MAX);
	ck_assert_uint_eq(f.n, 3);
	ck_assert_str_eq(f.ids.data, "{1000000000000000000,999999999999999999,9223372036854775807}");
	buf_free(&text);
	fence_free(&f);
}
END_TEST

START_TEST(anything_else_is_refused)
{
	static const char *const bad[] = {
		"",
		"epoch=",
		"epoch=1",
		"epoch=x jobs=1:0123456789abcdef01234567",
		"epoch=1 jobs=1:0123456789abcdef0123456",       /* short jid */
		"epoch=1 jobs=1:0123456789abcdef012345678",     /* long jid */
		"epoch=1 jobs=1:0123456789ABCDEF01234567",      /* upper case */
		"epoch=1 jobs=1:0123456789abcdef01234567,",     /* trailing comma */
		"epoch=1 jobs=1:0123456789abcdef01234567;DROP", /* anything after */
		"epoch=1 jobs=1}'::int8[]; DROP TABLE staged_jobs; --:0123456789abcdef01234567",
		"epoch=1 jobs=-1:0123456789abcdef01234567",
		"epoch=1 jobs=:0123456789abcdef01234567",
		"epoch=1 jobs=1234567890123456789012:0123456789abcdef01234567", /* overflows */
		"epoch=1 jobs=9223372036854775808:0123456789abcdef01234567",    /* INT64_MAX + 1 */
		"epoch=1 jobs=10000000000000000000:0123456789abcdef01234567",   /* 20 digits */
		"epoch=1 jobs=18446744073709551617:0123456789abcdef01234567",   /* wraps to 1 in 64 bits */
		"epoch=9223372036854775808 jobs=",
		"epoch=1 jobs=07:0123456789abcdef01234567", /* fence_write writes no leading zero */
	};
	struct fence f;

	fence_init(&f);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(fence_parse(&f, bad[i], strlen(bad[i])) < 0, "accepted: %s", bad[i]);
	fence_free(&f);
}
END_TEST

Suite *fence_suite(void)
{
	Suite *s = suite_create("fence");
	TCase *tc = tcase_create("text");

	tcase_add_test(tc, round_trip);
	tcase_add_test(tc, largest_ids_round_trip);
	tcase_add_test(tc, later_batches_append_and_the_whole_round_trips);
	tcase_add_test(tc, anything_else_is_refused);
	suite_add_tcase(s, tc);
	return s;
}
