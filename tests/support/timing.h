/* Clocks, sleeping, and the flag SIGINT/SIGTERM set: what every wait of the
 * test support library, the chaos programs and the bench is built on. */
#ifndef STAGEDRAIN_SUPPORT_TIMING_H
#define STAGEDRAIN_SUPPORT_TIMING_H

#include "fmacros.h"

#include <signal.h>

/* Set by SIGINT and SIGTERM once catch_signals ran; every wait stops early on it. */
extern volatile sig_atomic_t interrupted;

/* Installs the handlers that set `interrupted` (without SA_RESTART, so a
 * blocked call returns) and ignores SIGPIPE. Programs call it; Check suites do not. */
void catch_signals(void);
long long mono_ms(void);
long long mono_us(void);
/* CLOCK_REALTIME, the clock the relay stamps enqueued_at and its log lines with. */
long long wall_us(void);
/* Sleeps ms, resuming after other signals, but not once `interrupted` is set. */
void sleep_ms(long long ms);

#endif
