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
/* A route's own keys (routes.h): "<key prefix>stagedrain:<lock key>:<route>:<name>",
 * so targets sharing a Redis (and its database and prefix) keep their own
 * epoch and fence. Arguments: as KEYS_OWN_FMT, the route before the name. */
#define KEYS_ROUTE_OWN_FMT "%sstagedrain:%lld:%s:%s"
/* The crash fence: what the last batch pushed, and in which epoch. */
#define KEYS_FENCE "fence"
/* The leader epoch: a count of takeovers in KEYS_EPOCH (an integer, so a
 * relay of an older release, which INCRs it, still takes epochs that every
 * push checks), and in KEYS_EPOCH_TOKEN KEYS_EPOCH_TOKEN_LEN random lower-case
 * hex digits, new at each takeover. The push script compares both, as
 * "<n>:<token>", so an epoch is never reused even when a Redis that lost its
 * data counts n from 1 again. */
#define KEYS_EPOCH "epoch"
#define KEYS_EPOCH_TOKEN "epoch-token"
#define KEYS_EPOCH_TOKEN_LEN 32

#endif
