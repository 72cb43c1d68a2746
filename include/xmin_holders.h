/* Everything that holds back the database's xmin horizon, so vacuum cannot remove
 * dead rows: backends, a standby's feedback, replication slots, prepared transactions. */
#ifndef STAGEDRAIN_XMIN_HOLDERS_H
#define STAGEDRAIN_XMIN_HOLDERS_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

#include "fmacros.h"

enum xmin_holder_kind { XMIN_BACKEND = 0, XMIN_STANDBY, XMIN_SLOT, XMIN_PREPARED, XMIN_NKINDS };

/* The holders read at most; the oldest come first, so the rest matter less. */
#define XMIN_HOLDERS_MAX 32

/*
 * One holder and what an operator needs to end it. Fields a kind has no use
 * for are "" or 0.
 *
 *   kind      pid              name              user   where                        since
 *   backend   its pid          application_name  role   state (idle in transaction)  xact_start
 *   standby   its walsender    application_name  role   client address ("local")     backend_start
 *   slot      active_pid or 0  slot name         ""     "physical" or "logical"      ""
 *   prepared  0                gid               owner  ""                           prepared
 */
struct xmin_holder {
	enum xmin_holder_kind kind;
	int pid;
	char name[128];
	char user[64];
	char where[64];
	char since[40];
	bool active;       /* slot: a session streams from it (an inactive one holds for ever) */
	bool catalog_only; /* slot: only catalog_xmin, which holds back the system catalogs' cleanup */
	char xmin[16];     /* the xid it holds back to, as text */
	long long xids;    /* age(xmin): transactions begun since, the measure every kind has */
	/* Seconds since it began to hold, where PostgreSQL says: a backend's
	 * xact_start, a prepared transaction's prepared time. NAN for a standby
	 * (PostgreSQL keeps no time of its feedback's xmin: backend_start is when
	 * it connected, reply_time its last message) and a slot (PostgreSQL 15
	 * keeps no time for one): the caller may time those itself. */
	double age_s;
	/* Stays the same while the same thing holds the same horizon: backend
	 * pid and xact_start, standby pid and xmin, slot name and xmin, gid and
	 * prepared time. A watcher tells holdings apart by it. */
	char id[200];
};

/* No allocation: nothing to free. */
struct xmin_holders {
	struct xmin_holder h[XMIN_HOLDERS_MAX];
	size_t n;      /* oldest first, by xids */
	bool sees_all; /* pg_read_all_stats: other roles' backends and the standbys' xmin are visible */
};

/*
 * Reads every holder of the current database's horizon in one statement.
 * Without pg_read_all_stats (or pg_monitor) other roles' backends and every
 * standby's feedback are hidden by PostgreSQL: out->sees_all says so, and the
 * caller reports it once. Slots and prepared transactions are readable by any
 * role. 0, or -EIO with the error in err.
 */
int xmin_holders_read(PGconn *pg, struct xmin_holders *out, char *err, size_t errlen) SD_MUSTCHECK;

/* "backend", "standby", "slot", "prepared". */
const char *xmin_holder_kind_name(enum xmin_holder_kind kind);

/*
 * What ends the holding, one line for an operator ("SELECT
 * pg_terminate_backend(1234)", "ROLLBACK PREPARED 'gid'", ...), names quoted
 * as SQL literals. Pure. Returns what snprintf would have written.
 */
int xmin_holder_remedy(const struct xmin_holder *h, char *out, size_t len);

#endif
