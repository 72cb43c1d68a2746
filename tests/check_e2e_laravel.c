/* End to end for --format laravel against real servers: what the relay pushes
 * for a hand-written Class@method row is compared byte for byte with what
 * PHP's json_encode writes for Laravel 10-12's layout, rebuilt from their
 * source (tests/e2e/laravel_payload.php), and a payload clients/php staged
 * reaches Redis as written. A real Laravel 8 worker runs both kinds in
 * clients/php's own end-to-end tests. */
#include "fmacros.h"

#include <check.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "suites.h"

#define PREFIX "e2e_database_"

struct staged {
	const char *uuid, *queue, *job_class, *args, *options, *run_at;
	bool php_same; /* PHP's re-encoding of the data is the relay's copy */
};

/* Two queues, immediate and scheduled rows, options, escapes, and numbers
 * that PHP would re-encode (json_decode gives the handler the same values). */
static const struct staged rows[] = {
	{ "11111111-1111-4111-8111-111111111111", "default", "App\\Jobs\\SendReceipt@handle",
	  "[42, \"a/b\", {\"k\": \"\xc3\xa9\", \"n\": [2, -3]}, null, [], true]", "{}", NULL, true },
	{ "22222222-2222-4222-8222-222222222222", "emails", "App\\Mail\\Digest@send",
	  "[\"x\xe2\x80\xa8y\", {\"url\": \"https://example.com/a?b=1\", \"t\": \"tab\\there\"}]",
	  "{\"maxTries\": 3, \"backoff\": [10, 60], \"failOnTimeout\": true}", NULL, true },
	{ "33333333-3333-4333-8333-333333333333", "default", "App\\Jobs\\Ping", "[]", "{}", NULL, true },
	{ "44444444-4444-4444-8444-444444444444", "default", "App\\Jobs\\Later@handle", "[\"later\"]", "{}",
	  "2100-01-01 00:00:00.75+00", true },
	{ "55555555-5555-4555-8555-555555555555", "emails", "App\\Jobs\\Numbers@handle",
	  "[1.0, 1.50, 12345678901234567890, 1e2, {\"0\": \"a\"}, {}]", "{\"timeout\": 30}", NULL, false },
	{ "66666666-6666-4666-8666-666666666666", "emails", "App\\Jobs\\Later@handle", "[1]", "{}",
	  "2100-01-02 00:00:00+00", true },
};

#define NROWS (sizeof(rows) / sizeof(rows[0]))

/* One row: uuid, queue, job_class, args, options, run_at (NULL: none). */
static void stage_row(PGconn *c, const char *const p[6])
{
	PGresult *res = PQexecParams(c,
				     "INSERT INTO staged_jobs (uuid, queue, job_class, args, options, run_at)"
				     " VALUES ($1, $2, $3, $4, $5, $6)",
				     6, NULL, p, NULL, NULL, 0);

	ck_assert_msg(PQresultStatus(res) == PGRES_COMMAND_OK, "%s", PQerrorMessage(c));
	PQclear(res);
}

static void stage_rows(PGconn *c)
{
	for (size_t i = 0; i < NROWS; i++)
		stage_row(c, (const char *const[6]){ rows[i].uuid, rows[i].queue, rows[i].job_class, rows[i].args,
						     rows[i].options, rows[i].run_at });
	/* Laravel has no "tries" key: the row is dead-lettered, not pushed. */
	h_sql(c,
	      "INSERT INTO staged_jobs (queue, job_class, options) VALUES ('default', 'Bad@handle', '{\"tries\": 3}')");
}

