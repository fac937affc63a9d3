#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "common/base64.h"
#include "common/log.h"
#include "common/rand.h"
#include "auth/jwt.h"
#include "auth/keyfile.h"

/* A JWKS with more entries than this is refused: a token without kid is tried against every fitting key. */
#define JWKS_KEYS_MAX   64
#define JWKS_KID_MAX    256
#define ISSUER_KEY_FILE "issuer.key"
#define LEEWAY_MAX_S    3600
/* Claim times beyond this magnitude are refused so that leeway arithmetic cannot overflow. */
#define CLAIM_TIME_MAX ((int64_t)1 << 52)
#define ED25519_LEN    32
#define P256_COORD_LEN 32
#define RAW_SIG_LEN    64

typedef enum key_type { KEY_RSA, KEY_EC, KEY_OKP } key_type_t;

typedef EVP_PKEY *(*key_build_fn)(const json_t *jwk);

static EVP_PKEY *build_rsa(const json_t *jwk);
static EVP_PKEY *build_p256(const json_t *jwk);
static EVP_PKEY *build_ed25519(const json_t *jwk);

/*
 * Every supported key type and the one algorithm it verifies. Binding the
 * algorithm to the key type here is what rules out algorithm confusion: a
 * token's alg selects a row, and only keys built by that row are tried.
 */
static const struct key_kind {
    key_type_t type;
    const char *kty;
    const char *crv; /* NULL when the kty has no curve */
    const char *alg;
    const char *digest; /* NULL for EdDSA, which hashes internally */
    key_build_fn build;
} key_kinds[] = {
    {KEY_RSA, "RSA", NULL, "RS256", "SHA256", build_rsa},
    {KEY_EC, "EC", "P-256", "ES256", "SHA256", build_p256},
    {KEY_OKP, "OKP", "Ed25519", "EdDSA", NULL, build_ed25519},
};
#define KEY_KINDS_COUNT (sizeof(key_kinds) / sizeof(key_kinds[0]))

struct jwk {
    char *kid; /* NULL when the JWK has none */
    const struct key_kind *kind;
    EVP_PKEY *pkey;
};

struct rl_jwks {
    atomic_int refs;
    size_t count;
    struct jwk keys[];
};

struct rl_jwt_issuer {
    EVP_PKEY *key;
    char x[RL_BASE64URL_ENCODED_SIZE(ED25519_LEN)];
    char kid[RL_BASE64URL_ENCODED_SIZE(32)];
    rl_jwks_t *jwks;
};

/* ---- JWKS ---- */

/*
 * Decodes the base64url string member name of jwk into a fresh buffer of at
 * most max bytes. Returns the length, or -1 when absent, not a string, too
 * long or not base64url. Padding is tolerated here: the set comes from
 * configuration, not from the client.
 */
static long jwk_bytes(const json_t *jwk, const char *name, size_t max, unsigned char **out)
{
    const json_t *field = json_object_get(jwk, name);
    const char *text = json_string_value(field);
    size_t len = json_string_length(field);
    unsigned char *bytes;
    long got;

    *out = NULL;
    if (text == NULL || len == 0 || len > (max + 2) / 3 * 4 + 2)
        return -1;
    bytes = malloc(len * 3 / 4 + 3);
    if (bytes == NULL)
        return -1;
    got = rl_base64url_decode(text, len, bytes);
    if (got <= 0 || (size_t)got > max) {
        free(bytes);
        return -1;
    }
    *out = bytes;
    return got;
}

static EVP_PKEY *pkey_from_params(const char *type, OSSL_PARAM *params)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    EVP_PKEY *pkey = NULL;

    if (ctx == NULL || EVP_PKEY_fromdata_init(ctx) <= 0 ||
        EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) <= 0)
        pkey = NULL;
    EVP_PKEY_CTX_free(ctx);
    return pkey;
}

/* Runs OpenSSL's public-key validation (for EC: the point is on the curve and not the identity). */
static int pkey_check(EVP_PKEY *pkey)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL);
    int ok = ctx != NULL && EVP_PKEY_public_check(ctx) == 1;

    EVP_PKEY_CTX_free(ctx);
    return ok ? 0 : -1;
}

