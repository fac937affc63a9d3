#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <sodium.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "common/base64.h"
#include "common/hex.h"
#include "e2e/e2e.h"

#define ENVELOPE_V1 0x01
#define WRAP_V1     0x02
#define SENTINEL    0x00

/*
 * The authors' 32 SAS emoji (their sas-emojis.ts): interop data, so both
 * screens of a pairing show the same picture. Order matters; byte % 32 picks one.
 */
static const char *const sas_emoji[32] = {
    "\xF0\x9F\x90\xB1", "\xF0\x9F\x90\xB6", "\xF0\x9F\x90\xAD", "\xF0\x9F\x90\xB9", /* cat dog mouse hamster */
    "\xF0\x9F\x90\xB0", "\xF0\x9F\x90\xBB", "\xF0\x9F\x90\xBC", "\xF0\x9F\x90\xA8", /* rabbit bear panda koala */
    "\xF0\x9F\x90\xAF", "\xF0\x9F\xA6\x81", "\xF0\x9F\x90\xAE", "\xF0\x9F\x90\xB7", /* tiger lion cow pig */
    "\xF0\x9F\x90\xB8", "\xF0\x9F\xA6\x8A", "\xF0\x9F\x90\x94", "\xF0\x9F\x90\xBA", /* frog fox chicken wolf */
    "\xF0\x9F\x8D\x8E", "\xF0\x9F\x8D\x8C", "\xF0\x9F\x8D\x87", "\xF0\x9F\x8D\x93", /* apple banana grapes strawberry */
    "\xF0\x9F\x8D\x91", "\xF0\x9F\x8D\x92", "\xF0\x9F\xA5\x95", "\xF0\x9F\x8C\xBD", /* peach cherries carrot corn */
    "\xF0\x9F\x8C\x99", "\xE2\xAD\x90",     "\xF0\x9F\x8C\x88", "\xF0\x9F\x94\xA5", /* moon star rainbow fire */
    "\xE2\x9A\xA1",     "\xF0\x9F\x9A\x80", "\xE2\x9A\x93",     "\xF0\x9F\x8E\x81", /* zap rocket anchor gift */
};

int rl_e2e_init(void)
{
    return sodium_init() < 0 ? -1 : 0;
}

void rl_e2e_wipe(void *p, size_t len)
{
    if (p != NULL)
        sodium_memzero(p, len);
}

int rl_e2e_keypair_new(rl_e2e_keypair_t *kp)
{
    return crypto_box_keypair(kp->pub, kp->sec) == 0 ? 0 : RL_E2E_E_CRYPTO;
}

int rl_e2e_keypair_from_secret(rl_e2e_keypair_t *kp, const uint8_t sec[RL_E2E_KEY_LEN])
{
    memcpy(kp->sec, sec, RL_E2E_KEY_LEN);
    return crypto_scalarmult_base(kp->pub, kp->sec) == 0 ? 0 : RL_E2E_E_CRYPTO;
}

void rl_e2e_session_key_new(uint8_t key[RL_E2E_KEY_LEN])
{
    randombytes_buf(key, RL_E2E_KEY_LEN);
}

int rl_e2e_seal(const uint8_t key[RL_E2E_KEY_LEN], const void *plain, size_t len, uint8_t *out, size_t *outlen)
{
    EVP_CIPHER_CTX *ctx = NULL;
    int n = 0, fin = 0, result = RL_E2E_E_CRYPTO;

    /* The authors' sentinel: an empty value is told apart from a missing one without a GCM block. */
    if (len == 0) {
        out[0] = SENTINEL;
        *outlen = 1;
        return 0;
    }
    if (len > (size_t)INT32_MAX)
        return RL_E2E_E_FORMAT;
    out[0] = ENVELOPE_V1;
    randombytes_buf(out + 1, RL_E2E_NONCE_LEN);
    ctx = EVP_CIPHER_CTX_new();
    if (ctx == NULL || EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, RL_E2E_NONCE_LEN, NULL) != 1 ||
        EVP_EncryptInit_ex(ctx, NULL, NULL, key, out + 1) != 1 ||
        EVP_EncryptUpdate(ctx, out + 1 + RL_E2E_NONCE_LEN, &n, plain, (int)len) != 1 ||
        EVP_EncryptFinal_ex(ctx, out + 1 + RL_E2E_NONCE_LEN + n, &fin) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, RL_E2E_TAG_LEN, out + 1 + RL_E2E_NONCE_LEN + len) != 1)
        goto out;
    *outlen = len + RL_E2E_OVERHEAD;
    result = 0;
