#include "fmacros.h"

#include <stdio.h>
#include <string.h>

#include "support/job_rows.h"

struct job_row job_row_of(const char *queue, const char *job_class, const char *args, const char *options)
{
	struct job_row r;

	memset(&r, 0, sizeof(r));
	r.id = 1;
	r.queue = queue;
	r.queue_len = strlen(queue);
	r.job_class = job_class;
	r.class_len = strlen(job_class);
	r.args = args;
	r.args_len = strlen(args);
	r.options = options;
	r.options_len = options ? strlen(options) : 0;
	return r;
}

/* "1" and 399 zeros. */
static const char *digits400(void)
{
	static char d[401];

	if (!d[0]) {
		memset(d, '0', 400);
		d[0] = '1';
	}
	return d;
}

const char *job_rows_big_numbers(void)
{
	static char text[512];

	if (!text[0])
		snprintf(text, sizeof(text), "18446744073709551616,-18446744073709551616,%s,1e400,1.5e-400,-1E+400",
			 digits400());
	return text;
}

const char *job_rows_big_numbers_repr(void)
{
	static char text[512];

	/* json.loads makes ints of the integers, inf and 0.0 of the floats. */
	if (!text[0])
		snprintf(text, sizeof(text), "[18446744073709551616, -18446744073709551616, %s, inf, 0.0, -inf]",
			 digits400());
	return text;
}
