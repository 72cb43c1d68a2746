/* Log files: see logs.h. */
#include "fmacros.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/logs.h"
#include "support/timing.h"

int logs_count_both(const char *path, const char *a, const char *b)
{
	char *line = NULL;
	size_t cap = 0;
	int n = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return -errno;
	/* Whole lines, however long: a JSON line must not be counted twice. */
	while (getline(&line, &cap, f) > 0)
		n += strstr(line, a) && (!b || strstr(line, b));
	free(line);
	fclose(f);
	return n;
}

int logs_count(const char *path, const char *text)
{
	return logs_count_both(path, text, NULL);
}

bool logs_contains(const char *path, const char *text)
{
	return logs_count(path, text) > 0;
}

bool logs_wait(const char *path, const char *text, int n, int timeout_ms, const struct proc *writer)
{
	long long deadline = mono_ms() + timeout_ms;

	for (;;) {
		/* Exited: what it wrote is final, so look once more before giving up. */
		bool gone = writer && proc_exited(writer);
		if (logs_count(path, text) >= n)
			return true;
		if (gone || interrupted || mono_ms() > deadline)
			return false;
		sleep_ms(20);
	}
}
