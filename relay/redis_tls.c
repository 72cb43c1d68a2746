/* TLS to Redis with OpenSSL. Debian's hiredis 0.14 has no TLS, so the relay
 * owns the socket (redis_io.c) and this module the encryption on it. */
#include "fmacros.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "redis_tls.h"

static int tls_fail(struct redis_tls_error *err, const char *blame, const char *fmt, ...) SD_PRINTF(3, 4);
static int tls_fail(struct redis_tls_error *err, const char *blame, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err->errstr, sizeof(err->errstr), fmt, ap);
	va_end(ap);
	err->blame = blame;
	return -EINVAL;
}

/* OpenSSL's reason for the oldest queued error, which is the first cause; the queue is then cleared. */
static const char *ssl_reason(char *out, size_t len)
{
	unsigned long e = ERR_peek_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;

	snprintf(out, len, "%s", r ? r : "unknown error");
	ERR_clear_error();
	return out;
}

/* OpenSSL's words for a missing file are vague: say it plainly first. */
static int readable(const char *path, const char *blame, struct redis_tls_error *err)
{
	if (access(path, R_OK) != 0)
		return tls_fail(err, blame, "could not read %s: %s", path, strerror(errno));
	return 0;
}

/* With TLS 1.3 a server that wants a client certificate and gets none only
 * says so after the handshake, often by closing the connection: remember it
 * asked, to name the setting when the first exchange then fails. */
static int note_cert_asked(SSL *ssl, X509 **x509, EVP_PKEY **pkey)
{
	(void)x509;
	(void)pkey;
	SSL_set_app_data(ssl, (char *)"asked for a client certificate");
	return 0;
}

static int load_files(struct redis_tls *t, const struct config *cfg, struct redis_tls_error *err)
{
	const char *files[][2] = { { cfg->redis_tls_ca_file, "--redis-tls-ca-file" },
				   { cfg->redis_tls_cert_file, "--redis-tls-cert-file" },
				   { cfg->redis_tls_key_file, "--redis-tls-key-file" } };
	char why[128];

	for (size_t i = 0; i < 3; i++)
		if (files[i][0] && readable(files[i][0], files[i][1], err) < 0)
			return -EINVAL;

	if (cfg->redis_tls_ca_file && SSL_CTX_load_verify_locations(t->ctx, cfg->redis_tls_ca_file, NULL) != 1)
		return tls_fail(err, "--redis-tls-ca-file", "could not load CA certificates from %s: %s",
				cfg->redis_tls_ca_file, ssl_reason(why, sizeof(why)));
	if (!cfg->redis_tls_ca_file && SSL_CTX_set_default_verify_paths(t->ctx) != 1)
		return tls_fail(err, "--redis-tls-ca-file", "could not load the system's CA certificates: %s",
				ssl_reason(why, sizeof(why)));
	if (cfg->redis_tls_cert_file && SSL_CTX_use_certificate_chain_file(t->ctx, cfg->redis_tls_cert_file) != 1)
		return tls_fail(err, "--redis-tls-cert-file", "could not load the client certificate from %s: %s",
				cfg->redis_tls_cert_file, ssl_reason(why, sizeof(why)));
	if (cfg->redis_tls_key_file &&
	    SSL_CTX_use_PrivateKey_file(t->ctx, cfg->redis_tls_key_file, SSL_FILETYPE_PEM) != 1)
		return tls_fail(err, "--redis-tls-key-file", "could not load the private key from %s: %s",
				cfg->redis_tls_key_file, ssl_reason(why, sizeof(why)));
	if (cfg->redis_tls_key_file && SSL_CTX_check_private_key(t->ctx) != 1)
		return tls_fail(err, "--redis-tls-key-file", "%s is not the key of the certificate in %s",
				cfg->redis_tls_key_file, cfg->redis_tls_cert_file);
	return 0;
}

