/* `stagedrain status`'s two outputs: a short aligned table for a person, one JSON object for a script. */
#ifndef STAGEDRAIN_STATUS_PRINT_H
#define STAGEDRAIN_STATUS_PRINT_H

#include <stdio.h>

#include "fmacros.h"
#include "status.h"

/* One fact a line, then "healthy" or "needs attention: ...". */
void status_print_table(FILE *out, const struct status *s, const struct status_problems *p);
/* The same facts as one JSON object and a newline (keys in docs/status.md). 0, or -ENOMEM. */
int status_print_json(FILE *out, const struct status *s, const struct status_problems *p, long long max_age_ms,
		      long long horizon_ms) SD_MUSTCHECK;

#endif
