/* Whether each target's workers read where it pushes: looked at by the watcher, warned of, counted. */
#include "fmacros.h"

#include "log.h"
#include "redis_conn.h"
#include "watch_readers.h"

/* One target's look, on a connection of its own: the watcher's keeps the
 * default target's database, and a look may SELECT others. */
static enum readers_verdict look(const struct config *t, struct readers *r)
{
	struct redis_conn c;

	redis_conn_init(&c, t);
	if (redis_conn_connect(&c) < 0 || readers_read(&c, t, r) < 0)
		r->verdict = READERS_UNKNOWN;
	redis_conn_free(&c);
	return r->verdict;
}

static void tell(struct watch_readers *wr, size_t i, const char *name, const struct config *t, const struct readers *r)
{
	char say[400];

	if (r->verdict == READERS_UNKNOWN || r->verdict == wr->said[i])
		return;
	if (r->verdict == READERS_ELSEWHERE) {
		readers_say(r, t, say, sizeof(say));
		log_warn("no worker reads where a target pushes", LOGF(F_STR("target", name), F_STR("detail", say)));
	} else if (wr->said[i] == READERS_ELSEWHERE) {
		log_info("a target's workers read where it pushes again", LOGF(F_STR("target", name)));
	}
	wr->said[i] = r->verdict;
}

void watch_readers_round(struct watch_readers *wr, const struct config *cfg, struct metrics *m)
{
	long long cursor;

	/* Not at the first round: a relay just started has its batches to send first. */
	if (++wr->round % WATCH_READERS_ROUNDS != 0 || !metrics_leader_cursor(m, &cursor))
		return;
	for (size_t i = 0; i < cfg->routes.n && i < METRICS_MAX_TARGETS; i++) {
		const struct config *t = cfg->routes.t[i].cfg;
		struct readers r;
		enum readers_verdict v = look(t, &r);
		if (v != READERS_UNKNOWN)
			metrics_target_readers(m, i, v == READERS_ELSEWHERE);
		tell(wr, i, cfg->routes.t[i].name, t, &r);
	}
}