static EVP_PKEY *build_rsa(const json_t *jwk)
{
    unsigned char *n_bytes = NULL, *e_bytes = NULL;
    long n_len = jwk_bytes(jwk, "n", RL_JWKS_RSA_MAX_BITS / 8 + 1, &n_bytes);
    long e_len = jwk_bytes(jwk, "e", 8, &e_bytes);
    BIGNUM *n = NULL, *e = NULL;
    OSSL_PARAM_BLD *bld = NULL;
    OSSL_PARAM *params = NULL;
    EVP_PKEY *pkey = NULL;

    if (n_len < 0 || e_len < 0)
        goto out;
    n = BN_bin2bn(n_bytes, (int)n_len, NULL);
    e = BN_bin2bn(e_bytes, (int)e_len, NULL);
    if (n == NULL || e == NULL)
        goto out;
    if (BN_num_bits(n) < RL_JWKS_RSA_MIN_BITS || BN_num_bits(n) > RL_JWKS_RSA_MAX_BITS)
        goto out;
    bld = OSSL_PARAM_BLD_new();
    if (bld == NULL || !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, n) ||
        !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, e))
        goto out;
    params = OSSL_PARAM_BLD_to_param(bld);
    if (params == NULL)
        goto out;
    pkey = pkey_from_params("RSA", params);
    if (pkey != NULL && pkey_check(pkey) != 0) {
        EVP_PKEY_free(pkey);
        pkey = NULL;
    }
out:
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(bld);
    BN_free(n);
    BN_free(e);
    free(n_bytes);
    free(e_bytes);
    return pkey;
}

static EVP_PKEY *build_p256(const json_t *jwk)
{
    unsigned char *x = NULL, *y = NULL;
    long x_len = jwk_bytes(jwk, "x", P256_COORD_LEN, &x);
    long y_len = jwk_bytes(jwk, "y", P256_COORD_LEN, &y);
    unsigned char point[1 + 2 * P256_COORD_LEN];
    char group[] = "P-256";
    OSSL_PARAM params[3];
    EVP_PKEY *pkey = NULL;

    /* RFC 7518 6.2.1.2: coordinates are full-length octet strings, never shortened. */
    if (x_len != P256_COORD_LEN || y_len != P256_COORD_LEN)
        goto out;
    point[0] = POINT_CONVERSION_UNCOMPRESSED;
    memcpy(point + 1, x, P256_COORD_LEN);
    memcpy(point + 1 + P256_COORD_LEN, y, P256_COORD_LEN);
    params[0] = OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, group, 0);
    params[1] = OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, point, sizeof(point));
    params[2] = OSSL_PARAM_construct_end();
    pkey = pkey_from_params("EC", params);
    if (pkey != NULL && pkey_check(pkey) != 0) {
        EVP_PKEY_free(pkey);
        pkey = NULL;
    }
out:
    free(x);
    free(y);
    return pkey;
}

static EVP_PKEY *build_ed25519(const json_t *jwk)
{
    unsigned char *x = NULL;
    long x_len = jwk_bytes(jwk, "x", ED25519_LEN, &x);
    EVP_PKEY *pkey = NULL;

    if (x_len == ED25519_LEN)
        pkey = EVP_PKEY_new_raw_public_key_ex(NULL, "ED25519", NULL, x, ED25519_LEN);
    free(x);
    return pkey;
}

static int json_array_has_string(const json_t *array, const char *value)
{
    size_t i;

    for (i = 0; i < json_array_size(array); ++i) {
        const json_t *item = json_array_get(array, i);
        if (json_is_string(item) && json_string_length(item) == strlen(value) &&
            strcmp(json_string_value(item), value) == 0)
            return 1;
    }
    return 0;
}

static int json_string_equals(const json_t *field, const char *value)
{
    return json_is_string(field) && value != NULL && json_string_length(field) == strlen(value) &&
           strcmp(json_string_value(field), value) == 0;
}

