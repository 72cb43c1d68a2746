/* The oldest holder of the database's xmin horizon, for `stagedrain status`:
 * one small reader, so a fuller one (every holder kind) can take its place. */
#ifndef STAGEDRAIN_STATUS_HORIZON_H
#define STAGEDRAIN_STATUS_HORIZON_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

#include "fmacros.h"

struct status_horizon {
	bool held;      /* something holds it back now; the rest is valid only then */
	char kind[24];  /* "backend" (later also standby, slot, prepared) */
	char name[160]; /* who: "pid 4242, user app, application_name \"rails\", state idle in transaction" */
	int pid;        /* the backend's pid; 0 for a holder that has none */
	double age_s;   /* how long it has held it */
};

/* Reads the oldest holder into out (held false when none). 0, or -EIO with one line in err. */
int status_horizon_read(PGconn *conn, struct status_horizon *out, char *err, size_t errlen) SD_MUSTCHECK;

#endif
