/* `stagedrain dead list|show|replay|purge` against the real servers: rows the
 * real relay dead-lettered, listed, fixed, replayed and delivered once with
 * their original jid; a replay racing the relay and another replay; bad input. */
#include "fmacros.h"

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dead_text.h"
#include "harness.h"
#include "suites.h"

/* What one run of the command said. */
struct said {
	int status;
	char out[32768];
	char err[4096];
};

static void slurp(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, len - 1, f) : 0;

	buf[n] = '\0';
	if (f)
		fclose(f);
}

/* Runs `stagedrain dead ARGS... --pg-url URL` (url NULL: the test server's),
 * stdout and stderr apart. */
static void dead_as(struct said *s, const char *url, const char *const *args)
{
	const char *argv[32];
	char out[600], err[600];
	int n = 0, st;
	pid_t pid;

	argv[n++] = h_env("STAGEDRAIN_BIN");
	argv[n++] = "dead";
	for (; *args && n < 28; args++)
		argv[n++] = *args;
	argv[n++] = "--pg-url";
	argv[n++] = url ? url : h_env("TEST_PG_URL");
	argv[n] = NULL;
	snprintf(out, sizeof(out), "%s/dead.out", h_env("TEST_DIR"));
	snprintf(err, sizeof(err), "%s/dead.err", h_env("TEST_DIR"));
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600),
		    fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
			_exit(126);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	s->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	slurp(out, s->out, sizeof(s->out));
	slurp(err, s->err, sizeof(s->err));
}

#define DEAD(s, ...) dead_as((s), NULL, (const char *const[]){ __VA_ARGS__, NULL })

static int lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* One line on stderr, containing text, nothing on stdout, and the status. */
static void one_error(const struct said *s, int status, const char *text)
{
	ck_assert_msg(s->status == status, "status %d, not %d; stderr: %s", s->status, status, s->err);
	ck_assert_msg(lines(s->err) == 1 && strncmp(s->err, "stagedrain: ", 12) == 0, "stderr: %s", s->err);
	ck_assert_msg(strstr(s->err, text), "stderr lacks \"%s\": %s", text, s->err);
	ck_assert_str_eq(s->out, "");
}

/* What both tables hold and how far the ids went: equal before and after
 * anything that must change nothing. */
#define STATE_SQL                                                                                                      \
	"SELECT md5(coalesce((SELECT string_agg(d::text, '|' ORDER BY dead_id) FROM staged_jobs_dead d), '')"          \
	" || coalesce((SELECT string_agg(s::text, '|' ORDER BY id) FROM staged_jobs s), '')"                           \
	" || (SELECT last_value FROM staged_jobs_id_seq))"

static void state(PGconn *c, char *out, size_t len)
{
	h_sql_text(c, STATE_SQL, out, len);
}

/* Runs the relay with --once and args; it must end with every row moved. */
static void relay_once(const char *name, const char *max_job_bytes)
{
	ck_assert_int_eq(h_relay_run(name, (const char *const[]){ "--once", "--max-job-bytes", max_job_bytes, NULL }),
			 0);
}

/* Where the report says dead_id moved: its line's offset (it must be there). */
static long moved_at(const char *out, const char *dead_id)
{
	char line[200];
	const char *at;

	snprintf(line, sizeof(line), "moved dead_id %s -> ", dead_id);
	at = strstr(out, line);
	ck_assert_msg(at, "no \"%s\" in %s", line, out);
	return at - out;
}

static long long dead_id_of(PGconn *c, const char *where)
{
	return h_sql(c, "SELECT dead_id FROM staged_jobs_dead WHERE %s", where);
}

/*
 * One row for each way the relay dead-letters (a text column, args, options,
 * a format's option, a time, a size over --max-job-bytes, a column over its
 * bound), made by the real relay; listed, filtered, shown; refused while
 * broken; fixed (by an option edit, by the settings, or by hand); replayed;
 * then each delivered exactly once with its original jid.
 */
