/* Prometheus text exposition (format 0.0.4): a family's HELP and TYPE lines, a gauge, a label value. */
#ifndef STAGEDRAIN_METRICS_TEXT_H
#define STAGEDRAIN_METRICS_TEXT_H

#include <stddef.h>

#include "buf.h"
#include "fmacros.h"

/* A label value is at most this long: a longer name shows as its first bytes,
 * "...#" and 16 hex digits of a hash of the whole name (so two long names
 * that share a prefix stay two series). */
#define METRICS_LABEL_MAX 200

/* Every family is named stagedrain_<name>. Each writer appends to out and
 * returns 0 or -ENOMEM. */

/* "# HELP stagedrain_<name> <help>" and "# TYPE stagedrain_<name> <type>". */
int metrics_put_head(struct buf *out, const char *name, const char *type, const char *help) SD_MUSTCHECK;
/* A gauge without labels, its value with decimals digits; a NAN value (not
 * known) leaves its sample out, its HELP and TYPE still written. */
int metrics_put_gauge(struct buf *out, const char *name, const char *help, double v, int decimals) SD_MUSTCHECK;
/* A label value as the exposition format escapes it: \\, \" and \n. */
int metrics_put_label(struct buf *out, const char *s, size_t len) SD_MUSTCHECK;
/* The label of a name: itself, or past METRICS_LABEL_MAX bytes its head,
 * "...#" and a hash of the whole (out holds METRICS_LABEL_MAX + 1). Its length. */
size_t metrics_short_label(const char *name, size_t len, char *out);

#endif
