/* Child processes: see proc.h. */
#include "fmacros.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/proc.h"
#include "support/timing.h"

/* In the child: stdin, stdout and stderr as asked, then exec. Never returns. */
static void child(const struct proc_opts *o, const int pfd[2], pid_t parent)
{
	/* The parent may have died before the request: then it is too late. */
	if (o->die_with_parent && (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent))
		_exit(127);
	if (o->stdin_pipe) {
		dup2(pfd[0], STDIN_FILENO);
		close(pfd[0]);
		close(pfd[1]);
	}
	if (o->log) {
		int fd = open(o->log, O_WRONLY | O_CREAT | (o->log_append ? O_APPEND : O_TRUNC), 0644);
		if (fd < 0)
			_exit(127);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		close(fd);
	}
	if (o->cwd && chdir(o->cwd) < 0)
		_exit(126);
	/* Our handlers would run here until exec resets them. */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	if (o->child_setup)
		o->child_setup(o->child_arg);
	if (o->envp)
		execve(o->argv[0], (char *const *)o->argv, o->envp);
	else
		execvp(o->argv[0], (char *const *)o->argv);
	_exit(127);
}

int proc_start(struct proc *p, const struct proc_opts *o)
{
	int pfd[2] = { -1, -1 };
	pid_t pid, parent = getpid();

	p->pid = 0;
	p->status = -1;
	/* Only this child may hold the pipe, or its reader never sees end of file. */
	if (o->stdin_pipe && pipe(pfd) < 0)
		return -errno;
	if (o->stdin_pipe && (fcntl(pfd[0], F_SETFD, FD_CLOEXEC) < 0 || fcntl(pfd[1], F_SETFD, FD_CLOEXEC) < 0)) {
		int err = errno;
		close(pfd[0]);
		close(pfd[1]);
		return -err;
	}
	fflush(NULL); /* or the child's copy of our buffers could be written twice */
	pid = fork();
	if (pid < 0) {
		int err = errno;
		if (o->stdin_pipe) {
			close(pfd[0]);
			close(pfd[1]);
		}
		return -err;
	}
	if (pid == 0)
		child(o, pfd, parent);
	if (o->stdin_pipe) {
		close(pfd[0]);
		*o->stdin_pipe = pfd[1];
	}
	p->pid = pid;
	return 0;
}

int proc_spawn(struct proc *p, const char *const *argv, const char *log)
{
	struct proc_opts o = { .argv = argv, .log = log };

	return proc_start(p, &o);
}

/* 10 ms, not cut short by `interrupted`: the clean-up after Ctrl-C waits too. */
static void nap(void)
{
	struct timespec ts = { 0, 10 * 1000000L };

	nanosleep(&ts, NULL);
}

static int decode(int st)
{
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int proc_wait(struct proc *p, int timeout_ms)
{
	long long deadline = mono_ms() + timeout_ms;
	int st;

	while (p->pid > 0) {
		pid_t w = waitpid(p->pid, &st, timeout_ms < 0 ? 0 : WNOHANG);
		if (w == p->pid) {
			p->pid = 0;
			p->status = decode(st);
			return p->status;
		}
		if (w < 0 && errno != EINTR) {
			p->pid = 0; /* not our child (any more): nothing to wait for */
			return -1;
		}
		if (timeout_ms >= 0 && mono_ms() > deadline)
			return -1;
		if (w == 0)
			nap();
	}
	return -1;
}

bool proc_exited(const struct proc *p)
{
	siginfo_t info;

	if (p->pid <= 0)
		return false;
	memset(&info, 0, sizeof(info));
	/* WNOWAIT: the status stays for proc_wait. */
	if (waitid(P_PID, (id_t)p->pid, &info, WEXITED | WNOHANG | WNOWAIT) < 0)
		return errno == ECHILD;
	return info.si_pid == p->pid;
}

int proc_signal(const struct proc *p, int sig)
{
	if (p->pid <= 0)
		return 0;
	return kill(p->pid, sig) < 0 ? -errno : 0;
}

int proc_reap(struct proc *p, int timeout_ms)
{
	int st = proc_wait(p, timeout_ms);

	if (st < 0 && p->pid > 0) {
		pid_t w;
		(void)kill(p->pid, SIGKILL);
		do
			w = waitpid(p->pid, &st, 0);
		while (w < 0 && errno == EINTR);
		p->status = w == p->pid ? decode(st) : -1;
		p->pid = 0;
		return -1;
	}
	return st;
}

int proc_stop(struct proc *p, int sig, int timeout_ms)
{
	(void)proc_signal(p, sig);
	return proc_reap(p, timeout_ms);
}

int proc_run(const char *const *argv, const char *log, int timeout_ms)
{
	struct proc p;

	if (proc_spawn(&p, argv, log) < 0)
		return -1;
	return proc_reap(&p, timeout_ms);
}
