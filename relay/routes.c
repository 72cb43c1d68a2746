/* Routes: which target each staged row goes to (see include/routes.h). */
#include "fmacros.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "routes.h"
#include "values.h"

#define NAME_MAX_LEN 64
#define NAME_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"

/* The default target alone: every relay has it, routes or not. */
int routes_init(struct routes *r, struct config *cfg)
{
	memset(r, 0, sizeof(*r));
	if (!(r->t = calloc(1, sizeof(*r->t))) || !(r->t[0].name = strdup("default"))) {
		free(r->t);
		r->t = NULL;
		return -ENOMEM;
	}
	r->t[0].cfg = cfg;
	r->n = 1;
	return 0;
}

void routes_free(struct routes *r)
{
	if (!r)
		return;
	for (size_t i = 0; r->t && i < r->n; i++) {
		free(r->t[i].name);
	}
	for (size_t i = 0; i < r->nrules; i++)
		free(r->rules[i].pattern);
	free(r->t);
	free(r->rules);
	memset(r, 0, sizeof(*r));
}

/* fnmatch needs a NUL-terminated name: a queue a row may have fits the stack
 * buffer; a longer one (routes_find is pure: any caller) is copied to the heap. */
static bool rule_matches(const struct route_rule *rule, const char *queue, size_t qlen)
{
	char buf[JOB_MAX_NAME_BYTES + 1], *name = buf;
	bool yes;

	if (!rule->glob)
		return rule->len == qlen && memcmp(rule->pattern, queue, qlen) == 0;
	if (qlen >= sizeof(buf) && !(name = malloc(qlen + 1)))
		return false; /* out of memory: the default takes it, as for no match */
	memcpy(name, queue, qlen);
	name[qlen] = '\0';
	yes = fnmatch(rule->pattern, name, 0) == 0;
	if (name != buf)
		free(name);
	return yes;
}

size_t routes_find(const struct routes *r, const char *queue, size_t qlen, const char *route, size_t rlen)
{
	if (route) {
		for (size_t i = 0; i < r->n; i++)
			if (strlen(r->t[i].name) == rlen && memcmp(r->t[i].name, route, rlen) == 0)
				return i;
		return ROUTES_NONE;
	}
	for (size_t i = 0; i < r->nrules; i++)
		if (rule_matches(&r->rules[i], queue, qlen))
			return r->rules[i].target;
	return 0;
}

/* ---- parsing a route ---- */

/* A route's text split at whitespace: the words point into copy. */
static int split_words(struct route_text *ws, const char *text)
{
	char *p;

	if (!(ws->copy = strdup(text)) || !(ws->w = calloc(strlen(text) / 2 + 1, sizeof(*ws->w))))
		return -ENOMEM;
	for (p = ws->copy; *p;) {
		while (isspace((unsigned char)*p))
			*p++ = '\0';
		if (*p)
			ws->w[ws->n++] = p;
		while (*p && !isspace((unsigned char)*p))
			p++;
	}
	return 0;
}

static int check_name(const struct routes *r, const char *name, char *why, size_t len)
{
	size_t n = strlen(name);
	char shown[80];

	value_printable(name, shown, sizeof(shown));
	if (name[0] == '-')
		return value_fail(why, len, -EINVAL,
				  "a route starts with its name, not \"%s\": NAME QUEUES [--SETTING VALUE ...]", shown);
	if (strspn(name, NAME_CHARS) != n)
		return value_fail(why, len, -EINVAL, "bad name \"%s\": use letters, digits, '_', '-' and '.'", shown);
	if (n > NAME_MAX_LEN)
		return value_fail(why, len, -EINVAL, "the name is longer than %d characters", NAME_MAX_LEN);
	if (strcmp(name, "default") == 0)
		return value_fail(why, len, -EINVAL,
				  "\"default\" names the --redis-url target: give the route another name");
	for (size_t i = 1; i < r->n; i++)
		if (strcmp(r->t[i].name, name) == 0)
			return value_fail(why, len, -EINVAL, "the name \"%s\" is taken by an earlier route", shown);
	return 0;
}

/* The ']' closing the bracket expression that opens at p, or NULL when
 * there is none (fnmatch then reads the '[' as itself). */