out:
    EVP_CIPHER_CTX_free(ctx);
    return result;
}

int rl_e2e_open(const uint8_t key[RL_E2E_KEY_LEN], const uint8_t *env, size_t len, uint8_t *out, size_t *outlen)
{
    EVP_CIPHER_CTX *ctx = NULL;
    size_t body;
    int n = 0, fin = 0, result = RL_E2E_E_AUTH;

    if (len == 0)
        return RL_E2E_E_FORMAT;
    if (len == 1 && env[0] == SENTINEL) {
        *outlen = 0;
        return 0;
    }
    if (env[0] != ENVELOPE_V1)
        return RL_E2E_E_VERSION;
    if (len < RL_E2E_OVERHEAD || len - RL_E2E_OVERHEAD > (size_t)INT32_MAX)
        return RL_E2E_E_FORMAT;
    body = len - RL_E2E_OVERHEAD;
    ctx = EVP_CIPHER_CTX_new();
    if (ctx == NULL) {
        result = RL_E2E_E_CRYPTO;
        goto out;
    }
    if (EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, RL_E2E_NONCE_LEN, NULL) != 1 ||
        EVP_DecryptInit_ex(ctx, NULL, NULL, key, env + 1) != 1 ||
        EVP_DecryptUpdate(ctx, out, &n, env + 1 + RL_E2E_NONCE_LEN, (int)body) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, RL_E2E_TAG_LEN, (void *)(env + len - RL_E2E_TAG_LEN)) != 1 ||
        EVP_DecryptFinal_ex(ctx, out + n, &fin) != 1) {
        /* Nothing of an unauthenticated plaintext may leave this function. */
        rl_e2e_wipe(out, body);
        goto out;
    }
    *outlen = body;
    result = 0;
out:
    EVP_CIPHER_CTX_free(ctx);
    return result;
}

int rl_e2e_hkdf(const uint8_t *ikm, size_t ikmlen, const char *info, uint8_t *out, size_t outlen)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
    size_t len = outlen;
    int result = RL_E2E_E_CRYPTO;

    /*
     * No salt: RFC 5869 takes an absent salt as HashLen zero bytes, which is
     * what the authors' hkdfSync(…, empty salt, …) computes too.
     */
    if (ctx == NULL || EVP_PKEY_derive_init(ctx) != 1 || EVP_PKEY_CTX_set_hkdf_md(ctx, EVP_sha256()) != 1 ||
        EVP_PKEY_CTX_set1_hkdf_key(ctx, ikm, (int)ikmlen) != 1 ||
        EVP_PKEY_CTX_add1_hkdf_info(ctx, (const unsigned char *)info, (int)strlen(info)) != 1 ||
        EVP_PKEY_derive(ctx, out, &len) != 1 || len != outlen)
        goto out;
    result = 0;
out:
    EVP_PKEY_CTX_free(ctx);
    return result;
}

int rl_e2e_blob_key(const uint8_t session_key[RL_E2E_KEY_LEN], const char *path, uint8_t out[RL_E2E_KEY_LEN])
{
    static const char prefix[] = "sophon/v1/blob/";
    size_t plen = strlen(path);
    char *info = malloc(sizeof(prefix) + plen);
    int result;

    if (info == NULL)
        return RL_E2E_E_CRYPTO;
    memcpy(info, prefix, sizeof(prefix) - 1);
    memcpy(info + sizeof(prefix) - 1, path, plen + 1);
    result = rl_e2e_hkdf(session_key, RL_E2E_KEY_LEN, info, out, RL_E2E_KEY_LEN);
    free(info);
    return result;
}

