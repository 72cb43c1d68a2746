/* `stagedrain dead list` and `dead show`: the dead-letter table read, for a
 * person (aligned, control characters visible) or for scripts (JSON lines). */
#include "fmacros.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "dead_list.h"
#include "dead_text.h"
#include "values.h"

#define DEFAULT_LIMIT "100"
/* The table's text columns and the most characters each shows (`dead show` shows all). */
enum { T_QUEUE, T_CLASS, T_REASON, T_ARGS, T_NCOLS };
static const size_t col_max[T_NCOLS] = { 30, 40, 80, 60 };
static const char *const col_head[T_NCOLS] = { "QUEUE", "CLASS", "REASON", "ARGS" };

/* Every column as JSON, straight from Postgres: args and options stay exactly
 * as stored (jansson would round 0.1 and refuse big integers). */
#define LIST_JSON_SQL                                                                                                  \
	"SELECT row_to_json(d)::text, count(*) OVER () FROM staged_jobs_dead d WHERE " DEAD_WHERE(                     \
		"1", "2", "3", "4") " ORDER BY dead_id LIMIT $5"
/* The table's columns; args' first characters only (the 61st says it goes on). */
#define LIST_SQL                                                                                                       \
	"SELECT dead_id, floor(extract(epoch FROM now() - failed_at))::int8, queue, job_class, reason,"                \
	" left(args::text, 61), count(*) OVER () FROM staged_jobs_dead WHERE " DEAD_WHERE(                             \
		"1", "2", "3", "4") " ORDER BY dead_id LIMIT $5"

/* A whole number above 0, in digits only. */
static bool positive(const char *word, long long *v)
{
	char *end;

	errno = 0;
	*v = strtoll(word, &end, 10);
	return word[0] >= '0' && word[0] <= '9' && !*end && !errno && *v > 0;
}

int dead_parse_id(const char *word, long long *id)
{
	char shown[44];

	if (!positive(word, id))
		return dead_say(CMD_EXIT_USAGE, "\"%s\" is not a dead_id (a whole number above 0)",
				value_printable(word, shown, sizeof(shown)));
	return 0;
}

/* One cell: where its visible text sits in the table's buffer. */
struct cell {
	size_t off, len, width;
};

static void put_cell(const struct buf *b, const struct cell *c, size_t pad_to, bool last)
{
	fwrite(b->data + c->off, 1, c->len, stdout);
	for (size_t w = c->width; !last && w < pad_to + 2; w++)
		putchar(' ');
}

/* Builds every cell's visible text first: the widths must be known before the first line. */
static int print_table(const PGresult *res)
{
	int n = PQntuples(res), rc = 0;
	struct cell *cells = calloc((size_t)n * T_NCOLS + 1, sizeof(*cells));
	size_t width[T_NCOLS], id_w = strlen("DEAD_ID");
	struct buf text;

	if (!cells)
		return -ENOMEM;
	buf_init(&text);
	for (int c = 0; c < T_NCOLS; c++)
		width[c] = strlen(col_head[c]);
	for (int i = 0; rc == 0 && i < n; i++) {
		if ((size_t)PQgetlength(res, i, 0) > id_w)
			id_w = (size_t)PQgetlength(res, i, 0);
		for (int c = 0; rc == 0 && c < T_NCOLS; c++) {
			struct cell *cell = &cells[i * T_NCOLS + c];
			cell->off = text.len;
			rc = dead_text_visible(&text, PQgetvalue(res, i, 2 + c), (size_t)PQgetlength(res, i, 2 + c),
					       col_max[c], &cell->width);
			cell->len = text.len - cell->off;
			if (cell->width > width[c])
				width[c] = cell->width;
		}
	}
	if (rc == 0) {
		printf("%-*s  %-4s  ", (int)id_w, "DEAD_ID", "AGE");
		for (int c = 0; c < T_NCOLS; c++)
			printf(c + 1 < T_NCOLS ? "%-*s  " : "%.*s\n", (int)width[c], col_head[c]);
	}
	for (int i = 0; rc == 0 && i < n; i++) {
		char age[24];

		dead_text_age(strtoll(PQgetvalue(res, i, 1), NULL, 10), age, sizeof(age));
		printf("%-*s  %-4s  ", (int)id_w, PQgetvalue(res, i, 0), age);
		for (int c = 0; c < T_NCOLS; c++)
			put_cell(&text, &cells[i * T_NCOLS + c], width[c], c + 1 == T_NCOLS);
		putchar('\n');
	}
	buf_free(&text);
	free(cells);
	return rc;
}

/* `dead list [filters] [--limit N] [--json]`: oldest first; no rows is an
 * empty table (or no line) and no failure, as grep finding nothing is for a pipe. */
