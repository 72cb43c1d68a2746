/* A Redis server of a test's own: see redis_server.h. */
#include "fmacros.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/redis_server.h"
#include "support/timing.h"

#define START_TIMEOUT_MS 10000

/* True if a server could bind 127.0.0.1:port now (redis-server sets
 * SO_REUSEADDR too, so a connection in TIME_WAIT does not count). */
static bool port_free(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	bool ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
		  bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;

	if (fd >= 0)
		close(fd);
	return ok;
}

/* A free port in [10000, the ephemeral range's start), as services.sh picks;
 * -1 if 50 tries found none. */
static int pick_port(void)
{
	static unsigned long long x;
	int lo = 32768, span;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");

	if (f) {
		if (fscanf(f, "%d", &lo) != 1)
			lo = 32768;
		fclose(f);
	}
	span = lo - 10000;
	if (span < 1000) {
		lo = 50000;
		span = 20000;
	}
	if (!x)
		x = (unsigned long long)mono_us() ^ ((unsigned long long)getpid() << 32);
	for (int i = 0; i < 50; i++) {
		int port;
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		port = lo - 1 - (int)((x >> 33) % (unsigned long long)span);
		if (port_free(port))
			return port;
	}
	return -1;
}

/* Starts redis-server on s->port and waits for PONG; 0, or -1 with the cause
 * (its exit, or a timeout) in err. */
static int run(struct redis_server *s, char err[REDIS_ERRLEN])
{
	char port[16];
	const char *argv[] = { "redis-server", "--bind", "127.0.0.1",     "--port", port,     "--dir", s->dir,
			       "--appendonly", "yes",    "--appendfsync", "always", "--save", "",      NULL };
	struct proc_opts o = { .argv = argv, .log = s->log, .log_append = true, .die_with_parent = true };
	long long until = mono_ms() + START_TIMEOUT_MS;
	int rc;

	snprintf(port, sizeof(port), "%d", s->port);
	if ((rc = proc_start(&s->proc, &o)) < 0) {
		snprintf(err, REDIS_ERRLEN, "could not start redis-server: %s", strerror(-rc));
		return -1;
	}
	while (mono_ms() < until && !proc_exited(&s->proc)) {
		redisContext *r = redis_open(s->port, 500, err);
		redisReply *rep = r ? redisCommand(r, "PING") : NULL;
		bool up = rep && rep->type == REDIS_REPLY_STATUS && strcmp(rep->str, "PONG") == 0;
		freeReplyObject(rep);
		if (r)
			redisFree(r);
		if (up)
			return 0;
		sleep_ms(20);
	}
	snprintf(err, REDIS_ERRLEN, "redis on port %d %s; see %.400s", s->port,
		 proc_exited(&s->proc) ? "exited" : "did not answer PONG within 10 s", s->log);
	(void)redis_server_stop(s, SIGKILL, 5000);
	return -1;
}

int redis_server_start(struct redis_server *s, const char *dir, char err[REDIS_ERRLEN])
{
	*s = (struct redis_server){ 0 };
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
	snprintf(s->log, sizeof(s->log), "%s/redis.log", dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, REDIS_ERRLEN, "mkdir %s: %s", dir, strerror(errno));
		return -1;
	}
	/* A port found free can be taken before the server binds it: try another. */
	for (int try = 0; try < 3; try++) {
		if ((s->port = pick_port()) < 0) {
			snprintf(err, REDIS_ERRLEN, "no free port below the ephemeral range");
			return -1;
		}
		snprintf(s->url, sizeof(s->url), "redis://127.0.0.1:%d/0", s->port);
		if (run(s, err) == 0)
			return 0;
	}
	return -1;
}

int redis_server_restart(struct redis_server *s, char err[REDIS_ERRLEN])
{
	return run(s, err);
}

int redis_server_stop(struct redis_server *s, int sig, int timeout_ms)
{
	if (!s->proc.pid)
		return -1;
	return proc_stop(&s->proc, sig, timeout_ms);
}
