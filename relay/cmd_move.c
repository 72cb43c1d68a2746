/*
 * `stagedrain move --from-prefix P | --from-db N`: jobs a relay pushed under a
 * key prefix (a Sidekiq namespace, a Laravel prefix) or a database that no
 * worker reads, moved to where the relay's settings now push. Run with the
 * settings fixed: the target is the relay's default one, as configured.
 *
 * Each queue moves in one script, so a job is in one place or the other,
 * never both and never neither: its lists, in the order the workers take
 * them and ahead of jobs pushed there since (the stranded ones are older),
 * its scheduled jobs (Sidekiq's schedule, Laravel's :delayed) with their
 * times, the queue in the layout's registry (Sidekiq's and Resque's queues
 * set) and, for Laravel, one :notify entry per job, as its push writes.
 */
#include "fmacros.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_args.h"
#include "cmd_move.h"
#include "formats.h"
#include "log.h"
#include "redis_cmds.h"
#include "redis_conn.h"
#include "usage.h"
#include "values.h"

/*
 * ARGV: from db, to db, the end the workers take from (L or R), the list
 * pairs' count, the pairs (from, to), the scheduled set's pair ('' none), the
 * queue its members must name ('' any: the set is the queue's own), the
 * registry set ('' none), the queue, and Laravel's notify pair ('' none).
 * Returns {jobs listed, jobs scheduled}. SELECT inside a script stays there.
 */
static const char move_lua[] =
	"local from, to, take, n = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])\n"
	"local listed, scheduled, i = 0, 0, 5\n"
	"for k = 1, n do\n"
	"  local src, dst = ARGV[i], ARGV[i + 1]\n"
	"  i = i + 2\n"
	"  redis.call('SELECT', from)\n"
	"  local items = redis.call('LRANGE', src, 0, -1)\n"
	"  redis.call('DEL', src)\n"
	"  redis.call('SELECT', to)\n"
	/* Workers taking from the right: the moved (older) go rightmost, in
	 * their order; from the left: leftmost, pushed from the newest back. */
	"  if take == 'R' then\n"
	"    for j = 1, #items do redis.call('RPUSH', dst, items[j]) end\n"
	"  else\n"
	"    for j = #items, 1, -1 do redis.call('LPUSH', dst, items[j]) end\n"
	"  end\n"
	"  listed = listed + #items\n"
	"end\n"
	"local zsrc, zdst, only, reg, queue, nsrc, ndst = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3],"
	" ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]\n"
	"if zsrc ~= '' then\n"
	"  redis.call('SELECT', from)\n"
	"  local z = redis.call('ZRANGE', zsrc, 0, -1, 'WITHSCORES')\n"
	"  local keep = {}\n"
	"  for j = 1, #z, 2 do\n"
	"    local ok, job = pcall(cjson.decode, z[j])\n"
	"    if only == '' or (ok and type(job) == 'table' and job.queue == only) then\n"
	"      keep[#keep + 1] = {z[j + 1], z[j]}\n"
	"      redis.call('ZREM', zsrc, z[j])\n"
	"    end\n"
	"  end\n"
	"  redis.call('SELECT', to)\n"
	"  for j = 1, #keep do redis.call('ZADD', zdst, keep[j][1], keep[j][2]) end\n"
	"  scheduled = #keep\n"
	"end\n"
	"redis.call('SELECT', to)\n"
	"if reg ~= '' and listed + scheduled > 0 then redis.call('SADD', reg, queue) end\n"
	"if ndst ~= '' and listed > 0 then\n"
	"  redis.call('SELECT', from)\n"
	"  redis.call('DEL', nsrc)\n"
	"  redis.call('SELECT', to)\n"
	"  for j = 1, listed do redis.call('RPUSH', ndst, '1') end\n"
	"end\n"
	"return {listed, scheduled}\n";

/* One run: the settings, where the jobs are now, and the connection. */
struct move_cmd {
	struct cmd_args a;
	const struct config *cfg;
	const struct format *f;
	const char *from; /* the key prefix the stranded jobs' keys start with */
	int from_db;
	struct redis_conn c;
};