START_TEST(every_reason_is_listed_replayed_after_a_fix_and_delivered_once)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct said s;
	char path[600], id[7][24], before[64], after[64];
	static const char *const where[7] = {
		"job_class = ''",      "job_class = 'ArgsObj'", "job_class = 'Reserved'", "job_class = 'AjBad'",
		"job_class = 'Never'", "job_class = 'Big'",     "job_class = 'LongQ'",
	};
	json_t *jobs;

	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args) VALUES ('default', '', '[1]')");
	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args) VALUES ('default', 'ArgsObj', '{\"a\": 1}')");
	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args, options)"
		 " VALUES ('mail', 'Reserved', '[\"x\\ny\"]', '{\"jid\": \"forged\", \"retry\": 3}')");
	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args, options)"
		 " VALUES ('default', 'AjBad', '[4]', '{\"activejob\": \"yes\"}')");
	h_sql(c,
	      "INSERT INTO staged_jobs (queue, job_class, args, run_at) VALUES ('default', 'Never', '[5]', 'infinity')");
	h_sql(c,
	      "INSERT INTO staged_jobs (queue, job_class, args) VALUES ('default', 'Big', jsonb_build_array(repeat('b', 3000)))");
	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args) VALUES (repeat('q', 1100), 'LongQ', '[7]')");
	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args) VALUES ('default', 'Fine', '[8]')");
	h_sql(c, "CREATE TEMP TABLE orig AS SELECT job_class, jid FROM staged_jobs");
	relay_once("dead-first", "2000");
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 7);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 1);
	/* The relay's warning names what `dead show` takes. */
	snprintf(path, sizeof(path), "%s/dead-first.log", h_env("TEST_DIR"));
	ck_assert(h_log_contains(path, "queue=mail class=Reserved reason=\"options key \\\"jid\\\" is reserved\""));
	for (int i = 0; i < 7; i++) {
		char line[200];

		snprintf(id[i], sizeof(id[i]), "%lld", dead_id_of(c, where[i]));
		snprintf(line, sizeof(line), "dead_id=%s id=", id[i]);
		ck_assert_msg(h_log_contains(path, line), "the log lacks %s", line);
	}

	/* The table: a header and one line each, control characters visible. */
	DEAD(&s, "list");
	ck_assert_int_eq(s.status, 0);
	ck_assert_int_eq(lines(s.out), 8);
	ck_assert(strncmp(s.out, "DEAD_ID  AGE   QUEUE", 20) == 0);
	ck_assert(strstr(s.out, "job class is empty"));
	ck_assert(strstr(s.out, "args is not a json array (got object)"));
	ck_assert(strstr(s.out, "options key \"jid\" is reserved"));
	ck_assert(strstr(s.out, "[\"x\\ny\"]"));
	ck_assert(strstr(s.out, "options key \"activejob\" is not true or false"));
	ck_assert(strstr(s.out, "run_at is infinity"));
	ck_assert(strstr(s.out, "args are larger than --max-job-bytes"));
	ck_assert(strstr(s.out, "queue is 1100 bytes, over the 1024-byte limit"));
	ck_assert(strstr(s.out, "qqqqqqqqqqqqqqqqqqqqqqqqqqqqqq...")); /* cut at 30 characters */
	ck_assert_str_eq(s.err, "");

	/* JSON lines: every column, one object a line. */
	DEAD(&s, "list", "--json");
	ck_assert_int_eq(s.status, 0);
	ck_assert_int_eq(lines(s.out), 7);
	for (char *line = s.out; *line; line = strchr(line, '\n') + 1) {
		json_error_t err;
		json_t *row = json_loadb(line, strcspn(line, "\n"), 0, &err);

		ck_assert_msg(row, "not json: %s", err.text);
		ck_assert(json_is_integer(json_object_get(row, "dead_id")));
		ck_assert(json_is_string(json_object_get(row, "reason")));
		ck_assert(json_is_string(json_object_get(row, "jid")));
		ck_assert(json_object_get(row, "args") && json_object_get(row, "options"));
		json_decref(row);
	}

	/* Filters: queue, class, reason (any case), since. */
	DEAD(&s, "list", "--queue", "mail", "--json");
	ck_assert_int_eq(lines(s.out), 1);
	ck_assert(strstr(s.out, "\"job_class\":\"Reserved\""));
	DEAD(&s, "list", "--class", "Never", "--json");
	ck_assert_int_eq(lines(s.out), 1);
	DEAD(&s, "list", "--reason", "RESERVED", "--json");
	ck_assert_int_eq(lines(s.out), 1);
	h_sql(c, "UPDATE staged_jobs_dead SET failed_at = failed_at - interval '2 hours' WHERE job_class = 'Never'");
	DEAD(&s, "list", "--since", "1h", "--json");
	ck_assert_int_eq(lines(s.out), 6);
	ck_assert(!strstr(s.out, "\"Never\""));
	DEAD(&s, "list", "--queue", "nothing-here");
	ck_assert_int_eq(s.status, 0); /* nothing to list is no failure: the header alone */
	ck_assert_int_eq(lines(s.out), 1);

	/* show: every column, options as the app wrote them. */
	DEAD(&s, "show", id[2]);
	ck_assert_int_eq(s.status, 0);
	ck_assert(strstr(s.out, "reason      options key \"jid\" is reserved\n"));
	ck_assert(strstr(s.out, "queue       mail\n"));
	ck_assert_msg(strstr(s.out, "options\n  {\"jid\": \"forged\", \"retry\": 3}\n"), "%s", s.out);

	/* Still broken: each stays, said once, and nothing changes. */
	state(c, before, sizeof(before));
	DEAD(&s, "replay", "--queue", "default", "--max-job-bytes", "2000");
	ck_assert_int_eq(s.status, 1);
	ck_assert(strstr(s.out, "it would be dead-lettered again: job class is empty;"));
	ck_assert(strstr(s.out, "it would be dead-lettered again: options key \"activejob\" is not true or false;"));
	ck_assert(strstr(s.out, "moved 0 of 5 dead-lettered jobs\n"));
	state(c, after, sizeof(after));
	ck_assert_str_eq(before, after);

	/* Fixed by an option edit on the way. */
	DEAD(&s, "replay", id[2], "--unset-option", "jid", "--set-option", "tags=[\"replayed\"]");
	ck_assert_msg(s.status == 0, "%s%s", s.out, s.err);
	ck_assert(strstr(s.out, "-> id "));
	DEAD(&s, "replay", id[3], "--set-option", "activejob=false");
	ck_assert_msg(s.status == 0, "%s%s", s.out, s.err);
	/* Fixed by the settings: the relay will take a bigger job (1M, the default). */
	DEAD(&s, "replay", id[5], "--max-job-bytes", "2000");
	ck_assert_int_eq(s.status, 1);
	DEAD(&s, "replay", id[5]);
	ck_assert_msg(s.status == 0, "%s%s", s.out, s.err);
	/* Fixed by hand (a superuser here; the admin role may not change rows). */
	h_sql(c, "UPDATE staged_jobs_dead SET job_class = 'Named' WHERE job_class = ''");
	h_sql(c, "UPDATE staged_jobs_dead SET args = '[{\"a\": 1}]' WHERE job_class = 'ArgsObj'");
	h_sql(c, "UPDATE staged_jobs_dead SET run_at = NULL WHERE job_class = 'Never'");
	h_sql(c, "UPDATE staged_jobs_dead SET queue = 'long' WHERE job_class = 'LongQ'");
	DEAD(&s, "replay", id[6], id[4], id[0], id[1]);
	ck_assert_msg(s.status == 0, "%s%s", s.out, s.err);
	ck_assert(strstr(s.out, "moved 4 of 4 dead-lettered jobs\n"));
	/* In their original order: by the staged id, whatever order they were named in. */
	ck_assert(moved_at(s.out, id[0]) < moved_at(s.out, id[1]));
	ck_assert(moved_at(s.out, id[1]) < moved_at(s.out, id[4]));
	ck_assert(moved_at(s.out, id[4]) < moved_at(s.out, id[6]));
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs s JOIN orig o USING (jid)"
				  " WHERE o.job_class = s.job_class OR o.job_class = ''"),
			 7);

	relay_once("dead-replayed", "1M");
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	/* Each once, with the jid it was staged with. */
	h_sql(c, "DROP TABLE IF EXISTS expected");
	h_sql(c, "CREATE TABLE expected AS SELECT jid FROM orig");
	h_assert_each_once(c, r, (const char *const[]){ "queue:default", "queue:mail", "queue:long", NULL },
			   "queue:default", 6);
	jobs = h_list_jobs(r, "queue:mail");
	ck_assert_int_eq(json_array_size(jobs), 1);
	ck_assert_str_eq(json_string_value(json_array_get(json_object_get(json_array_get(jobs, 0), "tags"), 0)),
			 "replayed");
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(jobs, 0), "retry")), 3);
	json_decref(jobs);
	h_sql(c, "DROP TABLE expected");
	redisFree(r);
	PQfinish(c);
}
END_TEST

