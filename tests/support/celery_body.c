/* A Celery envelope's body, decoded by OpenSSL and parsed by jansson. */
#include "fmacros.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "celery_body.h"

char *celery_body_text(const json_t *envelope, size_t *len)
{
	const char *b64 = json_string_value(json_object_get(envelope, "body"));
	size_t n = b64 ? strlen(b64) : 0;
	unsigned char *raw;
	int got;

	if (!b64 || !(raw = malloc(n / 4 * 3 + 4)))
		return NULL;
	got = EVP_DecodeBlock(raw, (const unsigned char *)b64, (int)n);
	/* EVP_DecodeBlock counts the padding as zero bytes. */
	while (got > 0 && n > 0 && b64[--n] == '=')
		got--;
	if (got < 0) {
		free(raw);
		return NULL;
	}
	raw[got] = '\0';
	*len = (size_t)got;
	return (char *)raw;
}

json_t *celery_body(const json_t *envelope, size_t flags)
{
	size_t len;
	char *text = celery_body_text(envelope, &len);
	json_t *v = text ? json_loadb(text, len, flags, NULL) : NULL;

	free(text);
	return v;
}
