/* The relay's own Redis key names: see relay_keys.h. */
#include "fmacros.h"

#include <stdio.h>

#include "support/relay_keys.h"

const char *relay_key(char *out, size_t len, const char *prefix, long long lock_key, const char *name)
{
	snprintf(out, len, KEYS_OWN_FMT, prefix, lock_key, name);
	return out;
}

const char *relay_fence_key(char *out, size_t len, long long lock_key)
{
	return relay_key(out, len, "", lock_key, KEYS_FENCE);
}

const char *relay_epoch_key(char *out, size_t len, long long lock_key)
{
	return relay_key(out, len, "", lock_key, KEYS_EPOCH);
}