/* A row that would only be dead-lettered again stays, unless --force; forced,
 * the relay dead-letters it again for the same reason, jid unchanged. A dry
 * run changes nothing, not even the id sequence. */
START_TEST(a_broken_row_stays_unless_forced_and_a_dry_run_changes_nothing)
{
	PGconn *c = h_pg();
	struct said s;
	char before[64], after[64], jid[32];

	h_sql(c, "INSERT INTO staged_jobs (job_class, args, options) VALUES ('Reserved', '[1]', '{\"at\": 1}')");
	h_sql_text(c, "SELECT jid FROM staged_jobs", jid, sizeof(jid));
	relay_once("forced-first", "1M");
	state(c, before, sizeof(before));
	DEAD(&s, "replay", "1");
	ck_assert_int_eq(s.status, 1);
	ck_assert_str_eq(s.out, "not moved dead_id 1: it would be dead-lettered again: options key \"at\" is reserved;"
				" fix it with --set-option/--unset-option, or move it anyway with --force\n"
				"moved 0 of 1 dead-lettered jobs\n");
	DEAD(&s, "replay", "1", "--force", "--dry-run");
	ck_assert_int_eq(s.status, 0);
	ck_assert(strstr(s.out, "would move dead_id 1: queue default, class Reserved, jid "));
	DEAD(&s, "replay", "1", "--unset-option", "at", "--dry-run");
	ck_assert_int_eq(s.status, 0);
	ck_assert(strstr(s.out, "would move 1 of 1 dead-lettered jobs\n"));
	state(c, after, sizeof(after));
	ck_assert_str_eq(before, after);

	DEAD(&s, "replay", "1", "--force");
	ck_assert_int_eq(s.status, 0);
	ck_assert(strstr(s.out, "(forced: it would be dead-lettered again: options key \"at\" is reserved)"));
	relay_once("forced-again", "1M");
	ck_assert_int_eq(h_sql(c,
			       "SELECT count(*) FROM staged_jobs_dead WHERE dead_id = 2 AND jid = '%s'"
			       " AND reason = 'options key \"at\" is reserved'",
			       jid),
			 1);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 1);
	PQfinish(c);
}
END_TEST

