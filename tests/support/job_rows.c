#include "fmacros.h"

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
