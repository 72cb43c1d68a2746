/* A relay's command line: see relay_argv.h. */
#include "fmacros.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "support/relay_argv.h"

void relay_argv_init(struct relay_argv *a, const char *bin, const char *pg_url, const char *redis_url)
{
	*a = (struct relay_argv){ .argv = { bin, "--pg-url", pg_url, "--redis-url", redis_url }, .n = 5 };
}

static int add_word(struct relay_argv *a, const char *word)
{
	if (a->err == 0 && a->n == RELAY_ARGV_MAX)
		a->err = -E2BIG;
	if (a->err == 0) {
		a->argv[a->n++] = word;
		a->argv[a->n] = NULL;
	}
	return a->err;
}

int relay_argv_add(struct relay_argv *a, const char *flag, const char *value)
{
	if (add_word(a, flag) == 0 && value)
		(void)add_word(a, value);
	return a->err;
}

int relay_argv_add_list(struct relay_argv *a, const char *const *words)
{
	for (; words && *words && a->err == 0; words++)
		(void)add_word(a, *words);
	return a->err;
}

int relay_argv_words(struct relay_argv *a, const char *text)
{
	char *save = NULL;

	if (!text || !*text || a->err)
		return a->err;
	if (a->text)
		return a->err = -EALREADY;
	if (!(a->text = strdup(text)))
		return a->err = -ENOMEM;
	for (char *t = strtok_r(a->text, " ", &save); t && a->err == 0; t = strtok_r(NULL, " ", &save))
		(void)add_word(a, t);
	return a->err;
}

/* How many words the flag at argv[i] takes: its value is the next word
 * unless it has one after '=' (or none follows), as the relay reads them. */
static int words_of(const char *const *argv, int n, int i)
{
	return strchr(argv[i], '=') || i + 1 >= n || strncmp(argv[i + 1], "--", 2) == 0 ? 1 : 2;
}

static bool same_flag(const char *a, const char *b)
{
	size_t k = strcspn(a, "=");

	return k == strcspn(b, "=") && strncmp(a, b, k) == 0;
}

void relay_argv_keep_last(struct relay_argv *a)
{
	const char **argv = a->argv;
	int n = a->n, out = 1, w;

	for (int i = 1; i < n; i += w) {
		bool later = false;

		w = words_of(argv, n, i);
		for (int j = i + w; j < n && !same_flag(argv[i], "--route"); j += words_of(argv, n, j))
			later |= same_flag(argv[i], argv[j]);
		for (int k = 0; k < w && !later; k++)
			argv[out++] = argv[i + k];
	}
	argv[out] = NULL;
	a->n = out;
}

void relay_argv_free(struct relay_argv *a)
{
	if (!a)
		return;
	free(a->text);
	a->text = NULL;
}
