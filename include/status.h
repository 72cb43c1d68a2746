/* What `stagedrain status` found: the facts read from Postgres and Redis, and
 * the pure judgement of them (which need a person) and their formatting. */
#ifndef STAGEDRAIN_STATUS_H
#define STAGEDRAIN_STATUS_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "fmacros.h"
#include "lock_holder.h"
#include "pg_privileges.h"
#include "readers.h"
#include "status_horizon.h"

/* A queue whose Redis list has a cap, or that has held rows: its cap, held
 * jobs and list length, on one target (the same queue name may show on two). */
struct status_queue {
	char *name;
	size_t target; /* index into status.targets */
	long cap;
	long long held;       /* rows in staged_jobs_held */
	double held_oldest_s; /* the oldest held row's age (held_at); meaningless when held is 0 */
	long long length;     /* the Redis list's length (summed over a layout's lists); -1 unknown */
};

/* A target (routes.h): the default one, each route's, and any other the held
 * table names (a route since removed or renamed): where it is, whether it
 * answered, and what waits held for it. */
struct status_target {
	char *name;               /* "default", the route's, or the held table's */
	const struct config *cfg; /* its settings; NULL: no route of that name now */
	bool tried;               /* its Redis was connected to (configured, and not skipped) */
	bool reached;             /* it answered, and every command did */
	char where[300];          /* host:port/db, never a password */
	char err[256];
	long long held;         /* its rows in staged_jobs_held */
	double held_oldest_s;   /* the oldest one's age since it was staged (created_at); meaningless when held is 0 */
	struct readers readers; /* whether its workers read where it pushes (UNKNOWN: unread) */
	char cluster[160];      /* a cluster target: its state, masters and slots served; "" otherwise */
};

/* Why a part is unread when its server answered but this role may not see it
 * (sql/roles.sql's relay role reads no dead rows; only pg_read_all_stats
 * sees other roles' transactions): said, and not judged. */
#define STATUS_WHY_LEN 128

/* Every fact; a *_read flag says whether that part was read (a server down, a query failed, a privilege missing). */
struct status {
	bool pg_ok, redis_ok;
	char pg_err[256], redis_err[256];

	bool leader_read;
	struct lock_holder leader; /* kind NONE: no session holds the lock */
	double leader_age_s;       /* how long the holder's session has been up; < 0 unknown */
	long long epoch;           /* from Redis; -1: none there, or unread */

	bool backlog_read;
	char backlog_why[STATUS_WHY_LEN];
	bool staged_estimated; /* the count outlasted the statement timeout: the statistics' estimate */
	long long staged;
	double staged_oldest_s; /* the oldest staged row's age (created_at); NAN unknown; meaningless when staged is 0 */

	bool gaps_read;
	long long staging_xacts;      /* transactions, other than the leader's, with staged_jobs open for writing */
	double staging_oldest_s;      /* the oldest one's age (xact_start; a prepared one's: prepared) */
	int staging_oldest_pid;       /* 0 for a prepared transaction */
	char staging_oldest_gid[200]; /* a prepared one's gid; "" otherwise */

	bool dead_read;
	char dead_why[STATUS_WHY_LEN];
	long long dead;
	double dead_oldest_s;       /* failed_at of the oldest */
	long long dead_misdirected; /* staged for a key prefix the target's workers do not read */

	bool privileges_read;
	struct pg_privileges privileges; /* who else may change staged rows (pg_privileges.h) */

	char redis_where[300];   /* host:port/db connected to (or that would be) */
	const char *master_name; /* behind Sentinel: the master's name; NULL otherwise (points into the config) */
	bool redis_tls;

	struct status_target *targets; /* targets[0] is the default one */
	size_t ntargets;
	long long held;       /* every held row, all targets */
	double held_oldest_s; /* their oldest's age since it was staged; meaningless when held is 0 */

	bool queues_read; /* the held rows and staged queues, from Postgres */
	char queues_why[STATUS_WHY_LEN];
	struct status_queue *queues;
	size_t nqueues;

	bool horizon_read;
	char horizon_why[STATUS_WHY_LEN];
	struct status_horizon horizon;
};

void status_init(struct status *s);
void status_free(struct status *s);
/* Adds queue name of target with cap (or finds it): the entry, or NULL when out of memory. */
struct status_queue *status_queue_add(struct status *s, size_t target, const char *name, long cap);
/* Adds target name with its settings cfg (NULL: none configured), or finds
 * it: its index, or -ENOMEM. */
int status_target_add(struct status *s, const char *name, const struct config *cfg) SD_MUSTCHECK;

#define STATUS_MAX_PROBLEMS 8
#define STATUS_PROBLEM_LEN 512

/* What needs a person, each a short line; the thresholds in milliseconds
 * (horizon_ms 0: a held horizon is never a problem). */
struct status_problems {
	size_t n;
	char text[STATUS_MAX_PROBLEMS][STATUS_PROBLEM_LEN];
};

/* Pure: fills p from s: a server that could not be reached (a route's Redis
 * too), no relay leading (or a session that is not a relay holding the lock),
 * a job waiting (staged or held) longer than max_age_ms, a transaction
 * holding the xmin horizon longer than horizon_ms. */
void status_judge(const struct status *s, long long max_age_ms, long long horizon_ms, struct status_problems *p);

/* An age for people: "0.4s", "12s", "3m05s", "2h07m", "3d04h". */
void status_age(double seconds, char *out, size_t len);
/* A count with thousands separators: "1,204". */
void status_count(long long n, char *out, size_t len);

#endif
