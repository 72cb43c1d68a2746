/* One logging path: a line per event, key=value or JSON, to stderr. */
#include "fmacros.h"

#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "log.h"

/* The logger is the one piece of global state besides the config (STYLE.md). */
static enum log_level log_min = LOG_INFO;
static enum log_format log_fmt = LOG_FORMAT_KV;

static const char *const level_names[] = { "debug", "info", "warn", "error" };

void log_setup(enum log_level min, enum log_format fmt)
{
	log_min = min;
	log_fmt = fmt;
}

bool log_enabled(enum log_level level)
{
	return level >= log_min;
}

/* key=value values are quoted only when a reader would split them otherwise. */
static bool kv_needs_quotes(const char *s)
{
	if (!*s)
		return true;
	for (; *s; s++)
		if (*s == ' ' || *s == '"' || *s == '=' || *s == '\\' || (unsigned char)*s < 0x20)
			return true;
	return false;
}

/* Writes s as a JSON string body; also used for quoted key=value values. */
static void put_escaped(FILE *out, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", out);
		else if (c < 0x20)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
}

static void put_value(FILE *out, const struct log_field *f)
{
	switch (f->type) {
	case LOG_F_INT:
		fprintf(out, "%lld", f->i);
		break;
	case LOG_F_DBL:
		fprintf(out, "%.6g", f->d);
		break;
	default: {
		const char *s = f->s ? f->s : "";
		if (log_fmt == LOG_FORMAT_JSON || kv_needs_quotes(s)) {
			fputc('"', out);
			put_escaped(out, s);
			fputc('"', out);
		} else {
			fputs(s, out);
		}
	}
	}
}

static void put_field(FILE *out, const char *key, const struct log_field *f)
{
	if (log_fmt == LOG_FORMAT_JSON) {
		fprintf(out, ",\"%s\":", key);
	} else {
		fprintf(out, " %s=", key);
	}
	put_value(out, f);
}

void log_event(enum log_level level, const char *msg, const struct log_field *fields)
{
	char ts[96];
	struct timeval tv;
	struct tm tm;
	struct log_field m = { .type = LOG_F_STR, .s = msg };
	struct log_field lv = { .type = LOG_F_STR, .s = level_names[level] };
	FILE *out = stderr;

	if (!log_enabled(level))
		return;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
		 tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(tv.tv_usec / 1000) % 1000);
	flockfile(out);
	if (log_fmt == LOG_FORMAT_JSON)
		fprintf(out, "{\"ts\":\"%s\"", ts);
	else
		fprintf(out, "ts=%s", ts);
	put_field(out, "level", &lv);
	put_field(out, "msg", &m);
	for (; fields && fields->type != LOG_F_END; fields++)
		put_field(out, fields->key, fields);
	fputs(log_fmt == LOG_FORMAT_JSON ? "}\n" : "\n", out);
	funlockfile(out);
	fflush(out);
}
