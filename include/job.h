/* A staged row and the job it becomes: the types every step shares (job_build.h builds). */
#ifndef STAGEDRAIN_JOB_H
#define STAGEDRAIN_JOB_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "fmacros.h"

/* The layout a job takes in redis, as that worker library's own client writes it. */
enum job_format { FORMAT_SIDEKIQ = 0, FORMAT_RESQUE, FORMAT_ACTIVEJOB, FORMAT_CELERY, FORMAT_LARAVEL, FORMAT_BULLMQ };

/* Which Rails wrote the ActiveJob payload: 6.1 and 7.0 write times to the
 * second with no scheduled_at; 7.1 and later nine digits and scheduled_at. */
enum rails_version { RAILS_6_1 = 61, RAILS_7_1 = 71 };

/* One staged row as read from Postgres; strings need not be NUL-terminated. */
struct job_row {
	long long id;
	const char *queue;
	size_t queue_len;
	const char *job_class;
	size_t class_len;
	const char *args; /* JSON text */
	size_t args_len;
	const char *options; /* JSON text, an object; NULL means {} */
	size_t options_len;
	const char *jid; /* 24 lowercase hex digits */
	size_t jid_len;
	long long created_at_us; /* epoch microseconds */
	bool has_run_at;
	long long run_at_us;
	/* Set when a column holds what no job can carry (a time of infinity, an
	 * args text too large to read): the row is rejected with this reason. */
	const char *unfit;
	const char *uuid; /* 36 characters, fixed at staging: ActiveJob's job_id, Celery's task id, Laravel's uuid */
	size_t uuid_len;
	const char *tenant; /* NULL: the NULL tenant */
	size_t tenant_len;
	const char *route; /* NULL: the route rules pick the target by queue */
	size_t route_len;
};

struct job_opts {
	enum job_format format;
	int sidekiq_version;
	long max_job_bytes;
	long long now_us; /* enqueued_at, and the line between immediate and scheduled */
	enum rails_version rails_version;
	const char *origin; /* Celery's origin header: "stagedrain@<host>"; NULL: "stagedrain" */
	size_t target;      /* the target (routes.h) the jobs built go to: job_build_add notes it */
	/* The target's key prefix (--namespace, --laravel-prefix): where its
	 * workers must read. NULL: no row's recorded prefix is checked. */
	const char *key_prefix;
	bool cluster; /* a Redis Cluster target: a queue's keys need a hash tag */
};

/* Where one built job sits in the batch buffer. */
struct job_out {
	bool scheduled;      /* run_at > now: goes to the schedule, not a queue */
	long long run_at_us; /* when scheduled */
	size_t off;          /* payload starts at buf->data + off */
	size_t len;
};

/* The longest queue, class or tenant a row may have: far past any a real
 * app writes, and what keeps a hostile row's cost to the relay small (the
 * read leaves a longer one in Postgres and the row is dead-lettered). */
#define JOB_MAX_NAME_BYTES 1024

#define JOB_REJECT 1
#define JOB_REASON_SIZE 256
/*
 * Deepest nesting of a payload, counting the job object as 1. Ruby's JSON
 * refuses more by default (max_nesting 100): Sidekiq's client would not
 * write such a job and its workers, like Resque's, could not read it.
 */
#define JOB_MAX_DEPTH 100

#endif
