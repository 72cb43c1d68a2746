/* The crash fence: which rows the last batch pushed, written to Redis in the
 * same script call as the batch. Pure: formats and parses, no I/O. */
#include "fmacros.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "fence.h"

#define JID_LEN 24

void fence_init(struct fence *f)
{
	f->epoch = 0;
	f->n = 0;
	buf_init(&f->ids);
	buf_init(&f->jids);
}

void fence_free(struct fence *f)
{
	if (!f)
		return;
	buf_free(&f->ids);
	buf_free(&f->jids);
	f->n = 0;
}

/* The jid goes with the id so a fence can never match a different row with a
 * reused id (after TRUNCATE ... RESTART IDENTITY, say). */
static int write_jobs(struct buf *out, const struct batch *b, bool more)
{
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < b->njobs; i++) {
		if (((!i && !more) || (rc = buf_append(out, ",", 1)) == 0) &&
		    (rc = buf_put_int(out, b->jobs[i].id)) == 0 && (rc = buf_append(out, ":", 1)) == 0)
			rc = buf_append(out, b->jobs[i].jid, JID_LEN);
	}
	return rc;
}

int fence_write(struct buf *out, long long epoch, const struct batch *b)
{
	int rc = buf_puts(out, "epoch=");

	if (rc == 0 && (rc = buf_put_int(out, epoch)) == 0)
		rc = buf_puts(out, " jobs=");
	return rc ? rc : write_jobs(out, b, false);
}

int fence_write_more(struct buf *out, const struct batch *b)
{
	return write_jobs(out, b, true);
}

static bool is_hex_lower(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* Reads a decimal number at *p as fence_write writes one: any int8 from 0 to
 * INT64_MAX (ids are bigserial), no sign, no leading zero. What would overflow
 * is refused, not wrapped: a wrapped id could name another row. */
static int read_number(const char **p, const char *end, long long *v)
{
	const char *s = *p;

	*v = 0;
	while (*p < end && **p >= '0' && **p <= '9') {
		int d = **p - '0';

		if (*p > s && *s == '0')
			return -EINVAL;
		if (*v > (LLONG_MAX - d) / 10)
			return -EINVAL;
		*v = *v * 10 + d;
		(*p)++;
	}
	return *p > s ? 0 : -EINVAL;
}

static int parse_job(struct fence *f, const char **p, const char *end)
{
	const char *s;
	long long id;

	if (read_number(p, end, &id) < 0 || *p >= end || *(*p)++ != ':')
		return -EINVAL;
	s = *p;
	while (*p < end && is_hex_lower(**p))
		(*p)++;
	if (*p - s != JID_LEN)
		return -EINVAL;
	if (buf_printf(&f->ids, "%s%lld", f->n ? "," : "", id) < 0 ||
	    buf_printf(&f->jids, "%s%.*s", f->n ? "," : "", JID_LEN, s) < 0)
		return -ENOMEM;
	f->n++;
	return 0;
}

int fence_parse(struct fence *f, const char *text, size_t len)
{
	const char *p = text, *end = text + len;
	int rc;

	buf_reset(&f->ids);
	buf_reset(&f->jids);
	f->n = 0;
	if (len < 6 || memcmp(p, "epoch=", 6) != 0)
		return -EINVAL;
	p += 6;
	if (read_number(&p, end, &f->epoch) < 0 || (size_t)(end - p) < 6 || memcmp(p, " jobs=", 6) != 0)
		return -EINVAL;
	p += 6;
	if ((rc = buf_puts(&f->ids, "{")) < 0 || (rc = buf_puts(&f->jids, "{")) < 0)
		return rc;
	while (p < end) {
		if (f->n && *p++ != ',')
			return -EINVAL;
		if ((rc = parse_job(f, &p, end)) < 0)
			return rc;
	}
	if ((rc = buf_puts(&f->ids, "}")) < 0 || (rc = buf_puts(&f->jids, "}")) < 0)
		return rc;
	return 0;
}
