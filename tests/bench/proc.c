/* The relay binary as a real process: start, stop, peak memory, its batch log. */
#include "bench.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support/logs.h"
#include "support/relay_argv.h"

/* Children still running, so the exit clean-up can stop them (by PID). */
#define MAX_CHILDREN 8
static pid_t children[MAX_CHILDREN];

static void track(pid_t pid)
{
	for (int i = 0; i < MAX_CHILDREN; i++)
		if (children[i] == 0) {
			children[i] = pid;
			return;
		}
}

static void untrack(pid_t pid)
{
	for (int i = 0; i < MAX_CHILDREN; i++)
		if (children[i] == pid)
			children[i] = 0;
}

void child_start(struct proc *p, const struct proc_opts *o)
{
	int rc = proc_start(p, o);

	if (rc < 0)
		die("could not start %s: %s", o->argv[0], strerror(-rc));
	track(p->pid);
}

int child_wait(struct proc *p, int timeout_ms)
{
	pid_t pid = p->pid;
	int st = proc_wait(p, timeout_ms);

	if (p->pid <= 0)
		untrack(pid);
	return st;
}

int child_stop(struct proc *p, int sig, int timeout_ms)
{
	pid_t pid = p->pid;
	int st = proc_stop(p, sig, timeout_ms);

	untrack(pid);
	return st;
}

/* SIGTERM, then SIGKILL after 10 s. */
void children_stop_all(void)
{
	for (int i = 0; i < MAX_CHILDREN; i++) {
		struct proc p = { children[i], -1 };
		if (p.pid > 0)
			(void)proc_stop(&p, SIGTERM, 10000);
		children[i] = 0;
	}
}

void relay_start(struct relay *r, const struct bench_env *env, const char *name, const char *level)
{
	relay_start_with(r, env, name, level, NULL);
}

/* The scenario's own flags go after --relay-args: what a scenario compares
 * wins (relay_argv_keep_last), and --relay-args beats the bench's own defaults. */
void relay_start_with(struct relay *r, const struct bench_env *env, const char *name, const char *level,
		      const char *const *flags)
{
	struct relay_argv a;
	char batch[32];

	snprintf(r->log, sizeof(r->log), "%s/%s.log", env->srv.dir, name);
	snprintf(batch, sizeof(batch), "%d", env->opts->batch_size);
	relay_argv_init(&a, env->opts->bin, env->srv.pg_url, env->srv.redis_url);
	(void)relay_argv_add(&a, "--batch-size", batch);
	(void)relay_argv_add(&a, "--log-format", "json");
	(void)relay_argv_add(&a, "--log-level", level);
	(void)relay_argv_words(&a, env->opts->relay_args);
	if (relay_argv_add_list(&a, flags) < 0)
		die("could not build the relay's command line: %s", strerror(-a.err));
	relay_argv_keep_last(&a);
	child_start(&r->proc, &(struct proc_opts){ .argv = a.argv, .log = r->log });
	relay_argv_free(&a); /* the child has its own copy */
}

int relay_stop(struct relay *r)
{
	pid_t pid = r->proc.pid;
	int st;

	if (pid <= 0)
		return -1;
	st = child_stop(&r->proc, SIGTERM, 30000);
	if (st < 0)
		note("relay %d did not stop within 30 s of SIGTERM; killed it", (int)pid);
	return st;
}

void relay_kill(struct relay *r)
{
	pid_t pid = r->proc.pid;

	(void)proc_signal(&r->proc, SIGKILL);
	if (pid > 0 && child_wait(&r->proc, 10000) < 0 && r->proc.pid > 0)
		die("relay %d did not die of SIGKILL within 10 s", (int)pid);
}

int relay_wait_log(const struct relay *r, const char *text, int timeout_ms)
{
	return logs_wait(r->log, text, 1, timeout_ms, &r->proc) ? 0 : -1;
}

long long proc_hwm_kib(pid_t pid)
{
	char path[64], line[256];
	long long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "VmHWM:", 6) == 0)
			kib = strtoll(line + 6, NULL, 10);
	fclose(f);
	return kib;
}

