/* The names of the relay's own Redis keys, spelled by include/keys.h. */
#ifndef STAGEDRAIN_SUPPORT_RELAY_KEYS_H
#define STAGEDRAIN_SUPPORT_RELAY_KEYS_H

#include "fmacros.h"

#include <stddef.h>

#include "keys.h"

/* The key the relay with that --key-prefix and --lock-key names name (KEYS_FENCE, KEYS_EPOCH). */
const char *relay_key(char *out, size_t len, const char *prefix, long long lock_key, const char *name);
/* Without a key prefix, for a lock key (KEYS_LOCK_DEFAULT: the relay's default). */
const char *relay_fence_key(char *out, size_t len, long long lock_key);
const char *relay_epoch_key(char *out, size_t len, long long lock_key);

#endif
