/*
 * The formats by name: the relay's --format and a row's own choice pick one
 * of the layouts (relay/format_*.c), which know nothing of each other.
 */
#ifndef STAGEDRAIN_FORMATS_H
#define STAGEDRAIN_FORMATS_H

#include "format.h"

extern const struct format format_sidekiq, format_resque, format_activejob, format_celery, format_laravel,
	format_bullmq;

/* The relay's format: its layout in Redis, and every row's payload unless the
 * row says otherwise (format_of_row). */
const struct format *format_of(enum job_format f);
/*
 * The payload format of one row in a relay of format f: in a Sidekiq or
 * ActiveJob relay, options "activejob": true or false picks ActiveJob's
 * wrapper or a plain Sidekiq job (both go to the same keys). The key is
 * consumed, never written. 0, or JOB_REJECT when it is not a boolean or f
 * is another layout.
 */
int format_of_row(enum job_format f, struct span options, const struct format **out, char *reason, size_t rlen);

#endif