int dead_list(struct dead_cmd *d)
{
	const char *limit = cmd_args_last(&d->a, "limit");
	bool json = cmd_args_has(&d->a, "json");
	const char *params[5] = { d->filter[0], d->filter[1], d->filter[2], d->filter[3], limit };
	long long n, total;
	PGresult *res;
	int rc = 0;

	if (d->a.nwords > 0)
		return dead_say(CMD_EXIT_USAGE, "dead list takes no DEAD_ID (use dead show DEAD_ID)");
	if (!limit)
		params[4] = DEFAULT_LIMIT;
	else if (!positive(limit, &n))
		return dead_say(CMD_EXIT_USAGE, "--limit needs a whole number above 0");
	res = dead_exec(d, json ? LIST_JSON_SQL : LIST_SQL, 5, params, PGRES_TUPLES_OK,
			"could not read staged_jobs_dead");
	if (!res)
		return CMD_EXIT_ATTENTION;
	n = PQntuples(res);
	total = n ? strtoll(PQgetvalue(res, 0, PQnfields(res) - 1), NULL, 10) : 0;
	if (json)
		for (int i = 0; i < n; i++)
			printf("%s\n", PQgetvalue(res, i, 0));
	else
		rc = print_table(res);
	PQclear(res);
	if (rc < 0)
		return dead_say(CMD_EXIT_ATTENTION, "out of memory printing the table");
	if (total > n)
		fprintf(stderr, "(%lld of %lld dead-lettered jobs shown; --limit %lld shows them all)\n", n, total,
			total);
	return CMD_EXIT_OK;
}

/* Prints a text column (NULL as NULL), control characters visible. */
static int put_field(const char *name, const PGresult *res, int col)
{
	struct buf b;
	size_t w;
	int rc;

	if (PQgetisnull(res, 0, col)) {
		printf("%-11s NULL\n", name);
		return 0;
	}
	buf_init(&b);
	rc = dead_text_visible(&b, PQgetvalue(res, 0, col), (size_t)PQgetlength(res, 0, col), 0, &w);
	if (rc == 0)
		printf("%-11s %.*s\n", name, (int)b.len, b.data);
	buf_free(&b);
	return rc;
}

/* Prints JSON as stored under its name, each line indented and made visible. */
static int put_json(const char *name, const PGresult *res, int col)
{
	const char *s = PQgetvalue(res, 0, col);
	struct buf b;
	int rc = 0;

	printf("%s%s\n", name, PQgetisnull(res, 0, col) ? " NULL" : "");
	buf_init(&b);
	while (rc == 0 && *s && !PQgetisnull(res, 0, col)) {
		size_t n = strcspn(s, "\n"), w;

		buf_reset(&b);
		if ((rc = dead_text_visible(&b, s, n, 0, &w)) == 0)
			printf("  %.*s\n", (int)b.len, b.data);
		s += n + (s[n] == '\n');
	}
	buf_free(&b);
	return rc;
}

#define SHOW_SQL                                                                                                       \
	"SELECT dead_id, id, queue, job_class, reason, jid, uuid, tenant, route, created_at, run_at,"                  \
	" failed_at, floor(extract(epoch FROM now() - failed_at))::int8, args::text, options::text"                    \
	" FROM staged_jobs_dead WHERE dead_id = $1"
#define SHOW_JSON_SQL "SELECT row_to_json(d)::text FROM staged_jobs_dead d WHERE dead_id = $1"

/* `dead show DEAD_ID [--json]`: every column; args and options as stored. */
int dead_show(struct dead_cmd *d)
{
	static const char *const names[] = { "dead_id", "id",     "queue", "job_class",  "reason", "jid",
					     "uuid",    "tenant", "route", "created_at", "run_at", "failed_at" };
	bool json = cmd_args_has(&d->a, "json");
	long long id;
	PGresult *res;
	int rc = 0;
	char age[24];

	if (d->a.nwords != 1)
		return dead_say(CMD_EXIT_USAGE, "dead show takes one DEAD_ID");
	if (dead_parse_id(d->a.words[0], &id) != 0)
		return CMD_EXIT_USAGE;
	res = dead_exec(d, json ? SHOW_JSON_SQL : SHOW_SQL, 1, d->a.words, PGRES_TUPLES_OK,
			"could not read staged_jobs_dead");
	if (!res)
		return CMD_EXIT_ATTENTION;
	if (PQntuples(res) == 0) {
		PQclear(res);
		return dead_say(CMD_EXIT_ATTENTION, "no dead-lettered job with dead_id %lld", id);
	}
	if (json)
		printf("%s\n", PQgetvalue(res, 0, 0));
	for (int c = 0; !json && rc == 0 && c < (int)(sizeof(names) / sizeof(names[0])); c++)
		rc = put_field(names[c], res, c);
	if (!json && rc == 0) {
		dead_text_age(strtoll(PQgetvalue(res, 0, 12), NULL, 10), age, sizeof(age));
		printf("%-11s %s\n", "age", age);
		if ((rc = put_json("args", res, 13)) == 0)
			rc = put_json("options", res, 14);
	}
	PQclear(res);
	return rc < 0 ? dead_say(CMD_EXIT_ATTENTION, "out of memory printing the row") : CMD_EXIT_OK;
}
