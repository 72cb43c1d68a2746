/* The laravel format: whole payloads byte for byte as PHP's json_encode writes
 * Laravel's layout, the options it maps, its rejects, and a batch's commands. */
#include "fmacros.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "buf.h"
#include "formats.h"
#include "job.h"
#include "job_build.h"
#include "redis_cmds.h"
#include "suites.h"
#include "support/job_rows.h"

#define UUID "0f8fad5b-d9cb-469f-a165-70867728950e"
#define ID "0f8fad5bd9cb469fa16570867728950e"
#define NOW_US 1700000000000000LL

/* The keys between job and data when no option is set. */
#define DEFAULTS "\"maxTries\":null,\"maxExceptions\":null,\"failOnTimeout\":false,\"backoff\":null,\"timeout\":null"
#define TAIL ",\"id\":\"" ID "\",\"attempts\":0}"

static struct job_opts laravel_opts(void)
{
	struct job_opts o = { .format = FORMAT_LARAVEL, .max_job_bytes = 1 << 20, .now_us = NOW_US };

	return o;
}

static struct job_row laravel_row(const char *job_class, const char *args, const char *options)
{
	struct job_row r = job_row_of("default", job_class, args, options);

	r.uuid = UUID;
	r.uuid_len = strlen(UUID);
	r.created_at_us = NOW_US;
	return r;
}

/* The row's whole payload, built for a target with prefix (NULL: none
 * checked), must be want, byte for byte. */
static void assert_payload_for(const struct job_row *r, const char *prefix, const char *want)
{
	struct job_opts o = laravel_opts();
	char reason[JOB_REASON_SIZE];
	struct job_out out;
	struct buf b;
	int rc;

	o.key_prefix = prefix;
	buf_init(&b);
	rc = job_build(r, &o, &b, &out, reason, sizeof(reason));
	ck_assert_msg(rc == 0, "job_build returned %d: %s", rc, reason);
	ck_assert_msg(out.len == strlen(want) && memcmp(b.data + out.off, want, out.len) == 0,
		      "payload\n  %.*s\nwanted\n  %s", (int)out.len, b.data + out.off, want);
	buf_free(&b);
}

static void assert_payload(const struct job_row *r, const char *want)
{
	assert_payload_for(r, NULL, want);
}

/* The row, built for a target with prefix, must be dead-lettered with a
 * reason that contains want. */
static void assert_reject_for(const struct job_row *r, const char *prefix, const char *want)
{
	struct job_opts o = laravel_opts();
	char reason[JOB_REASON_SIZE];
	struct job_out out;
	struct buf b;

	o.key_prefix = prefix;
	buf_init(&b);
	ck_assert_int_eq(job_build(r, &o, &b, &out, reason, sizeof(reason)), JOB_REJECT);
	ck_assert_msg(strstr(reason, want) != NULL, "reason \"%s\" does not say \"%s\"", reason, want);
	ck_assert_uint_eq(b.len, 0);
	buf_free(&b);
}

static void assert_reject(const struct job_row *r, const char *want)
{
	assert_reject_for(r, NULL, want);
}

/* Compared with what tests/e2e/laravel_payload.php prints for the same job:
 * "/" as "\/", "é" raw, numbers as jsonb wrote them, nested data compact. */
START_TEST(writes_laravels_layout)
{
	struct job_row r = laravel_row("App\\Jobs\\SendReceipt@handle",
				       "[1, \"a/b\", {\"k\": \"\xc3\xa9\", \"n\": [2, -3]}, null, [], true]", NULL);

	assert_payload(&r, "{\"uuid\":\"" UUID "\",\"displayName\":\"App\\\\Jobs\\\\SendReceipt\","
			   "\"job\":\"App\\\\Jobs\\\\SendReceipt@handle\"," DEFAULTS ","
			   "\"data\":[1,\"a\\/b\",{\"k\":\"\xc3\xa9\",\"n\":[2,-3]},null,[],true]" TAIL);
}
END_TEST