static const char *bracket_end(const char *p)
{
	const char *q = p + 1;

	if (*q == '!' || *q == '^')
		q++;
	if (*q == ']')
		q++;
	for (; *q && *q != ']'; q++) {
		/* [:class:], [.sym.] and [=eq=] hold a ']' of their own. */
		if (q[0] == '[' && (q[1] == ':' || q[1] == '.' || q[1] == '=')) {
			const char *close = q + 2;

			while (*close && !(close[0] == q[1] && close[1] == ']'))
				close++;
			if (*close)
				q = close + 1;
		}
	}
	return *q ? q : NULL;
}

/*
 * Whether glob a, tried first, takes every queue glob b matches. Provable
 * when a holds only literals and '*' and matches b's text with each of b's
 * bracket expressions written as '?': a's literals then meet only b's
 * literals, never a character inside brackets, and a's '*' takes the rest.
 */
static bool shadows(const char *a, const char *b)
{
	char *text;
	size_t n = 0;
	bool yes;

	if (strpbrk(a, "?[\\") || !(text = malloc(strlen(b) + 1)))
		return false;
	for (const char *p = b, *end; *p; p++) {
		if (*p == '\\' && p[1]) {
			text[n++] = *p++;
			text[n++] = *p;
		} else if (*p == '[' && (end = bracket_end(p))) {
			text[n++] = '?';
			p = end;
		} else {
			text[n++] = *p;
		}
	}
	text[n] = '\0';
	yes = fnmatch(a, text, 0) == 0;
	free(text);
	return yes;
}

/* Refuses rule p when the earlier rule e (of the route named ename) leaves
 * it nothing: the same pattern, the queue it names, or every queue its glob
 * matches. Globs that only overlap are fine: the first wins. */
static int check_overlap(const struct route_rule *e, const char *ename, const struct route_rule *p, char *why,
			 size_t len)
{
	char a[80], b[80];

	value_printable(e->pattern, a, sizeof(a));
	value_printable(p->pattern, b, sizeof(b));
	if (strcmp(e->pattern, p->pattern) == 0)
		return value_fail(why, len, -EINVAL, "\"%s\" is given twice: route \"%s\" has it already", b, ename);
	if (!p->glob && e->glob && fnmatch(e->pattern, p->pattern, 0) == 0)
		return value_fail(
			why, len, -EINVAL,
			"queue \"%s\" would never reach this route: route \"%s\"'s pattern \"%s\" matches it first", b,
			ename, a);
	if (p->glob && e->glob && shadows(e->pattern, p->pattern))
		return value_fail(
			why, len, -EINVAL,
			"pattern \"%s\" would never match: route \"%s\"'s pattern \"%s\" matches every queue it "
			"does, first",
			b, ename, a);
	return 0;
}

/* Checks rules[k] against every rule before it: r's, then this route's. */
static int check_rule(const struct routes *r, const char *name, const struct route_rule *rules, size_t k, char *why,
		      size_t len)
{
	int rc = 0;

	for (size_t i = 0; i < r->nrules && rc == 0; i++)
		rc = check_overlap(&r->rules[i], r->t[r->rules[i].target].name, &rules[k], why, len);
	for (size_t i = 0; i < k && rc == 0; i++)
		rc = check_overlap(&rules[i], name, &rules[k], why, len);
	return rc;
}

static void free_rules(struct route_rule *rules, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(rules[i].pattern);
	free(rules);
}

