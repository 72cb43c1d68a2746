/* The signals the relay answers (signals.h). */
#include "fmacros.h"

#include <pthread.h>
#include <string.h>

#include "log.h"
#include "signals.h"

static volatile sig_atomic_t stop_requested;
static volatile sig_atomic_t hups;

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void on_hup(int sig)
{
	(void)sig;
	hups = 1;
}

void signals_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_stop;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	/* Restarted: a SIGHUP must not cut a read or a write short. */
	sa.sa_handler = on_hup;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sa.sa_flags = 0;
	sigaction(SIGPIPE, &sa, NULL);
}

volatile sig_atomic_t *signals_stop_flag(void)
{
	return &stop_requested;
}

void signals_note_hup(void)
{
	if (!hups)
		return;
	hups = 0;
	log_info("received SIGHUP: the relay does not reload its settings and carries on (restart it to change them;"
		 " SIGTERM stops it)",
		 NULL);
}

void signals_block(sigset_t *old)
{
	sigset_t block;

	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &block, old);
}
