/* What the formats share: the per-row "serialized" switch and the queue
 * pushes of the layouts. */
#include "fmacros.h"

#include <string.h>

#include "format.h"

int format_serialized(struct span options, bool *on, char *reason, size_t rlen)
{
	struct span v;
	int rc;

	*on = false;
	if ((rc = payload_member(options, "serialized", &v)) < 0 || v.n == 0)
		return rc;
	if (payload_kind(v) != PAYLOAD_BOOLEAN) {
		payload_reason(reason, rlen, "options key \"serialized\" is not true or false");
		return JOB_REJECT;
	}
	*on = v.p[0] == 't';
	return 0;
}

static bool takes(const struct batch_job *j, enum format_which which)
{
	return which == FORMAT_ALL || j->out.scheduled == (which == FORMAT_LATER);
}

int format_group(struct redis_cmds *c, const struct batch *b, enum format_which which, format_sub_fn sub)
{
	int rc = 0;

	queue_groups_reset(&c->groups);
	for (size_t i = 0; rc == 0 && i < b->njobs; i++) {
		const struct batch_job *j = &b->jobs[i];
		if (takes(j, which))
			rc = queue_groups_add(&c->groups, j->queue, j->queue_len, sub ? sub(b, j) : 0, i);
	}
	return rc ? rc : queue_groups_sort(&c->groups);
}

int format_llen(struct redis_cmds *c, const char *prefix, const char *infix, const char *queue, size_t len)
{
	int rc = cmds_begin(c, "LLEN");

	return rc ? rc : cmds_fmt(c, "%s%s%.*s", prefix, infix, (int)len, queue);
}

int format_queue_list(struct redis_cmds *c, const char *prefix, const char *queue, size_t len)
{
	return format_llen(c, prefix, "queue:", queue, len);
}

int format_add_queue_set(struct redis_cmds *c, const struct batch *b, const char *prefix)
{
	const struct queue_groups *g = &c->groups;
	int rc = format_group(c, b, FORMAT_NOW, NULL);

	for (size_t i = 0; rc == 0 && i < g->n; i++) {
		if (!g->v[i].first)
			continue;
		if (i == 0 && ((rc = cmds_begin(c, "SADD")) < 0 || (rc = cmds_fmt(c, "%squeues", prefix)) < 0))
			return rc;
		if ((rc = cmds_room(c, 2)) == 0)
			rc = cmds_ref(c, g->v[i].queue, g->v[i].len);
	}
	return rc;
}

int format_per_queue(struct redis_cmds *c, const struct batch *b, enum format_which which, const char *cmd,
		     const char *prefix, const char *infix, const char *suffix, format_add_fn add)
{
	const struct queue_groups *g = &c->groups;
	int rc = format_group(c, b, which, NULL);

	for (size_t i = 0; rc == 0 && i < g->n; i++) {
		const struct batch_job *j = &b->jobs[g->v[i].job];
		if (g->v[i].first &&
		    ((rc = cmds_begin(c, cmd)) < 0 ||
		     (rc = cmds_fmt(c, "%s%s%.*s%s", prefix, infix, (int)j->queue_len, j->queue, suffix)) < 0))
			return rc;
		if ((rc = cmds_room(c, 2)) == 0)
			rc = add(c, b, j);
	}
	return rc;
}

int format_add_payload(struct redis_cmds *c, const struct batch *b, const struct batch_job *j)
{
	return cmds_ref(c, b->payloads.data + j->out.off, j->out.len);
}

int format_push_queues(struct redis_cmds *c, const struct batch *b, const char *cmd, const char *prefix,
		       const char *infix, enum format_which which)
{
	return format_per_queue(c, b, which, cmd, prefix, infix, "", format_add_payload);
}

static int format_no_tag(struct span queue, char *reason, size_t rlen);

/* The i-th byte of the text made of n pieces put end to end. */
static char piece_byte(const struct span *p, size_t n, size_t i)
{
	for (size_t k = 0; k < n; i -= p[k].n, k++)
		if (i < p[k].n)
			return p[k].p[i];
	return '\0';
}

int format_check_cluster_queue(const struct format *f, const char *prefix, struct span queue, char *reason, size_t rlen)
{
	const struct span p[] = { span_of(prefix, strlen(prefix)), span_of(f->cluster_infix, strlen(f->cluster_infix)),
				  queue };
	size_t len = p[0].n + p[1].n + p[2].n, open = len;

	for (size_t i = 0; i < len; i++) {
		char c = piece_byte(p, 3, i);
		if (open == len && c == '{')
			open = i;
		else if (open < len && c == '}')
			return i > open + 1 ? 0 : format_no_tag(queue, reason, rlen);
	}
	return format_no_tag(queue, reason, rlen);
}

static int format_no_tag(struct span queue, char *reason, size_t rlen)
{
	payload_reason(reason, rlen,
		       "queue \"%.*s%s\" has no hash tag for Redis Cluster: its keys would fall in different slots "
		       "(put one in the queue's name, {%.*s%s}, or in the key prefix)",
		       FORMAT_SHOW(queue), FORMAT_SHOW(queue));
	return JOB_REJECT;
}
