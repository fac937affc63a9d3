#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sodium.h>

#include "common/hex.h"
#include "common/percent.h"
#include "common/rand.h"
#include "auth/token.h"

static int is_base62(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static size_t base62_run(const char *s, size_t len)
{
    size_t n = 0;

    while (n < len && is_base62(s[n]))
        ++n;
    return n;
}

int rl_installation_id_is_valid(const char *id, size_t len)
{
    return len == RL_INSTALLATION_ID_LEN && memcmp(id, "inst_", 5) == 0 && base62_run(id + 5, 16) == 16;
}

/*
 * SHA-256 by OpenSSL's own SHA256_* functions on a context on the stack.
 * Through EVP, OpenSSL 3.0 frees and allocates the provider's context at
 * every EVP_DigestInit_ex2 even when the context is reused (with the
 * dispatch, ~550 instructions a digest). A delta no longer takes one (its
 * token is known by its mac, its body by BLAKE2b), but user tokens, codes
 * and every idempotency record do. The digest is the same function either
 * way; these functions are deprecated in OpenSSL 3 but kept by it, hence
 * the local pragma.
 */
void rl_token_hash(const void *bytes, size_t len, char *out)
{
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256_CTX ctx;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    SHA256_Init(&ctx);
    SHA256_Update(&ctx, bytes, len);
    SHA256_Final(digest, &ctx);
#pragma GCC diagnostic pop
    OPENSSL_cleanse(&ctx, sizeof(ctx));
    rl_hex_encode(digest, sizeof(digest), out);
}

/* The key of this process's token macs, drawn once. */
static unsigned char mac_key[crypto_shorthash_siphashx24_KEYBYTES];
static pthread_once_t mac_key_once = PTHREAD_ONCE_INIT;

static void mac_key_draw(void)
{
    randombytes_buf(mac_key, sizeof(mac_key));
}

int rl_bridge_token_parse(const char *token, size_t len, rl_bridge_token_t *out)
{
    const char *secret;
    size_t secret_len;

    if (len < 50 || len > RL_TOKEN_MAX)
        return -1;
    if (!rl_installation_id_is_valid(token, RL_INSTALLATION_ID_LEN) || token[RL_INSTALLATION_ID_LEN] != ':')
        return -1;
    secret = token + RL_INSTALLATION_ID_LEN + 1;
    secret_len = len - RL_INSTALLATION_ID_LEN - 1;
    if (secret_len < 7 + 32 || memcmp(secret, "s_", 2) != 0)
        return -1;
    if (memcmp(secret + 2, "live_", 5) != 0 && memcmp(secret + 2, "test_", 5) != 0)
        return -1;
    if (base62_run(secret + 7, secret_len - 7) != secret_len - 7)
        return -1;
    memcpy(out->installation_id, token, RL_INSTALLATION_ID_LEN);
    out->installation_id[RL_INSTALLATION_ID_LEN] = '\0';
    memcpy(out->env, secret + 2, 4);
    out->env[4] = '\0';
    pthread_once(&mac_key_once, mac_key_draw);
    crypto_shorthash_siphashx24(out->mac, (const unsigned char *)secret, secret_len, mac_key);
    out->secret_hash[0] = '\0';
    out->secret = secret;
    out->secret_len = secret_len;
    return 0;
}

int rl_bridge_token_hash(rl_bridge_token_t *token)
{
    if (token->secret_hash[0] != '\0')
        return 0;
    if (token->secret == NULL)
        return -1;
    rl_token_hash(token->secret, token->secret_len, token->secret_hash);
    token->secret = NULL;
    token->secret_len = 0;
    return 0;
}

int rl_bridge_token_mac_equal(const rl_bridge_token_t *token, const unsigned char mac[RL_TOKEN_MAC_LEN])
{
    return CRYPTO_memcmp(token->mac, mac, RL_TOKEN_MAC_LEN) == 0;
}

void rl_bridge_token_mint(const char *installation_id, const char *env, char *out, size_t outsz, char *hash_out)
{
    char secret[7 + RL_TOKEN_SECRET_CHARS + 1];

    snprintf(secret, sizeof(secret), "s_%s_", env);
    rl_rand_base62(secret + 7, RL_TOKEN_SECRET_CHARS);
    rl_token_hash(secret, strlen(secret), hash_out);
    snprintf(out, outsz, "%s:%s", installation_id, secret);
    OPENSSL_cleanse(secret, sizeof(secret));
}

int rl_token_hash_equal(const char *a, const char *b)
{
    size_t len = strlen(a);

    if (len != strlen(b))
        return 0;
    return CRYPTO_memcmp(a, b, len) == 0;
}

static int ieq_prefix(const char *s, size_t len, const char *prefix)
{
    size_t plen = strlen(prefix);

    return len >= plen && strncasecmp(s, prefix, plen) == 0;
}

/* A JWT is three base64url segments; the header segment of every JSON header starts with "eyJ". */
static int looks_like_jwt(const char *s, size_t len)
{
    size_t i, dots = 0, run = 0;

    if (len < 20 || memcmp(s, "eyJ", 3) != 0)
        return 0;
    for (i = 0; i < len; ++i) {
        if (s[i] == '.') {
            if (run == 0)
                return 0;
            ++dots;
            run = 0;
        } else if (is_base62(s[i]) || s[i] == '-' || s[i] == '_') {
            ++run;
        } else {
            break;
        }
    }
    return dots == 2;
}

/* The checks on one spelling of the URL. */
static int carries_token(const char *url, size_t len)
{
    static const char *const credential_names[] = {
        "token=", "access_token=", "bearer=", "auth=", "authorization=", "api_key=", "apikey=", NULL};
    const char *query = memchr(url, '?', len);
    size_t i;

    for (i = 0; i < len; ++i) {
        const char *p = url + i;
        size_t rest = len - i;
        /* Both start with a known byte ("inst_", "eyJ"): every other place is passed at once (every request). */
        if (*p != 'i' && *p != 'e')
            continue;
        if (rest >= 5 + 16 && memcmp(p, "inst_", 5) == 0 && base62_run(p + 5, 16) == 16) {
            const char *after = p + 21;
            size_t left = rest - 21;
            if ((left >= 3 && ieq_prefix(after, left, ":s_")) || (left >= 5 && ieq_prefix(after, left, "%3As_")))
                return 1;
        }
        if ((i == 0 || !is_base62(url[i - 1])) && looks_like_jwt(p, rest))
            return 1;
    }
    if (query != NULL) {
        const char *p = query + 1, *end = url + len;
        while (p < end) {
            const char *amp = memchr(p, '&', (size_t)(end - p));
            size_t plen = (size_t)((amp != NULL ? amp : end) - p);
            int k;
            for (k = 0; credential_names[k] != NULL; ++k) {
                if (ieq_prefix(p, plen, credential_names[k]) && plen > strlen(credential_names[k]))
                    return 1;
            }
            p += plen + 1;
        }
    }
    return 0;
}

/* A URL is decoded this many times at most: a token hidden under more layers is no longer usable as one. */
#define DECODE_ROUNDS 3

int rl_url_carries_token(const char *url, size_t len)
{
    char *decoded;
    size_t n = len;
    int round, found;

    if (carries_token(url, len))
        return 1;
    if (memchr(url, '%', len) == NULL)
        return 0;
    /*
     * A server decodes the URL before it looks at a value, so a token spelt
     * with escapes (%2E for its dots, %65yJ for eyJ, inst%5F) is still a
     * token in the URL: every decoded spelling is checked, up to a few
     * layers deep. When memory runs out the request is refused, not let
     * through.
     */
    decoded = malloc(len + 1);
    if (decoded == NULL)
        return 1;
    memcpy(decoded, url, len);
    found = 0;
    for (round = 0; round < DECODE_ROUNDS && !found; ++round) {
        size_t before = n;
        /* Lenient: a malformed escape is text like any other, and the scan goes on past it. */
        n = (size_t)rl_percent_decode(decoded, n, decoded, n + 1, RL_PERCENT_LENIENT);
        if (n == before)
            break;
        found = carries_token(decoded, n);
    }
    free(decoded);
    return found;
}
