/* The relay's own Redis keys: their layout and the default lock key they carry.
 * The relay builds them from these, and the tests that read them do too. */
#ifndef STAGEDRAIN_KEYS_H
#define STAGEDRAIN_KEYS_H

/* The default --lock-key ("stgdrn" in ASCII); a bare literal so it can be
 * spelled as text for the settings table. */
#define KEYS_LOCK_DEFAULT_LITERAL 0x73746764726e
#define KEYS_LOCK_DEFAULT ((long long)KEYS_LOCK_DEFAULT_LITERAL)
#define KEYS_STR_(x) #x
#define KEYS_STR(x) KEYS_STR_(x)
/* The same as text: "0x73746764726e". */
#define KEYS_LOCK_DEFAULT_TEXT KEYS_STR(KEYS_LOCK_DEFAULT_LITERAL)

/* "<key prefix>stagedrain:<lock key>:<name>": under the job prefix and the lock
 * key, so relay groups sharing a Redis do not overwrite each other's keys.
 * Arguments: the prefix (const char *), the lock key (long long), the name. */
#define KEYS_OWN_FMT "%sstagedrain:%lld:%s"
/* The crash fence: what the last batch pushed, and in which epoch. */
#define KEYS_FENCE "fence"
/* The leader epoch counter, INCR'd at each takeover. */
#define KEYS_EPOCH "epoch"

#endif
