/* The push script (push_script.h), which the sink sends with every batch. */
#include "fmacros.h"

#include <errno.h>
#include <stdio.h>
#include <sys/random.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"
#include "push_script.h"

/*
 * The script runs atomically in Redis: it pushes only while ARGV[1] is still
 * the epoch's whole value (keys.h), count and token. A new leader takes
 * a new epoch before it reads the fence, so a push from a relay that lost its
 * session (or whose reply was lost: the relay takes a new epoch then too)
 * either landed before that read, and the fence names it, or is refused; it
 * can never land after. The token makes this hold across a Redis that lost
 * its data: its count starts again at 1, but no token comes back, so a late
 * push of an epoch "1" taken before the loss is refused like any other. (An
 * epoch key of the wrong type reads as ""; so does a missing one.)
 *
 * A Redis script is not rolled back when a command in it fails: a key of the
 * wrong type half-way would leave the pushes before it applied and the fence
 * unwritten, and the batch would be pushed again. So the script first checks
 * the type of every key it will write (a procedure checks its own keys, and
 * the values it reads back) and, if any is wrong, writes nothing and answers
 * WRONGTYPE with each bad key and its type. Past that check no command can
 * fail (an OOM refusal can only come on the first write), so the batch lands
 * whole or not at all, and the fence's SET, last, exists only if its
 * batch's pushes do.
 */
static const char head[] =
	"local function text(k)\n"
	"  local v = redis.pcall('GET', k)\n"
	"  if type(v) == 'string' then return v end\n"
	"  return ''\n"
	"end\n"
	"if text(KEYS[1]) .. ':' .. text(KEYS[2]) ~= ARGV[1] then\n"
	"  return redis.error_reply('STALE epoch ' .. ARGV[1] .. ' is not current')\n"
	"end\n"
	"local want = { LPUSH = 'list', RPUSH = 'list', SADD = 'set', ZADD = 'zset', APPEND = 'string' }\n"
	"local bad, seen, refused = { 'WRONGTYPE' }, {}, {}\n"
	"local function refuse(key, what)\n"
	"  if refused[key] then return end\n"
	"  refused[key] = true\n"
	"  bad[#bad + 1] = key\n"
	"  bad[#bad + 1] = what\n"
	"end\n"
	"local function check_type(key, t)\n"
	"  if not seen[key] then\n"
	"    seen[key] = redis.call('TYPE', key).ok\n"
	"    if seen[key] ~= 'none' and seen[key] ~= t then refuse(key, seen[key]) end\n"
	"  end\n"
	"  return seen[key]\n"
	"end\n"
	"local procs = {}\n";

static const char tail[] = "local i = 2\n"
			   "while i <= #ARGV do\n"
			   "  local n, p = tonumber(ARGV[i + 1]), procs[ARGV[i]]\n"
			   "  if p then\n"
			   "    p.check(i + 2, n)\n"
			   "  elseif want[ARGV[i]] then\n"
			   "    check_type(ARGV[i + 2], want[ARGV[i]])\n"
			   "  end\n"
			   "  i = i + 2 + n\n"
			   "end\n"
			   "if #bad > 1 then return bad end\n"
			   "i = 2\n"
			   "while i <= #ARGV do\n"
			   "  local n, p = tonumber(ARGV[i + 1]), procs[ARGV[i]]\n"
			   "  if p then\n"
			   "    p.run(i + 2, n)\n"
			   "  else\n"
			   "    redis.call(ARGV[i], unpack(ARGV, i + 2, i + 1 + n))\n"
			   "  end\n"
			   "  i = i + 2 + n\n"
			   "end\n"
			   "return 'OK'\n";

int push_script_build(struct buf *out, const char *procs)
{
	buf_reset(out);
	if (buf_append(out, head, sizeof(head) - 1) < 0 || (procs && buf_puts(out, procs) < 0) ||
	    buf_append(out, tail, sizeof(tail) - 1) < 0)
		return -ENOMEM;
	return 0;
}

void push_argv_free(struct push_argv *a)
{
	free(a->argv);
	free(a->len);
	*a = (struct push_argv){ NULL, NULL, 0, 0 };
}

/* argv and len always have the same capacity. */
static int grow(struct push_argv *a, size_t need)
{
	size_t cap = a->cap ? a->cap : 64;
	const char **argv;
	size_t *len;

	if (need <= a->cap)
		return 0;
	while (cap < need)
		cap *= 2;
	if (!(argv = realloc(a->argv, cap * sizeof(*argv))))
		return -ENOMEM;
	a->argv = argv;
	if (!(len = realloc(a->len, cap * sizeof(*len))))
		return -ENOMEM;
	a->len = len;
	a->cap = cap;
	return 0;
}

