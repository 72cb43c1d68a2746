/* One logging path: a line per event, key=value or JSON, to stderr. */
#ifndef STAGEDRAIN_LOG_H
#define STAGEDRAIN_LOG_H

#include <stdbool.h>

/*
 * Levels: debug = per-batch detail for developers; info = state changes an
 * operator wants in the log (leader acquired, drained, stopping); warn = a
 * fault the relay handles itself (reconnect, dead-lettered row); error = a
 * fault that needs a person (bad configuration, cannot start).
 */
enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };
enum log_format { LOG_FORMAT_KV = 0, LOG_FORMAT_JSON };

enum log_field_type { LOG_F_END = 0, LOG_F_STR, LOG_F_INT, LOG_F_DBL };

struct log_field {
	enum log_field_type type;
	const char *key;
	const char *s;
	long long i;
	double d;
};

/* One line per field kind, where clang-format would make each a block. */
/* clang-format off */
#define F_STR(k, v) { .type = LOG_F_STR, .key = (k), .s = (v) }
#define F_INT(k, v) { .type = LOG_F_INT, .key = (k), .i = (long long)(v) }
#define F_DBL(k, v) { .type = LOG_F_DBL, .key = (k), .d = (double)(v) }
/* clang-format on */
/* LOGF(F_STR(...), F_INT(...)) builds a terminated field list in place. */
#define LOGF(...) ((const struct log_field[]){ __VA_ARGS__, { .type = LOG_F_END } })

void log_setup(enum log_level min, enum log_format fmt);
bool log_enabled(enum log_level level);
/* fields may be NULL. */
void log_event(enum log_level level, const char *msg, const struct log_field *fields);

#define log_debug(msg, fields) log_event(LOG_DEBUG, (msg), (fields))
#define log_info(msg, fields) log_event(LOG_INFO, (msg), (fields))
#define log_warn(msg, fields) log_event(LOG_WARN, (msg), (fields))
#define log_error(msg, fields) log_event(LOG_ERROR, (msg), (fields))

#endif
