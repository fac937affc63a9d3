#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>

#include "common/base64.h"
#include "common/log.h"
#include "common/rand.h"
#include "auth/keyfile.h"
#include "push/webpush.h"

#define VAPID_FILE    "vapid.key"
#define VAPID_TTL_MAX (24 * 3600)
#define ORIGIN_MAX    512

struct rl_vapid {
    EVP_PKEY *key;
    char public_key[RL_BASE64URL_ENCODED_SIZE(RL_WEBPUSH_KEY_LEN)];
};

static EVP_PKEY *p256_from_params(OSSL_PARAM *params, int selection)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    EVP_PKEY *key = NULL;

    if (ctx == NULL || EVP_PKEY_fromdata_init(ctx) <= 0 || EVP_PKEY_fromdata(ctx, &key, selection, params) <= 0)
        key = NULL;
    EVP_PKEY_CTX_free(ctx);
    return key;
}

/* The user agent's p256dh key as an OpenSSL key; NULL unless it is a point on P-256. */
static EVP_PKEY *p256_public(const unsigned char *point)
{
    OSSL_PARAM params[3];
    EVP_PKEY_CTX *check;
    EVP_PKEY *key;
    unsigned char copy[RL_WEBPUSH_KEY_LEN];

    if (point[0] != 0x04)
        return NULL;
    memcpy(copy, point, sizeof(copy));
    params[0] = OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0);
    params[1] = OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, copy, sizeof(copy));
    params[2] = OSSL_PARAM_construct_end();
    key = p256_from_params(params, EVP_PKEY_PUBLIC_KEY);
    if (key == NULL)
        return NULL;
    /* fromdata decodes the point; the check makes sure it is on the curve and not the identity. */
    check = EVP_PKEY_CTX_new_from_pkey(NULL, key, NULL);
    if (check == NULL || EVP_PKEY_public_check(check) != 1) {
        EVP_PKEY_free(key);
        key = NULL;
    }
    EVP_PKEY_CTX_free(check);
    return key;
}

int rl_webpush_point_is_valid(const unsigned char *point, size_t len)
{
    EVP_PKEY *key;

    if (len != RL_WEBPUSH_KEY_LEN)
        return 0;
    key = p256_public(point);
    ERR_clear_error();
    EVP_PKEY_free(key);
    return key != NULL;
}

EVP_PKEY *rl_webpush_p256_key(const unsigned char *d, const unsigned char *point)
{
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    OSSL_PARAM *params = NULL;
    BIGNUM *priv = BN_bin2bn(d, 32, NULL);
    EVP_PKEY *key = NULL;

    if (bld != NULL && priv != NULL &&
        OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) &&
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_PRIV_KEY, priv) &&
        OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, RL_WEBPUSH_KEY_LEN) &&
        (params = OSSL_PARAM_BLD_to_param(bld)) != NULL)
        key = p256_from_params(params, EVP_PKEY_KEYPAIR);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(bld);
    BN_clear_free(priv);
    ERR_clear_error();
    return key;
}

static int public_point(EVP_PKEY *key, unsigned char *out)
{
    size_t len = 0;

    return EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_PUB_KEY, out, RL_WEBPUSH_KEY_LEN, &len) == 1 &&
                   len == RL_WEBPUSH_KEY_LEN && out[0] == 0x04
               ? 0
               : -1;
}

static EVP_PKEY *p256_generate(void)
{
    return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
}

/* HMAC-SHA-256 of the concatenation of two parts (the second may be empty). */
static int hmac(const unsigned char *key, size_t key_len, const void *a, size_t a_len, const void *b, size_t b_len,
                unsigned char *out)
{
    unsigned char buf[256];
    unsigned int out_len = 0;

    if (a_len + b_len > sizeof(buf))
        return -1;
    memcpy(buf, a, a_len);
    if (b_len > 0)
        memcpy(buf + a_len, b, b_len);
    return HMAC(EVP_sha256(), key, (int)key_len, buf, a_len + b_len, out, &out_len) != NULL && out_len == 32 ? 0 : -1;
}

static int ecdh(EVP_PKEY *mine, EVP_PKEY *peer, unsigned char *secret)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, mine, NULL);
    size_t len = 32;
    int result = -1;

    if (ctx != NULL && EVP_PKEY_derive_init(ctx) == 1 && EVP_PKEY_derive_set_peer(ctx, peer) == 1 &&
        EVP_PKEY_derive(ctx, secret, &len) == 1 && len == 32)
        result = 0;
    EVP_PKEY_CTX_free(ctx);
    return result;
}

static int aes128gcm(const unsigned char *key, const unsigned char *nonce, const unsigned char *plain, size_t len,
                     unsigned char *out)
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int n = 0, tail = 0, result = -1;

    if (ctx != NULL && EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), NULL, key, nonce) == 1 &&
        EVP_EncryptUpdate(ctx, out, &n, plain, (int)len) == 1 && EVP_EncryptFinal_ex(ctx, out + n, &tail) == 1 &&
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, out + n + tail) == 1)
        result = n + tail == (int)len ? 0 : -1;
    EVP_CIPHER_CTX_free(ctx);
    return result;
}