/* Job::fire() calls fire() on a job named without a method. */
START_TEST(class_without_method_is_its_own_display_name)
{
	struct job_row r = laravel_row("App\\Jobs\\Ping", "[]", NULL);

	assert_payload(&r, "{\"uuid\":\"" UUID "\",\"displayName\":\"App\\\\Jobs\\\\Ping\","
			   "\"job\":\"App\\\\Jobs\\\\Ping\"," DEFAULTS ",\"data\":[]" TAIL);
}
END_TEST

/* json_encode's escapes, which jansson's writer does not share: lowercase
 * \u0001, and U+2028 escaped even with JSON_UNESCAPED_UNICODE. The args are
 * in jsonb's text form, which leaves U+2028 raw. */
START_TEST(escapes_as_php_does)
{
	struct job_row r = laravel_row("App/Jobs\x01\tX\xe2\x80\xa8@run",
				       "[\"\\u001f\\n x\xe2\x80\xa8y\xe2\x80\xa9\", \"\\\"q\\\"\"]", NULL);

	assert_payload(&r, "{\"uuid\":\"" UUID "\",\"displayName\":\"App\\/Jobs\\u0001\\tX\\u2028\","
			   "\"job\":\"App\\/Jobs\\u0001\\tX\\u2028@run\"," DEFAULTS ","
			   "\"data\":[\"\\u001f\\n x\\u2028y\\u2029\",\"\\\"q\\\"\"]" TAIL);
}
END_TEST

/* The relay copies numbers as jsonb wrote them; PHP would re-encode a
 * decoded 1.0 as 1 and 12345678901234567890 as 1.2345678901234567e+19,
 * while json_decode gives the handler the same values from either. */
START_TEST(numbers_are_copied_as_written)
{
	struct job_row r = laravel_row("A@b", "[1.0, 1.50, 12345678901234567890, -0, 1e2, {\"x\": [0.1]}]", NULL);

	assert_payload(&r, "{\"uuid\":\"" UUID "\",\"displayName\":\"A\",\"job\":\"A@b\"," DEFAULTS ","
			   "\"data\":[1.0,1.50,12345678901234567890,-0,1e2,{\"x\":[0.1]}]" TAIL);
}
END_TEST

/* jsonb holds numbers of any size: in data each arrives as written; the
 * options Laravel reads as PHP ints refuse what an int cannot hold. */
START_TEST(numbers_past_64_bits_copied_as_written)
{
	/* Past 64 bits, but within a double's range (what PHP and Lua read). */
	const char *big = "18446744073709551616,-18446744073709551616,1.5e-400,-1.7976931348623157e308";
	char args[1200], want[2600];
	struct job_row r;

	snprintf(args, sizeof(args), "[%s, {\"k\": [%s]}]", big, big);
	r = laravel_row("A@b", args, "{\"maxTries\": 9223372036854775807}");
	snprintf(want, sizeof(want),
		 "{\"uuid\":\"" UUID "\",\"displayName\":\"A\",\"job\":\"A@b\",\"maxTries\":9223372036854775807,"
		 "\"maxExceptions\":null,\"failOnTimeout\":false,\"backoff\":null,\"timeout\":null,"
		 "\"data\":[%s,{\"k\":[%s]}]" TAIL,
		 big, big);
	assert_payload(&r, want);
	/* Past a double's range the worker's pop script (Redis' cjson) cannot
	 * encode the job again after its LPOP, and the job would be lost. */
	r = laravel_row("A@b", "[{\"k\": [1e400]}]", NULL);
	assert_reject(&r, "number 1e400 is past a double's range");
	r = laravel_row("A@b", "[-1E+309]", NULL);
	assert_reject(&r, "number -1E+309 is past a double's range");
	r = laravel_row("A@b", "[]", "{\"maxTries\": 9223372036854775808}");
	assert_reject(&r, "options key \"maxTries\" is not a non-negative integer");
	r = laravel_row("A@b", "[]", "{\"timeout\": 18446744073709551616}");
	assert_reject(&r, "options key \"timeout\" is not a non-negative integer");
	r = laravel_row("A@b", "[]", "{\"backoff\": [1, 18446744073709551616]}");
	assert_reject(&r, "options key \"backoff\" is not a non-negative integer or a non-empty array");
	r = laravel_row("A@b", "[]", "{\"backoff\": 1e400}");
	assert_reject(&r, "options key \"backoff\" is not a non-negative integer or a non-empty array");
}
END_TEST