int rl_e2e_blind_index_key(const uint8_t session_key[RL_E2E_KEY_LEN], uint8_t out[RL_E2E_KEY_LEN])
{
    return rl_e2e_hkdf(session_key, RL_E2E_KEY_LEN, "sophon/v1/blind-index", out, RL_E2E_KEY_LEN);
}

/* HMAC-SHA256 of first, then (0xFF part)* for each part: the framing of blind indexes and decision signatures. */
static int mac_parts(const uint8_t key[RL_E2E_KEY_LEN], const char *first, const char *const *parts, size_t n,
                     uint8_t mac[32])
{
    size_t total = strlen(first), i, at;
    unsigned int maclen = 0;
    unsigned char *msg;
    int result = RL_E2E_E_CRYPTO;

    for (i = 0; i < n; i++)
        total += 1 + strlen(parts[i]);
    msg = malloc(total + 1);
    if (msg == NULL)
        return RL_E2E_E_CRYPTO;
    at = strlen(first);
    memcpy(msg, first, at);
    for (i = 0; i < n; i++) {
        size_t len = strlen(parts[i]);
        msg[at++] = 0xFF;
        memcpy(msg + at, parts[i], len);
        at += len;
    }
    if (HMAC(EVP_sha256(), key, RL_E2E_KEY_LEN, msg, total, mac, &maclen) != NULL && maclen == 32)
        result = 0;
    free(msg);
    return result;
}

int rl_e2e_blind_index(const uint8_t index_key[RL_E2E_KEY_LEN], const char *scope, const char *const *inputs, size_t n,
                       char out[RL_E2E_BLIND_IDX_SIZE])
{
    uint8_t mac[32];
    int result = mac_parts(index_key, scope, inputs, n, mac);

    if (result == 0)
        rl_base64url_encode(mac, 16, out);
    return result;
}

char *rl_e2e_seal_field(const uint8_t session_key[RL_E2E_KEY_LEN], const char *path, const void *plain, size_t len)
{
    uint8_t key[RL_E2E_KEY_LEN], *env = NULL;
    size_t envlen = 0;
    char *text = NULL;

    if (rl_e2e_blob_key(session_key, path, key) != 0)
        goto out;
    env = malloc(len + RL_E2E_OVERHEAD);
    if (env == NULL || rl_e2e_seal(key, plain, len, env, &envlen) != 0)
        goto out;
    text = malloc(RL_BASE64_ENCODED_SIZE(envlen));
    if (text != NULL)
        rl_base64_encode(env, envlen, text);
out:
    rl_e2e_wipe(key, sizeof(key));
    free(env);
    return text;
}

int rl_e2e_open_field(const uint8_t session_key[RL_E2E_KEY_LEN], const char *path, const char *b64, char **out,
                      size_t *outlen)
{
    uint8_t key[RL_E2E_KEY_LEN], *env = NULL;
    size_t b64len = strlen(b64), plainlen = 0;
    char *plain = NULL;
    long envlen;
    int result = RL_E2E_E_CRYPTO;

    *out = NULL;
    env = malloc(b64len / 4 * 3 + 3);
    plain = malloc(b64len / 4 * 3 + 3);
    if (env == NULL || plain == NULL)
        goto out;
    envlen = rl_base64_decode(b64, b64len, env);
    if (envlen <= 0) {
        result = RL_E2E_E_FORMAT;
        goto out;
    }
    result = rl_e2e_blob_key(session_key, path, key);
    if (result == 0)
        result = rl_e2e_open(key, env, (size_t)envlen, (uint8_t *)plain, &plainlen);
    if (result != 0)
        goto out;
    plain[plainlen] = '\0';
    *out = plain;
    plain = NULL;
    if (outlen != NULL)
        *outlen = plainlen;
out:
    rl_e2e_wipe(key, sizeof(key));
    free(env);
    free(plain);
    return result;
}

/* HKDF over crypto_box_beforenm: X25519 then HSalsa20, as NaCl's box.before (the authors' wire), never the raw X25519.
 */