int redis_tls_init(struct redis_tls *t, const struct config *cfg, struct redis_tls_error *err)
{
	int rc;

	memset(t, 0, sizeof(*t));
	t->server_name = cfg->redis_tls_server_name;
	t->insecure = cfg->redis_tls_insecure;
	if (!(t->ctx = SSL_CTX_new(TLS_client_method())))
		return -ENOMEM;
	SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(t->ctx, t->insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
	/* A reply read may find the socket empty and call again: no retry loop inside OpenSSL. */
	SSL_CTX_set_mode(t->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_client_cert_cb(t->ctx, note_cert_asked);
	if ((rc = load_files(t, cfg, err)) < 0)
		redis_tls_free(t);
	return rc;
}

void redis_tls_free(struct redis_tls *t)
{
	if (!t)
		return;
	SSL_CTX_free(t->ctx);
	t->ctx = NULL;
}

static bool is_ip(const char *host)
{
	unsigned char addr[16];

	return inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
}

SSL *redis_tls_session(const struct redis_tls *t, int fd, const char *host)
{
	const char *name = t->server_name ? t->server_name : host;
	SSL *ssl = SSL_new(t->ctx);
	bool ok;

	if (!ssl)
		return NULL;
	ok = SSL_set_fd(ssl, fd) == 1;
	/* SNI carries names only; an address is checked against the certificate's IP entries. */
	if (ok && !is_ip(name))
		ok = SSL_set_tlsext_host_name(ssl, name) == 1 && (t->insecure || SSL_set1_host(ssl, name) == 1);
	else if (ok && !t->insecure)
		ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1;
	if (!ok) {
		SSL_free(ssl);
		return NULL;
	}
	SSL_set_connect_state(ssl);
	return ssl;
}

int redis_tls_handshake(SSL *ssl, bool *want_write, struct redis_tls_error *err)
{
	int ret = SSL_connect(ssl), e;

	if (ret == 1)
		return 0;
	e = SSL_get_error(ssl, ret);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		*want_write = e == SSL_ERROR_WANT_WRITE;
		return -EAGAIN;
	}
	redis_tls_explain(ssl, ret, false, "TLS handshake", err);
	return -EIO;
}

/* The server's certificate did not verify: which setting fixes it depends on why. */
static void explain_verify(SSL *ssl, const char *what, struct redis_tls_error *err)
{
	long v = SSL_get_verify_result(ssl);
	const char *why = X509_verify_cert_error_string(v);

	if (v == X509_V_ERR_HOSTNAME_MISMATCH || v == X509_V_ERR_IP_ADDRESS_MISMATCH)
		tls_fail(err, "--redis-tls-server-name",
			 "%s failed: certificate verify failed: %s (the server's certificate does not name the "
			 "host connected to; set --redis-tls-server-name to a name it carries)",
			 what, why);
	else
		tls_fail(err, "--redis-tls-ca-file",
			 "%s failed: certificate verify failed: %s (set --redis-tls-ca-file to the CA that signed "
			 "the server's certificate)",
			 what, why);
}

/* The server dropped the connection before its first reply: what about the
 * client certificate may be why. */
static bool explain_early(SSL *ssl, const char *what, struct redis_tls_error *err)
{
	char why[128];

	snprintf(why, sizeof(why), "%s",
		 ERR_peek_error() ? ERR_reason_error_string(ERR_peek_error()) : strerror(errno));
	ERR_clear_error();
	if (!SSL_get_certificate(ssl) && SSL_get_app_data(ssl))
		tls_fail(err, "--redis-tls-cert-file",
			 "%s failed: %s; the server asked for a client certificate and none is set "
			 "(--redis-tls-cert-file and --redis-tls-key-file)",
			 what, why);
	else if (SSL_get_certificate(ssl))
		tls_fail(err, "--redis-tls-cert-file",
			 "%s failed: %s; the server closed the connection right after the handshake: check that it "
			 "trusts the CA that signed the client certificate",
			 what, why);
	else
		return false;
	return true;
}

void redis_tls_explain(SSL *ssl, int ret, bool early, const char *what, struct redis_tls_error *err)
{
	unsigned long e = ERR_peek_error();
	int reason = e ? ERR_GET_REASON(e) : 0;
	char why[128];

	if (reason == SSL_R_CERTIFICATE_VERIFY_FAILED) {
		ERR_clear_error();
		explain_verify(ssl, what, err);
	} else if (reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED ||
		   (reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE && !SSL_get_certificate(ssl)))
		tls_fail(err, "--redis-tls-cert-file",
			 "%s failed: the server requires a client certificate (%s); set --redis-tls-cert-file "
			 "and --redis-tls-key-file",
			 what, ssl_reason(why, sizeof(why)));
	else if (reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE || reason == SSL_R_TLSV1_ALERT_UNKNOWN_CA)
		tls_fail(err, "--redis-tls-cert-file", "%s failed: the server refused the client certificate (%s)",
			 what, ssl_reason(why, sizeof(why)));
	else if (early && explain_early(ssl, what, err))
		return;
	else if (e)
		tls_fail(err, NULL, "%s failed: %s", what, ssl_reason(why, sizeof(why)));
	else if (SSL_get_error(ssl, ret) == SSL_ERROR_ZERO_RETURN || (ret == 0 && errno == 0))
		tls_fail(err, NULL, "%s failed: connection closed by the server", what);
	else
		tls_fail(err, NULL, "%s failed: %s", what, errno ? strerror(errno) : "connection closed");
}
