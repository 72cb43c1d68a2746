/* The files settings name: a secret's (one line, at most 64k) or a whole file's text. */
#include "fmacros.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_files.h"
#include "values.h"

#define SECRET_FILE_MAX 65536

/* One trailing newline is dropped, as echo and editors write one; what is
 * left must be one line. No message says anything of the contents. */
static int trim_secret(char *buf, size_t *n, char *why, size_t len)
{
	if (*n > 0 && buf[*n - 1] == '\n')
		(*n)--;
	if (*n > 0 && buf[*n - 1] == '\r')
		(*n)--;
	if (*n == 0)
		return value_fail(why, len, -EINVAL, "the file is empty");
	if (memchr(buf, '\0', *n))
		return value_fail(why, len, -EINVAL, "the file holds a NUL byte");
	if (memchr(buf, '\n', *n) || memchr(buf, '\r', *n))
		return value_fail(why, len, -EINVAL, "the file holds more than one line");
	buf[*n] = '\0';
	return 0;
}

int config_read_whole(const char *path, size_t max, const char *max_text, char **out, size_t *n, char *why, size_t len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	int rc = 0;

	*n = 0;
	if (!f)
		return value_fail(why, len, -EINVAL, "could not open the file: %s", strerror(errno));
	/* One byte more than allowed tells a file that is too big. */
	if ((buf = malloc(max + 1)))
		*n = fread(buf, 1, max + 1, f);
	if (!buf)
		rc = -ENOMEM;
	else if (ferror(f))
		rc = value_fail(why, len, -EINVAL, "could not read the file: %s", strerror(errno));
	else if (*n > max)
		rc = value_fail(why, len, -EINVAL, "the file is larger than %s", max_text);
	fclose(f);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	buf[*n] = '\0';
	*out = buf;
	return 0;
}

int config_read_secret(const char *path, char **out, char *why, size_t len)
{
	char *buf;
	size_t n;
	int rc = config_read_whole(path, SECRET_FILE_MAX, "64k", &buf, &n, why, len);

	if (rc == 0 && (rc = trim_secret(buf, &n, why, len)) < 0)
		free(buf);
	if (rc == 0)
		*out = buf;
	return rc;
}
