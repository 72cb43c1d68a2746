/* Child processes for the tests, the chaos programs and the bench: start one
 * with its output to a log file, wait for it with a timeout, signal it. */
#ifndef STAGEDRAIN_SUPPORT_PROC_H
#define STAGEDRAIN_SUPPORT_PROC_H

#include "fmacros.h"

#include <stdbool.h>
#include <sys/types.h>

struct proc {
	pid_t pid;  /* 0: not started, or already reaped */
	int status; /* once reaped: the exit status, or 128 + the signal; -1 before */
};

struct proc_opts {
	const char *const *argv; /* argv[0]: a path, or (without envp) a name found on PATH */
	char *const *envp;       /* the child's whole environment; NULL: this process's */
	const char *log;         /* stdout and stderr go here; NULL: inherited */
	bool log_append;         /* add to the log instead of truncating it */
	const char *cwd;         /* the child's working directory; NULL: ours */
	int *stdin_pipe;         /* given: stdin is a pipe whose write end is stored here */
	/* The child gets SIGTERM when the thread that started it dies (Linux's
	 * PR_SET_PDEATHSIG): a Check test that fails halfway leaves none behind. */
	bool die_with_parent;
	/* Runs in the child just before exec (e.g. to put its own pid into argv). */
	void (*child_setup)(void *arg);
	void *child_arg;
};

/* Forks and execs; 0 or -errno. A child that cannot open its log, change
 * directory or exec exits 127 (126 for the directory). */
int proc_start(struct proc *p, const struct proc_opts *o) SD_MUSTCHECK;
/* The same with only argv and a log (truncated). */
int proc_spawn(struct proc *p, const char *const *argv, const char *log) SD_MUSTCHECK;
/* Reaps the child: its status, or -1 if it is still running after timeout_ms
 * (< 0: no limit) or there is no child. */
int proc_wait(struct proc *p, int timeout_ms);
/* True once the child has exited (without reaping it: proc_wait still gets
 * its status); false while it runs or when there is none. */
bool proc_exited(const struct proc *p);
/* 0, or -errno; no-op (0) when there is no child. */
int proc_signal(const struct proc *p, int sig);
/* Waits up to timeout_ms, then SIGKILLs and reaps it; its status, or -1 if it
 * had to be killed (or there was no child). */
int proc_reap(struct proc *p, int timeout_ms);
/* proc_signal(sig), then proc_reap. */
int proc_stop(struct proc *p, int sig, int timeout_ms);
/* Runs argv to completion, output to log (NULL: inherited); its status, or -1
 * if it could not start or was still running after timeout_ms (then killed). */
int proc_run(const char *const *argv, const char *log, int timeout_ms);

#endif