static int box_derive(const uint8_t sec[RL_E2E_KEY_LEN], const uint8_t pub[RL_E2E_KEY_LEN], const char *info,
                      uint8_t *out, size_t outlen)
{
    uint8_t shared[crypto_box_BEFORENMBYTES];
    int result = RL_E2E_E_CRYPTO;

    if (crypto_box_beforenm(shared, pub, sec) == 0)
        result = rl_e2e_hkdf(shared, sizeof(shared), info, out, outlen);
    rl_e2e_wipe(shared, sizeof(shared));
    return result;
}

char *rl_e2e_wrap(const uint8_t recipient_pub[RL_E2E_KEY_LEN], const uint8_t *plain, size_t len)
{
    rl_e2e_keypair_t eph;
    uint8_t key[RL_E2E_KEY_LEN], *box = NULL;
    size_t envlen = 0;
    char *text = NULL;

    if (rl_e2e_keypair_new(&eph) != 0 ||
        box_derive(eph.sec, recipient_pub, "sophon/v1/sealed-box", key, sizeof(key)) != 0)
        goto out;
    box = malloc(1 + RL_E2E_KEY_LEN + len + RL_E2E_OVERHEAD);
    if (box == NULL)
        goto out;
    box[0] = WRAP_V1;
    memcpy(box + 1, eph.pub, RL_E2E_KEY_LEN);
    if (rl_e2e_seal(key, plain, len, box + 1 + RL_E2E_KEY_LEN, &envlen) != 0)
        goto out;
    text = malloc(RL_BASE64_ENCODED_SIZE(1 + RL_E2E_KEY_LEN + envlen));
    if (text != NULL)
        rl_base64_encode(box, 1 + RL_E2E_KEY_LEN + envlen, text);
out:
    rl_e2e_wipe(&eph, sizeof(eph));
    rl_e2e_wipe(key, sizeof(key));
    free(box);
    return text;
}

int rl_e2e_unwrap(const uint8_t sec[RL_E2E_KEY_LEN], const char *b64, uint8_t *out, size_t outsz, size_t *outlen)
{
    size_t b64len = strlen(b64);
    uint8_t key[RL_E2E_KEY_LEN], *box = malloc(b64len / 4 * 3 + 3), *plain = NULL;
    long len;
    int result = RL_E2E_E_FORMAT;

    if (box == NULL)
        return RL_E2E_E_CRYPTO;
    len = rl_base64_decode(b64, b64len, box);
    if (len <= 0)
        goto out;
    if (box[0] != WRAP_V1) {
        result = RL_E2E_E_VERSION;
        goto out;
    }
    if (len < 1 + RL_E2E_KEY_LEN + 1)
        goto out;
    plain = malloc((size_t)len);
    result = plain == NULL ? RL_E2E_E_CRYPTO : box_derive(sec, box + 1, "sophon/v1/sealed-box", key, sizeof(key));
    if (result == 0)
        result = rl_e2e_open(key, box + 1 + RL_E2E_KEY_LEN, (size_t)len - 1 - RL_E2E_KEY_LEN, plain, outlen);
    if (result == 0 && *outlen > outsz)
        result = RL_E2E_E_FORMAT;
    if (result == 0)
        memcpy(out, plain, *outlen);
out:
    rl_e2e_wipe(key, sizeof(key));
    if (plain != NULL)
        rl_e2e_wipe(plain, (size_t)len);
    free(plain);
    free(box);
    return result;
}

/*
 * issue 36: base64(nonce(24) || crypto_box_easy(...)), NaCl's box between two
 * long-lived X25519 keys, as a bridge seals a list to one device.
 */
