/* Celery's saferepr of what json.loads gives, as Celery writes argsrepr and
 * kwargsrepr: Python's repr, as celery.utils.saferepr shortens it. */
#include "fmacros.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "pyrepr.h"

/* saferepr's limits as Celery's amqp.argsrepr_maxsize and maxlevels use them. */
#define REPR_MAXLEN 1024
#define REPR_MAXLEVELS 3

/*
 * celery.utils.saferepr streams tokens and stops once maxlen code points
 * are spent: it writes ", ...", drops the token at hand and then only the
 * closing brackets of the containers still open. Strings are quoted with
 * only ' escaped (no repr escapes), containers past maxlevels print [...].
 */
struct py_repr {
	struct buf *b;
	long left;
	bool cut;
};

enum repr_tok { TOK_OPEN, TOK_CLOSE, TOK_SEP, TOK_TEXT, TOK_STR };

static size_t code_points(const char *p, size_t n)
{
	size_t c = 0;

	for (size_t i = 0; i < n; i++)
		c += ((unsigned char)p[i] & 0xc0) != 0x80;
	return c;
}

/* celery.utils.text.truncate: at maxlen or more code points, the first
 * maxlen up to their last space, then "...". Returns the bytes kept. */
static size_t truncated(const char *p, size_t n, long maxlen, bool *cut)
{
	size_t i = 0, cps = 0;

	*cut = code_points(p, n) >= (size_t)maxlen;
	if (!*cut)
		return n;
	for (; i < n && cps < (size_t)maxlen; i++)
		cps += ((unsigned char)p[i] & 0xc0) != 0x80;
	while (i < n && ((unsigned char)p[i] & 0xc0) == 0x80)
		i++;
	for (size_t k = i; k > 0; k--)
		if (p[k - 1] == ' ')
			return k - 1;
	return i;
}

/* One token of text or a quoted string; returns the code points written. */
static int put_truncated(struct py_repr *r, const char *p, size_t n, bool quote, long *written)
{
	size_t start = r->b->len, from = 0;
	bool cut;
	size_t keep = truncated(p, n, r->left, &cut);
	int rc = quote ? buf_puts(r->b, "'") : 0;

	for (size_t i = 0; rc == 0 && quote && i < keep; i++)
		if (p[i] == '\'') {
			if ((rc = buf_append(r->b, p + from, i - from)) == 0)
				rc = buf_puts(r->b, "\\'");
			from = i + 1;
		}
	if (rc == 0)
		rc = buf_append(r->b, p + from, keep - from);
	if (rc == 0 && cut)
		rc = buf_puts(r->b, "...");
	if (rc == 0 && quote)
		rc = buf_puts(r->b, "'");
	*written = (long)code_points(r->b->data + start, r->b->len - start);
	return rc;
}

static int repr_tok(struct py_repr *r, enum repr_tok kind, const char *p, size_t n)
{
	long written = (long)code_points(p, n);
	int rc;

	if (r->cut)
		return kind == TOK_CLOSE ? buf_append(r->b, p, n) : 0;
	if (r->left <= 0) {
		r->cut = true;
		return buf_puts(r->b, ", ...");
	}
	if (kind == TOK_TEXT || kind == TOK_STR)
		rc = put_truncated(r, p, n, kind == TOK_STR, &written);
	else
		rc = buf_append(r->b, p, n);
	r->left -= written;
	return rc;
}

