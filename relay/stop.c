/* The stop signal as the batch sees it: the time it was first seen, and the deadline that sets. */
#include "fmacros.h"

#include <limits.h>
#include <stddef.h>

#include "clock.h"
#include "stop.h"

void stop_init(struct stop *s, volatile sig_atomic_t *flag, int grace_ms)
{
	s->flag = flag;
	s->grace_ms = grace_ms;
	s->seen_ms = 0;
}

bool stop_seen(struct stop *s)
{
	if (!s || !s->flag || !*s->flag)
		return false;
	if (!s->seen_ms)
		s->seen_ms = clock_mono_ms();
	return true;
}

long long stop_deadline(struct stop *s)
{
	return stop_seen(s) ? s->seen_ms + s->grace_ms : LLONG_MAX;
}

bool stop_overdue(struct stop *s)
{
	return stop_seen(s) && clock_mono_ms() >= stop_deadline(s);
}
