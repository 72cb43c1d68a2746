/* The wall and monotonic clocks, in the units the relay counts in. */
#include "fmacros.h"

#include <time.h>

#include "clock.h"

static long long read_us(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

long long clock_wall_us(void)
{
	return read_us(CLOCK_REALTIME);
}

long long clock_mono_us(void)
{
	return read_us(CLOCK_MONOTONIC);
}

long long clock_mono_ms(void)
{
	return read_us(CLOCK_MONOTONIC) / 1000;
}

struct timespec clock_mono_after(long long ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}
