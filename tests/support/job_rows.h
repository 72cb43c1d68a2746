/* Job rows for the format suites: a row of plain C strings, as a reader of
 * staged_jobs would fill one. */
#ifndef STAGEDRAIN_SUPPORT_JOB_ROWS_H
#define STAGEDRAIN_SUPPORT_JOB_ROWS_H

#include "job.h"

/* Row id 1 of queue, job_class, args and options (NULL: none), each length
 * its strlen; the suite adds what its format needs (jid, uuid, times). */
struct job_row job_row_of(const char *queue, const char *job_class, const char *args, const char *options);

/* Numbers no 64-bit type holds, as a row may spell them, joined by "," with
 * no spaces: 2^64, -2^64, a 400-digit integer, 1e400, 1.5e-400, -1E+400. */
const char *job_rows_big_numbers(void);
/* Python's repr of the list of those numbers, as argsrepr writes it. */
const char *job_rows_big_numbers_repr(void);

#endif