START_TEST(maps_the_job_options)
{
	struct job_row all = laravel_row("A@b", "[]",
					 "{\"timeout\": 60, \"backoff\": [10, 20, 30], \"maxTries\": 3, "
					 "\"failOnTimeout\": true, \"maxExceptions\": 0}");
	struct job_row one = laravel_row("A@b", "[]", "{\"backoff\": 5, \"timeout\": null}");

	/* Laravel's key order whatever the options' order; backoff imploded. */
	assert_payload(&all, "{\"uuid\":\"" UUID "\",\"displayName\":\"A\",\"job\":\"A@b\",\"maxTries\":3,"
			     "\"maxExceptions\":0,\"failOnTimeout\":true,\"backoff\":\"10,20,30\",\"timeout\":60,"
			     "\"data\":[]" TAIL);
	assert_payload(&one, "{\"uuid\":\"" UUID "\",\"displayName\":\"A\",\"job\":\"A@b\",\"maxTries\":null,"
			     "\"maxExceptions\":null,\"failOnTimeout\":false,\"backoff\":\"5\",\"timeout\":null,"
			     "\"data\":[]" TAIL);
}
END_TEST

START_TEST(rejects_options_laravel_does_not_read)
{
	static const struct {
		const char *options, *reason;
	} cases[] = {
		{ "{\"tries\": 3}", "options key \"tries\" is not one laravel reads" },
		{ "{\"retryUntil\": 1700000000}", "options key \"retryUntil\" is not one laravel reads" },
		{ "{\"maxTries\": -1}", "options key \"maxTries\" is not a non-negative integer" },
		{ "{\"maxTries\": 1.5}", "options key \"maxTries\" is not a non-negative integer" },
		{ "{\"maxTries\": \"3\"}", "options key \"maxTries\" is not a non-negative integer" },
		{ "{\"timeout\": true}", "options key \"timeout\" is not a non-negative integer" },
		{ "{\"maxExceptions\": [1]}", "options key \"maxExceptions\" is not a non-negative integer" },
		{ "{\"failOnTimeout\": 1}", "options key \"failOnTimeout\" is not true or false" },
		{ "{\"backoff\": []}", "options key \"backoff\" is not a non-negative integer or a non-empty array" },
		{ "{\"backoff\": [1, \"2\"]}", "options key \"backoff\" is not a non-negative integer or a non-empty" },
		{ "{\"backoff\": \"10,20\"}", "options key \"backoff\" is not a non-negative integer or a non-empty" },
		{ "{\"activejob\": true}", "needs --format sidekiq or activejob, not laravel" },
		{ "{\"queue\": \"x\"}", "options key \"queue\" is reserved" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct job_row r = laravel_row("A@b", "[]", cases[i].options);
		assert_reject(&r, cases[i].reason);
	}
}
END_TEST

START_TEST(rejects_rows_laravel_cannot_run)
{
	struct job_row r = laravel_row("@handle", "[]", NULL);

	assert_reject(&r, "job_class \"Class@method\" has an empty class or method");
	r = laravel_row("App\\Jobs\\X@", "[]", NULL);
	assert_reject(&r, "has an empty class or method");
	r = laravel_row("A@b", "[]", NULL);
	r.uuid = NULL;
	r.uuid_len = 0;
	assert_reject(&r, "uuid is not a uuid");
	r.uuid = "0f8fad5bd9cb469fa16570867728950e0000";
	r.uuid_len = strlen(r.uuid);
	assert_reject(&r, "uuid is not a uuid");
	r.uuid = "0f8fad5b-d9cb-469f-a165-70867728950g";
	assert_reject(&r, "uuid is not a uuid");
	r.uuid = UUID;
	r.uuid_len = 35;
	assert_reject(&r, "uuid is not a uuid");
	r = laravel_row("A@b", "{\"a\": 1}", NULL);
	assert_reject(&r, "args is not a json array");
}
END_TEST

/* ---- rows clients/php staged: the payload Laravel's createPayload built ---- */

#define CMD_NAME "App\\Jobs\\SendInvoice"
/* What RedisQueue would push for a job with a protected property: the NULs
 * of its serialized name are \u0000 in the JSON text, "/" is "\/", "é" raw
 * and U+2028 escaped as json_encode(..., JSON_UNESCAPED_UNICODE) writes them. */
#define BUILT                                                                                                               \
	"{\"uuid\":\"" UUID "\",\"displayName\":\"App\\\\Jobs\\\\SendInvoice\","                                            \
	"\"job\":\"Illuminate\\\\Queue\\\\CallQueuedHandler@call\",\"maxTries\":3,\"maxExceptions\":null,"                  \
	"\"failOnTimeout\":false,\"backoff\":\"10,60\",\"timeout\":null,\"retryUntil\":null,"                               \
	"\"data\":{\"commandName\":\"App\\\\Jobs\\\\SendInvoice\",\"command\":\"O:20:\\\"App\\\\Jobs\\\\SendInvoice\\\":1:" \
	"{s:8:\\\"\\u0000*\\u0000note\\\";s:9:\\\"a\\/b \xc3\xa9\\u2028\\\";}\"},"                                          \
	"\"id\":\"Zx3kq9LmT0aBcDeFgHiJkLmNoPqRsTuV\",\"attempts\":0}"

/* The row's args: [payload] as jsonb writes it, the payload one JSON string. */
static struct job_row built_row(const char *payload, const char *options)
{
	static char args[8192];
	json_t *a = json_pack("[s]", payload);
	char *text = json_dumps(a, JSON_ENCODE_ANY);

	ck_assert_ptr_nonnull(text);
	ck_assert_uint_lt(strlen(text), sizeof(args));
	strcpy(args, text);
	free(text);
	json_decref(a);
	return laravel_row(CMD_NAME, args, options ? options : "{\"serialized\": true}");
}

/* The payload the framework built reaches Redis byte for byte. */
START_TEST(built_payload_is_pushed_as_written)
{
	struct job_row r = built_row(BUILT, NULL);

	assert_payload(&r, BUILT);
	r.run_at_us = NOW_US + 60000000;
	r.has_run_at = true;
	assert_payload(&r, BUILT);
	/* A Class@method job staged through Queue::push. */
	r = built_row("{\"uuid\":\"" UUID "\",\"displayName\":\"App\\\\Legacy\",\"job\":\"App\\\\Legacy@handle\","
		      "\"data\":{\"a\":[1,2.50,1e300]},\"id\":\"x\",\"attempts\":0}",
		      NULL);
	r.job_class = "App\\Legacy";
	r.class_len = strlen(r.job_class);
	assert_payload(&r, "{\"uuid\":\"" UUID "\",\"displayName\":\"App\\\\Legacy\",\"job\":\"App\\\\Legacy@handle\","
			   "\"data\":{\"a\":[1,2.50,1e300]},\"id\":\"x\",\"attempts\":0}");
}
END_TEST

/*
 * The prefix the Laravel client records (its app's workers read there) must
 * be the target's: a relay run with Laravel's default prefix for an app named
 * Shop would push where none of its workers read, so the row is dead-lettered
 * with a reason naming the flag. A row without the key goes as configured.
 */
START_TEST(recorded_prefix_must_be_the_targets)
{
	struct job_row r = built_row(BUILT, "{\"serialized\": true, \"laravel_prefix\": \"laravel_database_\"}");

	assert_payload_for(&r, "laravel_database_", BUILT);
	assert_payload(&r, BUILT); /* no target prefix to check against */
	r = built_row(BUILT, "{\"laravel_prefix\": \"laravel\\u005fdatabase_\", \"serialized\": true}");
	assert_payload_for(&r, "laravel_database_", BUILT);
	r = built_row(BUILT, "{\"serialized\": true, \"laravel_prefix\": \"shop_database_\"}");
	assert_reject_for(
		&r, "laravel_database_",
		"misdirected: the app's Laravel reads prefix \"shop_database_\", this relay pushes under "
		"\"laravel_database_\" (--laravel-prefix): set --laravel-prefix to the app's, then stagedrain "
		"dead replay");
	assert_reject_for(&r, "", "this relay pushes under \"\" (--laravel-prefix)");
	r = built_row(BUILT, "{\"serialized\": true, \"laravel_prefix\": \"\"}");
	assert_payload_for(&r, "", BUILT);
	r = built_row(BUILT, "{\"serialized\": true, \"laravel_prefix\": 1}");
	assert_reject_for(&r, "laravel_database_", "options key \"laravel_prefix\" is not a string");
	r = built_row(BUILT, NULL);
	assert_payload_for(&r, "elsewhere_", BUILT);
	/* A hand-written row may record it too; it is not part of the payload. */
	r = laravel_row("App\\Jobs\\A@handle", "[1]", "{\"laravel_prefix\": \"laravel_database_\"}");
	assert_payload_for(&r, "laravel_database_",
			   "{\"uuid\":\"" UUID
			   "\",\"displayName\":\"App\\\\Jobs\\\\A\",\"job\":\"App\\\\Jobs\\\\A@handle\"," DEFAULTS
			   ",\"data\":[1]" TAIL);
	assert_reject_for(&r, "shop_database_", "misdirected: the app's Laravel reads prefix \"laravel_database_\"");
}
END_TEST

/* Each way a staged payload can be wrong is dead-lettered with its reason. */
START_TEST(built_payload_rejects)
{
	static const char *const bad[][2] = {
		{ "[\"{}\", \"{}\"]", "serialized laravel args is not [payload], one string" },
		{ "[{\"job\": \"A@b\"}]", "serialized laravel args is not [payload], one string" },
		{ "[]", "serialized laravel args is not [payload], one string" },
		{ "[\"{\\\"job\\\": \"]", "payload is not json" },
		{ "[\"[1]\"]", "payload is not a json object" },
		{ "[\"{\\\"a\\\": 1, \\\"a\\\": 2}\"]", "payload is not json: duplicate object key" },
		{ "[\"{\\\"a\\\": 1} x\"]", "payload is not json" },
	};
	struct job_row r;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		r = laravel_row(CMD_NAME, bad[i][0], "{\"serialized\": true}");
		assert_reject(&r, bad[i][1]);
	}
	r = built_row(BUILT, "{\"serialized\": true, \"maxTries\": 3}");
	assert_reject(&r, "options key \"maxTries\" is not read with \"serialized\": true");
	r = built_row(BUILT, "{\"serialized\": 1}");
	assert_reject(&r, "options key \"serialized\" is not true or false");
	r = built_row(BUILT, NULL);
	r.job_class = "App\\Jobs\\Other";
	r.class_len = strlen(r.job_class);
	assert_reject(&r, "payload's \"displayName\" is not the row's job_class");
	r = built_row(BUILT, NULL);
	r.uuid = "11111111-1111-4111-8111-111111111111";
	assert_reject(&r, "payload's \"uuid\" is not the row's uuid");
}
END_TEST

