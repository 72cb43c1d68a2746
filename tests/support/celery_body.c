/* A Celery envelope's body, decoded by OpenSSL and parsed by jansson. */
#include "fmacros.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "celery_body.h"

json_t *celery_body(const json_t *envelope, size_t flags)
{
	const char *b64 = json_string_value(json_object_get(envelope, "body"));
	size_t n = b64 ? strlen(b64) : 0;
	unsigned char *raw;
	json_t *v = NULL;
	int len;

	if (!b64 || !(raw = malloc(n / 4 * 3 + 4)))
		return NULL;
	len = EVP_DecodeBlock(raw, (const unsigned char *)b64, (int)n);
	/* EVP_DecodeBlock counts the padding as zero bytes. */
	while (len > 0 && n > 0 && b64[--n] == '=')
		len--;
	if (len >= 0)
		v = json_loadb((const char *)raw, (size_t)len, flags, NULL);
	free(raw);
	return v;
}