/* QUEUES into rules for target r->n: "-" is none. queues is cut up. */
static int parse_queues(const struct routes *r, const char *name, char *queues, struct route_rule **out, size_t *nout,
			char *why, size_t len)
{
	struct route_rule *rules;
	size_t n = 0, max = 1;
	char shown[80];
	int rc = 0;

	*out = NULL;
	*nout = 0;
	if (strcmp(queues, "-") == 0)
		return 0;
	if (strncmp(queues, "--", 2) == 0)
		return value_fail(why, len, -EINVAL,
				  "QUEUES are missing before \"%s\": NAME QUEUES [--SETTING VALUE ...], - for none",
				  value_printable(queues, shown, sizeof(shown)));
	for (const char *p = queues; *p; p++)
		max += *p == ',';
	if (!(rules = calloc(max, sizeof(*rules))))
		return -ENOMEM;
	for (char *q = queues, *next; q && rc == 0; q = next, n++) {
		if ((next = strchr(q, ',')))
			*next++ = '\0';
		if (!*q)
			rc = value_fail(why, len, -EINVAL, "an empty queue pattern (two commas, or one at an end)");
		else if (strcmp(q, "-") == 0)
			rc = value_fail(why, len, -EINVAL, "\"-\" (no queues) goes alone, not in a list");
		else if (!(rules[n].pattern = strdup(q)))
			rc = -ENOMEM;
		if (rc < 0)
			break;
		rules[n].len = strlen(q);
		rules[n].glob = strpbrk(q, "*?[") != NULL;
		rules[n].target = r->n;
		rc = check_rule(r, name, rules, n, why, len);
	}
	if (rc < 0) {
		free_rules(rules, max);
		return rc;
	}
	*out = rules;
	*nout = n;
	return 0;
}

/* Takes cfg and the rules' patterns: 0, or -ENOMEM with nothing taken. */
static int append(struct routes *r, const char *name, struct config *cfg, const struct route_rule *rules, size_t n)
{
	struct route_target *t = realloc(r->t, (r->n + 1) * sizeof(*t));
	struct route_rule *all;
	char *copy;

	if (!t)
		return -ENOMEM;
	r->t = t;
	if (!(all = realloc(r->rules, (r->nrules + n + 1) * sizeof(*all))))
		return -ENOMEM;
	r->rules = all;
	if (!(copy = strdup(name)))
		return -ENOMEM;
	if (n) /* a route with no queues ("-") has no rules at all */
		memcpy(r->rules + r->nrules, rules, n * sizeof(*rules));
	r->nrules += n;
	r->t[r->n++] = (struct route_target){ copy, cfg };
	return 0;
}

int routes_parse(const struct routes *r, const char *text, struct route_text *rt, char *why, size_t len)
{
	int rc;

	*rt = (struct route_text){ NULL, NULL, 0, NULL, 0 };
	if ((rc = split_words(rt, text)) < 0)
		return value_fail(why, len, rc, "out of memory");
	if (rt->n < 2)
		return value_fail(why, len, -EINVAL, "%s: a route is NAME QUEUES [--SETTING VALUE ...]",
				  rt->n ? "too few fields" : "the route is empty");
	if ((rc = check_name(r, rt->w[0], why, len)) < 0)
		return rc;
	if ((rc = parse_queues(r, rt->w[0], rt->w[1], &rt->rules, &rt->nrules, why, len)) < 0)
		return rc == -ENOMEM ? value_fail(why, len, rc, "out of memory") : rc;
	return 0;
}

int routes_add(struct routes *r, struct route_text *rt, struct config *cfg)
{
	int rc = append(r, rt->w[0], cfg, rt->rules, rt->nrules);

	if (rc < 0)
		return rc;
	free(rt->rules); /* its patterns are r's now */
	rt->rules = NULL;
	rt->nrules = 0;
	return 0;
}

void route_text_free(struct route_text *rt)
{
	free_rules(rt->rules, rt->nrules);
	free(rt->copy);
	free(rt->w);
	*rt = (struct route_text){ NULL, NULL, 0, NULL, 0 };
}

/* ---- several routes in one text ---- */

/* Whether the ';' at p, in the word that starts at w, is a password's: an
 * '@' follows it in its word (a URL's user and password; no route name or
 * setting holds one), or it is in a password= value (no '&' between them). */
static bool in_credentials(const char *w, const char *p)
{
	const char *pw;

	for (const char *e = p; *e && !isspace((unsigned char)*e); e++)
		if (*e == '@')
			return true;
	for (; (pw = strstr(w, "password=")) && pw < p; w = pw + 9)
		if (!memchr(pw + 9, '&', (size_t)(p - pw - 9)))
			return true;
	return false;
}

size_t routes_piece_len(const char *text)
{
	const char *w = text, *p;

	for (p = text; *p && *p != '\n'; p++) {
		if (isspace((unsigned char)*p))
			w = p + 1;
		else if (*p == ';' && !in_credentials(w, p))
			break;
	}
	return (size_t)(p - text);
}