START_TEST(purge_deletes_by_age)
{
	PGconn *c = h_pg();
	struct said s;
	char before[64], after[64];

	h_sql(c,
	      "INSERT INTO staged_jobs_dead (id, job_class, reason) SELECT i, 'Old', 'x' FROM generate_series(1, 3) i");
	h_sql(c, "UPDATE staged_jobs_dead SET failed_at = now() - interval '10 days' WHERE id <= 2");
	state(c, before, sizeof(before));
	DEAD(&s, "purge", "--older-than", "7d", "--dry-run");
	ck_assert_int_eq(s.status, 0);
	ck_assert_str_eq(s.out, "would purge 2 dead-lettered jobs older than 7d\n");
	state(c, after, sizeof(after));
	ck_assert_str_eq(before, after);
	DEAD(&s, "purge", "--older-than", "7d");
	ck_assert_int_eq(s.status, 0);
	ck_assert_str_eq(s.out, "purged 2 dead-lettered jobs older than 7d\n");
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE id = 3"), 1);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 1);
	DEAD(&s, "purge", "--older-than", "7d");
	ck_assert_int_eq(s.status, 0); /* nothing old: a daily purge's usual day */
	ck_assert_str_eq(s.out, "purged 0 dead-lettered jobs older than 7d\n");
	PQfinish(c);
}
END_TEST

#define RACE_ROWS 400

/*
 * Replays while the relay drains (it runs on, polling fast, while jobs are
 * staged too), and two replays of the same rows at once: every job arrives
 * exactly once, nothing is left dead or staged.
 */
START_TEST(replays_racing_the_relay_and_each_other_lose_and_duplicate_nothing)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct relay_proc p, rp[2];
	struct said s;
	long long t0;

	h_sql(c,
	      "INSERT INTO staged_jobs_dead (id, queue, job_class, args, options, created_at, jid, uuid, reason)"
	      " SELECT i, 'default', 'Race' || (i %% 4), jsonb_build_array(i), '{}', now(),"
	      " substr(md5(i::text), 1, 24), gen_random_uuid(), 'redis refused it: OOM' FROM generate_series(1, %d) i",
	      RACE_ROWS);
	h_snapshot_expected(c);
	h_sql(c, "INSERT INTO expected SELECT id, jid, queue, job_class, args FROM staged_jobs_dead");
	h_relay_start(&p, "race", (const char *const[]){ "--poll-interval", "10ms", "--batch-size", "50", NULL });
	for (int k = 0; k < 3; k++) {
		char cls[32];

		h_stage_expected(c, "default", 1000 + k * 100, 100);
		snprintf(cls, sizeof(cls), "Race%d", k);
		DEAD(&s, "replay", "--class", cls);
		RELAY_CHECK(&p, s.status == 0, "replay %s: %s%s", cls, s.out, s.err);
		RELAY_CHECK(&p, strstr(s.out, "moved 100 of 100 dead-lettered jobs\n"), "%s", s.out);
	}
	/* Two replays of the same rows at once: each row moves once. */
	for (int k = 0; k < 2; k++) {
		char name[32];

		snprintf(name, sizeof(name), "replay%d", k);
		h_proc_start(&rp[k], name,
			     &(struct proc_opts){ .argv = (const char *const[]){
							  h_env("STAGEDRAIN_BIN"), "dead", "replay", "--class", "Race3",
							  "--pg-url", h_env("TEST_PG_URL"), NULL } });
	}
	for (int k = 0; k < 2; k++)
		RELAY_CHECK(&p, h_relay_wait(&rp[k], 30000) >= 0, "replay %d did not end", k);
	t0 = mono_ms();
	while ((h_sql(c, "SELECT count(*) FROM staged_jobs") > 0 ||
		h_cmd_int(r, "LLEN queue:default") < RACE_ROWS + 300) &&
	       mono_ms() - t0 < 30000)
		sleep_ms(20);
	h_relay_kill(&p, SIGTERM);
	ck_assert_int_eq(h_relay_wait(&p, 10000), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	h_assert_each_once(c, r, (const char *const[]){ "queue:default", NULL }, "queue:default", RACE_ROWS + 300);
	h_sql(c, "DROP TABLE expected");
	redisFree(r);
	PQfinish(c);
}
END_TEST

