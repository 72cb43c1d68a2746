/* The throwaway servers: see services.h. */
#include "fmacros.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/proc.h"
#include "support/services.h"

/* Start-up and shutdown are bounded by services.sh's own timeouts: this is a backstop. */
#define SCRIPT_TIMEOUT_MS 600000

/* A bound on a verb's arguments after DIR (cluster-reshard takes three). */
#define MAX_ARGS 8

int services_run(const struct services *s, const char *verb, const char *log)
{
	return services_run_args(s, verb, NULL, log);
}

int services_run_args(const struct services *s, const char *verb, const char *const *args, const char *log)
{
	const char *argv[4 + MAX_ARGS + 1] = { "bash", s->script, verb, s->dir };
	int n = 4;

	for (; args && *args; args++) {
		if (n == 4 + MAX_ARGS) {
			fprintf(stderr, "services.sh %s: more than %d arguments\n", verb, MAX_ARGS);
			return -1;
		}
		argv[n++] = *args;
	}
	argv[n] = NULL;
	return proc_run(argv, log, SCRIPT_TIMEOUT_MS);
}

/* sh puts the verb's stdout into a file in DIR and leaves its stderr alone,
 * so a failure's cause reaches the test's output (proc_run's log takes both). */
int services_output(const struct services *s, const char *verb, const char *const *args, char *out, size_t len)
{
	const char *argv[8 + MAX_ARGS + 1] = { "sh", "-c", "f=$1; shift; exec \"$@\" >\"$f\"", "sh" };
	char path[600];
	size_t got;
	int n = 4, st;
	FILE *f;

	if (len == 0)
		return -1;
	snprintf(path, sizeof(path), "%s/services-output.txt", s->dir);
	argv[n++] = path;
	argv[n++] = "bash";
	argv[n++] = s->script;
	argv[n++] = verb;
	argv[n++] = s->dir;
	for (; args && *args; args++) {
		if (n == 8 + MAX_ARGS) {
			fprintf(stderr, "services.sh %s: more than %d arguments\n", verb, MAX_ARGS);
			return -1;
		}
		argv[n++] = *args;
	}
	argv[n] = NULL;
	st = proc_run(argv, NULL, SCRIPT_TIMEOUT_MS);
	if (!(f = fopen(path, "r"))) {
		fprintf(stderr, "services.sh %s wrote no %s: %s\n", verb, path, strerror(errno));
		return -1;
	}
	got = fread(out, 1, len - 1, f);
	fclose(f);
	out[got] = '\0';
	while (got > 0 && out[got - 1] == '\n')
		out[--got] = '\0';
	return st == 0 ? 0 : -1;
}

int services_cluster_master_of(const struct services *s, int slot)
{
	char arg[16], port[32];
	const char *args[] = { arg, NULL };

	snprintf(arg, sizeof(arg), "%d", slot);
	if (services_output(s, "cluster-master-of", args, port, sizeof(port)) < 0)
		return -1;
	return atoi(port) > 0 ? atoi(port) : -1;
}

/* DIR/env, which services.sh start wrote: export TEST_PG_URL=... and so on. */
static int read_env(struct services *s)
{
	char path[600], *line = NULL;
	size_t cap = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/env", s->dir);
	if (!(f = fopen(path, "r"))) {
		fprintf(stderr, "services.sh wrote no %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (getline(&line, &cap, f) > 0) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "export TEST_PG_URL=", 19) == 0)
			snprintf(s->pg_url, sizeof(s->pg_url), "%s", line + 19);
		else if (strncmp(line, "export TEST_REDIS_URL=", 22) == 0)
			snprintf(s->redis_url, sizeof(s->redis_url), "%s", line + 22);
		else if (strncmp(line, "export TEST_REDIS_PORT=", 23) == 0)
			s->redis_port = atoi(line + 23);
	}
	free(line);
	fclose(f);
	if (!*s->pg_url || !*s->redis_url || s->redis_port <= 0) {
		fprintf(stderr, "%s lacks the server addresses\n", path);
		return -1;
	}
	return 0;
}

int services_start(struct services *s, const char *script, const char *name)
{
	const char *tmp = getenv("TMPDIR");

	memset(s, 0, sizeof(*s));
	snprintf(s->script, sizeof(s->script), "%s", script);
	snprintf(s->dir, sizeof(s->dir), "%s/stagedrain-%s.XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
	if (!mkdtemp(s->dir)) {
		fprintf(stderr, "mkdtemp %s: %s\n", s->dir, strerror(errno));
		*s->dir = '\0';
		return -1;
	}
	s->up = true; /* from here on, services_stop stops whatever did start */
	if (services_run(s, "start", NULL) != 0) {
		fprintf(stderr, "%s start %s failed\n", s->script, s->dir);
		return -1;
	}
	return read_env(s);
}

/* The value of a TEST_* variable into out; false if it is unset or empty. */
static bool env_copy(const char *name, char *out, size_t len)
{
	const char *v = getenv(name);

	if (!v || !*v)
		return false;
	snprintf(out, len, "%s", v);
	return true;
}

int services_attach(struct services *s)
{
	char port[32];

	memset(s, 0, sizeof(*s));
	if (!env_copy("TEST_SERVICES", s->script, sizeof(s->script)) || !env_copy("TEST_DIR", s->dir, sizeof(s->dir)) ||
	    !env_copy("TEST_PG_URL", s->pg_url, sizeof(s->pg_url)) ||
	    !env_copy("TEST_REDIS_URL", s->redis_url, sizeof(s->redis_url)) ||
	    !env_copy("TEST_REDIS_PORT", port, sizeof(port)))
		return -1;
	s->redis_port = atoi(port);
	return 0;
}

int services_migrate(const struct services *s, const char *bin)
{
	const char *argv[] = { bin, "migrate", "--pg-url", s->pg_url, NULL };
	struct proc_opts o = { .argv = argv, .log_append = true };
	struct proc p;
	char log[600];

	snprintf(log, sizeof(log), "%s/migrate.log", s->dir);
	o.log = log;
	if (proc_start(&p, &o) < 0)
		return -1;
	return proc_reap(&p, SCRIPT_TIMEOUT_MS);
}

int services_stop(struct services *s)
{
	int st = 0;

	if (s->up)
		st = services_run(s, "stop", NULL);
	s->up = false;
	return st == 0 ? 0 : -1;
}

int services_remove(const struct services *s)
{
	const char *argv[] = { "rm", "-rf", s->dir, NULL };

	if (!*s->dir)
		return 0;
	return proc_run(argv, NULL, SCRIPT_TIMEOUT_MS) == 0 ? 0 : -1;
}
