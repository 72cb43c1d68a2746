/* Chaos with a Redis Cluster target (chaos --cluster 1, on top of --routes):
 * services.sh's 3-master cluster, three more queues ({c1}, {c2}, {c4}: one
 * hash tag on each master) routed to it with --format bullmq, faults of its
 * own (a master SIGKILLed, its replica promoted, the old master revived; a
 * slot moved key by key while jobs flow), and the checker reading BullMQ's
 * wait lists and delayed sets from each slot's current master. */
#ifndef STAGEDRAIN_CHAOS_CLUSTER_H
#define STAGEDRAIN_CHAOS_CLUSTER_H

#include "common.h"

#define CLUSTER_NQUEUES 3
extern const char *const cluster_queues[CLUSTER_NQUEUES];

/* The route's name, chaos_seen.target of the cluster's jobs. */
#define CLUSTER_ROUTE "cl"

/* Fault events for the orchestrator's log (chaos.c's note_event). */
typedef void cluster_note_fn(void *arg, const char *kind, const char *text);

struct cluster_chaos {
	struct env *env;
	bool full_coverage; /* cluster-require-full-coverage yes (CLUSTERDOWN everywhere until a promotion) */
	char url[256];      /* redis-cluster://... as cluster-start wrote it */
	char flag[512];     /* the route: "cl {c1},{c2},{c4} --redis-url ... --format bullmq ..." */
	unsigned slot[CLUSTER_NQUEUES]; /* each queue's hash slot */
	cluster_note_fn *note;
	void *note_arg;
	int killed_port; /* a master cluster_kill SIGKILLed, until cluster_revive */
	/* what happened */
	int kills, revives, moves;
	long long promote_ms[64], move_ms[64], move_keys[64];
	long long held_at_revive; /* rows held for the cluster just before each revive, summed */
	/* what the checker found (cluster_seen_load) */
	long long waiting, delayed, repushes;
	char causes[512];    /* re-pushes by the fault before them, as report lines */
	char self_test[400]; /* cluster_self_test's line for the report */
};

/* Starts the cluster in the run's directory (no-coverage unless full_coverage),
 * records where the cluster's queues go (chaos_routed) and lets each queue's
 * events stream keep every event; 0 or -1 (said why). */
int cluster_start(struct cluster_chaos *cc, struct env *e, bool full_coverage, cluster_note_fn *note,
		  void *note_arg) SD_MUSTCHECK;
/* Adds "--route <the cluster route>" to a. */
void cluster_args(const struct cluster_chaos *cc, struct relay_argv *a);
/* A staged row's uuid (BullMQ's job id) made from its jid, so that a job id
 * in Redis names its row, rolled back or not: jid's 24 hex digits and eight
 * zeros, as 8-4-4-4-12. */
void cluster_uuid(const char *jid, char out[37]);

/* SIGKILLs the master of a cluster queue's slot (chosen by rng) and waits
 * until its replica serves the slots; 0 or -1. */
int cluster_kill(struct cluster_chaos *cc, unsigned long long *rng) SD_MUSTCHECK;
/* Starts the killed master again (it rejoins as a replica); 0 or -1. */
int cluster_revive(struct cluster_chaos *cc) SD_MUSTCHECK;
/* Moves a cluster queue's slot (its wait list, job hashes, events) to another
 * master, a few keys at a time, relays pushing meanwhile; 0 or -1. */
int cluster_move(struct cluster_chaos *cc, unsigned long long *rng) SD_MUSTCHECK;

/* Loads the cluster's jobs into chaos_seen (target "cl"): each wait list
 * (src queue, in push order) and delayed set (src schedule) read at its
 * slot's master, the job hashes' name and data as class and args, and the
 * time of each job's "added" event as enq; a "duplicated" event (a push of
 * an id BullMQ already had: the relay pushed a job again and BullMQ's id
 * check dropped it) goes to chaos_repushed. Adds to *entries; 0 or -1. */
int cluster_seen_load(struct cluster_chaos *cc, struct env *e, long long *entries) SD_MUSTCHECK;
/* Breaks the cluster's queues in six known ways (a job removed, one pushed
 * twice, a non-job, a rolled-back job's id, a job's data changed, a
 * re-push event) and checks again: 0 if each count moved from before, 1 if
 * one did not, -1 if it could not run. after gets the counts. */
int cluster_self_test(struct cluster_chaos *cc, const struct results *before, struct results *after);
/* The report's cluster lines; whether they pass: every fault asked for
 * happened, the cluster got jobs, nothing was pushed again, and no relay
 * (logs relay-001.log .. relay-<relay_logs>.log) waited out --redis-timeout
 * for a node's answer. */
bool cluster_report(struct cluster_chaos *cc, int want_kills, int want_moves, int relay_logs);
void cluster_stop(struct cluster_chaos *cc);

/* Shared by cluster.c and cluster_check.c. */
#define PREFIX "bull"
#define PAGE 10000
/* A connection to the master that serves slot now (its port in *port), or NULL (said why). */
redisContext *cluster_master_open(struct cluster_chaos *cc, unsigned slot, int *port);
/* A command's reply, or NULL with the error said. */
redisReply *cluster_cmd(redisContext *r, const char *fmt, ...) SD_PRINTF(2, 3);
/* The jid a job id (a uuid cluster_uuid made) names, into out; false when it names none. */
bool cluster_jid_of(const char *id, char out[25]);

#endif