/* Bad input: one line on stderr, a non-zero status, and nothing changed. */
START_TEST(bad_input_says_one_line_and_changes_nothing)
{
	PGconn *c = h_pg();
	struct said s;
	char before[64], after[64], relay_url[256], admin_url[256];

	h_sql(c, "INSERT INTO staged_jobs_dead (id, queue, job_class, args, options, created_at, jid, reason)"
		 " VALUES (1, 'default', 'A', '[1]', '{}', now(), 'aaaaaaaaaaaaaaaaaaaaaaaa', 'x')");
	h_stage(c, "default", 1, 2);
	state(c, before, sizeof(before));

	DEAD(&s, "show", "42");
	one_error(&s, 1, "no dead-lettered job with dead_id 42");
	DEAD(&s, "replay", "1", "42");
	one_error(&s, 1, "no dead-lettered job with dead_id 42; nothing was moved");
	DEAD(&s, "replay", "abc");
	one_error(&s, 2, "\"abc\" is not a dead_id");
	DEAD(&s, "show", "-1");
	ck_assert_int_ne(s.status, 0);
	DEAD(&s, "replay", "--queue", "nope");
	one_error(&s, 1, "no dead-lettered job matches the filters");
	DEAD(&s, "replay", "1", "--set-option", "retry=abc");
	one_error(&s, 2, "--set-option \"retry=abc\": the value is not json");
	DEAD(&s, "replay", "1", "--set-option", "retry");
	one_error(&s, 2, "is not KEY=JSON");
	DEAD(&s, "replay");
	one_error(&s, 2, "dead replay needs DEAD_IDs or a filter");
	DEAD(&s, "replay", "1", "--queue", "default");
	one_error(&s, 2, "not both");
	DEAD(&s, "purge");
	one_error(&s, 2, "needs --older-than");
	DEAD(&s, "purge", "--older-than", "7");
	one_error(&s, 2, "is not a span");
	DEAD(&s, "list", "--since", "soon");
	one_error(&s, 2, "is not a span");
	DEAD(&s, "frob");
	one_error(&s, 2, "no command \"dead frob\"");
	/* A span Postgres's interval cannot hold is a usage error, not a failed query. */
	DEAD(&s, "purge", "--older-than", "99999999999d");
	one_error(&s, 2, "--older-than \"99999999999d\" is longer than 36500 days (100 years)");
	DEAD(&s, "list", "--since", "99999999999d");
	one_error(&s, 2, "--since \"99999999999d\" is longer than 36500 days (100 years)");
	DEAD(&s, "replay", "--since", "36501d");
	one_error(&s, 2, "is longer than 36500 days");
	/* One option given twice: which was meant cannot be told. */
	DEAD(&s, "purge", "--older-than", "1d", "--older-than", "2d");
	one_error(&s, 2, "--older-than given twice: give it once");
	DEAD(&s, "list", "--queue", "a", "--queue=b");
	one_error(&s, 2, "--queue given twice: give it once");
	/* A word that may hold a password is never echoed. */
	DEAD(&s, "show", "redis://u:Sekr3tPw9x@h/0");
	one_error(&s, 2, "\"redis://...@h/0\" is not a dead_id");
	DEAD(&s, "redis://u:Sekr3tPw9x@h/0");
	one_error(&s, 2, "no command \"dead redis://...@h/0\"");
	DEAD(&s, "replay", "1", "--set-option", "url=\"redis://u:Sekr3tPw9x@h/0");
	one_error(&s, 2, "--set-option \"url=\"redis://...@h/0\": the value is not json");
	/* A usage error needs no server; a server that cannot be reached is one line too. */
	dead_as(&s, "host=127.0.0.1 port=1 dbname=x", (const char *const[]){ "purge", NULL });
	one_error(&s, 2, "needs --older-than");
	dead_as(&s, "host=127.0.0.1 port=1 dbname=x", (const char *const[]){ "list", NULL });
	one_error(&s, 1, "could not connect to postgres");
	state(c, after, sizeof(after));
	ck_assert_str_eq(before, after);

	/* No privilege: the relay's role (and the app's, which shares its lack). */
	h_relay_role(c, "sd_dead_relay", relay_url, sizeof(relay_url));
	dead_as(&s, relay_url, (const char *const[]){ "list", NULL });
	one_error(
		&s, 1,
		"permission denied for table staged_jobs_dead; the dead and held commands need the role stagedrain_admin");
	dead_as(&s, relay_url, (const char *const[]){ "replay", "1", NULL });
	one_error(&s, 1, "permission denied");
	dead_as(&s, relay_url, (const char *const[]){ "purge", "--older-than", "0s", NULL });
	one_error(&s, 1, "permission denied");
	state(c, after, sizeof(after));
	ck_assert_str_eq(before, after);

	/* The admin role may do all of it. */
	h_sql(c, "DROP ROLE IF EXISTS sd_dead_admin");
	h_sql(c, "CREATE ROLE sd_dead_admin LOGIN IN ROLE stagedrain_admin");
	snprintf(admin_url, sizeof(admin_url), "host=127.0.0.1 port=%s dbname=postgres user=sd_dead_admin", PQport(c));
	dead_as(&s, admin_url, (const char *const[]){ "list", NULL });
	ck_assert_int_eq(s.status, 0);
	dead_as(&s, admin_url, (const char *const[]){ "show", "1", NULL });
	ck_assert_int_eq(s.status, 0);
	dead_as(&s, admin_url, (const char *const[]){ "replay", "1", NULL });
	ck_assert_msg(s.status == 0, "%s%s", s.out, s.err);
	ck_assert(strstr(s.out, "moved dead_id 1 -> id 3: queue default, class A, jid aaaaaaaaaaaaaaaaaaaaaaaa\n"));
	dead_as(&s, admin_url, (const char *const[]){ "purge", "--older-than", "0s", NULL });
	ck_assert_int_eq(s.status, 0);
	PQfinish(c);
}
END_TEST

/* The test Redis's URL with database db instead of its own: a route's target. */
static void redis_db_url(int db, char *out, size_t len)
{
	const char *url = h_env("TEST_REDIS_URL"), *slash = strrchr(url, '/');

	ck_assert_ptr_nonnull(slash);
	snprintf(out, len, "%.*s/%d", (int)(slash - url), url, db);
}

