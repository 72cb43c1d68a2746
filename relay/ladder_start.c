/* The ladder's first climb: waiting for servers at start, and telling a
 * setting that can never work from a server that is not there yet (ladder.h). */
#include "fmacros.h"

#include <errno.h>

#include "ladder.h"
#include "log.h"
#include "pg_conn.h"
#include "pg_privileges.h"

/* Once at start: what lets others than the owner and the relay change staged
 * rows, each a warning (the relay runs all the same: it is the operator's to
 * fix). A failed reading is said at info: it changes nothing the relay does. */
static void warn_privileges(struct ladder *l)
{
	struct pg_privileges p;
	char err[256];

	if (pg_privileges_read(l->pg->conn, &p, err, sizeof(err)) < 0) {
		log_info("could not read the staging tables' privileges", LOGF(F_STR("error", err)));
		return;
	}
	for (size_t i = 0; i < p.n; i++)
		log_warn("staged jobs are not kept to least privilege", LOGF(F_STR("detail", p.text[i])));
}

/* One try at Postgres at start: 0; -EAGAIN when it cannot be reached yet
 * (logged and waited out); or a setting that can never work (logged). */
static int start_pg(struct ladder *l)
{
	int rc = pg_source_connect(l->pg);

	if (rc == 0)
		rc = pg_source_check_schema(l->pg);
	if (rc == 0) {
		metrics_connected(l->metrics, METRICS_PG, true, false);
		warn_privileges(l);
		return 0;
	}
	/* A schema read on a session that then broke is a server going away. */
	if (rc != -ENOMEM && pg_source_broken(l->pg) && !pg_conn_fatal(l->pg->errstr)) {
		/* The cause, for /readyz with --readyz-detail: the watcher starts later. */
		metrics_probe(l->metrics, METRICS_PG, false, l->pg->errstr);
		ladder_pg_trouble(l, "could not reach postgres to start; will retry");
		return -EAGAIN;
	}
	log_error("cannot start", LOGF(F_STR("setting", "--pg-url"), F_STR("error", l->pg->errstr)));
	return rc;
}

/* The same for one target's Redis: a fault with a setting to blame (a
 * password, TLS verification, a file) ends the start; any other is waited
 * out: -EAGAIN, logged. */
static int start_target(struct ladder *l, struct target *t)
{
	int rc = redis_sink_connect(&t->redis);
	const char *blame = t->redis.conn.blame;

	if (rc == 0) {
		metrics_target_up(l->metrics, t->index, true);
		if (t->index == 0)
			metrics_connected(l->metrics, METRICS_REDIS, true, false);
		return 0;
	}
	if (rc != -ENOMEM && !blame) {
		if (t->index == 0)
			metrics_probe(l->metrics, METRICS_REDIS, false, t->redis.errstr);
		ladder_connect_trouble(l, t, rc, "could not reach redis to start; will retry");
		return -EAGAIN;
	}
	log_error("cannot start", LOGF(F_STR("setting", blame ? blame : "--redis-url"), F_STR("error", t->redis.errstr),
				       F_STR("target", t->name)));
	return rc;
}

/* Every target, once: 0 when one at least is reachable (the others are
 * tried again as the relay runs); -EAGAIN when none is (napped); or a
 * setting that can never work. */
static int start_redis(struct ladder *l)
{
	bool any = false;
	int rc;

	for (size_t i = 0; i < l->nt; i++) {
		if (redis_sink_connected(&l->t[i].redis)) {
			any = true;
			continue;
		}
		if ((rc = start_target(l, &l->t[i])) == 0)
			any = true;
		else if (rc != -EAGAIN)
			return rc;
	}
	if (any)
		return 0;
	ladder_nap(l, ladder_next_try_ms(l));
	return -EAGAIN;
}

/* After a try that found a server unreachable: whether to try again. Not
 * after a stop signal (-ECANCELED), nor with --once past ONCE_SERVER_WAIT_MS
 * (-ETIMEDOUT: a run that cannot start is an error, not a wait forever). */
static int start_again(struct ladder *l)
{
	if (stop_seen(l->stopping))
		return -ECANCELED;
	return once_trouble_over(l->once, true) ? -ETIMEDOUT : 0;
}

int ladder_start(struct ladder *l)
{
	const char *names[METRICS_MAX_TARGETS];
	int rc;

	if (l->nt == 0)
		return -ENOMEM; /* drain_init could not make the targets */
	for (size_t i = 0; i < l->nt && i < METRICS_MAX_TARGETS; i++)
		names[i] = l->t[i].name;
	metrics_targets(l->metrics, names, l->nt);

	while ((rc = start_pg(l)) == -EAGAIN && (rc = start_again(l)) == 0)
		;
	while (rc == 0 && (rc = start_redis(l)) == -EAGAIN && (rc = start_again(l)) == 0)
		;
	if (rc == 0) {
		char pgw[300];
		(void)once_trouble_over(l->once, false);
		backoff_reset(&l->pg_backoff);
		pg_source_describe(l->pg, pgw, sizeof(pgw));
		for (size_t i = 0; i < l->nt; i++) {
			backoff_reset(&l->t[i].backoff);
			if (redis_sink_connected(&l->t[i].redis))
				target_log_connected(&l->t[i], l->metrics, pgw);
		}
	}
	return rc;
}