static int say(int status, const char *fmt, ...) SD_PRINTF(2, 3);
static int say(int status, const char *fmt, ...)
{
	va_list ap;

	fputs("stagedrain move: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(status == CMD_EXIT_USAGE ? " (see stagedrain help move)\n" : "\n", stderr);
	return status;
}

static bool takes_left(enum job_format f)
{
	return f == FORMAT_LARAVEL || f == FORMAT_RESQUE;
}

static bool has_registry(enum job_format f)
{
	return f != FORMAT_LARAVEL && f != FORMAT_CELERY;
}

/* The queue's list keys, under from and under the target's prefix. */
static int list_pairs(const struct move_cmd *m, const char *q, struct redis_cmds *from, struct redis_cmds *to)
{
	int rc = m->f->lists(from, m->from, q, strlen(q));

	return rc ? rc : m->f->lists(to, m->cfg->key_prefix, q, strlen(q));
}

/* The script's arguments for queue q, after its first four. */
static int move_args(const struct move_cmd *m, const char *q, struct redis_cmds *out)
{
	const char *p = m->from, *t = m->cfg->key_prefix;
	enum job_format f = m->cfg->format;
	struct redis_cmds from, to;
	int rc;

	cmds_init(&from);
	cmds_init(&to);
	rc = list_pairs(m, q, &from, &to);
	if (rc == 0)
		rc = cmds_begin(out, "EVAL");
	if (rc == 0)
		rc = cmds_ref(out, move_lua, sizeof(move_lua) - 1);
	if (rc == 0)
		rc = cmds_fmt(out, "0");
	if (rc == 0)
		rc = cmds_fmt(out, "%d", m->from_db);
	if (rc == 0)
		rc = cmds_fmt(out, "%d", m->cfg->redis.db);
	if (rc == 0)
		rc = cmds_fmt(out, "%s", takes_left(f) ? "L" : "R");
	if (rc == 0)
		rc = cmds_fmt(out, "%zu", from.ncmds);
	for (size_t k = 0; rc == 0 && k < from.ncmds; k++) {
		size_t a, b;
		const char *x = cmds_arg(&from, k, 1, &a), *y = cmds_arg(&to, k, 1, &b);
		if ((rc = cmds_fmt(out, "%.*s", (int)a, x)) == 0)
			rc = cmds_fmt(out, "%.*s", (int)b, y);
	}
	if (rc == 0 && (f == FORMAT_SIDEKIQ || f == FORMAT_ACTIVEJOB))
		rc = cmds_fmt(out, "%sschedule", p) || cmds_fmt(out, "%sschedule", t) || cmds_fmt(out, "%s", q);
	else if (rc == 0 && f == FORMAT_LARAVEL)
		rc = cmds_fmt(out, "%squeues:%s:delayed", p, q) || cmds_fmt(out, "%squeues:%s:delayed", t, q) ||
		     cmds_fmt(out, "%s", "");
	else if (rc == 0)
		rc = cmds_fmt(out, "%s", "") || cmds_fmt(out, "%s", "") || cmds_fmt(out, "%s", "");
	if (rc == 0)
		rc = has_registry(f) ? cmds_fmt(out, "%squeues", t) : cmds_fmt(out, "%s", "");
	if (rc == 0)
		rc = cmds_fmt(out, "%s", q);
	if (rc == 0 && f == FORMAT_LARAVEL)
		rc = cmds_fmt(out, "%squeues:%s:notify", p, q) || cmds_fmt(out, "%squeues:%s:notify", t, q);
	else if (rc == 0)
		rc = cmds_fmt(out, "%s", "") || cmds_fmt(out, "%s", "");
	cmds_free(&from);
	cmds_free(&to);
	return rc ? -ENOMEM : 0;
}

/* Runs the one command out holds; its reply in *r. */
static int run(struct move_cmd *m, struct redis_cmds *out, redisReply **r)
{
	const char **argv = calloc(out->nargs, sizeof(*argv));
	size_t *lens = calloc(out->nargs, sizeof(*lens));
	int rc = -ENOMEM;

	if (argv && lens) {
		for (size_t a = 0; a < out->nargs; a++)
			argv[a] = cmds_arg(out, 0, a, &lens[a]);
		rc = redis_conn_command(&m->c, (int)out->nargs, argv, lens, r);
	}
	free(argv);
	free(lens);
	return rc;
}

/* Moves queue q, and says what moved. */
static int move_queue(struct move_cmd *m, const char *q)
{
	struct redis_cmds out;
	redisReply *r = NULL;
	int rc;

	cmds_init(&out);
	if ((rc = move_args(m, q, &out)) < 0)
		return say(CMD_EXIT_ATTENTION, "out of memory");
	rc = run(m, &out, &r);
	cmds_free(&out);
	if (rc < 0)
		return say(CMD_EXIT_ATTENTION, "queue %s: %s", q, m->c.errstr);
	if (r->type == REDIS_REPLY_ARRAY && r->elements == 2)
		printf("moved queue %s: %lld jobs listed, %lld scheduled, from %s\"%s\" database %d to \"%s\" "
		       "database %d\n",
		       q, r->element[0]->integer, r->element[1]->integer, "prefix ", m->from, m->from_db,
		       m->cfg->key_prefix, m->cfg->redis.db);
	freeReplyObject(r);
	return CMD_EXIT_OK;
}

/* The queues under the from prefix, on the selected database: the registry's members, or Laravel's lists found by name. */
static int found_queues(struct move_cmd *m, char ***out, size_t *n)
{
	char key[512], cursor[32] = "0";
	redisReply *r = NULL;
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (has_registry(m->cfg->format)) {
		const char *argv[] = { "SMEMBERS", key };
		snprintf(key, sizeof(key), "%squeues", m->from);
		if ((rc = redis_conn_command(&m->c, 2, argv, NULL, &r)) < 0)
			return rc;
		*out = calloc(r->elements + 1, sizeof(**out));
		for (size_t i = 0; *out && i < r->elements; i++)
			if (((*out)[(*n)++] = strdup(r->element[i]->str)) == NULL)
				rc = -ENOMEM;
		freeReplyObject(r);
		return *out ? rc : -ENOMEM;
	}
	/* Laravel: its queues:<q> lists, their :delayed sets too. */
	snprintf(key, sizeof(key), "%squeues:*", m->from);
	do {
		const char *argv[] = { "SCAN", cursor, "MATCH", key, "COUNT", "1000" };
		if ((rc = redis_conn_command(&m->c, 6, argv, NULL, &r)) < 0)
			return rc;
		snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
		for (size_t i = 0; rc == 0 && i < r->element[1]->elements; i++) {
			char *name = r->element[1]->element[i]->str + strlen(m->from) + strlen("queues:");
			char *colon = strrchr(name, ':');
			char **grown;
			bool seen = false;
			if (colon &&
			    (!strcmp(colon, ":delayed") || !strcmp(colon, ":reserved") || !strcmp(colon, ":notify")))
				*colon = '\0';
			for (size_t k = 0; k < *n; k++)
				seen = seen || strcmp((*out)[k], name) == 0;
			if (seen)
				continue;
			if (!(grown = realloc(*out, (*n + 1) * sizeof(**out))) || !(grown[*n] = strdup(name)))
				rc = -ENOMEM;
			if (grown)
				*out = grown;
			if (rc == 0)
				(*n)++;
		}
		freeReplyObject(r);
	} while (rc == 0 && strcmp(cursor, "0") != 0);
	return rc;
}

static int parse(struct move_cmd *m)
{
	const char *db = cmd_args_last(&m->a, "from-db");
	long long v;

	m->cfg = &m->a.cfg;
	m->f = format_of(m->cfg->format);
	m->from = cmd_args_last(&m->a, "from-prefix");
	m->from_db = m->cfg->redis.db;
	if (m->a.nwords > 0)
		return say(CMD_EXIT_USAGE, "move takes no words; --queue NAME picks a queue");
	/* A BullMQ job is a hash, its id in a list or a set, its events in a
	 * stream: no list move carries it. */
	if (m->cfg->format == FORMAT_BULLMQ)
		return say(CMD_EXIT_USAGE, "move does not move bullmq's jobs: run a relay with the old --bullmq-prefix "
					   "until its workers drained them");
	if (db && (value_parse_i64(db, &v) < 0 || v < 0 || v > 15))
		return say(CMD_EXIT_USAGE, "--from-db is a database number, 0 to 15");
	if (db)
		m->from_db = (int)v;
	if (!m->from)
		m->from = m->cfg->key_prefix;
	if (m->cfg->format == FORMAT_CELERY && strcmp(m->from, m->cfg->key_prefix) != 0)
		return say(CMD_EXIT_USAGE, "celery's keys have no prefix: --from-db moves its queues");
	if (strcmp(m->from, m->cfg->key_prefix) == 0 && m->from_db == m->cfg->redis.db)
		return say(CMD_EXIT_USAGE,
			   "--from-prefix and --from-db name where the relay pushes now: give where the jobs are");
	if (m->cfg->format == FORMAT_CELERY && !cmd_args_has(&m->a, "queue"))
		return say(CMD_EXIT_USAGE, "celery's queues cannot be found by their keys: name each with --queue");
	return CMD_EXIT_OK;
}

static int run_moves(struct move_cmd *m)
{
	char **found = NULL;
	size_t n = 0;
	int status = CMD_EXIT_OK, rc;

	if (redis_conn_connect(&m->c) < 0)
		return say(CMD_EXIT_ATTENTION, "%s", m->c.errstr);
	for (int i = 0; i < m->a.ngiven; i++)
		if (strcmp(m->a.given[i].opt->flag, "queue") == 0 && move_queue(m, m->a.given[i].val) != CMD_EXIT_OK)
			status = CMD_EXIT_ATTENTION;
	if (cmd_args_has(&m->a, "queue"))
		return status;
	/* The queues are found where the jobs are: on the from database. */
	if (m->from_db != m->cfg->redis.db && redis_conn_select(&m->c, m->from_db) < 0)
		return say(CMD_EXIT_ATTENTION, "%s", m->c.errstr);
	rc = found_queues(m, &found, &n);
	if (rc == 0 && m->from_db != m->cfg->redis.db)
		rc = redis_conn_select(&m->c, m->cfg->redis.db);
	if (rc < 0)
		status = say(CMD_EXIT_ATTENTION, "%s", rc == -ENOMEM ? "out of memory" : m->c.errstr);
	if (rc == 0 && n == 0)
		printf("no queues under %s\"%s\" in database %d\n", "prefix ", m->from, m->from_db);
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (move_queue(m, found[i]) != CMD_EXIT_OK)
			status = CMD_EXIT_ATTENTION;
	for (size_t i = 0; i < n; i++)
		free(found[i]);
	free(found);
	return status;
}

int cmd_move_main(int argc, char **argv)
{
	const struct command_doc *doc = commands_find("move");
	struct move_cmd m = { 0 };
	char err[CONFIG_ERR_SIZE];
	int status;

	if (cmd_args_parse(&m.a, doc->opts, argc, argv, 2, err, sizeof(err)) < 0) {
		cmd_args_free(&m.a);
		return say(CMD_EXIT_USAGE, "%s", err);
	}
	if (m.a.cfg.help) {
		command_usage(stdout, doc);
		cmd_args_free(&m.a);
		return CMD_EXIT_OK;
	}
	if ((status = parse(&m)) == CMD_EXIT_OK) {
		log_setup(m.a.cfg.log_level, m.a.cfg.log_format);
		redis_conn_init(&m.c, m.cfg);
		status = run_moves(&m);
		redis_conn_free(&m.c);
	}
	cmd_args_free(&m.a);
	return status;
}