/* A payload's keys that the worker reads as it pops the job. */
START_TEST(built_payload_rejects_what_the_worker_cannot_pop)
{
	static const char *const bad[][2] = {
		{ "\"job\":\"\",\"attempts\":0,\"id\":\"x\"", "payload's \"job\" is not a non-empty string" },
		{ "\"job\":1,\"attempts\":0,\"id\":\"x\"", "payload's \"job\" is not a non-empty string" },
		{ "\"job\":\"A@b\",\"id\":\"x\"", "payload's \"attempts\" is not a non-negative integer" },
		{ "\"job\":\"A@b\",\"attempts\":-1,\"id\":\"x\"",
		  "payload's \"attempts\" is not a non-negative integer" },
		{ "\"job\":\"A@b\",\"attempts\":\"0\",\"id\":\"x\"",
		  "payload's \"attempts\" is not a non-negative integer" },
		{ "\"job\":\"A@b\",\"attempts\":0.5,\"id\":\"x\"",
		  "payload's \"attempts\" is not a non-negative integer" },
		{ "\"job\":\"A@b\",\"attempts\":0", "payload's \"id\" is not a string" },
		{ "\"job\":\"A@b\",\"attempts\":0,\"id\":7", "payload's \"id\" is not a string" },
		{ "\"job\":\"A@b\",\"attempts\":0,\"id\":\"x\",\"data\":[1e400]",
		  "number 1e400 is past a double's range" },
	};
	char payload[512];
	struct job_row r;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(payload, sizeof(payload),
			 "{\"uuid\":\"" UUID "\",\"displayName\":\"App\\\\Jobs\\\\SendInvoice\",%s}", bad[i][0]);
		r = built_row(payload, NULL);
		assert_reject(&r, bad[i][1]);
	}
	r = built_row("{\"displayName\":\"App\\\\Jobs\\\\SendInvoice\",\"job\":\"A@b\",\"attempts\":0,\"id\":\"x\"}",
		      NULL);
	assert_reject(&r, "payload's \"uuid\" is not the row's uuid");
	r = built_row("{\"uuid\":\"" UUID "\",\"job\":\"A@b\",\"attempts\":0,\"id\":\"x\"}", NULL);
	assert_reject(&r, "payload's \"displayName\" is not the row's job_class");
}
END_TEST