/*
 * Each row is checked for the target the relay would send it to, as the
 * relay resolves it: its route column first ('' names none, 'default' the
 * --redis-url target, a name no route has fails the check), else the queue
 * rules. A celery route's priority 12 stays; a route the settings lack
 * stays with the relay's own reason. --set-route/--unset-route correct the
 * route on the way, checked against the routes; `dead show` prints it.
 */
START_TEST(replay_checks_each_row_for_its_target_and_corrects_its_route)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct said s;
	char cel_url[256], shard_url[256], cel[400], shard[400], admin_url[256], before[64], after[64], reason[300];
	char pri_q[24], pri_col[24], pri_empty[24], pri_default[24], gone[24];

	redis_db_url(3, cel_url, sizeof(cel_url));
	redis_db_url(4, shard_url, sizeof(shard_url));
	snprintf(cel, sizeof(cel), "cel tasks --redis-url %s --format celery", cel_url);
	snprintf(shard, sizeof(shard), "shard2 - --redis-url %s", shard_url);
	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args, options, route) VALUES"
		 " ('tasks', 'app.add', '[1]', '{\"priority\": 12}', NULL),"    /* celery by its queue */
		 " ('default', 'app.add', '[2]', '{\"priority\": 12}', 'cel')," /* celery by its column */
		 " ('default', 'Hard', '[3]', '{}', 'shard3')")                 /* no such route */
		;
	{
		const char *args[] = { "--once", "--route", cel, "--route", shard, NULL };
		ck_assert_int_eq(h_relay_run("dead-routes", args), 0);
	}
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 3);
	snprintf(pri_q, sizeof(pri_q), "%lld", dead_id_of(c, "args::text = '[1]'"));
	snprintf(pri_col, sizeof(pri_col), "%lld", dead_id_of(c, "args::text = '[2]'"));
	snprintf(gone, sizeof(gone), "%lld", dead_id_of(c, "args::text = '[3]'"));
	h_sql_text(c, "SELECT reason FROM staged_jobs_dead WHERE args::text = '[3]'", reason, sizeof(reason));
	ck_assert_str_eq(reason, "route \"shard3\" is not a route of this relay (--route)");
	/* Two more, made by hand: an empty route names none (the rules pick:
	 * sidekiq, where priority is any key); 'default' beats the rules. */
	h_sql(c,
	      "INSERT INTO staged_jobs_dead (id, queue, job_class, args, options, created_at, jid, route, reason)"
	      " VALUES (100, 'default', 'Soft', '[4]', '{\"priority\": 12}', now(), 'bbbbbbbbbbbbbbbbbbbbbbbb', '', 'x'),"
	      " (101, 'tasks', 'Soft', '[5]', '{\"priority\": 12}', now(), 'cccccccccccccccccccccccc', 'default', 'x')");
	snprintf(pri_empty, sizeof(pri_empty), "%lld", dead_id_of(c, "args::text = '[4]'"));
	snprintf(pri_default, sizeof(pri_default), "%lld", dead_id_of(c, "args::text = '[5]'"));

	/* show prints the route. */
	DEAD(&s, "show", gone);
	ck_assert_int_eq(s.status, 0);
	ck_assert_msg(strstr(s.out, "\nroute       shard3\n"), "%s", s.out);
	DEAD(&s, "show", pri_q);
	ck_assert_msg(strstr(s.out, "\nroute       NULL\n"), "%s", s.out);

	/* With the relay's routes, each is judged for its own target. */
	state(c, before, sizeof(before));
	DEAD(&s, "replay", pri_q, pri_col, gone, pri_empty, pri_default, "--route", cel, "--route", shard, "--dry-run");
	ck_assert_msg(s.status == 1, "%s%s", s.out, s.err);
	ck_assert_msg(
		strstr(s.out,
		       "it would be dead-lettered again: options key \"priority\" is not an integer from 0 to 9;"),
		"%s", s.out);
	{
		char line[200];

		snprintf(line, sizeof(line),
			 "not moved dead_id %s: it would be dead-lettered again: options key \"priority\"", pri_col);
		ck_assert_msg(strstr(s.out, line), "%s", s.out);
		snprintf(
			line, sizeof(line),
			"not moved dead_id %s: it would be dead-lettered again: route \"shard3\" is not a route of this relay (--route);",
			gone);
		ck_assert_msg(strstr(s.out, line), "%s", s.out);
		snprintf(line, sizeof(line), "would move dead_id %s: ", pri_empty);
		ck_assert_msg(strstr(s.out, line), "%s", s.out);
		snprintf(line, sizeof(line), "would move dead_id %s: ", pri_default);
		ck_assert_msg(strstr(s.out, line), "%s", s.out);
	}
	ck_assert_msg(strstr(s.out, "would move 2 of 5 dead-lettered jobs\n"), "%s", s.out);
	/* Without the routes, a row naming one fails the check too. */
	DEAD(&s, "replay", pri_col, "--dry-run");
	ck_assert_int_eq(s.status, 1);
	ck_assert_msg(strstr(s.out, "route \"cel\" is not a route of this relay (--route)"), "%s", s.out);

	/* A route to set must be one of the settings' (or default): a usage error. */
	DEAD(&s, "replay", gone, "--set-route", "shard3", "--route", shard);
	one_error(&s, 2, "--set-route \"shard3\" is not a route of these settings");
	DEAD(&s, "replay", gone, "--set-route", "shard2", "--unset-route", "--route", shard);
	one_error(&s, 2, "not both");
	DEAD(&s, "replay", gone, "--set-route", "bad name!", "--route", shard);
	one_error(&s, 2, "--set-route");
	state(c, after, sizeof(after));
	ck_assert_str_eq(before, after);

	/* Corrected on the way, by the admin role: the route it goes to now. */
	h_sql(c, "DROP ROLE IF EXISTS sd_dead_admin");
	h_sql(c, "CREATE ROLE sd_dead_admin LOGIN IN ROLE stagedrain_admin");
	snprintf(admin_url, sizeof(admin_url), "host=127.0.0.1 port=%s dbname=postgres user=sd_dead_admin", PQport(c));
	dead_as(&s, admin_url,
		(const char *const[]){ "replay", gone, "--set-route", "shard2", "--route", shard, NULL });
	ck_assert_msg(s.status == 0, "%s%s", s.out, s.err);
	ck_assert_msg(strstr(s.out, ", route shard2\n"), "%s", s.out);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs WHERE route = 'shard2' AND args::text = '[3]'"), 1);
	/* Fixed by an option edit, checked as celery. */
	DEAD(&s, "replay", pri_q, pri_col, "--unset-option", "priority", "--route", cel, "--route", shard);
	ck_assert_msg(s.status == 0, "%s%s", s.out, s.err);
	/* Cleared: the rules pick by queue (tasks: celery, which refuses 12 ...). */
	DEAD(&s, "replay", pri_default, "--unset-route", "--route", cel, "--route", shard, "--dry-run");
	ck_assert_int_eq(s.status, 1);
	ck_assert_msg(strstr(s.out, "options key \"priority\" is not an integer from 0 to 9"), "%s", s.out);
	/* ... and default keeps it on the sidekiq target. */
	DEAD(&s, "replay", pri_default, pri_empty, "--set-route", "default", "--route", cel, "--route", shard);
	ck_assert_msg(s.status == 0, "%s%s", s.out, s.err);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs WHERE route = 'default'"), 2);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 0);

	/* The relay delivers each where the check said, and dead-letters none. */
	{
		const char *args[] = { "--once", "--route", cel, "--route", shard, NULL };
		ck_assert_int_eq(h_relay_run("dead-routes-replayed", args), 0);
	}
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 1); /* by the rules, as its '' route says */
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:tasks"), 1);   /* by its route, default */
	freeReplyObject(h_cmd(r, "SELECT 3"));
	ck_assert_int_eq(h_cmd_int(r, "LLEN tasks"), 1);
	ck_assert_int_eq(h_cmd_int(r, "LLEN default"), 1);
	freeReplyObject(h_cmd(r, "FLUSHDB"));
	freeReplyObject(h_cmd(r, "SELECT 4"));
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 1);
	freeReplyObject(h_cmd(r, "FLUSHDB"));
	redisFree(r);
	PQfinish(c);
}
END_TEST

