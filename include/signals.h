/* The signals the relay answers: SIGTERM and SIGINT stop it, SIGHUP is noted and ignored. */
#ifndef STAGEDRAIN_SIGNALS_H
#define STAGEDRAIN_SIGNALS_H

#include <signal.h>

#include "fmacros.h"

/*
 * SIGTERM and SIGINT set the stop flag (no SA_RESTART: a sleep or poll
 * returns early, so stopping is prompt). SIGHUP, which a daemon user may send
 * to reload or a closed terminal sends, neither stops nor reloads the relay:
 * it is logged (signals_note_hup) and the relay carries on. SIGPIPE is
 * ignored: a dropped socket must surface as an error, not kill the process.
 */
void signals_install(void);
/* The flag SIGTERM and SIGINT set. */
volatile sig_atomic_t *signals_stop_flag(void);
/* Logs the SIGHUPs received since the last call, if any: called from the
 * drain's loop and waits, never from the handler. */
void signals_note_hup(void);
/* Blocks the signals above in the calling thread (old gets the mask to
 * restore), so that only the main thread, the drain, sees them. */
void signals_block(sigset_t *old);

#endif