/* PHP's json_decode($payload, true) reads 511 levels (its default depth is
 * 512): the worker would decode a deeper payload as null. */
START_TEST(built_payload_depth_is_phps)
{
	static char payload[4096];
	struct job_row r;
	size_t n;

	for (int depth = 511; depth <= 512; depth++) {
		n = (size_t)snprintf(payload, sizeof(payload),
				     "{\"uuid\":\"" UUID
				     "\",\"displayName\":\"App\\\\Jobs\\\\SendInvoice\",\"job\":\"A@b\","
				     "\"attempts\":0,\"id\":\"x\",\"data\":");
		for (int i = 1; i < depth; i++)
			payload[n++] = '[';
		for (int i = 1; i < depth; i++)
			payload[n++] = ']';
		snprintf(payload + n, sizeof(payload) - n, "}");
		r = built_row(payload, NULL);
		if (depth == 511)
			assert_payload(&r, payload);
		else
			assert_reject(&r, "payload nests deeper than 511 levels");
	}
}
END_TEST

/* "serialized": false is the hand-written row (consumed, never written). */
START_TEST(not_serialized_is_the_hand_written_row)
{
	struct job_row r = laravel_row("A@b", "[1]", "{\"serialized\": false, \"maxTries\": 2}");

	assert_payload(&r, "{\"uuid\":\"" UUID "\",\"displayName\":\"A\",\"job\":\"A@b\",\"maxTries\":2,"
			   "\"maxExceptions\":null,\"failOnTimeout\":false,\"backoff\":null,\"timeout\":null,"
			   "\"data\":[1]" TAIL);
}
END_TEST