int rl_e2e_box_open(const uint8_t my_sec[RL_E2E_KEY_LEN], const uint8_t their_pub[RL_E2E_KEY_LEN], const char *b64,
                    char **out, size_t *outlen)
{
    size_t b64len = strlen(b64);
    uint8_t *box = malloc(b64len / 4 * 3 + 3);
    char *plain = NULL;
    long len;
    int result = RL_E2E_E_FORMAT;

    *out = NULL;
    if (box == NULL)
        return RL_E2E_E_CRYPTO;
    len = rl_base64_decode(b64, b64len, box);
    if (len < (long)(crypto_box_NONCEBYTES + crypto_box_MACBYTES))
        goto out;
    *outlen = (size_t)len - crypto_box_NONCEBYTES - crypto_box_MACBYTES;
    plain = malloc(*outlen + 1);
    if (plain == NULL) {
        result = RL_E2E_E_CRYPTO;
        goto out;
    }
    result = crypto_box_open_easy((uint8_t *)plain, box + crypto_box_NONCEBYTES,
                                  (unsigned long long)len - crypto_box_NONCEBYTES, box, their_pub, my_sec) == 0
                 ? 0
                 : RL_E2E_E_AUTH;
    if (result == 0) {
        plain[*outlen] = '\0';
        *out = plain;
        plain = NULL;
    }
out:
    free(plain);
    free(box);
    return result;
}

int rl_e2e_unwrap_key(const uint8_t sec[RL_E2E_KEY_LEN], const char *b64, uint8_t key[RL_E2E_KEY_LEN])
{
    uint8_t plain[RL_E2E_KEY_LEN + 1];
    size_t len = 0;
    int result = rl_e2e_unwrap(sec, b64, plain, sizeof(plain), &len);

    if (result == 0 && len != RL_E2E_KEY_LEN)
        result = RL_E2E_E_FORMAT;
    if (result == 0)
        memcpy(key, plain, RL_E2E_KEY_LEN);
    rl_e2e_wipe(plain, sizeof(plain));
    return result;
}

int rl_e2e_sas(const uint8_t my_sec[RL_E2E_KEY_LEN], const uint8_t their_pub[RL_E2E_KEY_LEN],
               uint8_t out[RL_E2E_SAS_LEN])
{
    return box_derive(my_sec, their_pub, "sophon/v1/sas", out, RL_E2E_SAS_LEN);
}

void rl_e2e_sas_text(const uint8_t sas[RL_E2E_SAS_LEN], char out[RL_E2E_SAS_TEXT_SIZE])
{
    size_t at = 0, i;

    for (i = 0; i < RL_E2E_SAS_LEN; i++) {
        const char *e = sas_emoji[sas[i] % 32];
        size_t len = strlen(e);
        if (i > 0)
            out[at++] = ' ';
        memcpy(out + at, e, len);
        at += len;
    }
    out[at] = '\0';
}

/* The MAC of parts under the key two devices share for purpose (also the message's first part). */
static int pair_mac(const uint8_t my_sec[RL_E2E_KEY_LEN], const uint8_t their_pub[RL_E2E_KEY_LEN], const char *purpose,
                    const char *const *parts, size_t n, uint8_t mac[32])
{
    uint8_t key[RL_E2E_KEY_LEN];
    int result = box_derive(my_sec, their_pub, purpose, key, sizeof(key));

    if (result == 0)
        result = mac_parts(key, purpose, parts, n, mac);
    rl_e2e_wipe(key, sizeof(key));
    return result;
}

/* 0 when sig is the base64 of mac (constant-time), RL_E2E_E_AUTH otherwise. */
static int sig_equal(const uint8_t mac[32], const char *sig)
{
    uint8_t given[36];

    if (sig == NULL || strlen(sig) != RL_E2E_SIG_SIZE - 1 || rl_base64_decode(sig, strlen(sig), given) != 32)
        return RL_E2E_E_AUTH;
    return sodium_memcmp(mac, given, 32) == 0 ? 0 : RL_E2E_E_AUTH;
}

static int decision_mac(const uint8_t my_sec[RL_E2E_KEY_LEN], const uint8_t their_pub[RL_E2E_KEY_LEN],
                        const char *approval_id, const char *session_id, const char *decision, const char *scope,
                        const char *device_id, uint8_t mac[32])
{
    const char *parts[] = {approval_id, session_id, decision, scope != NULL ? scope : "", device_id};

    return pair_mac(my_sec, their_pub, "relay/v1/decision", parts, 5, mac);
}

