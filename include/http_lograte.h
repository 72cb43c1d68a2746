/* The HTTP endpoint's own warnings, a few a minute: anyone can make the
 * endpoint complain, and nobody should be able to fill the log through it. */
#ifndef STAGEDRAIN_HTTP_LOGRATE_H
#define STAGEDRAIN_HTTP_LOGRATE_H

#include <stdbool.h>

#include "fmacros.h"

/* Pure: the caller passes the time and serialises the calls. */
struct http_lograte {
	int per_window;                /* lines a window may log */
	long long window_ms;           /* its length */
	long long window_start_ms;     /* when the current window began; -1: none yet */
	int logged;                    /* lines logged in it */
	unsigned long long suppressed; /* lines left out of it */
};

void http_lograte_init(struct http_lograte *r, int per_window, long long window_ms);
/* Whether one more line may be logged at now_ms; if not, it is counted. */
bool http_lograte_take(struct http_lograte *r, long long now_ms);
/* The count of lines left out, once the window they were left out of is over
 * (or at once with final, at shutdown): the caller logs it in one line. 0:
 * nothing to report. */
unsigned long long http_lograte_flush(struct http_lograte *r, long long now_ms, bool final);

#endif
