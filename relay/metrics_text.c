/* Prometheus text exposition: how a family's HELP and TYPE lines, a gauge and a label value are written. */
#include "fmacros.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "metrics_text.h"

int metrics_put_head(struct buf *out, const char *name, const char *type, const char *help)
{
	return buf_printf(out, "# HELP stagedrain_%s %s\n# TYPE stagedrain_%s %s\n", name, help, name, type);
}

/* A gauge the watcher reads: its sample is left out while the value is unknown. */
int metrics_put_gauge(struct buf *out, const char *name, const char *help, double v, int decimals)
{
	int rc = metrics_put_head(out, name, "gauge", help);

	if (rc == 0 && !isnan(v))
		rc = buf_printf(out, "stagedrain_%s %.*f\n", name, decimals, v);
	return rc;
}

int metrics_put_label(struct buf *out, const char *s, size_t len)
{
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < len; i++) {
		if (s[i] == '\\')
			rc = buf_puts(out, "\\\\");
		else if (s[i] == '"')
			rc = buf_puts(out, "\\\"");
		else if (s[i] == '\n')
			rc = buf_puts(out, "\\n");
		else
			rc = buf_append(out, &s[i], 1);
	}
	return rc;
}

/* The label of a long name: its head, cut on a UTF-8 boundary, "...#" and a
 * 64-bit FNV-1a hash of the whole name: METRICS_LABEL_MAX bytes in out,
 * which holds one more for snprintf's nul. */
size_t metrics_short_label(const char *name, size_t len, char *out)
{
	unsigned long long h = 14695981039346656037ULL;
	size_t head = METRICS_LABEL_MAX - 20;

	if (len <= METRICS_LABEL_MAX) {
		memcpy(out, name, len);
		out[len] = '\0';
		return len;
	}
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)name[i]) * 1099511628211ULL;
	while (head > 0 && ((unsigned char)name[head] & 0xc0) == 0x80)
		head--;
	memcpy(out, name, head);
	return head + (size_t)snprintf(out + head, METRICS_LABEL_MAX + 1 - head, "...#%016llx", h);
}