/* Returns the kind of a JWK, or NULL with *skip set when the relay cannot or must not use it. */
static const struct key_kind *jwk_kind(const json_t *jwk, const char **skip)
{
    const char *kty = json_string_value(json_object_get(jwk, "kty"));
    const char *crv = json_string_value(json_object_get(jwk, "crv"));
    const json_t *use = json_object_get(jwk, "use");
    const json_t *ops = json_object_get(jwk, "key_ops");
    const json_t *alg = json_object_get(jwk, "alg");
    const struct key_kind *kind = NULL;
    size_t i;

    for (i = 0; i < KEY_KINDS_COUNT && kind == NULL; ++i) {
        if (kty != NULL && strcmp(key_kinds[i].kty, kty) == 0 &&
            (key_kinds[i].crv == NULL || (crv != NULL && strcmp(key_kinds[i].crv, crv) == 0)))
            kind = &key_kinds[i];
    }
    *skip = NULL;
    if (kind == NULL)
        *skip = "unsupported kty or crv";
    else if (use != NULL && !json_string_equals(use, "sig"))
        *skip = "use is not sig";
    else if (ops != NULL && !json_array_has_string(ops, "verify"))
        *skip = "key_ops lacks verify";
    else if (alg != NULL && !json_string_equals(alg, kind->alg))
        *skip = "alg does not fit the key type";
    return *skip == NULL ? kind : NULL;
}

/* Appends jwk to keys, or returns -1 with *skip set to why it was left out. */
static int jwks_add(rl_jwks_t *keys, const json_t *jwk, const char **skip)
{
    const json_t *kid = json_object_get(jwk, "kid");
    const struct key_kind *kind;
    struct jwk *slot = &keys->keys[keys->count];

    if (!json_is_object(jwk)) {
        *skip = "not an object";
        return -1;
    }
    kind = jwk_kind(jwk, skip);
    if (kind == NULL)
        return -1;
    if (kid != NULL && (!json_is_string(kid) || json_string_length(kid) > JWKS_KID_MAX)) {
        *skip = "kid is not a string of at most 256 bytes";
        return -1;
    }
    slot->pkey = kind->build(jwk);
    if (slot->pkey == NULL) {
        *skip = "malformed or weak key material";
        ERR_clear_error();
        return -1;
    }
    slot->kid = kid != NULL ? strdup(json_string_value(kid)) : NULL;
    if (kid != NULL && slot->kid == NULL) {
        EVP_PKEY_free(slot->pkey);
        *skip = "out of memory";
        return -1;
    }
    slot->kind = kind;
    keys->count++;
    return 0;
}

static void jwks_free(rl_jwks_t *keys)
{
    size_t i;

    if (keys == NULL)
        return;
    for (i = 0; i < keys->count; ++i) {
        free(keys->keys[i].kid);
        EVP_PKEY_free(keys->keys[i].pkey);
    }
    free(keys);
}

int rl_jwks_parse(const char *json, size_t len, rl_jwks_t **out)
{
    json_t *doc = NULL;
    const json_t *list;
    rl_jwks_t *keys = NULL;
    json_error_t error;
    size_t i, n;
    int result = -1;

    *out = NULL;
    if (json == NULL || len > RL_JWKS_DOC_MAX)
        goto out;
    doc = json_loadb(json, len, JSON_REJECT_DUPLICATES, &error);
    list = json_object_get(doc, "keys");
    n = json_array_size(list);
    if (!json_is_array(list) || n > JWKS_KEYS_MAX)
        goto out;
    keys = calloc(1, sizeof(*keys) + n * sizeof(keys->keys[0]));
    if (keys == NULL)
        goto out;
    for (i = 0; i < n; ++i) {
        const char *skip;
        if (jwks_add(keys, json_array_get(list, i), &skip) != 0)
            rl_log_debug("jwks: key %zu skipped: %s", i, skip);
    }
    if (keys->count == 0)
        goto out;
    atomic_init(&keys->refs, 1);
    *out = keys;
    keys = NULL;
    result = 0;
out:
    jwks_free(keys);
    json_decref(doc);
    return result;
}

rl_jwks_t *rl_jwks_ref(rl_jwks_t *keys)
{
    if (keys != NULL)
        atomic_fetch_add_explicit(&keys->refs, 1, memory_order_relaxed);
    return keys;
}

