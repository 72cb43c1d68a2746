/* The throwaway PostgreSQL and Redis of tests/services.sh: start them in a
 * temp directory, run its other verbs, read the addresses it wrote, stop them. */
#ifndef STAGEDRAIN_SUPPORT_SERVICES_H
#define STAGEDRAIN_SUPPORT_SERVICES_H

#include "fmacros.h"

#include <stdbool.h>
#include <stddef.h>

struct services {
	char script[512]; /* tests/services.sh */
	char dir[512];    /* the servers' data, their logs, DIR/env */
	char pg_url[1024];
	char redis_url[256];
	int redis_port;
	bool up; /* services_stop has something to stop */
};

/* Makes $TMPDIR/stagedrain-NAME.XXXXXX and starts both servers there; 0 or
 * -1 with the cause on stderr. After a failure services_stop still stops
 * whatever did start. */
int services_start(struct services *s, const char *script, const char *name) SD_MUSTCHECK;
/* The servers of `services.sh run CMD`, from the TEST_* variables it sets;
 * 0, or -1 if one is missing (services_stop then leaves them alone). */
int services_attach(struct services *s) SD_MUSTCHECK;
/* `bash services.sh VERB DIR` (redis-stop, pg-restart, ...), output to log
 * (NULL: inherited); its exit status, or -1. */
int services_run(const struct services *s, const char *verb, const char *log);
/* `bash services.sh VERB DIR ARGS...` (cluster-kill DIR PORT, ...): args is
 * NULL-terminated (NULL: none); otherwise as services_run. */
int services_run_args(const struct services *s, const char *verb, const char *const *args, const char *log);
/* The same, its standard output (trailing newline cut) into out (at most
 * len - 1 bytes), its standard error to stderr; 0, or -1 if it failed. */
int services_output(const struct services *s, const char *verb, const char *const *args, char *out, size_t len);
/* `services.sh cluster-master-of DIR SLOT`: the port of the master that
 * serves slot now, or -1 if none runs (or cluster-start did not run). */
int services_cluster_master_of(const struct services *s, int slot);
/* `bin migrate --pg-url ...`, output to DIR/migrate.log (appended, so every
 * run stays readable); its exit status, or -1. */
int services_migrate(const struct services *s, const char *bin);
/* Stops the servers services_start started; 0, or -1 if stopping failed. */
int services_stop(struct services *s);
/* rm -rf DIR; 0 or -1. */
int services_remove(const struct services *s);

#endif