/* Redis's own limit back to its default, whatever the test did. */
static void restore_redis(void)
{
	redisContext *r = h_redis();

	freeReplyObject(h_cmd(r, "CONFIG SET proto-max-bulk-len 512mb"));
	redisFree(r);
}

/* The one reason the relay's checks cannot see coming: Redis refused the job
 * (here it is over Redis's proto-max-bulk-len). Once Redis takes it, the
 * replay moves it and the relay delivers it, with its jid. */
START_TEST(a_job_redis_refused_is_replayed_once_redis_takes_it)
{
	PGconn *c = h_pg();
	redisContext *r = h_redis();
	struct said s;
	char jid[32], dead_id[24];
	json_t *jobs;

	freeReplyObject(h_cmd(r, "CONFIG SET proto-max-bulk-len 1mb"));
	h_sql(c, "INSERT INTO staged_jobs (job_class, args) VALUES ('Good', '[1]'),"
		 " ('TooBig', jsonb_build_array(repeat('x', 1100000))), ('Good', '[2]')");
	h_sql_text(c, "SELECT jid FROM staged_jobs WHERE job_class = 'TooBig'", jid, sizeof(jid));
	relay_once("refused-first", "4M");
	ck_assert_int_eq(h_cmd_int(r, "LLEN queue:default"), 2);
	DEAD(&s, "list", "--reason", "redis refused it");
	ck_assert_int_eq(lines(s.out), 2);
	snprintf(dead_id, sizeof(dead_id), "%lld", dead_id_of(c, "job_class = 'TooBig'"));
	restore_redis();
	DEAD(&s, "replay", dead_id, "--max-job-bytes", "4M");
	ck_assert_msg(s.status == 0, "%s%s", s.out, s.err);
	relay_once("refused-replayed", "4M");
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead"), 0);
	jobs = h_list_jobs(r, "queue:default");
	ck_assert_int_eq(json_array_size(jobs), 3);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(jobs, 0), "jid")), jid);
	json_decref(jobs);
	redisFree(r);
	PQfinish(c);
}
END_TEST