void rl_jwks_unref(rl_jwks_t *keys)
{
    if (keys != NULL && atomic_fetch_sub_explicit(&keys->refs, 1, memory_order_acq_rel) == 1)
        jwks_free(keys);
}

size_t rl_jwks_count(const rl_jwks_t *keys)
{
    return keys->count;
}

/* ---- verification ---- */

/* The three segments of a compact JWS, decoded side by side into one bounded buffer. */
struct jws {
    const char *signing_input; /* header "." payload, as sent: the signature covers these bytes */
    size_t signing_input_len;
    const unsigned char *header, *payload, *signature;
    size_t header_len, payload_len, signature_len;
    unsigned char buf[RL_JWT_TOKEN_MAX / 4 * 3 + 16];
};

/*
 * Decodes one segment, refusing padding and non-zero trailing bits so that a
 * token has exactly one spelling (no two strings verify as the same token).
 */
static long segment_decode(const char *in, size_t len, unsigned char *out)
{
    size_t tail = len % 4;
    char last[RL_BASE64URL_ENCODED_SIZE(2)];
    long got;

    if (memchr(in, '=', len) != NULL)
        return -1;
    got = rl_base64url_decode(in, len, out);
    if (got < 0)
        return -1;
    /* Only a final group of 2 or 3 characters has spare bits; re-encoding its bytes must give it back. */
    if (tail != 0) {
        rl_base64url_encode(out + got - (long)(tail - 1), tail - 1, last);
        if (memcmp(last, in + len - tail, tail) != 0)
            return -1;
    }
    return got;
}

/* spec: compact serialization only: exactly three base64url segments, header and payload non-empty. */
static int jws_split(const char *token, size_t len, struct jws *jws)
{
    const char *dot1 = memchr(token, '.', len), *dot2;
    size_t used = 0;
    long got;

    if (dot1 == NULL)
        return -1;
    dot2 = memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - token));
    if (dot2 == NULL || memchr(dot2 + 1, '.', len - (size_t)(dot2 + 1 - token)) != NULL)
        return -1;
    if (dot1 == token || dot2 == dot1 + 1)
        return -1;

    got = segment_decode(token, (size_t)(dot1 - token), jws->buf);
    if (got <= 0)
        return -1;
    jws->header = jws->buf;
    jws->header_len = (size_t)got;
    used = (size_t)got;

    got = segment_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), jws->buf + used);
    if (got <= 0)
        return -1;
    jws->payload = jws->buf + used;
    jws->payload_len = (size_t)got;
    used += (size_t)got;

    got = segment_decode(dot2 + 1, len - (size_t)(dot2 + 1 - token), jws->buf + used);
    if (got < 0)
        return -1;
    jws->signature = jws->buf + used;
    jws->signature_len = (size_t)got;

    jws->signing_input = token;
    jws->signing_input_len = (size_t)(dot2 - token);
    return 0;
}

/* Reads the header's alg and kid; *kid points into *header_out, which the caller decrefs. */
static const char *header_parse(const struct jws *jws, const struct key_kind **kind, const char **kid,
                                json_t **header_out)
{
    json_error_t error;
    json_t *header = json_loadb((const char *)jws->header, jws->header_len, JSON_REJECT_DUPLICATES, &error);
    const json_t *alg, *kid_field;
    size_t i;

    *header_out = header;
    *kind = NULL;
    *kid = NULL;
    if (!json_is_object(header))
        return "malformed";
    alg = json_object_get(header, "alg");
    if (!json_is_string(alg))
        return "malformed";
    for (i = 0; i < KEY_KINDS_COUNT; ++i) {
        if (json_string_equals(alg, key_kinds[i].alg))
            *kind = &key_kinds[i];
    }
    if (*kind == NULL)
        return "unsupported_alg";
    /* RFC 7515 4.1.11: a critical extension the relay does not understand makes the token invalid. */
    if (json_object_get(header, "crit") != NULL)
        return "unsupported_crit";
    kid_field = json_object_get(header, "kid");
    if (kid_field != NULL && !json_is_string(kid_field))
        return "malformed";
    *kid = json_string_value(kid_field);
    return NULL;
}

