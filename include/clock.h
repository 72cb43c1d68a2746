/* The two clocks the relay reads: wall time for what it writes into jobs,
 * monotonic time for everything it measures or waits for. */
#ifndef STAGEDRAIN_CLOCK_H
#define STAGEDRAIN_CLOCK_H

#include <time.h>

/* Microseconds since the epoch. */
long long clock_wall_us(void);
/* Monotonic microseconds and milliseconds: never jump with the wall clock. */
long long clock_mono_us(void);
long long clock_mono_ms(void);
/* The monotonic time ms from now, as pthread_cond_timedwait takes it (on a
 * condition variable set to CLOCK_MONOTONIC). */
struct timespec clock_mono_after(long long ms);

#endif
