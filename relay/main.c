/* stagedrain: parses the settings, installs signals, runs `migrate` or the relay. */
#include "fmacros.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "cmd_args.h"
#include "cmd_dead.h"
#include "cmd_held.h"
#include "cmd_move.h"
#include "cmd_status.h"
#include "config.h"
#include "drain.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "migrate.h"
#include "pg_source.h"
#include "signals.h"
#include "usage.h"
#include "values.h"
#include "version.h"
#include "watch.h"

/* --once stopped with jobs left behind (README, Settings); 1 and 2 are errors. */
#define EXIT_JOBS_LEFT 3
/* How long the exit waits for the watcher's round to end (README, Stopping). */
#define WATCH_STOP_WAIT_MS 500

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
 * the signals, so only the main thread (the drain) sees them. The endpoint
 * starts first: while the servers are waited for, /readyz says so.
 */
static int start_http(const struct config *cfg, struct metrics *m, struct http *h)
{
	sigset_t old;
	int rc;

	if (!*cfg->http_addr)
		return 0;
	signals_block(&old);
	rc = http_start(h, cfg, m);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc < 0)
		log_error("cannot start", LOGF(F_STR("setting", "--http-addr"), F_STR("error", h->errstr)));
	else
		log_info("serving http", LOGF(F_STR("addr", h->where), F_STR("paths", "/metrics /healthz /readyz")));
	return rc;
}

/* The watcher runs whenever someone reads what it finds: the endpoint, or the
 * long-transaction warning of a relay that keeps running. It starts once the
 * drain has, so that a setting that can never work ends the start in one line. */
static int start_watch(const struct config *cfg, struct metrics *m, struct watch *w)
{
	sigset_t old;
	int rc;

	if (!*cfg->http_addr && (cfg->warn_xact_age_ms <= 0 || cfg->once))
		return 0;
	signals_block(&old);
	rc = watch_start(w, cfg, m);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc < 0)
		log_error("cannot start the watcher thread", LOGF(F_STR("error", strerror(-rc))));
	return rc;
}

static int run_relay(const struct config *cfg)
{
	struct metrics m;
	struct drain d;
	struct http h = { 0 };
	struct watch w = { 0 };
	int rc, status;

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
	drain_init(&d, cfg, signals_stop_flag(), &m);
	rc = start_http(cfg, &m, &h);
	if (rc == 0)
		rc = drain_start(&d);
	if (rc == 0)
		rc = start_watch(cfg, &m, &w);
	if (rc == 0) {
		rc = drain_run(&d);
	} else if (rc == -ECANCELED) {
		log_info("stopped on signal while waiting for a server", NULL);
		rc = 0;
	}
	status = rc < 0 ? EXIT_FAILURE : rc == DRAIN_LEFT ? EXIT_JOBS_LEFT : EXIT_SUCCESS;
	http_stop(&h);
	if (!watch_stop(&w, WATCH_STOP_WAIT_MS)) {
		/* Its round waits on a stuck server; the stop must not. It still
		 * holds w and the metrics, and exit's clean-up (OpenSSL's, libpq's)
		 * would pull them from under it: end here. */
		log_warn("the watcher is still waiting on a server; exiting without it",
			 LOGF(F_INT("waited_ms", WATCH_STOP_WAIT_MS)));
		_exit(status);
	}
	drain_free(&d);
	metrics_free(&m);
	return status;
}

/* `stagedrain help [COMMAND]`: the daemon's usage, or one operator command's. */
static int run_help(int argc, char **argv)
{
	char shown[64];

	if (argc <= 2) {
		config_usage(stdout);
		return EXIT_SUCCESS;
	}
	if (argc == 3 && commands_usage(stdout, argv[2]))
		return EXIT_SUCCESS;
	fprintf(stderr, "stagedrain: no command \"%s\" to help with (see stagedrain help)\n",
		value_printable(argv[2], shown, sizeof(shown)));
	return CMD_EXIT_USAGE;
}

/* The operator commands read their own arguments and the settings; they run without a relay. */
static const struct operator_cmd {
	const char *word;
	int (*run)(int argc, char **argv);
} operator_cmds[] = {
	{ "help", run_help },      { "status", cmd_status_main }, { "dead", cmd_dead_main },
	{ "held", cmd_held_main }, { "move", cmd_move_main },     { NULL, NULL },
};

/* A password inside a URL given as a flag shows in ps to every user of the machine. */
static void warn_argv_passwords(const struct config *cfg)
{
	if (cfg->pg_url_argv_password)
		log_warn(
			"a password is given inside --pg-url on the command line, where every user of this machine can "
			"read it (ps, /proc); give it in --pg-password-file, or the URL in --pg-url-file or "
			"STAGEDRAIN_PG_URL",
			LOGF(F_STR("setting", "--pg-url")));
	if (cfg->redis_url_argv_password)
		log_warn("a password is given inside --redis-url on the command line, where every user of this machine "
			 "can read it (ps, /proc); give it in --redis-password-file, or the URL in --redis-url-file or "
			 "STAGEDRAIN_REDIS_URL",
			 LOGF(F_STR("setting", "--redis-url")));
}

int main(int argc, char **argv)
{
	struct config cfg;
	char err[CONFIG_ERR_SIZE];
	int status;

	/* The process holds passwords: no core dump, and no other process of the
	 * same user may read its memory (ptrace, /proc/<pid>/mem). */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	for (const struct operator_cmd *op = operator_cmds; argc > 1 && op->word; op++)
		if (strcmp(argv[1], op->word) == 0)
			return op->run(argc, argv);
	/* Before anything that takes time (the settings' files, the log): a
	 * SIGHUP the moment the relay starts (a service manager's reload, a
	 * closed terminal) is noted like any other, never fatal. A SIGTERM in
	 * that time is not lost: the relay stops as on one a moment later (one
	 * that cuts a slow file's read short ends the start with that error). */
	signals_install();
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
	warn_argv_passwords(&cfg);
	if (cfg.command == CMD_MIGRATE)
		status = run_migrate(&cfg);
	else if (cfg.command == CMD_RUN)
		status = run_relay(&cfg);
	else /* an operator command that operator_cmds lacks: never the relay by mistake */
		status = CMD_EXIT_USAGE, fprintf(stderr, "stagedrain: %s is not built into this binary\n", argv[1]);
	config_free(&cfg);
	return status;
}
