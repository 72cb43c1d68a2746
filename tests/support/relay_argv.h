/* A relay's command line for the chaos programs and the bench: the binary,
 * the servers' URLs, then flags, in a bounded array that reports overflow. */
#ifndef STAGEDRAIN_SUPPORT_RELAY_ARGV_H
#define STAGEDRAIN_SUPPORT_RELAY_ARGV_H

#include "fmacros.h"

/* More words than any harness gives a relay; a longer line is an error, not cut. */
#define RELAY_ARGV_MAX 64

struct relay_argv {
	const char *argv[RELAY_ARGV_MAX + 1]; /* NULL-terminated, for proc_opts.argv */
	int n;
	/* 0, or the first error (-E2BIG: too many words; -ENOMEM; -EALREADY:
	 * relay_argv_words twice): once set, further words are not added. */
	int err;
	char *text; /* relay_argv_words' copy, which argv points into */
};

/* bin --pg-url pg_url --redis-url redis_url. The strings are not copied:
 * they must outlive the start of the child. */
void relay_argv_init(struct relay_argv *a, const char *bin, const char *pg_url, const char *redis_url);
/* flag and its value (NULL: the flag alone), not copied. Every adder returns
 * 0 or a->err, so a caller may check each word or only the last. */
int relay_argv_add(struct relay_argv *a, const char *flag, const char *value);
/* Each word of a NULL-terminated list (NULL: none), not copied. */
int relay_argv_add_list(struct relay_argv *a, const char *const *words);
/* The words of a space-separated string (NULL or "": none), as a user gives
 * --relay-args; copied once per command line, freed by relay_argv_free. */
int relay_argv_words(struct relay_argv *a, const char *text);
/* The relay refuses a flag given twice: of each flag (but --route, which
 * repeats), the last one given is kept, with its value. */
void relay_argv_keep_last(struct relay_argv *a);
/* Frees relay_argv_words' copy; once the child has started, it has its own. */
void relay_argv_free(struct relay_argv *a);

#endif
