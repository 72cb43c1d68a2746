/* TLS to Redis with OpenSSL: the client context from the settings, the handshake, and errors an operator can act on. */
#ifndef STAGEDRAIN_REDIS_TLS_H
#define STAGEDRAIN_REDIS_TLS_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "fmacros.h"

/* One client context: trusted CAs, the client certificate, verification. */
struct redis_tls {
	SSL_CTX *ctx;
	const char *server_name; /* --redis-tls-server-name, or NULL: the host connected to */
	bool insecure;
};

/*
 * A TLS failure explained: errstr says what happened, blame names the setting
 * that can fix it ("--redis-tls-ca-file", ...), or NULL when none can (a
 * network fault). Filled by the functions below.
 */
struct redis_tls_error {
	char errstr[256];
	const char *blame;
};

/* Loads the CAs (the system's by default) and the client certificate.
 * -EINVAL when a file cannot be used (err says which and why), -ENOMEM. */
int redis_tls_init(struct redis_tls *t, const struct config *cfg, struct redis_tls_error *err) SD_MUSTCHECK;
void redis_tls_free(struct redis_tls *t);
/* A session on connected socket fd for host (what the certificate must name
 * unless --redis-tls-server-name says otherwise); the handshake runs in
 * redis_tls_handshake. NULL only when out of memory. */
SSL *redis_tls_session(const struct redis_tls *t, int fd, const char *host);
/* Advances the handshake; 0 when done, -EAGAIN with *want_write telling the
 * direction to wait for, -EIO with err filled. */
int redis_tls_handshake(SSL *ssl, bool *want_write, struct redis_tls_error *err) SD_MUSTCHECK;
/* Explains a failed SSL_read, SSL_write or SSL_connect whose result was ret;
 * early: before the server's first reply, when a refused client certificate
 * shows as a dropped connection. */
void redis_tls_explain(SSL *ssl, int ret, bool early, const char *what, struct redis_tls_error *err);

#endif