/*
 * RedisQueue keeps queue q's delayed and reserved jobs (zsets) and its
 * notify list at queues:q:delayed, queues:q:reserved and queues:q:notify:
 * a queue named q:delayed, q:reserved or q:notify would clobber them.
 */
START_TEST(rejects_queues_that_are_another_queues_keys)
{
	static const char *const bad[][2] = {
		{ "default:reserved", "queue \"default:reserved\" would clobber laravel's key "
				      "\"queues:default:reserved\" (queue \"default\"'s reserved jobs)" },
		{ "default:delayed", "laravel's key \"queues:default:delayed\" (queue \"default\"'s delayed jobs)" },
		{ "x:notify", "laravel's key \"queues:x:notify\" (queue \"x\"'s notify list)" },
		{ "a:b:reserved", "laravel's key \"queues:a:b:reserved\" (queue \"a:b\"'s reserved jobs)" },
		{ ":delayed", "laravel's key \"queues::delayed\" (queue \"\"'s delayed jobs)" },
	};
	/* Names near those, which Laravel keeps nothing at. */
	static const char *const good[] = {
		"delayed",   "reserved",   "notify",    "default:reserve", "x:delayed:y",
		"x:Delayed", "x:delayedx", "x.delayed", "emails:high",     "x:notify2",
	};
	struct job_opts o = laravel_opts();
	char reason[JOB_REASON_SIZE];
	struct job_out out;
	struct buf b;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct job_row r = laravel_row("A@handle", "[]", NULL);
		r.queue = bad[i][0];
		r.queue_len = strlen(bad[i][0]);
		assert_reject(&r, bad[i][1]);
	}
	buf_init(&b);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct job_row r = laravel_row("A@handle", "[]", NULL);
		r.queue = good[i];
		r.queue_len = strlen(good[i]);
		ck_assert_msg(job_build(&r, &o, &b, &out, reason, sizeof(reason)) == 0, "%s: %s", good[i], reason);
	}
	buf_free(&b);
}
END_TEST

