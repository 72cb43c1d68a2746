/* Routes: which target each staged row goes to (see include/routes.h). */
#include "fmacros.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "routes.h"

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
		if (i > 0) {
			config_free(r->t[i].cfg);
			free(r->t[i].cfg);
		}
	}
	for (size_t i = 0; i < r->nrules; i++)
		free(r->rules[i].pattern);
	free(r->t);
	free(r->rules);
	memset(r, 0, sizeof(*r));
}

static bool rule_matches(const struct route_rule *rule, const char *queue, size_t qlen)
{
	char name[256];

	if (!rule->glob)
		return rule->len == qlen && memcmp(rule->pattern, queue, qlen) == 0;
	if (qlen >= sizeof(name))
		return false; /* no queue that long is worth a glob; the default takes it */
	memcpy(name, queue, qlen);
	name[qlen] = '\0';
	return fnmatch(rule->pattern, name, 0) == 0;
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