/* Runs tests/e2e/laravel_payload.php with args; its one line of output (caller frees). */
static char *php(const char *const *args)
{
	char script[PATH_MAX], out[PATH_MAX + 32];
	const char *argv[8] = { "php", script };
	size_t n = 2, len;
	char *text;
	FILE *f;

	ck_assert_ptr_nonnull(realpath("tests/e2e/laravel_payload.php", script));
	for (; *args && n < 7; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	snprintf(out, sizeof(out), "%s/php.out", h_env("TEST_DIR"));
	ck_assert_int_eq(proc_run(argv, out, 30000), 0);
	f = fopen(out, "rb");
	ck_assert_ptr_nonnull(f);
	text = calloc(1, 1 << 16);
	ck_assert_ptr_nonnull(text);
	len = fread(text, 1, (1 << 16) - 1, f);
	fclose(f);
	ck_assert_msg(len > 0 && text[len - 1] == '\n', "php printed: %s", text);
	text[len - 1] = '\0';
	return text;
}

static const struct staged *row_of(const char *payload)
{
	const char *u = strstr(payload, "\"uuid\":\"");

	ck_assert_ptr_nonnull(u);
	for (size_t i = 0; i < NROWS; i++)
		if (strncmp(u + 8, rows[i].uuid, 36) == 0)
			return &rows[i];
	ck_abort_msg("payload of no staged row: %s", payload);
	return NULL;
}

/* The id: the uuid's 32 hex digits. */
static void id_of(const char *uuid, char id[33])
{
	size_t n = 0;

	for (; *uuid; uuid++)
		if (*uuid != '-')
			id[n++] = *uuid;
	id[n] = '\0';
}

/* The data part of a payload, from "data": to ,"id": (as text). */
static void data_of(const char *payload, char *out, size_t len)
{
	const char *from = strstr(payload, ",\"data\":"), *to = strstr(payload, ",\"id\":\"");

	ck_assert_ptr_nonnull(from);
	ck_assert_ptr_nonnull(to);
	from += strlen(",\"data\":");
	snprintf(out, len, "%.*s", (int)(to - from), from);
}

/* Compares the relay's payload with PHP's for its row; the args as the
 * json column holds them are what both encode. */
static void check_payload(PGconn *c, const char *payload, char *fired, size_t len)
{
	const struct staged *s = row_of(payload);
	char id[33], args[1024], data[1024], sql[256];
	char *want, *fire;

	id_of(s->uuid, id);
	snprintf(sql, sizeof(sql), "SELECT args::text FROM staged_jobs_log WHERE uuid = '%s'", s->uuid);
	h_sql_text(c, sql, args, sizeof(args));
	want = php((const char *const[]){ s->uuid, id, s->job_class, args, s->options, NULL });
	if (s->php_same) {
		ck_assert_msg(strcmp(payload, want) == 0, "relay pushed\n  %s\nPHP writes\n  %s", payload, want);
	} else {
		/* Numbers as the app wrote them; PHP re-encodes 1.0 as 1, a big
		 * integer as a float, 1e2 as 100, and {"0": "a"}, {} (decoded to PHP arrays) as lists. */
		data_of(payload, data, sizeof(data));
		ck_assert_str_eq(data, "[1.0,1.50,12345678901234567890,1e2,{\"0\":\"a\"},{}]");
		data_of(want, data, sizeof(data));
		ck_assert_str_eq(data, "[1,1.5,1.2345678901234567e+19,100,[\"a\"],[]]");
	}
	/* What Job::fire() does with it: the class, the method, and $data
	 * equal (===) to json_decode of the column's args. */
	fire = php((const char *const[]){ "--fire", payload, args, NULL });
	snprintf(fired, len, "%s", fire);
	free(want);
	free(fire);
}

/* Every payload of a list or zset, checked, with what fire() made of each. */
static void check_key(PGconn *c, redisContext *r, const char *verb, const char *key, const char *const *fires, size_t n)
{
	redisReply *rep = h_cmd(r, "%s %s 0 -1", verb, key);
	char fired[512];

	ck_assert_uint_eq(rep->elements, n);
	for (size_t i = 0; i < n; i++) {
		check_payload(c, rep->element[i]->str, fired, sizeof(fired));
		ck_assert_str_eq(fired, fires[i]);
	}
	freeReplyObject(rep);
}

START_TEST(payloads_match_php_byte_for_byte)
{
	static const char *const argv[] = { "--once", "--format", "laravel", "--laravel-prefix", PREFIX, NULL };
	PGconn *c;
	redisContext *r;

	h_reset();
	c = h_pg();
	r = h_redis();
	/* The relay deletes what it pushed: keep a copy of the rows to compare with. */
	stage_rows(c);
	h_sql(c, "DROP TABLE IF EXISTS staged_jobs_log");
	h_sql(c, "CREATE TABLE staged_jobs_log AS SELECT * FROM staged_jobs");
	ck_assert_int_eq(h_relay_run("relay-laravel", argv), 0);

	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE job_class = 'Bad@handle'"
				  " AND reason LIKE '%%\"tries\" is not one laravel reads%%'"),
			 1);
	/* FIFO per queue; a job named without a method runs fire(). */
	check_key(c, r, "LRANGE", PREFIX "queues:default",
		  (const char *const[]){ "App\\Jobs\\SendReceipt handle same", "App\\Jobs\\Ping fire same" }, 2);
	check_key(c, r, "LRANGE", PREFIX "queues:emails",
		  (const char *const[]){ "App\\Mail\\Digest send same", "App\\Jobs\\Numbers handle same" }, 2);
	check_key(c, r, "ZRANGE", PREFIX "queues:default:delayed",
		  (const char *const[]){ "App\\Jobs\\Later handle same" }, 1);
	check_key(c, r, "ZRANGE", PREFIX "queues:emails:delayed",
		  (const char *const[]){ "App\\Jobs\\Later handle same" }, 1);
	/* One notify per pushed job; scheduled ones notify when the worker moves them. */
	ck_assert_int_eq(h_cmd_int(r, "LLEN %s", PREFIX "queues:default:notify"), 2);
	ck_assert_int_eq(h_cmd_int(r, "LLEN %s", PREFIX "queues:emails:notify"), 2);
	ck_assert_int_eq(h_cmd_int(r, "EXISTS %s", PREFIX "queues:default:delayed:notify"), 0);
	/* Laravel's availableAt: whole seconds (the .75 truncated, as getTimestamp() does). */
	redisReply *z = h_cmd(r, "ZRANGE %s 0 -1 WITHSCORES", PREFIX "queues:default:delayed");
	ck_assert_uint_eq(z->elements, 2);
	ck_assert_str_eq(z->element[1]->str, "4102444800");
	freeReplyObject(z);
	z = h_cmd(r, "ZRANGE %s 0 -1 WITHSCORES", PREFIX "queues:emails:delayed");
	ck_assert_uint_eq(z->elements, 2);
	ck_assert_str_eq(z->element[1]->str, "4102531200");
	freeReplyObject(z);
	/* Nothing written outside the prefix but the relay's own keys. */
	ck_assert_int_eq(h_cmd_int(r, "EXISTS queues:default"), 0);
	h_sql(c, "DROP TABLE staged_jobs_log");
	redisFree(r);
	PQfinish(c);
}
END_TEST

