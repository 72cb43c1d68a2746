/*
 * A job format: the payload a staged row becomes, and the Redis commands that
 * push a batch of them, exactly as that worker library's own client writes
 * them. One file per format (relay/format_*.c); job_build.c runs the checks every
 * format shares, and the drain, the fence and the sink never see which
 * format they carry.
 */
#ifndef STAGEDRAIN_FORMAT_H
#define STAGEDRAIN_FORMAT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "batch.h"
#include "buf.h"
#include "fmacros.h"
#include "job.h"
#include "payload.h"
#include "redis_cmds.h"

/* A row that passed the shared checks: class and queue are non-empty UTF-8
 * without NULs, args is a JSON array no deeper than JOB_MAX_DEPTH - 1 and
 * no larger than --max-job-bytes, options an object without duplicate keys.
 * Both are JSON text (numbers of any size): read them with payload.h's
 * readers, copy them, never re-encode them. */
struct job_in {
	const struct job_row *row;
	struct span args;    /* the args text, trimmed */
	struct span options; /* the options text, trimmed; {} when NULL */
	bool scheduled;      /* run_at is after opts->now_us */
};

struct format {
	const char *name;
	/* Appends in's payload to out: 0, JOB_REJECT with a one-line reason
	 * (out may hold a partial payload: job.c rewinds it), or -ENOMEM. */
	int (*payload)(const struct job_in *in, const struct job_opts *opts, struct buf *out, char *reason,
		       size_t rlen);
	/* Appends the commands that push every job of b, queue by queue in id
	 * order, under key prefix (--namespace or --laravel-prefix). */
	int (*commands)(struct redis_cmds *c, const struct batch *b, const char *prefix);
	/* Appends one `LLEN <list>` per list the queue's workers pop (what a
	 * queue cap counts), under key prefix. */
	int (*lists)(struct redis_cmds *c, const char *prefix, const char *queue, size_t len);
	/* 0, or JOB_REJECT with a reason naming the key, when this layout's
	 * list for queue would be a key its workers keep for something else
	 * (NULL: no queue name can be). */
	int (*check_queue)(struct span queue, char *reason, size_t rlen);
	/* Lua the push script runs before its commands (push_script.h): the
	 * procedures this layout's commands name, for a push that must decide
	 * as it writes (BullMQ's add); NULL: plain Redis commands only. */
	const char *script;
	/* On a Redis Cluster (redis_cluster.h): what stands between the key
	 * prefix and a queue's name in every key of that queue, so that a hash
	 * tag in "<prefix><infix><queue>" puts them all in one slot. NULL: a
	 * layout whose keys a cluster cannot hold together (one set for every
	 * queue, as Sidekiq's queues). */
	const char *cluster_infix;
	/* Appends to keys (one command's arguments) the keys command k of c
	 * reads or writes, for a procedure (NULL: a plain command's key is its
	 * first argument). */
	int (*cluster_keys)(struct redis_cmds *keys, const struct redis_cmds *c, size_t k);
};

/* A queue name in a reason: its first FORMAT_SHOWN bytes, "..." after a
 * longer one (for "%.*s%s"), so the reason keeps its end in its 256 bytes. */
#define FORMAT_SHOWN 40
#define FORMAT_SHOW(s) (int)((s).n < FORMAT_SHOWN ? (s).n : FORMAT_SHOWN), (s).p, (s).n > FORMAT_SHOWN ? "..." : ""

/*
 * Whether the row's options say "serialized": true, that the client library
 * staged the payload its framework built (ActiveJob's serialize, Celery's
 * message) rather than the arguments alone. 0 (*on false when absent), or
 * JOB_REJECT when it is not a boolean. The key is consumed, never written.
 */
int format_serialized(struct span options, bool *on, char *reason, size_t rlen);

/* The job hash Sidekiq's client writes, which ActiveJob's adapter wraps:
 * class (and wrapped), args written by put_args, queue, jid, retry, the
 * row's options but those in skip (NULL-terminated, or NULL), created_at,
 * and enqueued_at unless scheduled. */
struct sidekiq_item {
	struct span class_name;
	struct span wrapped; /* n == 0: no "wrapped" key */
	int (*put_args)(struct buf *b, const struct job_in *in, const struct job_opts *opts, void *arg);
	void *arg;
	const char *const *skip;
};
int sidekiq_put_item(struct buf *b, const struct job_in *in, const struct job_opts *opts,
		     const struct sidekiq_item *it) SD_MUSTCHECK;