/* A JSON string token, decoded (jansson already accepted it). */
static int repr_string(struct py_repr *r, struct span tok)
{
	json_t *v = json_loadb(tok.p, tok.n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	int rc;

	if (!v)
		return -ENOMEM;
	rc = repr_tok(r, TOK_STR, json_string_value(v), json_string_length(v));
	json_decref(v);
	return rc;
}

/* e, "%.*e" text, one up in its last digit (away from zero): 9.9e-01 becomes 1.0e+00. */
static void next_up(char *e, size_t size)
{
	char digits[24];
	int nd = 0, k, x = atoi(strchr(e, 'e') + 1);
	bool neg = e[0] == '-';

	for (const char *q = e; *q != 'e'; q++)
		if (*q >= '0' && *q <= '9')
			digits[nd++] = *q;
	for (k = nd - 1; k >= 0 && digits[k] == '9'; k--)
		digits[k] = '0';
	if (k >= 0) {
		digits[k]++;
	} else {
		digits[0] = '1';
		x++;
	}
	snprintf(e, size, "%s%c.%.*se%d", neg ? "-" : "", digits[0], nd - 1, digits + 1, x);
}

/*
 * Python's repr digits (dtoa's mode 0): the fewest that read back as d, the
 * nearest to d of that many, and its exponent. printf gives the nearest of
 * each length; when that one does not read back, the next one up still may:
 * a power of two's rounding interval reaches twice as far above it as below
 * (2^-24 is 5.960464477539063e-08, where printf's 16 digits end in 062).
 */
static int shortest_digits(double d, char *digits, int *exp10)
{
	char e[48];
	int nd = 0, prec;

	for (prec = 1; prec < 17; prec++) {
		snprintf(e, sizeof(e), "%.*e", prec - 1, d);
		if (strtod(e, NULL) == d)
			break;
		next_up(e, sizeof(e));
		if (strtod(e, NULL) == d)
			break;
	}
	if (prec == 17) /* 17 digits always read back */
		snprintf(e, sizeof(e), "%.16e", d);
	for (const char *q = e; *q != 'e'; q++)
		if (*q >= '0' && *q <= '9')
			digits[nd++] = *q;
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	*exp10 = atoi(strchr(e, 'e') + 1);
	return nd;
}

/*
 * Python's repr of a float: the shortest digits that read back the same,
 * positional for 1e-4 <= |x| < 1e16 (with ".0" when whole), else d.ddde+XX.
 * dst has room for 40 bytes.
 */
static void py_float(char *dst, double d)
{
	char digits[24];
	int exp10, nd, decpt;

	if (isinf(d)) {
		strcpy(dst, d < 0 ? "-inf" : "inf");
		return;
	}
	nd = shortest_digits(d, digits, &exp10);
	decpt = exp10 + 1;
	if (signbit(d))
		*dst++ = '-';
	if (decpt <= -4 || decpt > 16) {
		snprintf(dst, 32, "%c%s%.*se%c%02d", digits[0], nd > 1 ? "." : "", nd - 1, digits + 1,
			 exp10 < 0 ? '-' : '+', abs(exp10));
		return;
	}
	if (decpt <= 0) {
		*dst++ = '0';
		*dst++ = '.';
		for (int z = 0; z < -decpt; z++)
			*dst++ = '0';
		memcpy(dst, digits, (size_t)nd);
		dst[nd] = '\0';
		return;
	}
	for (int k = 0; k < decpt || k < nd; k++) {
		if (k == decpt)
			*dst++ = '.';
		*dst++ = k < nd ? digits[k] : '0';
	}
	strcpy(dst, decpt >= nd ? ".0" : "");
}

/* json.loads makes an int of a number without fraction or exponent, else a float. */
static int repr_number(struct py_repr *r, struct span tok)
{
	char num[48];
	double d;

	if (!memchr(tok.p, '.', tok.n) && !memchr(tok.p, 'e', tok.n) && !memchr(tok.p, 'E', tok.n)) {
		if (tok.n == 2 && memcmp(tok.p, "-0", 2) == 0)
			return repr_tok(r, TOK_TEXT, "0", 1);
		return repr_tok(r, TOK_TEXT, tok.p, tok.n);
	}
	/* 1e400 is inf to Python too, 1e-400 0.0. */
	if (payload_double(tok, &d) < 0)
		return -ENOMEM;
	py_float(num, d);
	return repr_tok(r, TOK_TEXT, num, strlen(num));
}

static int repr_value(struct py_repr *r, struct span s, size_t *i, int level);

static int repr_container(struct py_repr *r, struct span s, size_t *i, int level)
{
	bool dict = s.p[*i] == '{';
	int rc, n = 0;

	if (level >= REPR_MAXLEVELS) {
		*i = payload_value_end(s, *i);
		return repr_tok(r, TOK_TEXT, dict ? "{...}" : "[...]", 5);
	}
	if ((rc = repr_tok(r, TOK_OPEN, dict ? "{" : "[", 1)) < 0)
		return rc;
	for (*i = payload_skip_ws(s, *i + 1); rc == 0 && s.p[*i] != ']' && s.p[*i] != '}'; n++) {
		if (n > 0)
			rc = repr_tok(r, TOK_SEP, ", ", 2);
		if (rc == 0 && dict) {
			size_t k = payload_string_end(s, *i);
			rc = r->cut ? 0 : repr_string(r, span_of(s.p + *i, k - *i));
			*i = payload_skip_ws(s, payload_skip_ws(s, k) + 1);
			if (rc == 0)
				rc = repr_tok(r, TOK_SEP, ": ", 2);
		}
		if (rc == 0)
			rc = repr_value(r, s, i, level + 1);
		*i = payload_skip_ws(s, *i);
		if (s.p[*i] == ',')
			*i = payload_skip_ws(s, *i + 1);
	}
	(*i)++;
	return rc ? rc : repr_tok(r, TOK_CLOSE, dict ? "}" : "]", 1);
}

static int repr_value(struct py_repr *r, struct span s, size_t *i, int level)
{
	size_t end;
	struct span tok;

	*i = payload_skip_ws(s, *i);
	end = payload_value_end(s, *i);
	/* Past the cut saferepr reads no further value, nested ones included. */
	if (r->cut) {
		*i = end;
		return 0;
	}
	if (s.p[*i] == '[' || s.p[*i] == '{')
		return repr_container(r, s, i, level);
	tok = span_of(s.p + *i, end - *i);
	*i = end;
	switch (tok.p[0]) {
	case '"':
		return repr_string(r, tok);
	case 't':
		return repr_tok(r, TOK_TEXT, "True", 4);
	case 'f':
		return repr_tok(r, TOK_TEXT, "False", 5);
	case 'n':
		return repr_tok(r, TOK_TEXT, "None", 4);
	}
	return repr_number(r, tok);
}

int pyrepr_saferepr(struct buf *b, struct span json)
{
	struct py_repr r = { .b = b, .left = REPR_MAXLEN };
	size_t i = 0;

	return repr_value(&r, json, &i, 0);
}