/* "2024-05-01T12:00:00.123Z" as µs since the epoch (UTC). */
static long long parse_ts(const char *s)
{
	struct tm tm;
	int ms = 0;

	memset(&tm, 0, sizeof(tm));
	if (sscanf(s, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
		   &tm.tm_sec, &ms) != 7)
		return -1;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (long long)timegm(&tm) * 1000000 + ms * 1000LL;
}

static bool add_field(json_t *o, const char *key, double *sum)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_number(v))
		return false;
	*sum += json_number_value(v);
	return true;
}

int relay_log_batches(const char *log, long long t0_wall_us, struct batch_minute *out, int minutes)
{
	char line[8192];
	FILE *f = fopen(log, "r");

	memset(out, 0, sizeof(*out) * (size_t)minutes);
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		json_t *o, *ts;
		long long t;
		int m;
		struct batch_minute *b;

		if (!strstr(line, "\"batch relayed\""))
			continue;
		if (!(o = json_loads(line, 0, NULL)))
			continue;
		ts = json_object_get(o, "ts");
		t = json_is_string(ts) ? parse_ts(json_string_value(ts)) : -1;
		m = t < t0_wall_us ? -1 : (int)((t - t0_wall_us) / 60000000);
		if (m >= 0 && m < minutes) {
			long long nb = json_integer_value(json_object_get(o, "batches"));
			b = &out[m];
			b->batches += nb > 1 ? nb : 1; /* a transaction of several batches logs one line */
			b->jobs += (long long)json_integer_value(json_object_get(o, "jobs"));
			/* All three or none: a partial set would be a different figure. */
			if (add_field(o, "fetch_us", &b->fetch_us) && add_field(o, "push_us", &b->push_us) &&
			    add_field(o, "commit_us", &b->commit_us))
				b->timed = true;
		}
		json_decref(o);
	}
	fclose(f);
	for (int m = 0; m < minutes; m++)
		if (!out[m].timed)
			out[m].fetch_us = out[m].push_us = out[m].commit_us = NAN;
	return 0;
}

/* An integer field of a log line, or -1 when the relay did not log it. */
static long long int_field(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* Every "batch relayed" line, appended to *v: when it ended, relative to t0. */
int relay_log_list(const char *log, long long t0_wall_us, struct batch_rec **v, size_t *n, size_t *cap)
{
	char line[8192];
	FILE *f = fopen(log, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		struct batch_rec b = { 0, 0, 0, 0, 0, 0, false, -1, -1, NAN };
		json_t *o, *ts;
		double fe = 0, pu = 0, co = 0;
		long long nb;

		if (!strstr(line, "\"batch relayed\""))
			continue;
		/* A relay killed mid-write leaves a torn last line: it does not parse. */
		if (!(o = json_loads(line, 0, NULL)))
			continue;
		ts = json_object_get(o, "ts");
		b.end_us = json_is_string(ts) ? parse_ts(json_string_value(ts)) - t0_wall_us : -1;
		b.jobs = (long long)json_integer_value(json_object_get(o, "jobs"));
		b.gaps = int_field(o, "gaps");
		b.held = int_field(o, "held");
		b.released = int_field(o, "released");
		if (json_is_number(json_object_get(o, "release_us")))
			b.release_us = json_number_value(json_object_get(o, "release_us"));
		if (add_field(o, "fetch_us", &fe) && add_field(o, "push_us", &pu) && add_field(o, "commit_us", &co)) {
			b.timed = true;
			b.fetch_us = fe;
			b.push_us = pu;
			b.commit_us = co;
		}
		/* A transaction of several batches logs one line: its batches, each an
		 * equal share of its jobs and times. */
		nb = json_integer_value(json_object_get(o, "batches"));
		json_decref(o);
		if (nb > 1) {
			b.jobs /= nb;
			b.fetch_us /= (double)nb;
			b.push_us /= (double)nb;
			b.commit_us /= (double)nb;
		}
		for (long long k = 0; k < (nb > 1 ? nb : 1); k++) {
			if (*n == *cap) {
				size_t c = *cap ? *cap * 2 : 4096;
				struct batch_rec *nv = realloc(*v, c * sizeof(**v));
				if (!nv)
					die("out of memory");
				*v = nv;
				*cap = c;
			}
			(*v)[(*n)++] = b;
		}
	}
	fclose(f);
	return 0;
}
