/* --queue-limit: per-queue caps on the Redis list length. */
#include "fmacros.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "queue_limits.h"
#include "values.h"

void queue_limits_free(struct queue_limits *ql)
{
	for (size_t i = 0; i < ql->n; i++)
		free(ql->v[i].queue);
	free(ql->v);
	ql->v = NULL;
	ql->n = 0;
}

int queue_limits_copy(struct queue_limits *dst, const struct queue_limits *src)
{
	*dst = (struct queue_limits){ NULL, 0 };
	if (src->n && !(dst->v = calloc(src->n, sizeof(*dst->v))))
		return -ENOMEM;
	for (size_t i = 0; i < src->n; i++) {
		dst->v[i] = src->v[i];
		if (!(dst->v[i].queue = strndup(src->v[i].queue, src->v[i].len))) {
			queue_limits_free(dst);
			return -ENOMEM;
		}
		dst->n = i + 1;
	}
	return 0;
}

static const struct queue_limit *find(const struct queue_limits *ql, const char *queue, size_t len)
{
	for (size_t i = 0; i < ql->n; i++)
		if (ql->v[i].len == len && memcmp(ql->v[i].queue, queue, len) == 0)
			return &ql->v[i];
	return NULL;
}

/* The cap's digits, with nothing else. */
static int parse_cap(const char *s, size_t n, long *cap)
{
	long v = 0;

	if (n == 0)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (s[i] - '0');
		if (v > QUEUE_LIMIT_MAX)
			return -EINVAL;
	}
	*cap = v;
	return 0;
}

/* One "NAME=N" item of n bytes, spaces already trimmed. */
static int add_item(struct queue_limits *ql, const char *s, size_t n, char *why, size_t whylen)
{
	const char *eq = NULL;
	struct queue_limit *v;
	char shown[64];
	long cap;

	for (size_t i = 0; i < n; i++)
		if (s[i] == '=')
			eq = s + i;
	value_printable_n(s, n, shown, sizeof(shown));
	if (!eq || eq == s)
		return value_fail(why, whylen, -EINVAL, "\"%s\" is not QUEUE=N", shown);
	if (parse_cap(eq + 1, (size_t)(s + n - eq - 1), &cap) < 0)
		return value_fail(why, whylen, -EINVAL, "the cap in \"%s\" is not a whole number from 0 to %ld", shown,
				  QUEUE_LIMIT_MAX);
	if (find(ql, s, (size_t)(eq - s)))
		return value_fail(why, whylen, -EINVAL, "queue \"%s\" is listed twice",
				  value_printable_n(s, (size_t)(eq - s), shown, sizeof(shown)));
	if (!(v = realloc(ql->v, (ql->n + 1) * sizeof(*v))))
		return -ENOMEM;
	ql->v = v;
	v = &ql->v[ql->n];
	if (!(v->queue = strndup(s, (size_t)(eq - s))))
		return -ENOMEM;
	v->len = (size_t)(eq - s);
	v->cap = cap;
	ql->n++;
	return 0;
}

int queue_limits_parse(struct queue_limits *ql, const char *text, char *why, size_t whylen)
{
	const char *p = text ? text : "";
	int rc = 0;

	ql->v = NULL;
	ql->n = 0;
	if (*p && p[strlen(p) - 1] == ',')
		return value_fail(why, whylen, -EINVAL, "an empty item after the last comma");
	while (rc == 0 && *p) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		const char *s = p;

		p += n + (end != NULL);
		while (n > 0 && *s == ' ')
			s++, n--;
		while (n > 0 && s[n - 1] == ' ')
			n--;
		if (n == 0)
			rc = value_fail(why, whylen, -EINVAL, "an empty item (two commas in a row, or one first)");
		else
			rc = add_item(ql, s, n, why, whylen);
	}
	if (rc < 0)
		queue_limits_free(ql);
	return rc;
}

long queue_limits_cap(const struct queue_limits *ql, const char *queue, size_t len, long dflt)
{
	const struct queue_limit *l = find(ql, queue, len);

	return l ? l->cap : dflt;
}