/* JOSE carries ES256 signatures as raw r||s (RFC 7518 3.4); OpenSSL wants DER. */
static int es256_to_der(const unsigned char *raw, size_t raw_len, unsigned char **der, size_t *der_len)
{
    ECDSA_SIG *sig = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(raw, RAW_SIG_LEN / 2, NULL);
    BIGNUM *s = BN_bin2bn(raw + RAW_SIG_LEN / 2, RAW_SIG_LEN / 2, NULL);
    int result = -1, len;

    *der = NULL;
    if (raw_len != RAW_SIG_LEN || sig == NULL || r == NULL || s == NULL || !ECDSA_SIG_set0(sig, r, s))
        goto out;
    r = s = NULL;
    len = i2d_ECDSA_SIG(sig, der);
    if (len <= 0)
        goto out;
    *der_len = (size_t)len;
    result = 0;
out:
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(sig);
    return result;
}

static int signature_verify(const struct key_kind *kind, EVP_PKEY *pkey, const struct jws *jws,
                            const unsigned char *sig, size_t sig_len)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    EVP_PKEY_CTX *pctx = NULL;
    int ok = 0;

    if (ctx == NULL || EVP_DigestVerifyInit_ex(ctx, &pctx, kind->digest, NULL, NULL, pkey, NULL) != 1)
        goto out;
    if (kind->type == KEY_RSA && EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PADDING) != 1)
        goto out;
    ok = EVP_DigestVerify(ctx, sig, sig_len, (const unsigned char *)jws->signing_input, jws->signing_input_len) == 1;
out:
    EVP_MD_CTX_free(ctx);
    return ok;
}

/*
 * The candidates for a token: the keys named by its kid, or every key when
 * it has none, narrowed to those of the alg's type. Returns NULL when there
 * is at least one, else the reason there is none.
 */
static const char *keys_select(const rl_jwks_t *keys, const struct key_kind *kind, const char *kid)
{
    int kid_seen = 0;
    size_t i;

    for (i = 0; i < keys->count; ++i) {
        const struct jwk *key = &keys->keys[i];
        if (kid != NULL && (key->kid == NULL || strcmp(key->kid, kid) != 0))
            continue;
        if (key->kind == kind)
            return NULL;
        kid_seen = 1;
    }
    if (kid == NULL)
        return "no_key";
    return kid_seen ? "key_mismatch" : "unknown_kid";
}

static int key_is_candidate(const struct jwk *key, const struct key_kind *kind, const char *kid)
{
    return key->kind == kind && (kid == NULL || (key->kid != NULL && strcmp(key->kid, kid) == 0));
}

/* Verifies the signature with each candidate key until one accepts it. */
static const char *keys_verify(const rl_jwks_t *keys, const struct key_kind *kind, const char *kid,
                               const struct jws *jws)
{
    unsigned char *der = NULL;
    const unsigned char *sig = jws->signature;
    size_t sig_len = jws->signature_len, i;
    const char *why = keys_select(keys, kind, kid);
    int ok = 0;

    if (why != NULL)
        return why;
    if (kind->type != KEY_RSA && sig_len != RAW_SIG_LEN)
        return "bad_signature";
    if (kind->type == KEY_EC) {
        if (es256_to_der(jws->signature, jws->signature_len, &der, &sig_len) != 0)
            return "bad_signature";
        sig = der;
    }
    for (i = 0; i < keys->count && !ok; ++i) {
        if (key_is_candidate(&keys->keys[i], kind, kid))
            ok = signature_verify(kind, keys->keys[i].pkey, jws, sig, sig_len);
    }
    OPENSSL_free(der);
    return ok ? NULL : "bad_signature";
}

/*
 * Reads a NumericDate claim (RFC 7519 2: integer or non-integer seconds).
 * Non-integers round toward the stricter side (round_up for nbf and iat).
 * Returns 0 with *present, or -1 when the claim is not a number in range.
 */
