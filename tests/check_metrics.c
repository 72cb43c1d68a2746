/* metrics: counters from batches, the histogram, label escaping, the queue bound, /readyz's answer. */
#include "fmacros.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "sidekiq_probe.h"
#include "suites.h"

static struct metrics m;

static void setup(void)
{
	ck_assert_int_eq(metrics_init(&m), 0);
}

static void teardown(void)
{
	metrics_free(&m);
}

/* The page as text (caller frees). */
static char *page(void)
{
	struct buf b;
	char *s;

	buf_init(&b);
	ck_assert_int_eq(metrics_format(&m, &b), 0);
	ck_assert_int_eq(buf_append(&b, "", 1), 0);
	s = strdup(b.data);
	buf_free(&b);
	return s;
}

static char *ready_text_as(int expect, bool detail)
{
	struct buf b;
	bool ready = !expect;
	char *s;

	buf_init(&b);
	ck_assert_int_eq(metrics_ready(&m, &b, &ready, detail), 0);
	ck_assert_int_eq(ready, expect);
	ck_assert_int_eq(buf_append(&b, "", 1), 0);
	s = strdup(b.data);
	buf_free(&b);
	return s;
}

/* /readyz as anyone sees it, without --readyz-detail. */
static char *ready_text(int expect)
{
	return ready_text_as(expect, false);
}

/* The whole line "name value" must be on the page. */
static void has_line(const char *text, const char *line)
{
	char want[512];
	const char *p;

	snprintf(want, sizeof(want), "%s\n", line);
	for (p = strstr(text, want); p && p != text && p[-1] != '\n'; p = strstr(p + 1, want))
		;
	ck_assert_msg(p != NULL, "page lacks line \"%s\":\n%s", line, text);
}

static void lacks(const char *text, const char *s)
{
	ck_assert_msg(strstr(text, s) == NULL, "page has \"%s\":\n%s", s, text);
}

/* A batch of jobs on the given queues (NULL-terminated) and ndead dead rows. */
struct fake {
	struct batch b;
	struct batch_job jobs[2048];
	char names[2048][16];
};

static void fake_batch(struct fake *f, const char *const *queues, size_t ndead)
{
	memset(&f->b, 0, sizeof(f->b));
	f->b.jobs = f->jobs;
	for (; *queues; queues++) {
		struct batch_job *j = &f->jobs[f->b.njobs++];
		memset(j, 0, sizeof(*j));
		j->queue = *queues;
		j->queue_len = strlen(*queues);
	}
	f->b.ndead = ndead;
}

/* Every sample's family was declared with # TYPE before it, and every line
 * is a comment or "name[{labels}] value": what a Prometheus scraper parses. */
static void well_formed(char *text)
{
	char *save = NULL, types[4096] = "";

	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[128], fam[140];
		size_t n = strcspn(line, "{ ");

		if (strncmp(line, "# TYPE ", 7) == 0) {
			sscanf(line + 7, "%127s", name);
			snprintf(fam, sizeof(fam), "|%s|", name);
			strcat(types, fam);
			continue;
		}
		if (line[0] == '#') {
			ck_assert_msg(strncmp(line, "# HELP stagedrain_", 18) == 0, "bad comment: %s", line);
			continue;
		}
		ck_assert_msg(strncmp(line, "stagedrain_", 11) == 0 && n < sizeof(name), "bad line: %s", line);
		snprintf(name, sizeof(name), "%.*s", (int)n, line);
		for (const char *suffix = "_bucket\0_sum\0_count\0"; *suffix; suffix += strlen(suffix) + 1) {
			size_t k = strlen(name), s = strlen(suffix);
			char base[140];
			if (k <= s || strcmp(name + k - s, suffix) != 0)
				continue;
			/* _bucket, _sum and _count belong to a histogram's or a summary's family */
			snprintf(base, sizeof(base), "|%.*s|", (int)(k - s), name);
			if (strstr(types, base))
				name[k - s] = '\0';
		}
		snprintf(fam, sizeof(fam), "|%s|", name);
		ck_assert_msg(strstr(types, fam), "no # TYPE before %s", line);
		ck_assert_msg(strchr(line, ' ') && strtod(strrchr(line, ' ') + 1, NULL) >= 0, "bad value: %s", line);
	}
}

