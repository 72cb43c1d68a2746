/* Chaos with a Redis Cluster target: see cluster.h. */
#include "fmacros.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "support/redis.h"
#include "support/timing.h"

/* Tags on the three masters of cluster-start's even split (slots 14347,
 * 2152, 10414); a slot move may later put two on one master. */
const char *const cluster_queues[CLUSTER_NQUEUES] = { "{c1}", "{c2}", "{c4}" };

#define CLUSTER_NODES 6
/* BullMQ trims a queue's events stream to opts.maxLenEvents (10000 unless
 * the Queue's streams.events.maxLen says otherwise): the checker reads every
 * job's "added" event, so the run keeps them all. */
#define EVENTS_MAX "1000000000"

static void note(struct cluster_chaos *cc, const char *kind, const char *fmt, ...) SD_PRINTF(3, 4);
static void note(struct cluster_chaos *cc, const char *kind, const char *fmt, ...)
{
	char text[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	cc->note(cc->note_arg, kind, text);
}

/* A connection to node N (1..6), or NULL if it does not answer. */
static redisContext *node_open(const struct cluster_chaos *cc, int n, int *port)
{
	char path[PATH_MAX], err[REDIS_ERRLEN];
	FILE *f;

	snprintf(path, sizeof(path), "%s/cluster-n%d.port", cc->env->srv.dir, n);
	if (!(f = fopen(path, "r")))
		return NULL;
	if (fscanf(f, "%d", port) != 1)
		*port = 0;
	fclose(f);
	return *port > 0 ? redis_open(*port, 2000, err) : NULL;
}

/* A connection to the master serving slot now, or NULL (said why). */
redisContext *cluster_master_open(struct cluster_chaos *cc, unsigned slot, int *port)
{
	char err[REDIS_ERRLEN];
	redisContext *r;

	if ((*port = services_cluster_master_of(&cc->env->srv, (int)slot)) < 0) {
		say("cluster: no master serves slot %u", slot);
		return NULL;
	}
	if (!(r = redis_open(*port, 5000, err)))
		say("cluster: %s", err);
	return r;
}

/* A command on r whose reply must not be an error; NULL (said why) if it is. */
redisReply *cluster_cmd(redisContext *r, const char *fmt, ...)
{
	char err[REDIS_ERRLEN];
	redisReply *rep;
	va_list ap;

	va_start(ap, fmt);
	rep = redis_vcmd(r, err, fmt, ap);
	va_end(ap);
	if (!rep)
		say("cluster: %s", err);
	return rep;
}

int cluster_start(struct cluster_chaos *cc, struct env *e, bool full_coverage, cluster_note_fn *note_fn, void *note_arg)
{
	const char *const partial[] = { "no-coverage", NULL };
	char path[PATH_MAX], sql[512];
	redisContext *r = NULL;
	FILE *f;
	int port = 0;

	*cc = (struct cluster_chaos){ .env = e, .full_coverage = full_coverage, .note = note_fn, .note_arg = note_arg };
	if (services_run_args(&e->srv, "cluster-start", full_coverage ? NULL : partial, NULL) != 0) {
		say("cluster: services.sh cluster-start failed");
		return -1;
	}
	snprintf(path, sizeof(path), "%s/cluster.url", e->srv.dir);
	if (!(f = fopen(path, "r")) || !fgets(cc->url, sizeof(cc->url), f)) {
		say("cluster: no %s", path);
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	cc->url[strcspn(cc->url, "\n")] = '\0';
	/* WAIT 1 a part: a master killed before its replica has a push cannot
	 * take an acknowledged job with it (docs/redis.md, WAIT). */
	snprintf(cc->flag, sizeof(cc->flag),
		 CLUSTER_ROUTE " %s,%s,%s --redis-url %s --format bullmq --redis-wait-replicas 1"
			       " --redis-wait-timeout 500ms",
		 cluster_queues[0], cluster_queues[1], cluster_queues[2], cc->url);
	for (int n = 1; n <= CLUSTER_NODES && !r; n++)
		r = node_open(cc, n, &port);
	if (!r)
		return -1;
	for (int q = 0; q < CLUSTER_NQUEUES; q++) {
		redisReply *s = cluster_cmd(r, "CLUSTER KEYSLOT " PREFIX ":%s:wait", cluster_queues[q]);
		cc->slot[q] = s && s->type == REDIS_REPLY_INTEGER ? (unsigned)s->integer : 0;
		freeReplyObject(s);
	}
	redisFree(r);
	for (int q = 0; q < CLUSTER_NQUEUES; q++) {
		redisReply *s;
		if (!(r = cluster_master_open(cc, cc->slot[q], &port)))
			return -1;
		s = cluster_cmd(r, "HSET " PREFIX ":%s:meta opts.maxLenEvents " EVENTS_MAX, cluster_queues[q]);
		redisFree(r);
		if (!s)
			return -1;
		freeReplyObject(s);
		snprintf(sql, sizeof(sql), "INSERT INTO chaos_routed VALUES ('%s', '" CLUSTER_ROUTE "')",
			 cluster_queues[q]);
		if (env_val(e, sql) < 0)
			return -1;
	}
	return env_val(e, "CREATE TABLE chaos_repushed (queue text NOT NULL, id text NOT NULL, jid text,"
			  " t_us bigint NOT NULL)") < 0
		       ? -1
		       : 0;
}

void cluster_args(const struct cluster_chaos *cc, struct relay_argv *a)
{
	(void)relay_argv_add(a, "--route", cc->flag);
}

void cluster_uuid(const char *jid, char out[37])
{
	char hex[33];

	snprintf(hex, sizeof(hex), "%.24s00000000", jid);
	snprintf(out, 37, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16, hex + 20);
}

/* The jid a job id names (cluster_uuid's inverse); false for any other id. */
bool cluster_jid_of(const char *id, char out[25])
{
	char hex[33];
	size_t n = 0;

	if (strlen(id) != 36 || id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-')
		return false;
	for (const char *p = id; *p; p++)
		if (*p != '-')
			hex[n++] = *p;
	hex[n] = '\0';
	if (n != 32 || strspn(hex, "0123456789abcdef") != 32 || strcmp(hex + 24, "00000000") != 0)
		return false;
	memcpy(out, hex, 24);
	out[24] = '\0';
	return true;
}

/* ---- faults ---- */

int cluster_kill(struct cluster_chaos *cc, unsigned long long *rng)
{
	int q = (int)(rnd(rng) % CLUSTER_NQUEUES), port;
	char arg[16], promoted[64];
	const char *const args[] = { arg, NULL };
	long long t0;

	if ((port = services_cluster_master_of(&cc->env->srv, (int)cc->slot[q])) < 0)
		return -1;
	snprintf(arg, sizeof(arg), "%d", port);
	note(cc, "cluster master SIGKILL", "the master of %s (slot %u) on port %d", cluster_queues[q], cc->slot[q],
	     port);
	if (services_run_args(&cc->env->srv, "cluster-kill", args, NULL) != 0)
		return -1;
	t0 = mono_ms();
	if (services_output(&cc->env->srv, "cluster-wait-promoted", args, promoted, sizeof(promoted)) < 0)
		return -1;
	for (char *p = promoted; (p = strchr(p, '\n'));)
		*p = ' ';
	if (cc->kills < (int)(sizeof(cc->promote_ms) / sizeof(cc->promote_ms[0])))
		cc->promote_ms[cc->kills] = mono_ms() - t0;
	cc->kills++;
	cc->killed_port = port;
	note(cc, "cluster failover", "port %s serves its slots, %lld ms after the SIGKILL", promoted, mono_ms() - t0);
	return 0;
}

int cluster_revive(struct cluster_chaos *cc)
{
	char arg[16];
	const char *const args[] = { arg, NULL };
	long long held = env_val(cc->env, "SELECT count(*) FROM staged_jobs_held WHERE target = '" CLUSTER_ROUTE "'");

	if (cc->killed_port <= 0)
		return 0;
	snprintf(arg, sizeof(arg), "%d", cc->killed_port);
	if (services_run_args(&cc->env->srv, "cluster-revive", args, NULL) != 0)
		return -1;
	cc->held_at_revive += held > 0 ? held : 0;
	cc->revives++;
	note(cc, "cluster master revived", "port %d rejoined as a replica (%lld rows were held for the cluster)",
	     cc->killed_port, held);
	cc->killed_port = 0;
	return 0;
}

/* The masters' ports (ROLE master), at most CLUSTER_NODES; how many. */
static int masters(struct cluster_chaos *cc, int *ports)
{
	int n = 0;

	for (int i = 1; i <= CLUSTER_NODES; i++) {
		int port = 0;
		redisContext *r = node_open(cc, i, &port);
		redisReply *role = r ? redisCommand(r, "ROLE") : NULL;
		if (role && role->type == REDIS_REPLY_ARRAY && role->elements > 0 &&
		    role->element[0]->type == REDIS_REPLY_STRING && strcmp(role->element[0]->str, "master") == 0)
			ports[n++] = port;
		freeReplyObject(role);
		if (r)
			redisFree(r);
	}
	return n;
}

int cluster_move(struct cluster_chaos *cc, unsigned long long *rng)
{
	int q = (int)(rnd(rng) % CLUSTER_NQUEUES), ports[CLUSTER_NODES], n = masters(cc, ports), from, to = -1;
	unsigned slot = cc->slot[q];
	char slot_arg[16], to_arg[16], count[24], pause[24];
	const char *const args[] = { slot_arg, to_arg, NULL };
	long long keys = 0, t0, ms;
	redisContext *r;
	redisReply *k;
	int rc;

	if (!(r = cluster_master_open(cc, slot, &from)))
		return -1;
	k = cluster_cmd(r, "CLUSTER COUNTKEYSINSLOT %u", slot);
	keys = k && k->type == REDIS_REPLY_INTEGER ? k->integer : 0;
	freeReplyObject(k);
	redisFree(r);
	for (int tries = 0; tries < 16 && (to < 0 || to == from) && n > 0; tries++)
		to = ports[rnd(rng) % (unsigned)n];
	if (to < 0 || to == from) {
		say("cluster: no master but %d to move slot %u to", from, slot);
		return -1;
	}
	/* About 40 MIGRATEs whatever the slot holds, each a pause apart: ASK
	 * and TRYAGAIN answers for a second or more while jobs flow. */
	snprintf(count, sizeof(count), "%lld", keys / 40 > 20 ? keys / 40 : 20);
	snprintf(pause, sizeof(pause), "%lld", rnd_range(rng, 20, 60));
	snprintf(slot_arg, sizeof(slot_arg), "%u", slot);
	snprintf(to_arg, sizeof(to_arg), "%d", to);
	setenv("CLUSTER_MIGRATE_COUNT", count, 1);
	setenv("CLUSTER_MIGRATE_PAUSE_MS", pause, 1);
	note(cc, "slot migration", "slot %u (%s, %lld keys) from port %d to %d, %s keys a MIGRATE, %s ms apart", slot,
	     cluster_queues[q], keys, from, to, count, pause);
	t0 = mono_ms();
	rc = services_run_args(&cc->env->srv, "cluster-move-slot", args, NULL);
	ms = mono_ms() - t0;
	unsetenv("CLUSTER_MIGRATE_COUNT");
	unsetenv("CLUSTER_MIGRATE_PAUSE_MS");
	if (rc != 0)
		return -1;
	if (cc->moves < (int)(sizeof(cc->move_ms) / sizeof(cc->move_ms[0]))) {
		cc->move_ms[cc->moves] = ms;
		cc->move_keys[cc->moves] = keys;
	}
	cc->moves++;
	note(cc, "slot migrated", "slot %u now on port %d, after %lld ms", slot, to, ms);
	return 0;
}

/* The relays' log lines (relay-001.log ...) where the cluster target waited
 * out --redis-timeout for an answer that never came: no node of a healthy
 * cluster (a killed one closes its sockets) leaves a command unanswered, so
 * each is a stall. The first goes to first. */
static long long unanswered(const struct cluster_chaos *cc, int relay_logs, char *first, size_t len)
{
	char path[PATH_MAX + 32], line[2048];
	long long n = 0;

	*first = '\0';
	for (int i = 1; i <= relay_logs; i++) {
		FILE *f;
		snprintf(path, sizeof(path), "%s/relay-%03d.log", cc->env->srv.dir, i);
		if (!(f = fopen(path, "r")))
			continue;
		while (fgets(line, sizeof(line), f))
			if (strstr(line, "no reply within") && strstr(line, "target=" CLUSTER_ROUTE) && n++ == 0)
				snprintf(first, len, "relay-%03d.log: %.400s", i, line);
		fclose(f);
	}
	return n;
}

bool cluster_report(struct cluster_chaos *cc, int want_kills, int want_moves, int relay_logs)
{
	char first[600];
	long long stalls = unanswered(cc, relay_logs, first, sizeof(first));
	long long max_promote = 0, max_move = 0, keys = 0;
	int nk = cc->kills < 64 ? cc->kills : 64, nm = cc->moves < 64 ? cc->moves : 64;

	for (int i = 0; i < nk; i++)
		max_promote = cc->promote_ms[i] > max_promote ? cc->promote_ms[i] : max_promote;
	for (int i = 0; i < nm; i++) {
		max_move = cc->move_ms[i] > max_move ? cc->move_ms[i] : max_move;
		keys += cc->move_keys[i];
	}
	printf("  cluster target \"" CLUSTER_ROUTE "\"         3 masters, a replica each, full coverage %s;"
	       " %s %s %s, bullmq, WAIT 1\n",
	       cc->full_coverage ? "yes" : "no", cluster_queues[0], cluster_queues[1], cluster_queues[2]);
	printf("  cluster jobs                 %lld in wait lists, %lld delayed\n", cc->waiting, cc->delayed);
	printf("  cluster masters SIGKILLed    %d (promoted within %lld ms at most), revived %d;"
	       " %lld rows held for the cluster at the revives\n",
	       cc->kills, max_promote, cc->revives, cc->held_at_revive);
	printf("  slot migrations              %d (%lld keys moved, the longest took %lld ms)\n", cc->moves, keys,
	       max_move);
	printf("  pushed again (BullMQ kept 1) %lld (\"duplicated\" events: the relay pushed a job twice)\n",
	       cc->repushes);
	if (cc->repushes > 0)
		fputs(cc->causes, stdout);
	printf("  cluster answers never came   %lld (relay log lines: --redis-timeout waited out)\n", stalls);
	if (stalls > 0)
		printf("    first: %s%s", first, strchr(first, '\n') ? "" : "\n");
	if (*cc->self_test)
		printf("  cluster self-test            %s\n", cc->self_test);
	return cc->kills >= want_kills && cc->revives == cc->kills && cc->moves >= want_moves && cc->waiting > 0 &&
	       cc->repushes == 0 && stalls == 0;
}

void cluster_stop(struct cluster_chaos *cc)
{
	if (cc->env && services_run(&cc->env->srv, "cluster-stop", NULL) != 0)
		say("cluster: services.sh cluster-stop failed");
}
