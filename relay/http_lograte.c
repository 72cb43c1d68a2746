/* A fixed window of a few lines: the first ones in each window are logged, the
 * rest counted and reported in one line when the window is over. */
#include "fmacros.h"

#include "http_lograte.h"

void http_lograte_init(struct http_lograte *r, int per_window, long long window_ms)
{
	r->per_window = per_window;
	r->window_ms = window_ms;
	r->window_start_ms = -1;
	r->logged = 0;
	r->suppressed = 0;
}

unsigned long long http_lograte_flush(struct http_lograte *r, long long now_ms, bool final)
{
	unsigned long long n = r->suppressed;

	if (!final && (r->window_start_ms < 0 || now_ms - r->window_start_ms < r->window_ms))
		return 0;
	/* The window is over: the next line starts a new one. */
	r->window_start_ms = -1;
	r->logged = 0;
	r->suppressed = 0;
	return n;
}

bool http_lograte_take(struct http_lograte *r, long long now_ms)
{
	if (r->window_start_ms < 0)
		r->window_start_ms = now_ms;
	if (r->logged < r->per_window) {
		r->logged++;
		return true;
	}
	r->suppressed++;
	return false;
}