/* Command k's arguments, joined by spaces, payloads shown by their job class. */
static void assert_cmd(const struct redis_cmds *c, size_t k, const char *want)
{
	char got[512] = "";
	size_t used = 0;

	ck_assert_uint_lt(k, c->ncmds);
	for (size_t a = 0; a < c->cmds[k].argc; a++) {
		size_t len;
		const char *p = cmds_arg(c, k, a, &len);
		const char *job = len > 0 && p[0] == '{' ? strstr(p, "\"displayName\":\"") : NULL;
		if (job) {
			p = job + strlen("\"displayName\":\"");
			len = strcspn(p, "\"");
		}
		used += (size_t)snprintf(got + used, sizeof(got) - used, "%s%.*s", a ? " " : "", (int)len, p);
		ck_assert_uint_lt(used, sizeof(got));
	}
	ck_assert_str_eq(got, want);
}

static void add_job(struct batch *b, long long id, const char *queue, const char *job_class, long long run_at_us)
{
	struct job_opts o = laravel_opts();
	struct job_row r = laravel_row(job_class, "[]", NULL);

	r.id = id;
	r.queue = queue;
	r.queue_len = strlen(queue);
	r.has_run_at = run_at_us != 0;
	r.run_at_us = run_at_us;
	ck_assert_int_eq(job_build_add(b, &r, &o, 0), 0);
	ck_assert_uint_eq(b->ndead, 0);
}

/* Queues in order of their first job, FIFO within each, one notify per
 * pushed job, scheduled jobs in :delayed at whole seconds without a notify. */
START_TEST(batch_commands)
{
	struct redis_cmds c;
	struct batch b;

	batch_init(&b);
	cmds_init(&c);
	ck_assert_int_eq(batch_reset(&b, 6), 0);
	add_job(&b, 1, "default", "A@handle", 0);
	add_job(&b, 2, "emails", "B@handle", 0);
	add_job(&b, 3, "default", "C@handle", NOW_US + 99900000);
	add_job(&b, 4, "default", "D@handle", NOW_US - 1);
	add_job(&b, 5, "emails", "E@handle", NOW_US + 3600000000LL);
	add_job(&b, 6, "default", "F@handle", NOW_US + 99000000);
	ck_assert_int_eq(format_laravel.commands(&c, &b, "app_database_"), 0);
	ck_assert_uint_eq(c.ncmds, 6);
	assert_cmd(&c, 0, "RPUSH app_database_queues:default A D");
	assert_cmd(&c, 1, "RPUSH app_database_queues:emails B");
	assert_cmd(&c, 2, "RPUSH app_database_queues:default:notify 1 1");
	assert_cmd(&c, 3, "RPUSH app_database_queues:emails:notify 1");
	assert_cmd(&c, 4, "ZADD app_database_queues:default:delayed 1700000099 C 1700000099 F");
	assert_cmd(&c, 5, "ZADD app_database_queues:emails:delayed 1700003600 E");
	cmds_free(&c);
	batch_free(&b);
}
END_TEST