static int grant_mac(const uint8_t my_sec[RL_E2E_KEY_LEN], const uint8_t their_pub[RL_E2E_KEY_LEN],
                     const char *session_id, const char *wrapped, const char *device_id, uint8_t mac[32])
{
    const char *parts[] = {session_id, wrapped, device_id};

    if (session_id == NULL || wrapped == NULL || device_id == NULL)
        return RL_E2E_E_FORMAT;
    return pair_mac(my_sec, their_pub, "relay/v1/grant", parts, 3, mac);
}

int rl_e2e_grant_sig(const uint8_t my_sec[RL_E2E_KEY_LEN], const uint8_t their_pub[RL_E2E_KEY_LEN],
                     const char *session_id, const char *wrapped, const char *device_id, char out[RL_E2E_SIG_SIZE])
{
    uint8_t mac[32];
    int result = grant_mac(my_sec, their_pub, session_id, wrapped, device_id, mac);

    if (result == 0)
        rl_base64_encode(mac, sizeof(mac), out);
    return result;
}

int rl_e2e_grant_verify(const uint8_t my_sec[RL_E2E_KEY_LEN], const uint8_t their_pub[RL_E2E_KEY_LEN],
                        const char *session_id, const char *wrapped, const char *device_id, const char *sig)
{
    uint8_t mac[32];

    if (grant_mac(my_sec, their_pub, session_id, wrapped, device_id, mac) != 0)
        return RL_E2E_E_AUTH;
    return sig_equal(mac, sig);
}

int rl_e2e_decision_sig(const uint8_t my_sec[RL_E2E_KEY_LEN], const uint8_t their_pub[RL_E2E_KEY_LEN],
                        const char *approval_id, const char *session_id, const char *decision, const char *scope,
                        const char *device_id, char out[RL_E2E_SIG_SIZE])
{
    uint8_t mac[32];
    int result = decision_mac(my_sec, their_pub, approval_id, session_id, decision, scope, device_id, mac);

    if (result == 0)
        rl_base64_encode(mac, sizeof(mac), out);
    return result;
}

int rl_e2e_decision_verify(const uint8_t my_sec[RL_E2E_KEY_LEN], const uint8_t their_pub[RL_E2E_KEY_LEN],
                           const char *approval_id, const char *session_id, const char *decision, const char *scope,
                           const char *device_id, const char *sig)
{
    uint8_t mac[32];

    if (decision_mac(my_sec, their_pub, approval_id, session_id, decision, scope, device_id, mac) != 0)
        return RL_E2E_E_AUTH;
    return sig_equal(mac, sig);
}

/* config_sig (docs/api.md, "Steering"): the ts as the device wrote it, in decimal. */
static int config_mac(const uint8_t my_sec[RL_E2E_KEY_LEN], const uint8_t their_pub[RL_E2E_KEY_LEN],
                      const char *session_id, const char *option_id, const char *value, long long ts,
                      const char *device_id, uint8_t mac[32])
{
    char when[24];
    const char *parts[] = {session_id, option_id, value, when, device_id};

    if (session_id == NULL || option_id == NULL || value == NULL || device_id == NULL)
        return RL_E2E_E_FORMAT;
    snprintf(when, sizeof(when), "%lld", ts);
    return pair_mac(my_sec, their_pub, "relay/v1/config", parts, 5, mac);
}

int rl_e2e_config_sig(const uint8_t my_sec[RL_E2E_KEY_LEN], const uint8_t their_pub[RL_E2E_KEY_LEN],
                      const char *session_id, const char *option_id, const char *value, long long ts,
                      const char *device_id, char out[RL_E2E_SIG_SIZE])
{
    uint8_t mac[32];
    int result = config_mac(my_sec, their_pub, session_id, option_id, value, ts, device_id, mac);

    if (result == 0)
        rl_base64_encode(mac, sizeof(mac), out);
    return result;
}

