/* The holder of the database's xmin horizon that `stagedrain status` shows and judges,
 * picked from every holder xmin_holders.c reads (backends, standbys, slots, prepared). */
#ifndef STAGEDRAIN_STATUS_HORIZON_H
#define STAGEDRAIN_STATUS_HORIZON_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

#include "fmacros.h"

struct status_horizon {
	bool sees_all;  /* pg_read_all_stats: other roles' transactions count; without it, the rest is a guess */
	bool held;      /* something holds it back now; the rest is valid only then */
	char kind[24];  /* "backend", "standby", "slot" or "prepared" */
	char name[384]; /* who: "pid 4242, user app, application_name \"rails\", idle in transaction" */
	int pid;        /* the backend's (or walsender's, or slot consumer's) pid; 0 when it has none */
	bool timed;     /* age_s is known: Postgres keeps no time for a standby's feedback or a slot */
	bool forever;   /* an inactive slot: nothing will ever move it on */
	double age_s;   /* how long it has held it, when timed */
	long long xids; /* transactions begun since its xmin: every kind has this */
	char end_it[320];
};

/*
 * Reads every holder and picks the one a person must act on first: an
 * inactive slot, else the longest-held one that has a time, else the oldest
 * by xids. held is false when none. 0, or -EIO with one line in err.
 */
int status_horizon_read(PGconn *conn, struct status_horizon *out, char *err, size_t errlen) SD_MUSTCHECK;

#endif