START_TEST(empty_page)
{
	char *text = page();

	has_line(text, "stagedrain_batches_total 0");
	has_line(text, "stagedrain_dead_letter_jobs_total 0");
	has_line(text, "stagedrain_is_leader 0");
	has_line(text, "stagedrain_leader_epoch 0");
	has_line(text, "stagedrain_reconnects_total{server=\"postgres\"} 0");
	has_line(text, "stagedrain_reconnects_total{server=\"redis\"} 0");
	has_line(text, "stagedrain_batch_duration_seconds_bucket{le=\"+Inf\"} 0");
	has_line(text, "stagedrain_ready 0");
	/* Families are declared, but what the watcher has not read yet has no sample. */
	has_line(text, "# TYPE stagedrain_backlog_jobs gauge");
	has_line(text, "# TYPE stagedrain_jobs_relayed_total counter");
	lacks(text, "\nstagedrain_backlog_jobs ");
	lacks(text, "\nstagedrain_oldest_staged_job_age_seconds ");
	lacks(text, "\nstagedrain_oldest_transaction_age_seconds ");
	lacks(text, "\nstagedrain_staged_dead_tuples ");
	lacks(text, "\nstagedrain_jobs_relayed_total{");
	/* No Redis connected yet: no server to name. */
	has_line(text, "stagedrain_redis_wait_short_total 0");
	lacks(text, "stagedrain_redis_master_info");
	well_formed(text);
	free(text);
}
END_TEST

/* The server in use is named (after a failover, the new master), its label escaped; short WAITs are counted. */
START_TEST(redis_server_and_short_waits)
{
	char *text;

	metrics_redis_server(&m, "127.0.0.1:6380/0", NULL, false);
	metrics_redis_server(&m, "10.0.0.2:6379/3", "my\"master", true);
	metrics_wait_short(&m);
	metrics_wait_short(&m);
	text = page();
	has_line(
		text,
		"stagedrain_redis_master_info{address=\"10.0.0.2:6379/3\",master_name=\"my\\\"master\",tls=\"true\"} 1");
	lacks(text, "6380");
	has_line(text, "stagedrain_redis_wait_short_total 2");
	well_formed(text);
	free(text);
}
END_TEST

/* The series says what is written (the timestamps) apart from what runs:
 * a Sidekiq 6.4 fleet shows "6" however its jobs are stamped. */
START_TEST(job_format_follows_the_sidekiq_fleet)
{
	char *text = page();
	struct sidekiq_seen six = { .timestamps = "float_seconds", .version = "6", .source = "read" };
	struct sidekiq_seen eight = { .timestamps = "integer_milliseconds", .version = "8.0.3", .source = "read" };
	struct sidekiq_seen fixed = { .timestamps = "float_seconds", .version = "7", .source = "configured" };
	struct sidekiq_seen odd = { .timestamps = "float_seconds", .version = "7\"x\\", .source = "read" };

	lacks(text, "job_format_info"); /* nothing written yet */
	free(text);
	metrics_job_format(&m, "sidekiq", &eight);
	metrics_job_format(&m, "sidekiq", &six);
	text = page();
	has_line(text, "stagedrain_job_format_info{format=\"sidekiq\",timestamps=\"float_seconds\","
		       "sidekiq_version=\"6\",sidekiq_version_source=\"read\"} 1");
	lacks(text, "8.0.3");
	lacks(text, "sidekiq_version=\"7\"");
	well_formed(text);
	free(text);
	metrics_job_format(&m, "activejob", &eight);
	text = page();
	has_line(text, "stagedrain_job_format_info{format=\"activejob\",timestamps=\"integer_milliseconds\","
		       "sidekiq_version=\"8.0.3\",sidekiq_version_source=\"read\"} 1");
	free(text);
	metrics_job_format(&m, "sidekiq", &fixed);
	text = page();
	has_line(text, "stagedrain_job_format_info{format=\"sidekiq\",timestamps=\"float_seconds\","
		       "sidekiq_version=\"7\",sidekiq_version_source=\"configured\"} 1");
	free(text);
	/* What Redis held is a label value: escaped. */
	metrics_job_format(&m, "sidekiq", &odd);
	text = page();
	has_line(text, "stagedrain_job_format_info{format=\"sidekiq\",timestamps=\"float_seconds\","
		       "sidekiq_version=\"7\\\"x\\\\\",sidekiq_version_source=\"read\"} 1");
	well_formed(text);
	free(text);
	metrics_job_format(&m, "celery", NULL);
	text = page();
	has_line(text, "stagedrain_job_format_info{format=\"celery\",timestamps=\"\",sidekiq_version=\"\","
		       "sidekiq_version_source=\"\"} 1");
	well_formed(text);
	free(text);
}
END_TEST