static int claim_time(const json_t *payload, const char *name, int round_up, int64_t *value, int *present)
{
    const json_t *field = json_object_get(payload, name);
    double real;

    *value = 0;
    *present = field != NULL;
    if (field == NULL)
        return 0;
    if (json_is_integer(field)) {
        json_int_t v = json_integer_value(field);
        if (v > CLAIM_TIME_MAX || v < -CLAIM_TIME_MAX)
            return -1;
        *value = (int64_t)v;
        return 0;
    }
    if (!json_is_real(field))
        return -1;
    real = json_real_value(field);
    if (!isfinite(real) || real > (double)CLAIM_TIME_MAX || real < -(double)CLAIM_TIME_MAX)
        return -1;
    *value = (int64_t)(round_up ? ceil(real) : floor(real));
    return 0;
}

/*
 * sub becomes the user id (brief), and the rule for it is ours (docs/api.md):
 * 1..255 bytes of printable ASCII without spaces. Quotes and backslashes are
 * allowed; every place that shows the id (events, logs, JSON answers) goes
 * through the JSON encoder. Control characters, spaces and non-ASCII bytes
 * are refused here, so no id is ever altered on its way anywhere.
 */
static const char *sub_check(const char *sub, size_t len)
{
    size_t i;

    if (sub == NULL || len == 0)
        return "missing_sub";
    if (len > RL_JWT_SUB_MAX)
        return "bad_sub";
    for (i = 0; i < len; ++i) {
        unsigned char c = (unsigned char)sub[i];
        if (c <= 0x20 || c >= 0x7f)
            return "bad_sub";
    }
    return NULL;
}

