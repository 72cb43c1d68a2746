/* The relay binary as a real process: start, stop, peak memory, its batch log. */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

/* Waits up to timeout_ms; returns the exit status, 128+signal, or -1 if still running. */
static int wait_child(pid_t pid, int timeout_ms)
{
	long long end = mono_us() + (long long)timeout_ms * 1000;
	int st;

	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid) {
			untrack(pid);
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		}
		if (w < 0 && errno != EINTR) {
			untrack(pid);
			return -1;
		}
		if (mono_us() > end)
			return -1;
		sleep_ms(10);
	}
}

void proc_stop_all(void)
{
	for (int i = 0; i < MAX_CHILDREN; i++) {
		pid_t pid = children[i];
		if (pid <= 0)
			continue;
		kill(pid, SIGTERM);
		if (wait_child(pid, 10000) < 0) {
			kill(pid, SIGKILL);
			wait_child(pid, 5000);
		}
		children[i] = 0;
	}
}

/* fork+exec with stdout and stderr to log (or inherited when NULL), and
 * with stdin from a pipe whose write end goes to *wfd when wfd is given. */
static pid_t spawn_io(const char *const *argv, const char *log, int *wfd)
{
	int pfd[2] = {-1, -1};
	pid_t pid;

	if (wfd && pipe(pfd) < 0)
		die("pipe: %s", strerror(errno));
	/* Only this child may hold the pipe, or its reader never sees end of file. */
	if (wfd && (fcntl(pfd[0], F_SETFD, FD_CLOEXEC) < 0 || fcntl(pfd[1], F_SETFD, FD_CLOEXEC) < 0))
		die("fcntl: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		if (wfd) {
			dup2(pfd[0], 0);
			close(pfd[0]);
			close(pfd[1]);
		}
		if (log) {
			int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (fd < 0)
				_exit(127);
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		execv(argv[0], (char *const *)argv);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	if (wfd) {
		close(pfd[0]);
		*wfd = pfd[1];
	}
	track(pid);
	return pid;
}

static pid_t spawn(const char *const *argv, const char *log)
{
	return spawn_io(argv, log, NULL);
}

pid_t proc_spawn_piped(const char *const *argv, const char *log, int *wfd)
{
	return spawn_io(argv, log, wfd);
}

int proc_wait(pid_t pid, int timeout_ms)
{
	return wait_child(pid, timeout_ms);
}

int run_cmd(const char *const *argv, const char *log)
{
	pid_t pid = spawn(argv, log);
	int st;

	/* Start-up commands (migrate, services.sh) are bounded by their own timeouts. */
	while ((st = wait_child(pid, 600000)) < 0 && !bench_stop)
		;
	return st;
}

void relay_start(struct relay *r, const struct bench_env *env, const char *name, const char *level)
{
	const char *argv[40];
	char batch[32], *extra = NULL, *save = NULL;
	int n = 0;

	snprintf(r->log, sizeof(r->log), "%s/%s.log", env->dir, name);
	snprintf(batch, sizeof(batch), "%d", env->opts->batch_size);
	argv[n++] = env->opts->bin;
	argv[n++] = "--pg-url";
	argv[n++] = env->pg_url;
	argv[n++] = "--redis-url";
	argv[n++] = env->redis_url;
	argv[n++] = "--batch-size";
	argv[n++] = batch;
	argv[n++] = "--log-format";
	argv[n++] = "json";
	argv[n++] = "--log-level";
	argv[n++] = level;
	if (env->opts->relay_args && *env->opts->relay_args) {
		extra = strdup(env->opts->relay_args);
		if (!extra)
			die("out of memory");
		for (char *t = strtok_r(extra, " ", &save); t && n < 38; t = strtok_r(NULL, " ", &save))
			argv[n++] = t;
	}
	argv[n] = NULL;
	r->pid = spawn(argv, r->log);
	free(extra); /* the child has its own copy */
}

int relay_stop(struct relay *r)
{
	int st;

	if (r->pid <= 0)
		return -1;
	kill(r->pid, SIGTERM);
	st = wait_child(r->pid, 30000);
	if (st < 0) {
		note("relay %d did not stop within 30 s of SIGTERM; killing it", (int)r->pid);
		kill(r->pid, SIGKILL);
		wait_child(r->pid, 5000);
	}
	r->pid = 0;
	return st;
}

void relay_kill(struct relay *r)
{
	if (r->pid <= 0)
		return;
	kill(r->pid, SIGKILL);
	if (wait_child(r->pid, 10000) < 0)
		die("relay %d did not die of SIGKILL within 10 s", (int)r->pid);
	r->pid = 0;
}

int relay_wait_log(const struct relay *r, const char *text, int timeout_ms)
{
	long long end = mono_us() + (long long)timeout_ms * 1000;
	char line[8192];

	while (mono_us() < end && !bench_stop && proc_hwm_kib(r->pid) >= 0) {
		FILE *f = fopen(r->log, "r");
		bool found = false;
		while (f && !found && fgets(line, sizeof(line), f))
			found = strstr(line, text) != NULL;
		if (f)
			fclose(f);
		if (found)
			return 0;
		sleep_ms(20);
	}
	return -1;
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
			b = &out[m];
			b->batches++;
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

/* Every "batch relayed" line, appended to *v: when it ended, relative to t0. */
int relay_log_list(const char *log, long long t0_wall_us, struct batch_rec **v, size_t *n, size_t *cap)
{
	char line[8192];
	FILE *f = fopen(log, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		struct batch_rec b = {0, 0, 0, 0, 0, 0, false};
		json_t *o, *ts;
		double fe = 0, pu = 0, co = 0;

		if (!strstr(line, "\"batch relayed\""))
			continue;
		/* A relay killed mid-write leaves a torn last line: it does not parse. */
		if (!(o = json_loads(line, 0, NULL)))
			continue;
		ts = json_object_get(o, "ts");
		b.end_us = json_is_string(ts) ? parse_ts(json_string_value(ts)) - t0_wall_us : -1;
		b.jobs = (long long)json_integer_value(json_object_get(o, "jobs"));
		b.gaps = json_is_integer(json_object_get(o, "gaps"))
		             ? (long long)json_integer_value(json_object_get(o, "gaps"))
		             : -1;
		if (add_field(o, "fetch_us", &fe) && add_field(o, "push_us", &pu) &&
		    add_field(o, "commit_us", &co)) {
			b.timed = true;
			b.fetch_us = fe;
			b.push_us = pu;
			b.commit_us = co;
		}
		json_decref(o);
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
	fclose(f);
	return 0;
}
