/* stagedrain: parses the settings, installs signals, runs `migrate` or the relay. */
#include "fmacros.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "drain.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "migrate.h"
#include "pg_source.h"
#include "usage.h"
#include "version.h"
#include "watch.h"

/* --once stopped with jobs left behind (README, Settings); 1 and 2 are errors. */
#define EXIT_JOBS_LEFT 3

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

/*
 * The HTTP endpoint and the watcher run in threads of their own; they block
 * the stop signals, so only the main thread (the drain) sees them. The
 * watcher runs whenever someone reads what it finds: the endpoint, or the
 * long-transaction warning of a relay that keeps running.
 */
static int start_sidecars(const struct config *cfg, struct metrics *m, struct http *h, struct watch *w)
{
	sigset_t block, old;
	int rc = 0;

	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	if (*cfg->http_addr && (rc = http_start(h, cfg, m)) < 0)
		log_error("cannot start", LOGF(F_STR("setting", "--http-addr"), F_STR("error", h->errstr)));
	else if (*cfg->http_addr)
		log_info("serving http", LOGF(F_STR("addr", h->where), F_STR("paths", "/metrics /healthz /readyz")));
	if (rc == 0 && (*cfg->http_addr || (cfg->warn_xact_age_ms > 0 && !cfg->once)) &&
	    (rc = watch_start(w, cfg, m)) < 0)
		log_error("cannot start the watcher thread", LOGF(F_STR("error", strerror(-rc))));
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

static int run_relay(const struct config *cfg)
{
	struct metrics m;
	struct drain d;
	struct http h = { 0 };
	struct watch w = { 0 };
	int rc;

	/* Every batch frees and allocates the same few hundred kilobytes (the
	 * rows libpq read, the command hiredis writes). Keep them in the heap
	 * instead of handing them back to the kernel and faulting them in again:
	 * memory stays at the peak of one batch, and a batch costs far fewer page
	 * faults. */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 128 << 20);

	if ((rc = metrics_init(&m)) < 0) {
		log_error("cannot start", LOGF(F_STR("error", strerror(-rc))));
		return EXIT_FAILURE;
	}
	drain_init(&d, cfg, &stop_requested);
	d.metrics = &m;
	rc = drain_start(&d);
	if (rc == 0) {
		metrics_connected(&m, METRICS_PG, true, false);
		metrics_connected(&m, METRICS_REDIS, true, false);
		rc = start_sidecars(cfg, &m, &h, &w);
	}
	if (rc == 0)
		rc = drain_run(&d);
	http_stop(&h);
	watch_stop(&w);
	drain_free(&d);
	metrics_free(&m);
	return rc < 0 ? EXIT_FAILURE : rc == DRAIN_LEFT ? EXIT_JOBS_LEFT : EXIT_SUCCESS;
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
