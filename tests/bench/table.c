/* The result table: one row per figure, each run's value, median/min/max, target. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct row {
	char scenario[24];
	char figure[96];
	int decimals;
	double v[BENCH_MAX_RUNS];
	int n;
	enum cmp cmp;
	double target;
	char target_text[48];
	char pass[24], miss[24]; /* empty: PASS and MISS */
};

static struct row *rows;
static size_t nrows, caprows;

static struct row *find(const char *scenario, const char *figure, int decimals)
{
	for (size_t i = 0; i < nrows; i++)
		if (strcmp(rows[i].scenario, scenario) == 0 && strcmp(rows[i].figure, figure) == 0)
			return &rows[i];
	if (nrows == caprows) {
		size_t cap = caprows ? caprows * 2 : 64;
		struct row *r = realloc(rows, cap * sizeof(*r));
		if (!r)
			die("out of memory");
		rows = r;
		caprows = cap;
	}
	memset(&rows[nrows], 0, sizeof(rows[nrows]));
	snprintf(rows[nrows].scenario, sizeof(rows[nrows].scenario), "%s", scenario);
	snprintf(rows[nrows].figure, sizeof(rows[nrows].figure), "%s", figure);
	rows[nrows].decimals = decimals;
	return &rows[nrows++];
}

void table_add(const char *scenario, const char *figure, int decimals, double value)
{
	struct row *r = find(scenario, figure, decimals);

	if (r->n < BENCH_MAX_RUNS)
		r->v[r->n++] = value;
}

void table_target(const char *scenario, const char *figure, enum cmp cmp, double target, const char *text)
{
	struct row *r = find(scenario, figure, 2);

	r->cmp = cmp;
	r->target = target;
	snprintf(r->target_text, sizeof(r->target_text), "%s", text);
}

void table_words(const char *scenario, const char *figure, const char *pass, const char *miss)
{
	struct row *r = find(scenario, figure, 2);

	snprintf(r->pass, sizeof(r->pass), "%s", pass);
	snprintf(r->miss, sizeof(r->miss), "%s", miss);
}

static void fmt(char *out, size_t len, double v, int decimals)
{
	if (isnan(v))
		snprintf(out, len, "n/a");
	else
		snprintf(out, len, "%.*f", decimals, v);
}

/* Median, min and max of the runs that produced a number (n/a values are skipped). */
static int summarize(const struct row *r, double *med, double *lo, double *hi)
{
	double v[BENCH_MAX_RUNS];
	int n = 0;

	for (int i = 0; i < r->n; i++)
		if (!isnan(r->v[i]))
			v[n++] = r->v[i];
	if (n == 0) {
		*med = *lo = *hi = NAN;
		return 0;
	}
	qsort(v, (size_t)n, sizeof(v[0]), cmp_dbl);
	*med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	*lo = v[0];
	*hi = v[n - 1];
	return n;
}

static void print_row(FILE *out, const struct row *r, int width)
{
	char med[32], lo[32], hi[32];
	double m, a, b;
	int n = summarize(r, &m, &a, &b);
	const char *res = "";

	if (r->cmp != CMP_NONE)
		res = n == 0                                                 ? "n/a"
		      : (r->cmp == CMP_LE ? m <= r->target : m >= r->target) ? (*r->pass ? r->pass : "PASS")
									     : (*r->miss ? r->miss : "MISS");
	fmt(med, sizeof(med), m, r->decimals);
	fmt(lo, sizeof(lo), a, r->decimals);
	fmt(hi, sizeof(hi), b, r->decimals);
	fprintf(out, "%-10s %-*s %12s %12s %12s %4d  %-22s %s\n", r->scenario, width, r->figure, med, lo, hi, n,
		r->target_text, res);
}

/* Rows grouped by scenario (in order of first appearance), then as added. */
void table_print(FILE *out)
{
	int width = 52; /* the figure column: at least this, else the longest figure */

	for (size_t i = 0; i < nrows; i++)
		if ((int)strlen(rows[i].figure) > width)
			width = (int)strlen(rows[i].figure);
	fprintf(out, "%-10s %-*s %12s %12s %12s %4s  %-22s %s\n", "scenario", width, "figure", "median", "min", "max",
		"runs", "target", "result");
	for (size_t i = 0; i < nrows; i++) {
		bool first = true;
		for (size_t k = 0; k < i && first; k++)
			first = strcmp(rows[k].scenario, rows[i].scenario) != 0;
		if (!first)
			continue;
		for (size_t j = i; j < nrows; j++)
			if (strcmp(rows[j].scenario, rows[i].scenario) == 0)
				print_row(out, &rows[j], width);
	}
}

void table_free(void)
{
	free(rows);
	rows = NULL;
	nrows = caprows = 0;
}
