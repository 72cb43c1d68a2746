/* What the relay tells an operator about each xmin holder, and the gauges that
 * carry the holders and the dead-letter table: pure code, no server. */
#include "fmacros.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "suites.h"
#include "xmin_holders.h"

static struct xmin_holder holder(enum xmin_holder_kind kind, int pid, const char *name, const char *user,
				 const char *where, bool active)
{
	struct xmin_holder h = { .kind = kind, .pid = pid, .active = active, .age_s = NAN };

	snprintf(h.name, sizeof(h.name), "%s", name);
	snprintf(h.user, sizeof(h.user), "%s", user);
	snprintf(h.where, sizeof(h.where), "%s", where);
	return h;
}

static void remedy_is(struct xmin_holder h, const char *want)
{
	char out[512];

	ck_assert_int_eq(xmin_holder_remedy(&h, out, sizeof(out)), (int)strlen(want));
	ck_assert_str_eq(out, want);
}

START_TEST(each_kind_says_what_ends_it)
{
	remedy_is(holder(XMIN_BACKEND, 4242, "report", "app", "idle in transaction", true),
		  "end the transaction in its application, or SELECT pg_terminate_backend(4242)");
	remedy_is(holder(XMIN_STANDBY, 77, "replica-1", "repl", "10.0.0.7", true),
		  "on the standby 'replica-1' at 10.0.0.7: end its long query or transaction, or turn "
		  "hot_standby_feedback off there");
	remedy_is(holder(XMIN_SLOT, 0, "old_sub", "", "logical", false),
		  "nothing consumes it: SELECT pg_drop_replication_slot('old_sub') if nothing will again");
	remedy_is(holder(XMIN_SLOT, 99, "cdc", "", "logical", true),
		  "its consumer (pid 99) is behind: let it catch up, or stop it and SELECT "
		  "pg_drop_replication_slot('cdc')");
	remedy_is(holder(XMIN_PREPARED, 0, "tx-1", "billing", "", false),
		  "COMMIT PREPARED 'tx-1' or ROLLBACK PREPARED 'tx-1' (as billing or a superuser)");
	ck_assert_str_eq(xmin_holder_kind_name(XMIN_STANDBY), "standby");
	ck_assert_str_eq(xmin_holder_kind_name(XMIN_NKINDS), "unknown");
}
END_TEST

/* A gid is any text: quoted as a literal, so the line can be pasted into psql. */
START_TEST(names_are_quoted_as_sql_literals)
{
	char out[64];

	remedy_is(holder(XMIN_PREPARED, 0, "it's", "o", "", false),
		  "COMMIT PREPARED 'it''s' or ROLLBACK PREPARED 'it''s' (as o or a superuser)");
	/* Cut short, never past the buffer. */
	struct xmin_holder h = holder(XMIN_PREPARED, 0, "''''''''''''''''''''''''''''''''''''''''", "o", "", false);
	ck_assert_int_gt(xmin_holder_remedy(&h, out, sizeof(out)), (int)sizeof(out));
	ck_assert_uint_eq(strlen(out), sizeof(out) - 1);
}
END_TEST

static char *page(struct metrics *m)
{
	struct buf b;
	char *text;

	buf_init(&b);
	ck_assert_int_eq(metrics_format(m, &b), 0);
	text = strndup(b.data, b.len);
	buf_free(&b);
	return text;
}

static void has(const char *text, const char *line)
{
	ck_assert_msg(strstr(text, line), "no \"%s\" in:\n%s", line, text);
}

START_TEST(holder_and_dead_gauges)
{
	struct metrics m;
	struct metrics_db db;
	char *text;

	ck_assert_int_eq(metrics_init(&m), 0);
	/* Nothing read yet: no samples. */
	text = page(&m);
	has(text, "# TYPE stagedrain_xmin_holder_age_seconds gauge\n");
	ck_assert_ptr_null(strstr(text, "stagedrain_xmin_holder_age_seconds{"));
	ck_assert_ptr_null(strstr(text, "\nstagedrain_dead_oldest_age_seconds "));
	free(text);

	metrics_db_unknown(&db);
	for (int k = 0; k < METRICS_XMIN_KINDS; k++)
		db.holder_age_s[k] = db.holder_xids[k] = 0;
	db.holder_age_s[XMIN_STANDBY] = 12.5;
	db.holder_xids[XMIN_STANDBY] = 300;
	db.holder_age_s[XMIN_BACKEND] = db.holder_xids[XMIN_BACKEND] = NAN; /* not permitted to see */
	db.dead_oldest_age_s = 61;
	db.ndead = 2;
	snprintf(db.dead[0].queue, sizeof(db.dead[0].queue), "%s", "q\"1");
	db.dead[0].rows = 5;
	snprintf(db.dead[1].queue, sizeof(db.dead[1].queue), "%s", METRICS_OTHER_QUEUE);
	db.dead[1].rows = 7;
	metrics_db_reading(&m, &db);
	text = page(&m);
	has(text, "\nstagedrain_xmin_holder_age_seconds{kind=\"standby\"} 12.500\n");
	has(text, "\nstagedrain_xmin_holder_age_seconds{kind=\"slot\"} 0.000\n");
	has(text, "\nstagedrain_xmin_holder_xids{kind=\"standby\"} 300\n");
	has(text, "\nstagedrain_xmin_holder_xids{kind=\"prepared\"} 0\n");
	ck_assert_ptr_null(strstr(text, "kind=\"backend\""));
	has(text, "\nstagedrain_dead_jobs{queue=\"q\\\"1\"} 5\n");
	has(text, "\nstagedrain_dead_jobs{queue=\"_other\"} 7\n");
	has(text, "\nstagedrain_dead_oldest_age_seconds 61.000\n");
	free(text);
	metrics_free(&m);
}
END_TEST

Suite *xmin_unit_suite(void)
{
	Suite *s = suite_create("xmin_unit");
	TCase *tc = tcase_create("remedy");

	tcase_add_test(tc, each_kind_says_what_ends_it);
	tcase_add_test(tc, names_are_quoted_as_sql_literals);
	tcase_add_test(tc, holder_and_dead_gauges);
	suite_add_tcase(s, tc);
	return s;
}
