/* `stagedrain status`'s facts as data: their struct, which of them need a person, and how they read. Pure. */
#include "fmacros.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

void status_init(struct status *s)
{
	memset(s, 0, sizeof(*s));
	s->leader_age_s = -1;
	s->epoch = -1;
}

void status_free(struct status *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nqueues; i++)
		free(s->queues[i].name);
	free(s->queues);
	s->queues = NULL;
	s->nqueues = 0;
	for (size_t i = 0; i < s->ntargets; i++)
		free(s->targets[i].name);
	free(s->targets);
	s->targets = NULL;
	s->ntargets = 0;
}

int status_target_add(struct status *s, const char *name, const struct config *cfg)
{
	struct status_target *t;

	for (size_t i = 0; i < s->ntargets; i++)
		if (strcmp(s->targets[i].name, name) == 0)
			return (int)i;
	t = realloc(s->targets, (s->ntargets + 1) * sizeof(*t));
	if (!t)
		return -ENOMEM;
	s->targets = t;
	t = &s->targets[s->ntargets];
	*t = (struct status_target){ .name = strdup(name), .cfg = cfg };
	if (!t->name)
		return -ENOMEM;
	return (int)s->ntargets++;
}

struct status_queue *status_queue_add(struct status *s, size_t target, const char *name, long cap)
{
	struct status_queue *q;

	for (size_t i = 0; i < s->nqueues; i++)
		if (s->queues[i].target == target && strcmp(s->queues[i].name, name) == 0)
			return &s->queues[i];
	q = realloc(s->queues, (s->nqueues + 1) * sizeof(*q));
	if (!q)
		return NULL;
	s->queues = q;
	q = &s->queues[s->nqueues];
	*q = (struct status_queue){ .name = strdup(name), .target = target, .cap = cap, .length = -1 };
	if (!q->name)
		return NULL;
	s->nqueues++;
	return q;
}

static void add(struct status_problems *p, const char *fmt, ...) SD_PRINTF(2, 3);
static void add(struct status_problems *p, const char *fmt, ...)
{
	va_list ap;

	if (p->n == STATUS_MAX_PROBLEMS)
		return;
	va_start(ap, fmt);
	vsnprintf(p->text[p->n++], STATUS_PROBLEM_LEN, fmt, ap);
	va_end(ap);
}

/* The oldest job waiting, staged or held (a target down, a queue at its cap), by when it was staged. */
static void judge_age(const struct status *s, long long max_age_ms, struct status_problems *p)
{
	bool staged = s->backlog_read && s->staged > 0;
	bool held = s->queues_read && s->held > 0;
	const struct status_target *oldest = NULL;
	char age[32], limit[32];

	status_age((double)max_age_ms / 1000, limit, sizeof(limit));
	for (size_t i = 0; held && i < s->ntargets; i++)
		if (s->targets[i].held > 0 && (!oldest || s->targets[i].held_oldest_s > oldest->held_oldest_s))
			oldest = &s->targets[i];
	if (oldest && oldest->held_oldest_s * 1000 > (double)max_age_ms &&
	    (!staged || !(s->staged_oldest_s > oldest->held_oldest_s))) {
		status_age(oldest->held_oldest_s, age, sizeof(age));
		add(p, "the oldest held job (target %s) is %s old (--max-age %s)", oldest->name, age, limit);
	} else if (staged && s->staged_oldest_s * 1000 > (double)max_age_ms) {
		status_age(s->staged_oldest_s, age, sizeof(age));
		add(p, "the oldest staged job is %s old (--max-age %s)", age, limit);
	}
}

void status_judge(const struct status *s, long long max_age_ms, long long horizon_ms, struct status_problems *p)
{
	char age[32], limit[32];

	p->n = 0;
	if (!s->pg_ok)
		add(p, "postgres: %s", s->pg_err);
	if (!s->redis_ok)
		add(p, "redis: %s", s->redis_err);
	if (s->leader_read && s->leader.kind == LOCK_HOLDER_NONE)
		add(p, "no relay holds the leader lock");
	else if (s->leader_read && s->leader.kind == LOCK_HOLDER_FOREIGN)
		add(p, "a session that is not a relay holds the leader lock (pid %d)", s->leader.pid);
	for (size_t i = 1; i < s->ntargets; i++)
		if (s->targets[i].tried && !s->targets[i].reached)
			add(p, "target %s: %s", s->targets[i].name, s->targets[i].err);
	judge_age(s, max_age_ms, p);
	for (size_t i = 0; i < s->ntargets; i++)
		if (s->targets[i].readers.verdict == READERS_ELSEWHERE) {
			char say[STATUS_PROBLEM_LEN - 64];
			readers_say(&s->targets[i].readers, s->targets[i].cfg, say, sizeof(say));
			add(p, "target %s: %s", s->targets[i].name, say);
		}
	for (size_t i = 0; s->privileges_read && i < s->privileges.n; i++)
		add(p, "%s", s->privileges.text[i]);
	if (s->dead_read && s->dead_misdirected > 0)
		add(p,
		    "%lld dead-lettered job%s staged for a key prefix this relay does not push under (stagedrain dead "
		    "list --reason misdirected)",
		    s->dead_misdirected, s->dead_misdirected == 1 ? "" : "s");
	if (s->horizon_read && s->horizon.held && s->horizon.forever)
		add(p, "an inactive replication slot (%s) holds the xmin horizon until it is dropped", s->horizon.name);
	else if (s->horizon_read && s->horizon.held && s->horizon.timed && horizon_ms > 0 &&
		 s->horizon.age_s * 1000 > (double)horizon_ms) {
		status_age(s->horizon.age_s, age, sizeof(age));
		status_age((double)horizon_ms / 1000, limit, sizeof(limit));
		add(p, "a %s (%s) has held the xmin horizon for %s (--warn-xact-age %s)", s->horizon.kind,
		    s->horizon.name, age, limit);
	}
}

/* Truncated, never rounded up: a job 4m59.9s old does not read as 5m00s. */
void status_age(double seconds, char *out, size_t len)
{
	long long t;

	if (!(seconds > 0)) /* negative (clocks apart) or NaN */
		seconds = 0;
	if (seconds < 10) {
		snprintf(out, len, "%lld.%llds", (long long)(seconds * 10) / 10, (long long)(seconds * 10) % 10);
		return;
	}
	t = (long long)seconds;
	if (t < 60)
		snprintf(out, len, "%llds", t);
	else if (t < 3600)
		snprintf(out, len, "%lldm%02llds", t / 60, t % 60);
	else if (t < 86400)
		snprintf(out, len, "%lldh%02lldm", t / 3600, t % 3600 / 60);
	else
		snprintf(out, len, "%lldd%02lldh", t / 86400, t % 86400 / 3600);
}

void status_count(long long n, char *out, size_t len)
{
	char digits[32];
	size_t nd, o = 0;
	unsigned long long u = n < 0 ? 0ULL - (unsigned long long)n : (unsigned long long)n;

	nd = (size_t)snprintf(digits, sizeof(digits), "%llu", u);
	if (len == 0)
		return;
	if (n < 0 && o + 1 < len)
		out[o++] = '-';
	for (size_t i = 0; i < nd && o + 1 < len; i++) {
		if (i > 0 && (nd - i) % 3 == 0 && o + 2 < len)
			out[o++] = ',';
		out[o++] = digits[i];
	}
	out[o] = '\0';
}