/* A row's text cannot play tricks on a terminal: control characters print as
 * escapes, in the table and in show; JSON escapes them its own way. */
START_TEST(control_characters_print_visibly)
{
	PGconn *c = h_pg();
	struct said s;

	h_sql(c, "INSERT INTO staged_jobs_dead (id, queue, job_class, args, options, created_at, jid, reason)"
		 " VALUES (1, E'ev\\x1b[2Jil\\nq', E'K\\tC', '[]', '{}', now(), 'aaaaaaaaaaaaaaaaaaaaaaaa',"
		 " E'why\\rnot \u00e9')");
	DEAD(&s, "list");
	ck_assert_int_eq(s.status, 0);
	ck_assert_msg(strstr(s.out, "ev\\u001b[2Jil\\nq  K\\tC   why\\rnot \u00e9  []\n"), "%s", s.out);
	ck_assert_ptr_null(strchr(s.out, '\x1b'));
	ck_assert_ptr_null(strchr(s.out, '\r'));
	DEAD(&s, "show", "1");
	ck_assert(strstr(s.out, "queue       ev\\u001b[2Jil\\nq\n"));
	ck_assert_ptr_null(strchr(s.out, '\x1b'));
	PQfinish(c);
}
END_TEST

/* The text rules alone (no server): characters, not bytes, are counted and cut. */
START_TEST(visible_text_and_ages)
{
	static const struct {
		const char *in;
		size_t max;
		const char *out;
		size_t width;
	} cases[] = {
		{ "h\xc3\xa9llo", 2, "h\xc3\xa9...", 5 }, /* a two-byte character is not split */
		{ "a\xff"
		  "b",
		  0, "a\\xffb", 6 }, /* not utf-8: the byte's value */
		{ "a\xc2\x85"
		  "b",
		  0, "a\\u0085b", 8 }, /* C1 control (NEL) */
		{ "\x1b[31m\t\r\n", 0, "\\u001b[31m\\t\\r\\n", 16 },
		{ "\xe2\x82\xac", 1, "\xe2\x82\xac", 1 },     /* exactly max: no dots */
		{ "\xed\xa0\x80", 0, "\\xed\\xa0\\x80", 12 }, /* a surrogate is not utf-8 */
	};
	char age[16];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct buf b;
		size_t w = 0;

		buf_init(&b);
		ck_assert_int_eq(dead_text_visible(&b, cases[i].in, strlen(cases[i].in), cases[i].max, &w), 0);
		ck_assert_int_eq(b.len, strlen(cases[i].out));
		ck_assert_msg(memcmp(b.data, cases[i].out, b.len) == 0, "case %zu: %.*s", i, (int)b.len, b.data);
		ck_assert_uint_eq(w, cases[i].width);
		buf_free(&b);
	}
	dead_text_age(59, age, sizeof(age));
	ck_assert_str_eq(age, "59s");
	dead_text_age(60, age, sizeof(age));
	ck_assert_str_eq(age, "1m");
	dead_text_age(7199, age, sizeof(age));
	ck_assert_str_eq(age, "1h");
	dead_text_age(5 * 86400 + 1, age, sizeof(age));
	ck_assert_str_eq(age, "5d");
	dead_text_age(-3, age, sizeof(age));
	ck_assert_str_eq(age, "0s");
}
END_TEST

START_TEST(help_prints_the_usage)
{
	struct said s;

	DEAD(&s, "-h");
	ck_assert_int_eq(s.status, 0);
	ck_assert(strstr(s.out, "usage: stagedrain dead purge --older-than SPAN [--dry-run]\n"));
	DEAD(&s, "replay", "-h");
	ck_assert_int_eq(s.status, 0);
	ck_assert(strncmp(s.out, "usage: stagedrain dead replay ", 30) == 0);
}
END_TEST

Suite *dead_suite(void)
{
	Suite *s = suite_create("dead");
	TCase *tc = tcase_create("dead");
	TCase *refused = tcase_create("refused");
	TCase *text = tcase_create("text");

	tcase_add_checked_fixture(tc, h_reset, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, every_reason_is_listed_replayed_after_a_fix_and_delivered_once);
	tcase_add_test(tc, a_broken_row_stays_unless_forced_and_a_dry_run_changes_nothing);
	tcase_add_test(tc, purge_deletes_by_age);
	tcase_add_test(tc, replays_racing_the_relay_and_each_other_lose_and_duplicate_nothing);
	tcase_add_test(tc, bad_input_says_one_line_and_changes_nothing);
	tcase_add_test(tc, control_characters_print_visibly);
	tcase_add_test(tc, help_prints_the_usage);
	tcase_add_test(tc, replay_checks_each_row_for_its_target_and_corrects_its_route);
	suite_add_tcase(s, tc);
	tcase_add_test(text, visible_text_and_ages);
	suite_add_tcase(s, text);
	tcase_add_checked_fixture(refused, h_reset, restore_redis);
	tcase_set_timeout(refused, 120);
	tcase_add_test(refused, a_job_redis_refused_is_replayed_once_redis_takes_it);
	suite_add_tcase(s, refused);
	return s;
}
