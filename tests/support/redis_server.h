/* A Redis server of a test's own, beside services.sh's: started in a directory
 * of the run's, SIGKILLed and started again on the same port with the same
 * data, stopped by PID. For the tests and the chaos program that need more than
 * one Redis (routes: one target each). */
#ifndef STAGEDRAIN_SUPPORT_REDIS_SERVER_H
#define STAGEDRAIN_SUPPORT_REDIS_SERVER_H

#include "fmacros.h"

#include "support/proc.h"
#include "support/redis.h"

struct redis_server {
	struct proc proc;
	int port;
	char dir[512]; /* its AOF and redis.log */
	char url[64];  /* redis://127.0.0.1:PORT/0 */
	char log[600]; /* DIR/redis.log, appended at each start */
};

/* Makes dir and starts redis-server there on a free loopback port below the
 * kernel's ephemeral range (as services.sh's free_port: no client's outgoing
 * connection can take it while the server is down between a kill and its
 * restart), with an AOF fsynced before each reply (a SIGKILL loses nothing
 * it acknowledged) and no RDB; waits until it answers PING. The server gets
 * SIGTERM if the thread that started it dies (a failed Check test leaves no
 * Redis behind). 0, or -1 with the cause in err. */
int redis_server_start(struct redis_server *s, const char *dir, char err[REDIS_ERRLEN]) SD_MUSTCHECK;
/* Starts it again, after redis_server_stop, on the same port with the same
 * data, and waits until it has loaded its AOF and answers PING; 0 or -1. */
int redis_server_restart(struct redis_server *s, char err[REDIS_ERRLEN]) SD_MUSTCHECK;
/* Sends sig (SIGKILL: a crash; SIGTERM: a shutdown) and reaps it, SIGKILLing
 * it after timeout_ms; its exit status, or -1. A no-op on a stopped server. */
int redis_server_stop(struct redis_server *s, int sig, int timeout_ms);

#endif
