/* stagedrain: parses the settings, installs signals, runs `migrate` or the relay. */
#include "fmacros.h"

#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "drain.h"
#include "log.h"
#include "migrate.h"
#include "pg_source.h"

#ifndef STAGEDRAIN_VERSION
#define STAGEDRAIN_VERSION "0.1.0"
#endif

static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

/* No SA_RESTART: a sleep or poll returns early, so stopping is prompt. */
static void install_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	/* A dropped Redis socket must surface as an error, not kill the process. */
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
}

static int run_migrate(const struct config *cfg)
{
	struct pg_source pg;
	char err[512];
	int rc;

	pg_source_init(&pg, cfg);
	rc = pg_source_connect(&pg);
	if (rc < 0) {
		log_error("cannot migrate", LOGF(F_STR("setting", "--pg-url"), F_STR("error", pg.errstr)));
	} else if ((rc = migrate_apply(pg.conn, err, sizeof(err))) < 0) {
		log_error("migration failed; nothing was changed", LOGF(F_STR("error", err)));
	} else {
		log_info("schema is up to date", NULL);
	}
	pg_source_free(&pg);
	return rc < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}

static int run_relay(const struct config *cfg)
{
	struct drain d;
	int rc;

	/* Every batch frees and allocates the same few hundred kilobytes (the
	 * rows libpq read, the command hiredis writes). Keep them in the heap
	 * instead of handing them back to the kernel and faulting them in again:
	 * memory stays at the peak of one batch, and a batch costs far fewer page
	 * faults. */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 128 << 20);
	drain_init(&d, cfg, &stop_requested);
	rc = drain_start(&d);
	if (rc == 0)
		rc = drain_run(&d);
	drain_free(&d);
	return rc < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}

int main(int argc, char **argv)
{
	struct config cfg;
	char err[CONFIG_ERR_SIZE];
	int status;

	if (config_load(&cfg, argc, argv, err, sizeof(err)) < 0) {
		fprintf(stderr, "stagedrain: %s\n", err);
		return 2;
	}
	if (cfg.help || cfg.version) {
		if (cfg.help)
			config_usage(stdout);
		else
			printf("stagedrain %s\n", STAGEDRAIN_VERSION);
		config_free(&cfg);
		return EXIT_SUCCESS;
	}
	log_setup(cfg.log_level, cfg.log_format);
	install_signals();
	status = cfg.command == CMD_MIGRATE ? run_migrate(&cfg) : run_relay(&cfg);
	config_free(&cfg);
	return status;
}