long rl_webpush_encrypt(const unsigned char *ua_public, const unsigned char *auth, EVP_PKEY *sender,
                        const unsigned char *salt, const void *payload, size_t len, unsigned char *out, size_t outsz)
{
    static const char key_info[] = "WebPush: info";
    static const char cek_info[] = "Content-Encoding: aes128gcm";
    static const char nonce_info[] = "Content-Encoding: nonce";
    unsigned char secret[32], prk_key[32], ikm[32], prk[32], cek[32], nonce[32], salt_bytes[RL_WEBPUSH_SALT_LEN];
    unsigned char info[sizeof(key_info) + 2 * RL_WEBPUSH_KEY_LEN + 1], as_public[RL_WEBPUSH_KEY_LEN];
    unsigned char *record = NULL;
    EVP_PKEY *ua = NULL, *ephemeral = NULL;
    long result = -1;

    if (len > RL_WEBPUSH_PAYLOAD_MAX || outsz < RL_WEBPUSH_BODY_LEN(len))
        return -1;
    if ((ua = p256_public(ua_public)) == NULL)
        goto out;
    if (sender == NULL)
        sender = ephemeral = p256_generate();
    if (salt == NULL) {
        rl_rand_bytes(salt_bytes, sizeof(salt_bytes));
        salt = salt_bytes;
    }
    if (sender == NULL || public_point(sender, as_public) != 0 || ecdh(sender, ua, secret) != 0)
        goto out;
    /* RFC 8291 §3.3: the shared secret and the auth secret make the input keying material. */
    memcpy(info, key_info, sizeof(key_info)); /* with its NUL, as the info string requires */
    memcpy(info + sizeof(key_info), ua_public, RL_WEBPUSH_KEY_LEN);
    memcpy(info + sizeof(key_info) + RL_WEBPUSH_KEY_LEN, as_public, RL_WEBPUSH_KEY_LEN);
    info[sizeof(info) - 1] = 0x01;
    if (hmac(auth, RL_WEBPUSH_AUTH_LEN, secret, sizeof(secret), NULL, 0, prk_key) != 0 ||
        hmac(prk_key, sizeof(prk_key), info, sizeof(info), NULL, 0, ikm) != 0)
        goto out;
    /* RFC 8188 §2.2 and §2.3: the content-encryption key and the nonce, from the salt and that material. */
    if (hmac(salt, RL_WEBPUSH_SALT_LEN, ikm, sizeof(ikm), NULL, 0, prk) != 0 ||
        hmac(prk, sizeof(prk), cek_info, sizeof(cek_info), "\x01", 1, cek) != 0 ||
        hmac(prk, sizeof(prk), nonce_info, sizeof(nonce_info), "\x01", 1, nonce) != 0)
        goto out;
    /* One record, so its sequence number is 0 and the nonce is used as derived; 0x02 marks it as the last. */
    record = malloc(len + 1);
    if (record == NULL)
        goto out;
    memcpy(record, payload, len);
    record[len] = 0x02;
    memcpy(out, salt, RL_WEBPUSH_SALT_LEN);
    out[16] = (RL_WEBPUSH_RECORD >> 24) & 0xff;
    out[17] = (RL_WEBPUSH_RECORD >> 16) & 0xff;
    out[18] = (RL_WEBPUSH_RECORD >> 8) & 0xff;
    out[19] = RL_WEBPUSH_RECORD & 0xff;
    out[20] = RL_WEBPUSH_KEY_LEN;
    memcpy(out + 21, as_public, RL_WEBPUSH_KEY_LEN);
    if (aes128gcm(cek, nonce, record, len + 1, out + RL_WEBPUSH_HEADER_LEN) != 0)
        goto out;
    result = (long)RL_WEBPUSH_BODY_LEN(len);
out:
    OPENSSL_cleanse(secret, sizeof(secret));
    OPENSSL_cleanse(prk_key, sizeof(prk_key));
    OPENSSL_cleanse(ikm, sizeof(ikm));
    OPENSSL_cleanse(prk, sizeof(prk));
    OPENSSL_cleanse(cek, sizeof(cek));
    if (record != NULL) {
        OPENSSL_cleanse(record, len + 1);
        free(record);
    }
    EVP_PKEY_free(ua);
    EVP_PKEY_free(ephemeral);
    ERR_clear_error();
    return result;
}

/* ---- VAPID ---- */

rl_vapid_t *rl_vapid_from_key(EVP_PKEY *key)
{
    rl_vapid_t *vapid = calloc(1, sizeof(*vapid));
    unsigned char point[RL_WEBPUSH_KEY_LEN];

    if (vapid == NULL || key == NULL || !EVP_PKEY_is_a(key, "EC") || public_point(key, point) != 0) {
        free(vapid);
        EVP_PKEY_free(key);
        return NULL;
    }
    vapid->key = key;
    rl_base64url_encode(point, sizeof(point), vapid->public_key);
    return vapid;
}