START_TEST(batches_count_by_queue_with_a_histogram)
{
	static struct fake f;
	const char *first[] = { "default", "default", "mail", NULL }, *second[] = { "mail", NULL };
	char *text;

	fake_batch(&f, first, 0);
	metrics_batch_pushed(&m, &f.b);
	metrics_batch_done(&m, f.b.ndead, 0.003, 3);
	fake_batch(&f, second, 2);
	metrics_batch_pushed(&m, &f.b);
	metrics_batch_done(&m, f.b.ndead, 20, 6);
	text = page();
	has_line(text, "stagedrain_jobs_relayed_total{queue=\"default\"} 2");
	has_line(text, "stagedrain_jobs_relayed_total{queue=\"mail\"} 2");
	has_line(text, "stagedrain_batches_total 2");
	has_line(text, "stagedrain_dead_letter_jobs_total 2");
	/* Cumulative buckets: 3 ms falls in le=0.005, 20 s only in +Inf. */
	has_line(text, "stagedrain_batch_duration_seconds_bucket{le=\"0.001\"} 0");
	has_line(text, "stagedrain_batch_duration_seconds_bucket{le=\"0.0025\"} 0");
	has_line(text, "stagedrain_batch_duration_seconds_bucket{le=\"0.005\"} 1");
	has_line(text, "stagedrain_batch_duration_seconds_bucket{le=\"10\"} 1");
	has_line(text, "stagedrain_batch_duration_seconds_bucket{le=\"+Inf\"} 2");
	has_line(text, "stagedrain_batch_duration_seconds_count 2");
	has_line(text, "stagedrain_batch_duration_seconds_sum 20.003000");
	well_formed(text);
	free(text);
}
END_TEST

/* Pushed but not committed (the delete failed): the next batch forgets it. */
START_TEST(uncommitted_batches_do_not_count)
{
	static struct fake f;
	const char *three[] = { "q", "q", "q", NULL }, *one[] = { "q", NULL };
	char *text;

	fake_batch(&f, three, 0);
	metrics_batch_pushed(&m, &f.b);
	fake_batch(&f, one, 0);
	metrics_batch_pushed(&m, &f.b);
	metrics_batch_done(&m, 0, 0.1, 1);
	text = page();
	has_line(text, "stagedrain_jobs_relayed_total{queue=\"q\"} 1");
	has_line(text, "stagedrain_batches_total 1");
	free(text);
}
END_TEST

/* A batch pushed but not deleted, then deleted by the next leader's fence:
 * its rows count as relayed once, when the fence deletes them. */
START_TEST(rows_a_fence_deleted_count_as_relayed)
{
	static struct fake f;
	const char *three[] = { "q", "q", "mail", NULL };
	char *text;

	fake_batch(&f, three, 0);
	metrics_batch_pushed(&m, &f.b);
	metrics_fenced(&m, "q", 1, 2);
	metrics_fenced(&m, "mail", 4, 1);
	text = page();
	has_line(text, "stagedrain_jobs_relayed_total{queue=\"q\"} 2");
	has_line(text, "stagedrain_jobs_relayed_total{queue=\"mail\"} 1");
	has_line(text, "stagedrain_batches_total 0");
	free(text);
}
END_TEST

START_TEST(a_bound_equals_its_bucket)
{
	static struct fake f;
	const char *one[] = { "q", NULL };
	char *text;

	fake_batch(&f, one, 0);
	metrics_batch_pushed(&m, &f.b);
	metrics_batch_done(&m, f.b.ndead, 0.01, 1); /* le means "less than or equal" */
	text = page();
	has_line(text, "stagedrain_batch_duration_seconds_bucket{le=\"0.005\"} 0");
	has_line(text, "stagedrain_batch_duration_seconds_bucket{le=\"0.01\"} 1");
	free(text);
}
END_TEST