int push_argv_build(struct push_argv *a, const struct redis_cmds *head, struct redis_cmds *body)
{
	size_t counts = body->scratch.len, total = 0;
	const char *count;
	int rc = 0;

	a->n = 0;
	for (size_t k = 0; rc == 0 && k < body->ncmds; k++)
		if ((rc = buf_printf(&body->scratch, "%zu", body->cmds[k].argc - 1)) == 0)
			rc = buf_append(&body->scratch, "", 1);
	for (size_t k = 0; k < head->ncmds; k++)
		total += head->cmds[k].argc;
	for (size_t k = 0; k < body->ncmds; k++)
		total += body->cmds[k].argc + 1;
	if (rc < 0 || (rc = grow(a, total)) < 0)
		return rc;
	for (size_t k = 0; k < head->ncmds; k++)
		for (size_t i = 0; i < head->cmds[k].argc; i++, a->n++)
			a->argv[a->n] = cmds_arg(head, k, i, &a->len[a->n]);
	/* scratch no longer moves: pointers into it stay valid until the send. */
	count = body->scratch.data + counts;
	for (size_t k = 0; k < body->ncmds; k++) {
		for (size_t i = 0; i < body->cmds[k].argc; i++) {
			a->argv[a->n] = cmds_arg(body, k, i, &a->len[a->n]);
			a->n++;
			if (i == 0) {
				a->argv[a->n] = count;
				a->len[a->n] = strlen(count);
				count += a->len[a->n++] + 1;
			}
		}
	}
	return 0;
}

/* Error codes Redis answers for its own state, whatever the batch holds. */
static const char *const state_errors[] = {
	"OOM ",      "READONLY ",    "LOADING ", "BUSY ",   "MASTERDOWN ", "MISCONF ",  "NOREPLICAS ",
	"TRYAGAIN ", "CLUSTERDOWN ", "NOAUTH ",  "NOPERM ", "WRONGPASS ",  "NOSCRIPT ", "UNBLOCKED ",
};

int push_script_error(const char *err)
{
	if (strncmp(err, "STALE ", 6) == 0)
		return -ESTALE;
	for (size_t i = 0; i < sizeof(state_errors) / sizeof(state_errors[0]); i++)
		if (strncmp(err, state_errors[i], strlen(state_errors[i])) == 0)
			return -EIO;
	return REDIS_SINK_REFUSED;
}

int push_script_wrongtype(const redisReply *r, struct buf *bad, size_t *nbad)
{
	buf_reset(bad);
	*nbad = 0;
	for (size_t i = 1; i + 1 < r->elements; i += 2) {
		const redisReply *k = r->element[i], *t = r->element[i + 1];
		if (k->type != REDIS_REPLY_STRING || t->type != REDIS_REPLY_STRING)
			continue;
		if (buf_append(bad, k->str, k->len + 1) < 0 || buf_append(bad, t->str, t->len + 1) < 0)
			return -ENOMEM;
		(*nbad)++;
	}
	return *nbad ? 0 : -EINVAL;
}

int push_argv_resp(const struct push_argv *a, struct buf *out)
{
	int rc = buf_printf(out, "*%zu\r\n", a->n);

	for (size_t i = 0; rc == 0 && i < a->n; i++)
		if ((rc = buf_printf(out, "$%zu\r\n", a->len[i])) == 0 &&
		    (rc = buf_append(out, a->argv[i], a->len[i])) == 0)
			rc = buf_append(out, "\r\n", 2);
	return rc;
}

int push_script_token(char *out)
{
	unsigned char raw[KEYS_EPOCH_TOKEN_LEN / 2];
	ssize_t n = getrandom(raw, sizeof(raw), 0);

	if (n != (ssize_t)sizeof(raw))
		return n < 0 ? -errno : -EIO;
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	return 0;
}

int push_own_key(struct redis_cmds *c, const char *tag, const char *prefix, long long lock_key, const char *route,
		 const char *name)
{
	const char *open = tag ? "{" : "", *shut = tag ? "}:" : "";

	tag = tag ? tag : "";
	if (route)
		return cmds_fmt(c, "%s%s%s" KEYS_ROUTE_OWN_FMT, open, tag, shut, prefix, lock_key, route, name);
	return cmds_fmt(c, "%s%s%s" KEYS_OWN_FMT, open, tag, shut, prefix, lock_key, name);
}