int rl_vapid_open(const char *dir, rl_vapid_t **out)
{
    EVP_PKEY *key = NULL;
    char group[32] = "";
    size_t group_len = 0;

    *out = NULL;
    if (rl_keyfile_open(dir, VAPID_FILE, "EC", "push (VAPID) key", p256_generate, &key) != 0)
        return -1;
    if (EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group), &group_len) != 1 ||
        strcmp(group, "prime256v1") != 0) {
        rl_log_error("push (VAPID) key %s/%s: not a P-256 key", dir, VAPID_FILE);
        EVP_PKEY_free(key);
        return -1;
    }
    *out = rl_vapid_from_key(key);
    return *out != NULL ? 0 : -1;
}

void rl_vapid_free(rl_vapid_t *vapid)
{
    if (vapid == NULL)
        return;
    EVP_PKEY_free(vapid->key);
    free(vapid);
}

const char *rl_vapid_public_key(const rl_vapid_t *vapid)
{
    return vapid->public_key;
}

/* The origin (scheme://host[:port]) of an absolute http(s) URL. */
static int endpoint_origin(const char *endpoint, char *out, size_t outsz)
{
    const char *host;
    size_t len;

    if (strncasecmp(endpoint, "https://", 8) == 0)
        host = endpoint + 8;
    else if (strncasecmp(endpoint, "http://", 7) == 0)
        host = endpoint + 7;
    else
        return -1;
    len = (size_t)(host - endpoint) + strcspn(host, "/?#");
    if (len == (size_t)(host - endpoint) || len >= outsz)
        return -1;
    memcpy(out, endpoint, len);
    out[len] = '\0';
    return 0;
}

/* ES256 as JWS wants it: r || s, 32 bytes each, not DER. */
static int sign_es256(EVP_PKEY *key, const char *input, size_t len, unsigned char *raw)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char der[80];
    const unsigned char *p = der;
    size_t der_len = sizeof(der);
    ECDSA_SIG *sig = NULL;
    const BIGNUM *r, *s;
    int result = -1;

    if (ctx == NULL || EVP_DigestSignInit_ex(ctx, NULL, "SHA256", NULL, NULL, key, NULL) != 1 ||
        EVP_DigestSign(ctx, der, &der_len, (const unsigned char *)input, len) != 1)
        goto out;
    sig = d2i_ECDSA_SIG(NULL, &p, (long)der_len);
    if (sig == NULL)
        goto out;
    ECDSA_SIG_get0(sig, &r, &s);
    if (BN_bn2binpad(r, raw, 32) != 32 || BN_bn2binpad(s, raw + 32, 32) != 32)
        goto out;
    result = 0;
out:
    ECDSA_SIG_free(sig);
    EVP_MD_CTX_free(ctx);
    return result;
}

char *rl_vapid_authorization(const rl_vapid_t *vapid, const char *endpoint, const char *subject, int64_t now_s,
                             int64_t ttl_s)
{
    static const char header[] = "{\"typ\":\"JWT\",\"alg\":\"ES256\"}";
    char origin[ORIGIN_MAX], *claims_text = NULL, *input = NULL, *value = NULL;
    unsigned char signature[64];
    char signature_b64[RL_BASE64URL_ENCODED_SIZE(64)];
    json_t *claims;
    size_t header_len, claims_len, input_len, value_len;

    if (endpoint_origin(endpoint, origin, sizeof(origin)) != 0 || ttl_s <= 0)
        return NULL;
    if (ttl_s > VAPID_TTL_MAX)
        ttl_s = VAPID_TTL_MAX;
    claims = json_pack("{s:s, s:I, s:s}", "aud", origin, "exp", (json_int_t)(now_s + ttl_s), "sub", subject);
    claims_text = claims != NULL ? json_dumps(claims, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(claims);
    if (claims_text == NULL)
        return NULL;
    header_len = RL_BASE64URL_ENCODED_SIZE(sizeof(header) - 1);
    claims_len = RL_BASE64URL_ENCODED_SIZE(strlen(claims_text));
    input = malloc(header_len + claims_len + 1);
    if (input == NULL)
        goto out;
    input_len = rl_base64url_encode(header, sizeof(header) - 1, input);
    input[input_len++] = '.';
    input_len += rl_base64url_encode(claims_text, strlen(claims_text), input + input_len);
    if (sign_es256(vapid->key, input, input_len, signature) != 0)
        goto out;
    rl_base64url_encode(signature, sizeof(signature), signature_b64);
    value_len = input_len + strlen(signature_b64) + strlen(vapid->public_key) + 32;
    value = malloc(value_len);
    if (value != NULL)
        snprintf(value, value_len, "vapid t=%s.%s, k=%s", input, signature_b64, vapid->public_key);
out:
    ERR_clear_error();
    free(claims_text);
    free(input);
    return value;
}