START_TEST(queue_names_are_escaped)
{
	static struct fake f;
	const char *odd[] = { "we\"ird\\q\nx", NULL };
	char *text;

	fake_batch(&f, odd, 0);
	metrics_batch_pushed(&m, &f.b);
	metrics_batch_done(&m, f.b.ndead, 0.1, 1);
	text = page();
	has_line(text, "stagedrain_jobs_relayed_total{queue=\"we\\\"ird\\\\q\\nx\"} 1");
	well_formed(text);
	free(text);
}
END_TEST

/* Queue names come from the table: past the bound they share one series. */
START_TEST(queue_count_is_bounded)
{
	static struct fake f;
	const char *names[METRICS_MAX_QUEUES + 6];
	char *text;
	size_t n = 0;

	for (size_t i = 0; i < METRICS_MAX_QUEUES + 5; i++) {
		snprintf(f.names[i], sizeof(f.names[i]), "q%zu", i);
		names[i] = f.names[i];
	}
	names[METRICS_MAX_QUEUES + 5] = NULL;
	fake_batch(&f, names, 0);
	metrics_batch_pushed(&m, &f.b);
	metrics_batch_done(&m, f.b.ndead, 0.1, 1);
	text = page();
	has_line(text, "stagedrain_jobs_relayed_total{queue=\"q0\"} 1");
	has_line(text, "stagedrain_jobs_relayed_total{queue=\"q999\"} 1");
	lacks(text, "queue=\"q1000\"");
	has_line(text, "stagedrain_jobs_relayed_total{queue=\"_other\"} 5");
	for (const char *p = text; (p = strstr(p, "stagedrain_jobs_relayed_total{")); p++)
		n++;
	ck_assert_uint_eq(n, METRICS_MAX_QUEUES + 1);
	free(text);
}
END_TEST

/* The bytes of the queue labels the metrics keep. */
static size_t kept_label_bytes(void)
{
	size_t n = 0;

	for (size_t i = 0; i < m.nqueues; i++)
		n += m.queues[i].len;
	return n;
}

/* Series of the relayed counter on the page. */
static size_t relayed_series(const char *text)
{
	size_t n = 0;

	for (const char *p = text; (p = strstr(p, "stagedrain_jobs_relayed_total{")); p++)
		n++;
	return n;
}

/* Twenty queues of 1 MB names that differ only in their last byte: each
 * stays its own series, its label at most METRICS_LABEL_MAX bytes, and the
 * page and what the metrics keep stay a few KB. */
START_TEST(long_queue_names_are_shortened)
{
	static struct fake f;
	enum { N = 20, LEN = 1 << 20 };
	const char *names[N + 1];
	char *big[N], *text;

	for (size_t i = 0; i < N; i++) {
		big[i] = malloc(LEN + 1);
		ck_assert_ptr_nonnull(big[i]);
		memset(big[i], 'q', LEN);
		big[i][LEN - 1] = (char)('a' + i);
		big[i][LEN] = '\0';
		names[i] = big[i];
	}
	names[N] = NULL;
	fake_batch(&f, names, 0);
	metrics_batch_pushed(&m, &f.b);
	metrics_batch_done(&m, 0, 0.1, 1);
	metrics_batch_pushed(&m, &f.b); /* seen again: the same series */
	metrics_batch_done(&m, 0, 0.1, 1);
	for (size_t i = 0; i < N; i++)
		free(big[i]);
	ck_assert_uint_eq(m.nqueues, N);
	ck_assert_uint_le(kept_label_bytes(), N * METRICS_LABEL_MAX);
	for (size_t i = 0; i < N; i++) {
		ck_assert_uint_le(m.queues[i].len, METRICS_LABEL_MAX);
		ck_assert_uint_eq(m.queues[i].relayed, 2);
		ck_assert_msg(strstr(m.queues[i].name, "...#"), "no marker in %.*s", (int)m.queues[i].len,
			      m.queues[i].name);
		for (size_t k = 0; k < i; k++)
			ck_assert_msg(m.queues[k].len != m.queues[i].len ||
					      memcmp(m.queues[k].name, m.queues[i].name, m.queues[i].len) != 0,
				      "queues %zu and %zu share a label", k, i);
	}
	text = page();
	ck_assert_uint_lt(strlen(text), 16 * 1024); /* 20 MB of names before */
	ck_assert_uint_eq(relayed_series(text), N);
	well_formed(text);
	free(text);
}
END_TEST

