/* A Redis Cluster target's pure parts: the hash slot of a key, and which queues a cluster can hold. */
#include "fmacros.h"

#include <check.h>
#include <string.h>

#include "format.h"
#include "formats.h"
#include "job.h"
#include "redis_cluster.h"
#include "suites.h"

/* Slots as CLUSTER KEYSLOT answers them (Redis 7.0). */
static const struct {
	const char *key;
	unsigned slot;
} slots[] = {
	{ "foo", 12182 },
	{ "{q1}", 7450 },
	{ "bull:{q1}:wait", 7450 },
	{ "{user1000}.following", 3443 },
	{ "a{}b", 13694 },
	{ "{}", 15257 },
	{ "x{y", 2740 },
	{ "123456789", 12739 },
};

START_TEST(key_slots)
{
	const char *k = slots[_i].key;

	ck_assert_uint_eq(cluster_key_slot(k, strlen(k)), slots[_i].slot);
}
END_TEST

START_TEST(key_tags)
{
	ck_assert(cluster_key_tagged("bull:{q1}:wait", 14));
	ck_assert(!cluster_key_tagged("a{}b", 4));
	ck_assert(!cluster_key_tagged("x{y", 3));
	ck_assert(!cluster_key_tagged("plain", 5));
}
END_TEST

/* Which queues' keys share one slot under a prefix: a tag in the name or the prefix. */
static const struct {
	enum job_format format;
	const char *prefix, *queue;
	bool ok;
} queues[] = {
	{ FORMAT_BULLMQ, "bull:", "{q1}", true },
	{ FORMAT_BULLMQ, "bull:", "q1", false },
	{ FORMAT_BULLMQ, "{bull}:", "q1", true },
	{ FORMAT_BULLMQ, "bull:", "{}", false },
	{ FORMAT_BULLMQ, "bull:", "a}{b", false },
	{ FORMAT_BULLMQ, "{bu", "ll}q", true },
	{ FORMAT_BULLMQ, "b{}:", "{q}", false },
	{ FORMAT_LARAVEL, "", "{default}", true },
	{ FORMAT_LARAVEL, "laravel_database_", "default", false },
	{ FORMAT_LARAVEL, "{app}", "default", true },
};

START_TEST(cluster_queues)
{
	char reason[256] = "";
	const char *q = queues[_i].queue;
	int rc = format_check_cluster_queue(format_of(queues[_i].format), queues[_i].prefix, span_of(q, strlen(q)),
					    reason, sizeof(reason));

	ck_assert_msg((rc == 0) == queues[_i].ok, "%s%s: %s", queues[_i].prefix, q, reason);
	if (!queues[_i].ok) {
		ck_assert_int_eq(rc, JOB_REJECT);
		ck_assert_ptr_nonnull(strstr(reason, "has no hash tag for Redis Cluster"));
	}
}
END_TEST

Suite *cluster_unit_suite(void)
{
	Suite *s = suite_create("cluster_unit");
	TCase *tc = tcase_create("slots");

	tcase_add_loop_test(tc, key_slots, 0, (int)(sizeof(slots) / sizeof(slots[0])));
	tcase_add_test(tc, key_tags);
	tcase_add_loop_test(tc, cluster_queues, 0, (int)(sizeof(queues) / sizeof(queues[0])));
	suite_add_tcase(s, tc);
	return s;
}