static int64_t clamp_add(int64_t a, int64_t b)
{
    int64_t r;

    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static const char *claims_check(const json_t *payload, const rl_jwt_policy_t *policy, int64_t now_s,
                                rl_jwt_claims_t *claims)
{
    int64_t leeway = policy->leeway_s < 0 ? 0 : policy->leeway_s > LEEWAY_MAX_S ? LEEWAY_MAX_S : policy->leeway_s;
    int64_t earliest = clamp_add(now_s, -leeway), latest = clamp_add(now_s, leeway);
    const json_t *aud = json_object_get(payload, "aud");
    const json_t *sub = json_object_get(payload, "sub");
    int has_exp, has_nbf, has_iat;
    const char *why;

    if (claim_time(payload, "exp", 0, &claims->exp, &has_exp) != 0 ||
        claim_time(payload, "nbf", 1, &claims->nbf, &has_nbf) != 0 ||
        claim_time(payload, "iat", 1, &claims->iat, &has_iat) != 0)
        return "malformed";
    /* spec: a token without exp is refused; the relay never accepts an unbounded credential. */
    if (!has_exp)
        return "missing_exp";
    if (claims->exp <= earliest)
        return "expired";
    if (has_nbf && claims->nbf > latest)
        return "not_yet_valid";
    if (has_iat && claims->iat > latest)
        return "iat_in_future";
    if (!json_string_equals(json_object_get(payload, "iss"), policy->issuer))
        return "wrong_issuer";
    if (policy->audience == NULL || !(json_string_equals(aud, policy->audience) ||
                                      (json_is_array(aud) && json_array_has_string(aud, policy->audience))))
        return "wrong_audience";
    if (sub != NULL && !json_is_string(sub))
        return "missing_sub";
    why = sub_check(json_string_value(sub), json_string_length(sub));
    if (why != NULL)
        return why;
    memcpy(claims->sub, json_string_value(sub), json_string_length(sub));
    claims->sub[json_string_length(sub)] = '\0';
    return NULL;
}

int rl_jwt_verify(const rl_jwks_t *keys, const rl_jwt_policy_t *policy, const char *token, size_t len, int64_t now_s,
                  rl_jwt_claims_t *claims, const char **why)
{
    struct jws *jws = NULL;
    const struct key_kind *kind;
    json_t *header = NULL, *payload = NULL;
    json_error_t error;
    const char *kid, *reason = "malformed";

    memset(claims, 0, sizeof(*claims));
    if (len > RL_JWT_TOKEN_MAX) {
        reason = "too_long";
        goto out;
    }
    if (token == NULL || keys == NULL || policy == NULL)
        goto out;
    /* The decode buffer is heap-allocated: the loop thread's stack is not the place for 6 KiB per call. */
    jws = malloc(sizeof(*jws));
    if (jws == NULL) {
        reason = "out_of_memory";
        goto out;
    }
    if (jws_split(token, len, jws) != 0)
        goto out;
    reason = header_parse(jws, &kind, &kid, &header);
    if (reason != NULL)
        goto out;
    reason = keys_verify(keys, kind, kid, jws);
    if (reason != NULL)
        goto out;
    payload = json_loadb((const char *)jws->payload, jws->payload_len, JSON_REJECT_DUPLICATES, &error);
    reason = json_is_object(payload) ? claims_check(payload, policy, now_s, claims) : "malformed";
out:
    if (reason != NULL)
        memset(claims, 0, sizeof(*claims));
    /* Failed verifications leave entries on this thread's OpenSSL error queue; they must not pile up. */
    ERR_clear_error();
    json_decref(payload);
    json_decref(header);
    free(jws);
    *why = reason;
    return reason == NULL ? 0 : -1;
}

/* ---- embedded issuer ---- */

static EVP_PKEY *ed25519_generate(void)
{
    return EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
}

/* RFC 7638: SHA-256 over the required members in lexicographic order, no whitespace. */
static int issuer_thumbprint(rl_jwt_issuer_t *issuer)
{
    char canonical[128];
    unsigned char digest[32];
    size_t digest_len = 0;
    int len = snprintf(canonical, sizeof(canonical), "{\"crv\":\"Ed25519\",\"kty\":\"OKP\",\"x\":\"%s\"}", issuer->x);

    if (len < 0 || (size_t)len >= sizeof(canonical) ||
        !EVP_Q_digest(NULL, "SHA256", NULL, canonical, (size_t)len, digest, &digest_len) ||
        digest_len != sizeof(digest))
        return -1;
    rl_base64url_encode(digest, digest_len, issuer->kid);
    return 0;
}

/* Serializes with malloc so that callers free with free() whatever jansson's allocator is. */
static char *json_text(const json_t *json)
{
    size_t len = json != NULL ? json_dumpb(json, NULL, 0, JSON_COMPACT | JSON_PRESERVE_ORDER) : 0;
    char *text;

    if (len == 0)
        return NULL;
    text = malloc(len + 1);
    if (text == NULL)
        return NULL;
    if (json_dumpb(json, text, len, JSON_COMPACT | JSON_PRESERVE_ORDER) != len) {
        free(text);
        return NULL;
    }
    text[len] = '\0';
    return text;
}

int rl_jwt_issuer_open(const char *dir, rl_jwt_issuer_t **out)
{
    rl_jwt_issuer_t *issuer = calloc(1, sizeof(*issuer));
    unsigned char raw[ED25519_LEN];
    size_t raw_len = sizeof(raw);
    char path[PATH_MAX], *jwks = NULL;
    int result = -1;

    *out = NULL;
    if (issuer == NULL) {
        rl_log_error("issuer key: %s", strerror(ENOMEM));
        goto out;
    }
    if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, ISSUER_KEY_FILE) >= sizeof(path)) {
        rl_log_error("issuer key in %s: %s", dir, strerror(ENAMETOOLONG));
        goto out;
    }
    if (rl_keyfile_open(dir, ISSUER_KEY_FILE, "ED25519", "issuer key", ed25519_generate, &issuer->key) != 0)
        goto out;
    if (EVP_PKEY_get_raw_public_key(issuer->key, raw, &raw_len) != 1 || raw_len != ED25519_LEN) {
        rl_log_error("issuer key %s: cannot read its public half", path);
        goto out;
    }
    rl_base64url_encode(raw, raw_len, issuer->x);
    if (issuer_thumbprint(issuer) != 0) {
        rl_log_error("issuer key %s: cannot compute its thumbprint", path);
        goto out;
    }
    jwks = rl_jwt_issuer_jwks_json(issuer);
    if (jwks == NULL || rl_jwks_parse(jwks, strlen(jwks), &issuer->jwks) != 0) {
        rl_log_error("issuer key %s: cannot build its key set", path);
        goto out;
    }
    *out = issuer;
    issuer = NULL;
    result = 0;
