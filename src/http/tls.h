/* TLS for relayd and catalogd (src/http/tls.c). */
#ifndef RL_HTTP_TLS_H
#define RL_HTTP_TLS_H

#include <h2o.h>
#include <openssl/ssl.h>

/*
 * A server context for a PEM certificate chain (leaf first) and its PEM
 * private key, offering h2 and http/1.1 by ALPN; NULL with the reason logged.
 */
SSL_CTX *rl_http_tls_context(const char *cert_file, const char *key_file);

#endif
