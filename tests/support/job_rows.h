/* Job rows for the format suites: a row of plain C strings, as a reader of
 * staged_jobs would fill one. */
#ifndef STAGEDRAIN_SUPPORT_JOB_ROWS_H
#define STAGEDRAIN_SUPPORT_JOB_ROWS_H

#include "job.h"

/* Row id 1 of queue, job_class, args and options (NULL: none), each length
 * its strlen; the suite adds what its format needs (jid, uuid, times). */
struct job_row job_row_of(const char *queue, const char *job_class, const char *args, const char *options);

#endif