/* Past METRICS_LABEL_BUDGET bytes of labels, new queues share _other. */
START_TEST(queue_label_bytes_are_bounded)
{
	static struct fake f;
	static char longnames[1000][METRICS_LABEL_MAX + 1];
	const char *names[1001];
	size_t named = METRICS_LABEL_BUDGET / METRICS_LABEL_MAX;
	char *text;

	for (size_t i = 0; i < 1000; i++) {
		memset(longnames[i], 'n', METRICS_LABEL_MAX);
		snprintf(longnames[i], 8, "%06zu", i);
		longnames[i][6] = 'n';
		longnames[i][METRICS_LABEL_MAX] = '\0';
		names[i] = longnames[i];
	}
	names[1000] = NULL;
	fake_batch(&f, names, 0);
	metrics_batch_pushed(&m, &f.b);
	metrics_batch_done(&m, 0, 0.1, 1);
	ck_assert_uint_le(kept_label_bytes(), METRICS_LABEL_BUDGET + sizeof(METRICS_OTHER_QUEUE));
	text = page();
	ck_assert_uint_eq(relayed_series(text), named + 1);
	lacks(text, "queue=\"000999");
	{
		char line[64];
		snprintf(line, sizeof(line), "stagedrain_jobs_relayed_total{queue=\"_other\"} %zu", 1000 - named);
		has_line(text, line);
	}
	free(text);
}
END_TEST

START_TEST(leader_epoch_and_reconnects)
{
	long long cursor = -1;
	char *text;

	ck_assert(!metrics_leader_cursor(&m, &cursor));
	metrics_leader(&m, true, 0);
	metrics_epoch(&m, 7);
	metrics_connected(&m, METRICS_REDIS, false, false);
	metrics_connected(&m, METRICS_REDIS, true, true);
	metrics_connected(&m, METRICS_PG, true, true);
	metrics_connected(&m, METRICS_PG, true, true);
	ck_assert(metrics_leader_cursor(&m, &cursor));
	ck_assert_int_eq(cursor, 0);
	text = page();
	has_line(text, "stagedrain_is_leader 1");
	has_line(text, "stagedrain_leader_epoch 7");
	has_line(text, "stagedrain_reconnects_total{server=\"postgres\"} 2");
	has_line(text, "stagedrain_reconnects_total{server=\"redis\"} 1");
	free(text);
	/* A standby reports epoch 0: max() over relays is the leader's. */
	metrics_leader(&m, false, 0);
	text = page();
	has_line(text, "stagedrain_is_leader 0");
	has_line(text, "stagedrain_leader_epoch 0");
	free(text);
}
END_TEST

START_TEST(database_readings)
{
	struct metrics_db db = {
		.backlog_jobs = 1234, .oldest_job_age_s = 61.25, .oldest_xact_age_s = 0.5, .dead_tuples = 98765
	};
	char *text;

	metrics_db_reading(&m, &db);
	text = page();
	has_line(text, "stagedrain_backlog_jobs 1234");
	has_line(text, "stagedrain_oldest_staged_job_age_seconds 61.250");
	has_line(text, "stagedrain_oldest_transaction_age_seconds 0.500");
	has_line(text, "stagedrain_staged_dead_tuples 98765");
	free(text);
	/* A standby does not know the oldest job; a failed reading knows nothing. */
	db.oldest_job_age_s = NAN;
	metrics_db_reading(&m, &db);
	text = page();
	lacks(text, "\nstagedrain_oldest_staged_job_age_seconds ");
	has_line(text, "stagedrain_backlog_jobs 1234");
	free(text);
}
END_TEST