out:
    ERR_clear_error();
    free(jwks);
    rl_jwt_issuer_free(issuer);
    return result;
}

void rl_jwt_issuer_free(rl_jwt_issuer_t *issuer)
{
    if (issuer == NULL)
        return;
    EVP_PKEY_free(issuer->key);
    rl_jwks_unref(issuer->jwks);
    free(issuer);
}

rl_jwks_t *rl_jwt_issuer_jwks(rl_jwt_issuer_t *issuer)
{
    return rl_jwks_ref(issuer->jwks);
}

char *rl_jwt_issuer_jwks_json(rl_jwt_issuer_t *issuer)
{
    json_t *doc = json_pack("{s:[{s:s, s:s, s:s, s:s, s:s, s:s}]}", "keys", "kty", "OKP", "crv", "Ed25519", "x",
                            issuer->x, "kid", issuer->kid, "use", "sig", "alg", "EdDSA");
    char *text = json_text(doc);

    json_decref(doc);
    return text;
}

const char *rl_jwt_issuer_kid(const rl_jwt_issuer_t *issuer)
{
    return issuer->kid;
}

/* Appends the base64url form of json's text at out; returns the length written, or 0 on failure. */
static size_t segment_encode(const json_t *json, char *out, size_t room)
{
    char *text = json_text(json);
    size_t len = text != NULL ? strlen(text) : 0, put = 0;

    if (len > 0 && RL_BASE64URL_ENCODED_SIZE(len) <= room)
        put = rl_base64url_encode(text, len, out);
    free(text);
    return put;
}

char *rl_jwt_issuer_sign(rl_jwt_issuer_t *issuer, const char *iss, const char *aud, const char *sub, int64_t iat,
                         int64_t ttl_s)
{
    json_t *header = NULL, *payload = NULL;
    EVP_MD_CTX *ctx = NULL;
    unsigned char sig[RAW_SIG_LEN];
    size_t sig_len = sizeof(sig), len, put;
    char *token = NULL;
    int64_t exp;
    int ok = 0;

    if (iss == NULL || *iss == '\0' || aud == NULL || *aud == '\0' || sub == NULL ||
        sub_check(sub, strlen(sub)) != NULL || ttl_s <= 0 || __builtin_add_overflow(iat, ttl_s, &exp))
        goto out;
    header = json_pack("{s:s, s:s, s:s}", "alg", "EdDSA", "typ", "JWT", "kid", issuer->kid);
    payload = json_pack("{s:s, s:s, s:s, s:I, s:I}", "iss", iss, "aud", aud, "sub", sub, "iat", (json_int_t)iat, "exp",
                        (json_int_t)exp);
    token = malloc(RL_JWT_TOKEN_MAX + 1);
    if (header == NULL || payload == NULL || token == NULL)
        goto out;
    len = segment_encode(header, token, RL_JWT_TOKEN_MAX);
    if (len == 0)
        goto out;
    token[len++] = '.';
    put = segment_encode(payload, token + len, RL_JWT_TOKEN_MAX - len);
    if (put == 0)
        goto out;
    len += put;
    ctx = EVP_MD_CTX_new();
    if (ctx == NULL || EVP_DigestSignInit_ex(ctx, NULL, NULL, NULL, NULL, issuer->key, NULL) != 1 ||
        EVP_DigestSign(ctx, sig, &sig_len, (const unsigned char *)token, len) != 1 || sig_len != RAW_SIG_LEN)
        goto out;
    /* The result must pass rl_jwt_verify's length bound, or the relay would mint tokens it refuses. */
    if (len + 1 + RL_BASE64URL_ENCODED_SIZE(RAW_SIG_LEN) > RL_JWT_TOKEN_MAX + 1)
        goto out;
    token[len++] = '.';
    rl_base64url_encode(sig, sig_len, token + len);
    ok = 1;
out:
    ERR_clear_error();
    EVP_MD_CTX_free(ctx);
    json_decref(header);
    json_decref(payload);
    if (!ok) {
        free(token);
        token = NULL;
    }
    return token;
}
