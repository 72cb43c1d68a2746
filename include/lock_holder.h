/* Who holds the relay's leader lock, as Postgres shows it: another relay, or a
 * foreign session (any role may take an advisory lock). A relay that leads
 * also holds a companion lock, the two-int form of the same key, which only
 * relays take: it tells the two apart (README "Security"). */
#ifndef STAGEDRAIN_LOCK_HOLDER_H
#define STAGEDRAIN_LOCK_HOLDER_H

#include <stdbool.h>
#include <stddef.h>

#include "fmacros.h"
#include "pg_source.h"

/* What a role that may not read another role's statistics is told instead. */
#define LOCK_HOLDER_HIDDEN "not visible to this role"

enum lock_holder_kind {
	LOCK_HOLDER_NONE = 0, /* nobody holds it now (it was freed between the try and the look) */
	LOCK_HOLDER_RELAY,    /* its holder also holds the companion lock */
	LOCK_HOLDER_FOREIGN,  /* anything else, a relay older than the companion lock included */
};

struct lock_holder {
	enum lock_holder_kind kind;
	int pid; /* 0: no session, a prepared transaction holds it */
	char user[64];
	char app[64];   /* application_name: the session's own word, named, never trusted */
	char addr[64];  /* client address, "local socket", or LOCK_HOLDER_HIDDEN */
	char since[32]; /* the session's backend_start, UTC, or LOCK_HOLDER_HIDDEN */
};

/* On the session that has just taken the leader lock: takes the companion
 * lock too, without waiting. *marked is false when another session holds it.
 * 0, or -EIO (pg->errstr). Never released: the session's end frees both. */
int lock_holder_mark(struct pg_source *pg, bool *marked) SD_MUSTCHECK;
/* Reads who holds the leader lock now into h (kind NONE if nobody does).
 * One statement over pg_locks and pg_stat_activity. 0, or -EIO (pg->errstr). */
int lock_holder_read(struct pg_source *pg, struct lock_holder *h) SD_MUSTCHECK;
/* True when a and b name the same holder (the same session, of the same kind). */
bool lock_holder_same(const struct lock_holder *a, const struct lock_holder *b);
/* "another relay, pid P, user U, application_name "A", from ADDR, session
 * started T", or "a session that is not a relay, ...", for a line of text. */
void lock_holder_describe(const struct lock_holder *h, char *out, size_t len);

#endif
