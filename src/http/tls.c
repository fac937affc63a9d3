/*
 * TLS for the HTTP core: one OpenSSL server context built from a PEM
 * certificate chain and its private key, offering HTTP/2 and HTTP/1.1 by
 * ALPN. TLS 1.2 is the floor, with forward-secret AEAD suites only; TLS 1.3
 * keeps OpenSSL's defaults (all of them are).
 */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "http/tls.h"

/* Logs what OpenSSL says went wrong, with our context first. */
static void log_openssl(const char *what, const char *path)
{
    unsigned long code = ERR_get_error();
    char reason[256] = "";

    if (code != 0)
        ERR_error_string_n(code, reason, sizeof(reason));
    ERR_clear_error();
    rl_log_error("TLS: %s %s%s%s", what, path, reason[0] != '\0' ? ": " : "", reason);
}

SSL_CTX *rl_http_tls_context(const char *cert_file, const char *key_file)
{
    SSL_CTX *ctx;

    /* Failed handshakes leave errors behind; the ones logged below must be this call's. */
    ERR_clear_error();
    ctx = SSL_CTX_new(TLS_server_method());

    if (ctx == NULL) {
        log_openssl("cannot create a context", "");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    if (SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM:ECDHE+CHACHA20") != 1) {
        log_openssl("cannot set the TLS 1.2 ciphers", "");
        goto fail;
    }
    /* Idle streams would otherwise each keep 2 x 16 KiB of TLS buffers. */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
        log_openssl("cannot load the certificate chain", cert_file);
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1) {
        if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
            ERR_clear_error();
            rl_log_error("TLS: the private key %s does not match the certificate %s", key_file, cert_file);
        } else {
            log_openssl("cannot load the private key", key_file);
        }
        goto fail;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        log_openssl("the private key does not match the certificate in", cert_file);
        goto fail;
    }
    /* h2 first, then http/1.1: a client offering only http/1.1 gets a proper ALPN answer. */
    h2o_ssl_register_alpn_protocols(ctx, h2o_alpn_protocols);
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}
