/* How Celery's Python side spells a message's values: saferepr of args, base64 of the body, isoformat of times. */
#include "fmacros.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "celery_codec.h"
#include "pyrepr.h"

/* Celery's saferepr(args or ()) or saferepr(kwargs) of JSON text, as a JSON string. */
int celery_codec_repr(struct buf *b, struct span json)
{
	struct buf text;
	int rc;

	buf_init(&text);
	/* send_task's `args or ()`: an empty list becomes a tuple. */
	if (json.p[0] == '[' && json.p[payload_skip_ws(json, 1)] == ']')
		rc = buf_puts(&text, "()");
	else
		rc = pyrepr_saferepr(&text, json);
	if (rc == 0)
		rc = payload_string(b, span_of(text.data, text.len), 0);
	buf_free(&text);
	return rc;
}

/* ---- the body, base64 ---- */

static void b64_quad(const unsigned char *in, size_t n, char *out)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	unsigned long v = (unsigned long)in[0] << 16 | (n > 1 ? (unsigned long)in[1] << 8 : 0) | (n > 2 ? in[2] : 0);

	out[0] = a[v >> 18 & 63];
	out[1] = a[v >> 12 & 63];
	out[2] = n > 1 ? a[v >> 6 & 63] : '=';
	out[3] = n > 2 ? a[v & 63] : '=';
}

/* Replaces the bytes of b from off on with their base64 (kombu's body_encoding). */
int celery_codec_base64(struct buf *b, size_t off)
{
	size_t n = b->len - off, enc = (n + 2) / 3 * 4;
	char chunk[64];
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < n; i += 48) {
		size_t take = n - i < 48 ? n - i : 48, w = 0;
		for (size_t k = 0; k < take; k += 3, w += 4)
			b64_quad((const unsigned char *)b->data + off + i + k, take - k, chunk + w);
		rc = buf_append(b, chunk, w);
	}
	if (rc < 0)
		return rc;
	memmove(b->data + off, b->data + off + n, enc);
	payload_rewind(b, off + enc);
	return 0;
}

/* ---- times ---- */

/* datetime.isoformat() of an aware UTC time, always with microseconds. */
int celery_codec_put_iso(struct buf *b, long long us)
{
	time_t secs = (time_t)payload_floor_div(us, 1000000);
	struct tm tm;

	if (!gmtime_r(&secs, &tm))
		return -EINVAL;
	return buf_printf(b, "\"%04d-%02d-%02dT%02d:%02d:%02d.%06lld+00:00\"", tm.tm_year + 1900, tm.tm_mon + 1,
			  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us - payload_floor_div(us, 1000000) * 1000000);
}

static int digits(const char *p, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		*v = *v * 10 + (p[i] - '0');
	}
	return 0;
}

/* YYYY-MM-DDTHH:MM:SS[.f{1,6}](Z|+HH:MM|-HH:MM) to epoch microseconds: a
 * naive time would be read in the worker's zone, so the offset is required. */
static int parse_iso(const char *s, long long *us)
{
	int y, mo, d, h, mi, se, oh, om, frac = 0, nf = 0;
	size_t n = strlen(s), i = 19;
	struct tm tm = { 0 }, back;
	time_t secs;

	if (n < 20 || digits(s, 4, &y) || s[4] != '-' || digits(s + 5, 2, &mo) || s[7] != '-' || digits(s + 8, 2, &d) ||
	    s[10] != 'T' || digits(s + 11, 2, &h) || s[13] != ':' || digits(s + 14, 2, &mi) || s[16] != ':' ||
	    digits(s + 17, 2, &se))
		return -1;
	if (s[i] == '.')
		for (i++; i < n && s[i] >= '0' && s[i] <= '9' && nf < 6; i++, nf++)
			frac = frac * 10 + (s[i] - '0');
	if (s[i - 1] == '.' || y < 1 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 59)
		return -1;
	for (; nf < 6; nf++)
		frac *= 10;
	if (strcmp(s + i, "Z") == 0) {
		oh = om = 0;
	} else if (n - i != 6 || (s[i] != '+' && s[i] != '-') || digits(s + i + 1, 2, &oh) || s[i + 3] != ':' ||
		   digits(s + i + 4, 2, &om) || oh > 23 || om > 59) {
		return -1;
	}
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = se;
	secs = timegm(&tm);
	/* timegm rolls 31 February over into March; Python refuses it. */
	if (!gmtime_r(&secs, &back) || back.tm_mday != d)
		return -1;
	*us = ((long long)secs - (s[i] == '-' ? -1 : 1) * (oh * 3600LL + om * 60LL)) * 1000000LL + frac;
	return 0;
}

/* An ISO 8601 time (expires'), from its JSON string. */
int celery_codec_read_iso(struct span v, long long *us, bool *ok)
{
	json_error_t err;
	json_t *s = json_loadb(v.p, v.n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);

	*ok = false;
	if (!s)
		return json_error_code(&err) == json_error_out_of_memory ? -ENOMEM : 0;
	*ok = parse_iso(json_string_value(s), us) == 0;
	json_decref(s);
	return 0;
}