/* A payload as clients/php stages it: Laravel's createPayload output (a
 * protected property's NULs as \u0000), the row's args [payload]. */
#define BUILT_UUID "77777777-7777-4777-8777-777777777777"
#define BUILT(id)                                                                                                      \
	"{\"uuid\":\"" BUILT_UUID "\",\"displayName\":\"App\\\\Jobs\\\\Send\",\"job\":\"Illuminate\\\\Queue\\\\"       \
	"CallQueuedHandler@call\",\"data\":{\"commandName\":\"App\\\\Jobs\\\\Send\",\"command\":\"O:13:\\\"App\\\\"    \
	"Jobs\\\\Send\\\":1:{s:4:\\\"\\u0000*\\u0000a\\\";s:3:\\\"a\\/b\\\";}\"},\"id\":\"" id "\",\"attempts\":0}"

static void stage_built(PGconn *c, const char *uuid, const char *payload, const char *run_at)
{
	json_t *a = json_pack("[s]", payload);
	char *args = json_dumps(a, JSON_ENCODE_ANY);
	stage_row(c,
		  (const char *const[6]){ uuid, "default", "App\\Jobs\\Send", args, "{\"serialized\": true}", run_at });
	free(args);
	json_decref(a);
}

/* What the framework built reaches the queue byte for byte, a delayed one its
 * zset; a payload the worker could not pop is dead-lettered, the drain going on. */
START_TEST(built_payloads_reach_redis_as_written)
{
	static const char *const argv[] = { "--once", "--format", "laravel", "--laravel-prefix", PREFIX, NULL };
	PGconn *c;
	redisContext *r;
	redisReply *rep;

	h_reset();
	c = h_pg();
	r = h_redis();
	stage_built(c, BUILT_UUID, BUILT("now"), NULL);
	stage_built(c, "88888888-8888-4888-8888-888888888888", "{\"job\":\"A@b\"}", NULL);
	/* Redis' cjson reads 1e400 (jsonb writes its 401 digits) as inf and
	 * cannot encode the popped job again. */
	h_sql(c, "INSERT INTO staged_jobs (queue, job_class, args) VALUES ('default', 'Big@handle', '[1e400]')");
	stage_built(c, BUILT_UUID, BUILT("later"), "2100-01-01 00:00:00+00");
	ck_assert_int_eq(h_relay_run("relay-laravel-built", argv), 0);

	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs"), 0);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE reason LIKE "
				  "'%%payload''s \"displayName\" is not the row''s job_class%%'"),
			 1);
	ck_assert_int_eq(h_sql(c, "SELECT count(*) FROM staged_jobs_dead WHERE job_class = 'Big@handle'"
				  " AND reason LIKE '%%is past a double''s range%%'"),
			 1);
	rep = h_cmd(r, "LRANGE %s 0 -1", PREFIX "queues:default");
	ck_assert_uint_eq(rep->elements, 1);
	ck_assert_str_eq(rep->element[0]->str, BUILT("now"));
	freeReplyObject(rep);
	ck_assert_int_eq(h_cmd_int(r, "LLEN %s", PREFIX "queues:default:notify"), 1);
	rep = h_cmd(r, "ZRANGE %s 0 -1 WITHSCORES", PREFIX "queues:default:delayed");
	ck_assert_uint_eq(rep->elements, 2);
	ck_assert_str_eq(rep->element[0]->str, BUILT("later"));
	ck_assert_str_eq(rep->element[1]->str, "4102444800");
	freeReplyObject(rep);
	redisFree(r);
	PQfinish(c);
}
END_TEST

Suite *laravel_e2e_suite(void)
{
	Suite *s = suite_create("laravel_e2e");
	TCase *t = tcase_create("php");

	tcase_set_timeout(t, 120);
	tcase_add_test(t, payloads_match_php_byte_for_byte);
	tcase_add_test(t, built_payloads_reach_redis_as_written);
	suite_add_tcase(s, t);
	return s;
}