START_TEST(ready_needs_both_servers_twice)
{
	char *text = ready_text(0);

	ck_assert_str_eq(text, "not ready standby; postgres: not connected; redis: not connected\n");
	free(text);
	metrics_connected(&m, METRICS_PG, true, false);
	metrics_connected(&m, METRICS_REDIS, true, false);
	text = ready_text(0);
	ck_assert_str_eq(text, "not ready standby; postgres: not checked yet; redis: not checked yet\n");
	free(text);
	metrics_probe(&m, METRICS_PG, true, NULL);
	metrics_probe(&m, METRICS_REDIS, true, NULL);
	text = ready_text(1);
	ck_assert_str_eq(text, "ready standby\n");
	free(text);
	metrics_leader(&m, true, 0);
	text = ready_text(1);
	ck_assert_str_eq(text, "ready leader\n");
	free(text);
	/* The watcher's probe fails while the drain has not noticed yet. */
	metrics_probe(&m, METRICS_REDIS, false, "PING failed: Connection refused");
	text = ready_text(0);
	ck_assert_str_eq(text, "not ready leader; redis: unreachable\n");
	free(text);
	text = page();
	has_line(text, "stagedrain_ready 0");
	free(text);
	metrics_probe(&m, METRICS_REDIS, true, NULL);
	metrics_connected(&m, METRICS_PG, false, false);
	text = ready_text(0);
	ck_assert_str_eq(text, "not ready leader; postgres: not connected\n");
	free(text);
}
END_TEST

/* /readyz answers anyone: by default a word or two per server, never the
 * watcher's error text (a host, a port, a user, a server's message); with
 * --readyz-detail that text, also for a server the drain is not connected to. */
START_TEST(ready_reason_is_short_unless_detail)
{
	const char *err = "could not connect to redis at 10.0.0.7:6380/0: Connection refused";
	char *text;

	metrics_connected(&m, METRICS_PG, true, false);
	metrics_connected(&m, METRICS_REDIS, true, false);
	metrics_probe(&m, METRICS_PG, false, "could not connect to postgres at db.internal:5432 as relay: timeout");
	metrics_probe(&m, METRICS_REDIS, false, err);
	text = ready_text_as(0, false);
	ck_assert_str_eq(text, "not ready standby; postgres: unreachable; redis: unreachable\n");
	free(text);
	text = ready_text_as(0, true);
	ck_assert_str_eq(text, "not ready standby; postgres: could not connect to postgres at db.internal:5432 as "
			       "relay: timeout; redis: could not connect to redis at 10.0.0.7:6380/0: Connection "
			       "refused\n");
	free(text);
	/* The drain lost Redis too: the short reason says so; the detail adds the watcher's why. */
	metrics_connected(&m, METRICS_REDIS, false, false);
	metrics_probe(&m, METRICS_PG, true, NULL);
	text = ready_text_as(0, false);
	ck_assert_str_eq(text, "not ready standby; redis: not connected\n");
	free(text);
	text = ready_text_as(0, true);
	ck_assert_str_eq(text, "not ready standby; redis: not connected: could not connect to redis at "
			       "10.0.0.7:6380/0: Connection refused\n");
	free(text);
	/* Not connected, and the watcher found it fine: nothing more to say. */
	metrics_probe(&m, METRICS_REDIS, true, NULL);
	text = ready_text_as(0, true);
	ck_assert_str_eq(text, "not ready standby; redis: not connected\n");
	free(text);
}
END_TEST

/* The drain calls these with no metrics when nobody reads them. */
START_TEST(null_metrics_are_ignored)
{
	static struct fake f;
	const char *one[] = { "q", NULL };
	struct metrics_db db = { .backlog_jobs = 1, .oldest_job_age_s = 2, .oldest_xact_age_s = 3, .dead_tuples = 4 };
	long long cursor;

	fake_batch(&f, one, 0);
	metrics_batch_pushed(NULL, &f.b);
	metrics_batch_done(NULL, 0, 1, 1);
	metrics_leader(NULL, true, 1);
	metrics_epoch(NULL, 1);
	metrics_connected(NULL, METRICS_PG, true, true);
	metrics_probe(NULL, METRICS_PG, true, NULL);
	metrics_db_reading(NULL, &db);
	metrics_redis_server(NULL, "h:1/0", "m", true);
	metrics_wait_short(NULL);
	metrics_job_format(NULL, "sidekiq", NULL);
	ck_assert(!metrics_leader_cursor(NULL, &cursor));
	metrics_free(NULL);
}
END_TEST

/* Each target's push time is one summary family (promtool refuses _sum and
 * _count typed counter); held rows show by queue and target as the watcher
 * read them, 0 once gone, past the bound under the target's _other, and not
 * at all when unread (a standby). */