int rl_e2e_config_verify(const uint8_t my_sec[RL_E2E_KEY_LEN], const uint8_t their_pub[RL_E2E_KEY_LEN],
                         const char *session_id, const char *option_id, const char *value, long long ts,
                         const char *device_id, const char *sig)
{
    uint8_t mac[32];

    if (config_mac(my_sec, their_pub, session_id, option_id, value, ts, device_id, mac) != 0)
        return RL_E2E_E_AUTH;
    return sig_equal(mac, sig);
}

void rl_e2e_pub_hex(const uint8_t pub[RL_E2E_KEY_LEN], char out[RL_E2E_PUBHEX_SIZE])
{
    rl_hex_encode(pub, RL_E2E_KEY_LEN, out);
}

int rl_e2e_pub_parse(const char *hex, uint8_t pub[RL_E2E_KEY_LEN])
{
    return hex != NULL && rl_hex_decode(hex, strlen(hex), pub, RL_E2E_KEY_LEN) == 0 ? 0 : RL_E2E_E_FORMAT;
}

/* No I, O, 0 or 1: a code is read off a screen and typed. 32 letters, so that a byte's low 5 bits pick one evenly. */
static const char enrol_alphabet[] = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789";

void rl_e2e_enrol_new(char out[RL_E2E_ENROL_TEXT])
{
    uint8_t raw[RL_E2E_ENROL_LEN];
    size_t i, at = 0;

    randombytes_buf(raw, sizeof(raw));
    for (i = 0; i < RL_E2E_ENROL_LEN; i++) {
        if (i > 0 && i % 4 == 0)
            out[at++] = '-';
        out[at++] = enrol_alphabet[raw[i] & 31];
    }
    out[at] = '\0';
    rl_e2e_wipe(raw, sizeof(raw));
}

int rl_e2e_enrol_key(const char *code, uint8_t key[RL_E2E_KEY_LEN])
{
    char norm[RL_E2E_ENROL_LEN];
    size_t n = 0;
    int result = RL_E2E_E_FORMAT;

    for (; code != NULL && *code != '\0'; code++) {
        char c = *code >= 'a' && *code <= 'z' ? (char)(*code - 'a' + 'A') : *code;
        if (c == '-' || c == ' ' || c == '\t' || c == '\n' || c == '\r')
            continue;
        if (n == sizeof(norm) || strchr(enrol_alphabet, c) == NULL)
            goto out;
        norm[n++] = c;
    }
    if (n == sizeof(norm))
        result = rl_e2e_hkdf((const uint8_t *)norm, n, "relay/v1/enrol", key, RL_E2E_KEY_LEN);
out:
    rl_e2e_wipe(norm, sizeof(norm));
    return result;
}

static int enrol_mac(const uint8_t key[RL_E2E_KEY_LEN], const char *bridge_device_id, const char *device_id,
                     const char *pubkey_hex, uint8_t mac[32])
{
    const char *parts[] = {bridge_device_id, device_id, pubkey_hex};

    if (bridge_device_id == NULL || device_id == NULL || pubkey_hex == NULL)
        return RL_E2E_E_FORMAT;
    return mac_parts(key, "relay/v1/enrol", parts, 3, mac);
}

int rl_e2e_enrol_proof(const uint8_t key[RL_E2E_KEY_LEN], const char *bridge_device_id, const char *device_id,
                       const char *pubkey_hex, char out[RL_E2E_SIG_SIZE])
{
    uint8_t mac[32];
    int result = enrol_mac(key, bridge_device_id, device_id, pubkey_hex, mac);

    if (result == 0)
        rl_base64_encode(mac, sizeof(mac), out);
    return result;
}

int rl_e2e_enrol_verify(const uint8_t key[RL_E2E_KEY_LEN], const char *bridge_device_id, const char *device_id,
                        const char *pubkey_hex, const char *proof)
{
    uint8_t mac[32];

    if (enrol_mac(key, bridge_device_id, device_id, pubkey_hex, mac) != 0)
        return RL_E2E_E_AUTH;
    return sig_equal(mac, proof);
}