/* A batch of scheduled jobs only notifies nothing; an empty prefix is none. */
START_TEST(scheduled_jobs_do_not_notify)
{
	struct redis_cmds c;
	struct batch b;

	batch_init(&b);
	cmds_init(&c);
	ck_assert_int_eq(batch_reset(&b, 2), 0);
	add_job(&b, 1, "default", "A@handle", NOW_US + 1000000);
	add_job(&b, 2, "default", "B@handle", NOW_US + 2500000);
	ck_assert_int_eq(format_laravel.commands(&c, &b, ""), 0);
	ck_assert_uint_eq(c.ncmds, 1);
	assert_cmd(&c, 0, "ZADD queues:default:delayed 1700000001 A 1700000002 B");
	cmds_free(&c);
	batch_free(&b);
}
END_TEST

/* A batch larger than one command's arguments still gets one "1" per job. */
START_TEST(long_batches_notify_every_job)
{
	enum { N = 2500 };
	size_t pushed = 0, notified = 0;
	struct redis_cmds c;
	struct batch b;

	batch_init(&b);
	cmds_init(&c);
	ck_assert_int_eq(batch_reset(&b, N), 0);
	for (long long i = 1; i <= N; i++)
		add_job(&b, i, "default", "A@handle", 0);
	ck_assert_int_eq(format_laravel.commands(&c, &b, "p_"), 0);
	for (size_t k = 0; k < c.ncmds; k++) {
		size_t len;
		const char *key = cmds_arg(&c, k, 1, &len);
		ck_assert_uint_le(c.cmds[k].argc, CMDS_MAX_ARGS);
		if (len == strlen("p_queues:default:notify") && memcmp(key, "p_queues:default:notify", len) == 0)
			notified += c.cmds[k].argc - 2;
		else if (len == strlen("p_queues:default") && memcmp(key, "p_queues:default", len) == 0)
			pushed += c.cmds[k].argc - 2;
		else
			ck_abort_msg("unexpected key %.*s", (int)len, key);
	}
	ck_assert_uint_eq(pushed, N);
	ck_assert_uint_eq(notified, N);
	cmds_free(&c);
	batch_free(&b);
}
END_TEST

Suite *laravel_format_suite(void)
{
	Suite *s = suite_create("laravel_format");
	TCase *payload = tcase_create("payload");
	TCase *options = tcase_create("options");
	TCase *commands = tcase_create("commands");

	tcase_add_test(payload, writes_laravels_layout);
	tcase_add_test(payload, class_without_method_is_its_own_display_name);
	tcase_add_test(payload, escapes_as_php_does);
	tcase_add_test(payload, numbers_are_copied_as_written);
	tcase_add_test(payload, numbers_past_64_bits_copied_as_written);
	tcase_add_test(payload, rejects_rows_laravel_cannot_run);
	tcase_add_test(payload, rejects_queues_that_are_another_queues_keys);
	tcase_add_test(payload, built_payload_is_pushed_as_written);
	tcase_add_test(payload, built_payload_rejects);
	tcase_add_test(payload, built_payload_rejects_what_the_worker_cannot_pop);
	tcase_add_test(payload, built_payload_depth_is_phps);
	tcase_add_test(payload, not_serialized_is_the_hand_written_row);
	tcase_add_test(payload, recorded_prefix_must_be_the_targets);
	tcase_add_test(options, maps_the_job_options);
	tcase_add_test(options, rejects_options_laravel_does_not_read);
	tcase_add_test(commands, batch_commands);
	tcase_add_test(commands, scheduled_jobs_do_not_notify);
	tcase_add_test(commands, long_batches_notify_every_job);
	suite_add_tcase(s, payload);
	suite_add_tcase(s, options);
	suite_add_tcase(s, commands);
	return s;
}