/* A sidekiq_item's put_args for the row's args text as written (a plain
 * Sidekiq job; ActiveJob's serialize staged by the app). */
int sidekiq_put_row_args(struct buf *b, const struct job_in *in, const struct job_opts *opts, void *arg);
/* Epoch seconds as Sidekiq writes a float: "1700000000.25", "1700000000.0". */
void job_format_epoch(char *dst, size_t dstlen, long long us);
/* Sidekiq's job check: a jid of 24 lowercase hex digits. 0 or JOB_REJECT. */
int sidekiq_check_jid(const struct job_row *row, char *reason, size_t rlen);
/* The sidekiq layout: SADD queues, LPUSH queue:<q>, ZADD schedule. */
int sidekiq_commands(struct redis_cmds *c, const struct batch *b, const char *prefix);

/* The options key the Laravel client records its app's Redis key prefix in
 * (what --laravel-prefix must be); no other reader of options takes it. */
#define LARAVEL_PREFIX_KEY "laravel_prefix"
/* How the reason of a row staged for a prefix the target's workers do not
 * read begins: status and /metrics count the dead rows by it. */
#define JOB_MISDIRECTED "misdirected:"

/*
 * Laravel's payload for a row that carries what the app's framework built
 * (options "serialized": true, clients/php): args [payload], the payload text
 * as one JSON string, appended to out byte for byte once it is strict JSON
 * with the keys the row and the worker need. 0, JOB_REJECT or -ENOMEM.
 */
int laravel_built_payload(const struct job_in *in, struct buf *out, char *reason, size_t rlen) SD_MUSTCHECK;
/* JSON text Laravel's worker can pop: no deeper than max_depth levels, every
 * number within a double's range (its pop script re-encodes the job with
 * Redis' cjson after the LPOP). 0, JOB_REJECT or -ENOMEM. */
int laravel_check_json(struct span json, int max_depth, char *reason, size_t rlen) SD_MUSTCHECK;

/* On a Redis Cluster: 0 when "<prefix><f's infix><queue>" holds a hash tag
 * (redis_cluster.h), so every key of the queue shares one slot; else
 * JOB_REJECT with a reason that says where to put one. */
int format_check_cluster_queue(const struct format *f, const char *prefix, struct span queue, char *reason,
			       size_t rlen) SD_MUSTCHECK;

/* Which of a batch's jobs a command takes. */
enum format_which { FORMAT_NOW, FORMAT_LATER, FORMAT_ALL };

/* A list within job j's queue (Celery's priority step). */
typedef int (*format_sub_fn)(const struct batch *b, const struct batch_job *j);
/*
 * Groups the jobs which takes in c->groups, list by list (a list: a queue,
 * or with sub a list within it), the lists in the order of their first
 * job, each list's jobs in id order; n log n comparisons of queue names.
 */
int format_group(struct redis_cmds *c, const struct batch *b, enum format_which which, format_sub_fn sub) SD_MUSTCHECK;

/* Adds job j's values to the command being built (its payload; a score and
 * its payload; a constant). */
typedef int (*format_add_fn)(struct redis_cmds *c, const struct batch *b, const struct batch_job *j);

/*
 * Shared by the layouts: for each queue, in order of its first job that
 * which takes, one `<cmd> <prefix><infix><queue><suffix>` with add's values
 * for each of its jobs that which takes, in id order (split as redis_cmds
 * splits long commands).
 */
int format_per_queue(struct redis_cmds *c, const struct batch *b, enum format_which which, const char *cmd,
		     const char *prefix, const char *infix, const char *suffix, format_add_fn add);
/* format_per_queue's add for the job's payload alone. */
int format_add_payload(struct redis_cmds *c, const struct batch *b, const struct batch_job *j);
/* One `<cmd> <prefix><infix><queue> payload...` per queue, of the jobs which takes. */
int format_push_queues(struct redis_cmds *c, const struct batch *b, const char *cmd, const char *prefix,
		       const char *infix, enum format_which which);
/* `LLEN <prefix><infix><queue>`: a layout's list of queue. */
int format_llen(struct redis_cmds *c, const char *prefix, const char *infix, const char *queue, size_t len);
/* `LLEN <prefix>queue:<q>`: the list of Sidekiq's and Resque's layouts. */
int format_queue_list(struct redis_cmds *c, const char *prefix, const char *queue, size_t len);
/* `SADD <prefix>queues q...` of the queues the batch pushes to now. */
int format_add_queue_set(struct redis_cmds *c, const struct batch *b, const char *prefix);

#endif