START_TEST(targets_and_held_rows)
{
	static const char *const names[] = { "default", "b" };
	struct metrics_held_row rows[3];
	char *text;

	metrics_targets(&m, names, 2);
	metrics_target_pushed(&m, 1, 5, 0.25);
	memset(rows, 0, sizeof(rows));
	snprintf(rows[0].target, sizeof(rows[0].target), "b");
	snprintf(rows[0].queue, sizeof(rows[0].queue), "bq");
	rows[0].rows = 2;
	rows[0].oldest_s = 6.5;
	snprintf(rows[1].target, sizeof(rows[1].target), "default");
	snprintf(rows[1].queue, sizeof(rows[1].queue), "mail\"x");
	rows[1].rows = 3;
	rows[1].oldest_s = 1;
	metrics_held_reading(&m, rows, 2, true);
	text = page();
	has_line(text, "# TYPE stagedrain_target_push_seconds summary");
	lacks(text, "# TYPE stagedrain_target_push_seconds_sum");
	has_line(text, "stagedrain_target_push_seconds_sum{target=\"b\"} 0.250000");
	has_line(text, "stagedrain_target_push_seconds_count{target=\"b\"} 1");
	has_line(text, "stagedrain_held_jobs{queue=\"bq\",target=\"b\"} 2");
	has_line(text, "stagedrain_held_jobs{queue=\"mail\\\"x\",target=\"default\"} 3");
	has_line(text, "stagedrain_target_oldest_held_age_seconds{target=\"b\"} 6.500");
	has_line(text, "stagedrain_target_oldest_held_age_seconds{target=\"default\"} 1.000");
	well_formed(text);
	free(text);
	/* bq's rows left: 0, not gone. */
	metrics_held_reading(&m, &rows[1], 1, true);
	text = page();
	has_line(text, "stagedrain_held_jobs{queue=\"bq\",target=\"b\"} 0");
	has_line(text, "stagedrain_target_oldest_held_age_seconds{target=\"b\"} 0.000");
	free(text);
	/* Past METRICS_HELD_SERIES pairs, a target's new queues share its _other. */
	for (int i = 0; i < METRICS_HELD_SERIES + 5; i++) {
		snprintf(rows[2].target, sizeof(rows[2].target), "b");
		snprintf(rows[2].queue, sizeof(rows[2].queue), "q%d", i);
		rows[2].rows = 1;
		metrics_held_reading(&m, &rows[2], 1, true);
	}
	ck_assert_uint_le(m.nheld, METRICS_HELD_SERIES + 1);
	metrics_held_reading(&m, &rows[2], 1, true);
	text = page();
	has_line(text, "stagedrain_held_jobs{queue=\"_other\",target=\"b\"} 1");
	free(text);
	/* Unread: no held samples at all, the families still declared. */
	metrics_held_reading(&m, NULL, 0, false);
	text = page();
	has_line(text, "# TYPE stagedrain_held_jobs gauge");
	lacks(text, "stagedrain_held_jobs{");
	lacks(text, "stagedrain_target_oldest_held_age_seconds{");
	free(text);
}
END_TEST

Suite *metrics_suite(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("metrics");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, empty_page);
	tcase_add_test(tc, batches_count_by_queue_with_a_histogram);
	tcase_add_test(tc, uncommitted_batches_do_not_count);
	tcase_add_test(tc, rows_a_fence_deleted_count_as_relayed);
	tcase_add_test(tc, a_bound_equals_its_bucket);
	tcase_add_test(tc, queue_names_are_escaped);
	tcase_add_test(tc, queue_count_is_bounded);
	tcase_add_test(tc, long_queue_names_are_shortened);
	tcase_add_test(tc, queue_label_bytes_are_bounded);
	tcase_add_test(tc, leader_epoch_and_reconnects);
	tcase_add_test(tc, redis_server_and_short_waits);
	tcase_add_test(tc, job_format_follows_the_sidekiq_fleet);
	tcase_add_test(tc, database_readings);
	tcase_add_test(tc, ready_needs_both_servers_twice);
	tcase_add_test(tc, ready_reason_is_short_unless_detail);
	tcase_add_test(tc, null_metrics_are_ignored);
	tcase_add_test(tc, targets_and_held_rows);
	suite_add_tcase(s, tc);
	return s;
}
