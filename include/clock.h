/* The two clocks the relay reads: wall time for what it writes into jobs,
 * monotonic time for everything it measures or waits for. */
#ifndef STAGEDRAIN_CLOCK_H
#define STAGEDRAIN_CLOCK_H

/* Microseconds since the epoch. */
long long clock_wall_us(void);
/* Monotonic microseconds and milliseconds: never jump with the wall clock. */
long long clock_mono_us(void);
long long clock_mono_ms(void);

#endif
