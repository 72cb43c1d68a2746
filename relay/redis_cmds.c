/* The Redis commands one batch writes: names, keys and payloads, kept as
 * pointers and offsets until the sink flattens them into its script call. */
#include "fmacros.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "redis_cmds.h"

void cmds_init(struct redis_cmds *c)
{
	memset(c, 0, sizeof(*c));
	buf_init(&c->scratch);
	queue_groups_init(&c->groups);
}

void cmds_reset(struct redis_cmds *c)
{
	buf_reset(&c->scratch);
	c->nargs = c->ncmds = 0;
}

void cmds_free(struct redis_cmds *c)
{
	if (!c)
		return;
	buf_free(&c->scratch);
	free(c->args);
	free(c->cmds);
	queue_groups_free(&c->groups);
	memset(c, 0, sizeof(*c));
}

static int push_arg(struct redis_cmds *c, const char *ptr, size_t off, size_t len)
{
	if (buf_grow_array((void **)&c->args, &c->argcap, c->nargs + 1, sizeof(*c->args)) < 0)
		return -ENOMEM;
	c->args[c->nargs++] = (struct cmd_arg){ .ptr = ptr, .off = off, .len = len };
	c->cmds[c->ncmds - 1].argc++;
	return 0;
}

int cmds_begin(struct redis_cmds *c, const char *name)
{
	if (buf_grow_array((void **)&c->cmds, &c->cmdcap, c->ncmds + 1, sizeof(*c->cmds)) < 0)
		return -ENOMEM;
	c->cmds[c->ncmds].first = c->nargs;
	c->cmds[c->ncmds].argc = 0;
	c->ncmds++;
	return push_arg(c, name, 0, strlen(name));
}

int cmds_ref(struct redis_cmds *c, const char *p, size_t len)
{
	return push_arg(c, p, 0, len);
}

int cmds_fmt(struct redis_cmds *c, const char *fmt, ...)
{
	size_t off = c->scratch.len;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = buf_vprintf(&c->scratch, fmt, ap);
	va_end(ap);
	return rc < 0 ? rc : push_arg(c, NULL, off, c->scratch.len - off);
}

int cmds_tail(struct redis_cmds *c, size_t off)
{
	return push_arg(c, NULL, off, c->scratch.len - off);
}

int cmds_room(struct redis_cmds *c, size_t head)
{
	size_t first = c->cmds[c->ncmds - 1].first;
	int rc;

	if (c->cmds[c->ncmds - 1].argc < CMDS_MAX_ARGS)
		return 0;
	if ((rc = buf_grow_array((void **)&c->cmds, &c->cmdcap, c->ncmds + 1, sizeof(*c->cmds))) < 0)
		return rc;
	c->cmds[c->ncmds].first = c->nargs;
	c->cmds[c->ncmds].argc = 0;
	c->ncmds++;
	for (size_t a = 0; rc == 0 && a < head; a++) {
		struct cmd_arg copy = c->args[first + a]; /* push_arg may move args */
		rc = push_arg(c, copy.ptr, copy.off, copy.len);
	}
	return rc;
}

const char *cmds_arg(const struct redis_cmds *c, size_t k, size_t a, size_t *len)
{
	const struct cmd_arg *arg = &c->args[c->cmds[k].first + a];

	*len = arg->len;
	return arg->ptr ? arg->ptr : c->scratch.data + arg->off;
}
