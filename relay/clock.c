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
