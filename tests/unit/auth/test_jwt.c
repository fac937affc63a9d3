/*
 * Unit tests for src/auth/jwt.c and src/auth/jwks_source.c.
 *
 * Keys are generated here with OpenSSL and tokens are signed here by a
 * test-only signer, so that the verifier is checked against an independent
 * producer rather than against itself. The URL source is exercised against a
 * tiny HTTP server running on a thread of this process.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "common/base64.h"
#include "common/clock.h"
#include "auth/jwks_source.h"
#include "common/jobs.h"
#include "auth/jwt.h"

#define NOW      1700000000
#define ISSUER   "https://idp.test"
#define AUDIENCE "relay"

static EVP_PKEY *rsa_key, *ec_key, *ed_key, *ed_other_key;
static char *jwks_text;
static rl_jwks_t *jwks;
static const rl_jwt_policy_t policy = {ISSUER, AUDIENCE, 30};

/* ---- test-only JOSE producer ---- */

static char *b64(const void *data, size_t len)
{
    char *out = malloc(RL_BASE64URL_ENCODED_SIZE(len));

    assert_non_null(out);
    rl_base64url_encode(data, len, out);
    return out;
}

static char *bn_b64(const BIGNUM *bn, int pad)
{
    unsigned char buf[1024];
    int len = pad > 0 ? BN_bn2binpad(bn, buf, pad) : BN_bn2bin(bn, buf);

    assert_true(len > 0);
    return b64(buf, (size_t)len);
}

/* Wraps a malloc'd string in a JSON string and frees it. */
static json_t *json_owned(char *text)
{
    json_t *value = json_string(text);

    free(text);
    return value;
}

static json_t *jwk_of(EVP_PKEY *key, const char *kid)
{
    json_t *jwk = json_object();

    if (EVP_PKEY_is_a(key, "RSA")) {
        BIGNUM *n = NULL, *e = NULL;
        assert_int_equal(EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_N, &n), 1);
        assert_int_equal(EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_E, &e), 1);
        json_object_set_new(jwk, "kty", json_string("RSA"));
        json_object_set_new(jwk, "n", json_owned(bn_b64(n, 0)));
        json_object_set_new(jwk, "e", json_owned(bn_b64(e, 0)));
        BN_free(n);
        BN_free(e);
    } else if (EVP_PKEY_is_a(key, "EC")) {
        BIGNUM *x = NULL, *y = NULL;
        int coord_len = (EVP_PKEY_get_bits(key) + 7) / 8;
        assert_int_equal(EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, &x), 1);
        assert_int_equal(EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, &y), 1);
        json_object_set_new(jwk, "kty", json_string("EC"));
        json_object_set_new(jwk, "crv", json_string("P-256"));
        json_object_set_new(jwk, "x", json_owned(bn_b64(x, coord_len)));
        json_object_set_new(jwk, "y", json_owned(bn_b64(y, coord_len)));
        BN_free(x);
        BN_free(y);
    } else {
        unsigned char raw[32];
        size_t raw_len = sizeof(raw);
        assert_int_equal(EVP_PKEY_get_raw_public_key(key, raw, &raw_len), 1);
        json_object_set_new(jwk, "kty", json_string("OKP"));
        json_object_set_new(jwk, "crv", json_string("Ed25519"));
        json_object_set_new(jwk, "x", json_owned(b64(raw, raw_len)));
    }
    if (kid != NULL)
        json_object_set_new(jwk, "kid", json_string(kid));
    return jwk;
}

static char *jwks_of(json_t *keys)
{
    json_t *doc = json_pack("{s:o}", "keys", keys);
    char *text = json_dumps(doc, JSON_COMPACT);

    json_decref(doc);
    return text;
}

/* Signs header.payload with key; the algorithm follows the key, whatever the header claims. */
static char *sign_compact(EVP_PKEY *key, const char *header, const char *payload)
{
    char *h = b64(header, strlen(header)), *p = b64(payload, strlen(payload));
    size_t input_len = strlen(h) + 1 + strlen(p);
    char *token = malloc(input_len + 1 + 1024);
    unsigned char sig[1024], raw[64];
    size_t sig_len = sizeof(sig);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    const char *md = EVP_PKEY_is_a(key, "ED25519") ? NULL : "SHA256";

    sprintf(token, "%s.%s", h, p);
    assert_int_equal(EVP_DigestSignInit_ex(ctx, NULL, md, NULL, NULL, key, NULL), 1);
    assert_int_equal(EVP_DigestSign(ctx, sig, &sig_len, (unsigned char *)token, input_len), 1);
    EVP_MD_CTX_free(ctx);
    if (EVP_PKEY_is_a(key, "EC")) {
        const unsigned char *der = sig;
        ECDSA_SIG *ecdsa = d2i_ECDSA_SIG(NULL, &der, (long)sig_len);
        assert_non_null(ecdsa);
        assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_r(ecdsa), raw, 32), 32);
        assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_s(ecdsa), raw + 32, 32), 32);
        ECDSA_SIG_free(ecdsa);
        memcpy(sig, raw, 64);
        sig_len = 64;
    }
    token[input_len] = '.';
    rl_base64url_encode(sig, sig_len, token + input_len + 1);
    free(h);
    free(p);
    return token;
}

/* Builds a token from header fields and claims (stolen). kid may be NULL. */
static char *token_with(EVP_PKEY *key, const char *alg, const char *kid, json_t *claims)
{
    json_t *header = json_pack("{s:s}", "alg", alg);
    char *h, *p, *token;

    if (kid != NULL)
        json_object_set_new(header, "kid", json_string(kid));
    h = json_dumps(header, JSON_COMPACT);
    p = json_dumps(claims, JSON_COMPACT);
    token = sign_compact(key, h, p);
    free(h);
    free(p);
    json_decref(header);
    json_decref(claims);
    return token;
}

static json_t *claims_default(void)
{
    return json_pack("{s:s, s:s, s:s, s:I, s:I}", "iss", ISSUER, "aud", AUDIENCE, "sub", "user-1", "iat",
                     (json_int_t)NOW, "exp", (json_int_t)(NOW + 600));
}

static json_t *claims_set(json_t *claims, const char *name, json_t *value)
{
    if (value == NULL)
        json_object_del(claims, name);
    else
        json_object_set_new(claims, name, value);
    return claims;
}

/* Verifies with the fixture keys and policy; returns NULL on success, else the reason. Frees token. */
static const char *verdict_policy(char *token, const rl_jwt_policy_t *with, rl_jwt_claims_t *claims)
{
    rl_jwt_claims_t scratch;
    const char *why = "unset";
    int result = rl_jwt_verify(jwks, with, token, strlen(token), NOW, claims ? claims : &scratch, &why);

    free(token);
    if (result == 0) {
        assert_null(why);
        return NULL;
    }
    assert_int_equal(result, -1);
    assert_non_null(why);
    return why;
}

static const char *verdict(char *token)
{
    return verdict_policy(token, &policy, NULL);
}

static void assert_reason(const char *got, const char *want)
{
    if (want == NULL && got == NULL)
        return;
    if (want == NULL || got == NULL || strcmp(got, want) != 0)
        fail_msg("reason %s, expected %s", got ? got : "(accepted)", want ? want : "(accepted)");
}

static int group_setup(void **state)
{
    rsa_key = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    ec_key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    ed_key = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    ed_other_key = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    if (rsa_key == NULL || ec_key == NULL || ed_key == NULL || ed_other_key == NULL)
        return -1;
    jwks_text = jwks_of(json_pack("[o, o, o]", jwk_of(rsa_key, "rsa1"), jwk_of(ec_key, "ec1"), jwk_of(ed_key, "ed1")));
    if (rl_jwks_parse(jwks_text, strlen(jwks_text), &jwks) != 0 || rl_jwks_count(jwks) != 3)
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    rl_jwks_unref(jwks);
    free(jwks_text);
    EVP_PKEY_free(rsa_key);
    EVP_PKEY_free(ec_key);
    EVP_PKEY_free(ed_key);
    EVP_PKEY_free(ed_other_key);
    return 0;
}

/* ---- verification ---- */

static void test_valid_each_alg(void **state)
{
    static const struct {
        const char *alg, *kid;
        EVP_PKEY **key;
    } cases[] = {{"RS256", "rsa1", &rsa_key}, {"ES256", "ec1", &ec_key}, {"EdDSA", "ed1", &ed_key}};
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        rl_jwt_claims_t claims;
        assert_reason(
            verdict_policy(token_with(*cases[i].key, cases[i].alg, cases[i].kid, claims_default()), &policy, &claims),
            NULL);
        assert_string_equal(claims.sub, "user-1");
        assert_int_equal(claims.exp, NOW + 600);
        assert_int_equal(claims.iat, NOW);
        assert_int_equal(claims.nbf, 0);
        /* Without kid every key of the alg's type is tried. */
        assert_reason(verdict(token_with(*cases[i].key, cases[i].alg, NULL, claims_default())), NULL);
    }
}

static void test_expired(void **state)
{
    assert_reason(
        verdict(token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "exp", json_integer(NOW - 3600)))),
        "expired");
    assert_reason(verdict(token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "exp", NULL))),
                  "missing_exp");
    assert_reason(
        verdict(token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "exp", json_string("9999999999")))),
        "malformed");
    assert_reason(
        verdict(token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "exp", json_real(NOW + 60.5)))), NULL);
    assert_reason(
        verdict(token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "exp", json_integer(INT64_MAX)))),
        "malformed");
}

static void test_not_yet_valid(void **state)
{
    assert_reason(
        verdict(token_with(rsa_key, "RS256", "rsa1", claims_set(claims_default(), "nbf", json_integer(NOW + 600)))),
        "not_yet_valid");
    assert_reason(
        verdict(token_with(rsa_key, "RS256", "rsa1", claims_set(claims_default(), "iat", json_integer(NOW + 600)))),
        "iat_in_future");
}

static void test_leeway(void **state)
{
    rl_jwt_policy_t strict = {ISSUER, AUDIENCE, 0};
    rl_jwt_claims_t claims;

    /* spec: valid while now - leeway < exp; nbf and iat may be up to leeway ahead. */
    assert_reason(
        verdict(token_with(ec_key, "ES256", "ec1", claims_set(claims_default(), "exp", json_integer(NOW - 29)))), NULL);
    assert_reason(
        verdict(token_with(ec_key, "ES256", "ec1", claims_set(claims_default(), "exp", json_integer(NOW - 30)))),
        "expired");
    assert_reason(
        verdict_policy(token_with(ec_key, "ES256", "ec1", claims_set(claims_default(), "nbf", json_integer(NOW + 30))),
                       &policy, &claims),
        NULL);
    assert_int_equal(claims.nbf, NOW + 30);
    assert_reason(
        verdict(token_with(ec_key, "ES256", "ec1", claims_set(claims_default(), "nbf", json_integer(NOW + 31)))),
        "not_yet_valid");
    assert_reason(
        verdict(token_with(ec_key, "ES256", "ec1", claims_set(claims_default(), "iat", json_integer(NOW + 30)))), NULL);
    assert_reason(
        verdict_policy(token_with(ec_key, "ES256", "ec1", claims_set(claims_default(), "exp", json_integer(NOW))),
                       &strict, NULL),
        "expired");
    assert_reason(
        verdict_policy(token_with(ec_key, "ES256", "ec1", claims_set(claims_default(), "exp", json_integer(NOW + 1))),
                       &strict, NULL),
        NULL);
    assert_reason(
        verdict_policy(token_with(ec_key, "ES256", "ec1", claims_set(claims_default(), "nbf", json_integer(NOW + 1))),
                       &strict, NULL),
        "not_yet_valid");
}

static void test_issuer(void **state)
{
    rl_jwt_policy_t unset = {NULL, AUDIENCE, 30};

    assert_reason(verdict(token_with(ed_key, "EdDSA", "ed1",
                                     claims_set(claims_default(), "iss", json_string("https://evil.test")))),
                  "wrong_issuer");
    assert_reason(
        verdict(token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "iss", json_string(ISSUER "/")))),
        "wrong_issuer");
    assert_reason(verdict(token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "iss", NULL))),
                  "wrong_issuer");
    assert_reason(
        verdict(token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "iss", json_pack("[s]", ISSUER)))),
        "wrong_issuer");
    assert_reason(verdict_policy(token_with(ed_key, "EdDSA", "ed1", claims_default()), &unset, NULL), "wrong_issuer");
}

static void test_audience(void **state)
{
    assert_reason(
        verdict(token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "aud", json_string("other")))),
        "wrong_audience");
    assert_reason(verdict(token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "aud", NULL))),
                  "wrong_audience");
    assert_reason(verdict(token_with(ed_key, "EdDSA", "ed1",
                                     claims_set(claims_default(), "aud", json_pack("[s, s]", "other", AUDIENCE)))),
                  NULL);
    assert_reason(verdict(token_with(ed_key, "EdDSA", "ed1",
                                     claims_set(claims_default(), "aud", json_pack("[s, i]", "other", 5)))),
                  "wrong_audience");
    assert_reason(verdict(token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "aud", json_pack("[]")))),
                  "wrong_audience");
    assert_reason(
        verdict(token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "aud", json_string("relay ")))),
        "wrong_audience");
}

/* Replaces the signature segment with the same bytes, one bit flipped. */
static char *flip_signature(char *token, size_t at)
{
    char *dot = strrchr(token, '.');
    unsigned char sig[1024];
    long len = rl_base64url_decode(dot + 1, strlen(dot + 1), sig);

    assert_true(len > 0);
    sig[at % (size_t)len] ^= 0x01;
    rl_base64url_encode(sig, (size_t)len, dot + 1);
    return token;
}

static void test_bad_signature(void **state)
{
    char *token, *dot, *mixed;
    size_t at;

    for (at = 0; at < 64; at += 21) {
        assert_reason(verdict(flip_signature(token_with(rsa_key, "RS256", "rsa1", claims_default()), at)),
                      "bad_signature");
        assert_reason(verdict(flip_signature(token_with(ec_key, "ES256", "ec1", claims_default()), at)),
                      "bad_signature");
        assert_reason(verdict(flip_signature(token_with(ed_key, "EdDSA", "ed1", claims_default()), at)),
                      "bad_signature");
    }
    /* A different key under the same kid. */
    assert_reason(verdict(token_with(ed_other_key, "EdDSA", "ed1", claims_default())), "bad_signature");
    assert_reason(verdict(token_with(ed_other_key, "EdDSA", NULL, claims_default())), "bad_signature");

    /* A payload swapped under a valid signature. */
    token = token_with(ed_key, "EdDSA", "ed1", claims_default());
    mixed = token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "sub", json_string("admin")));
    dot = strrchr(mixed, '.');
    memcpy(dot, strrchr(token, '.'), strlen(dot));
    free(token);
    assert_reason(verdict(mixed), "bad_signature");

    /* Truncated signatures of each alg (cut at a 4-character boundary, so still canonical base64url). */
    token = token_with(ec_key, "ES256", "ec1", claims_default());
    strrchr(token, '.')[1 + 80] = '\0';
    assert_reason(verdict(token), "bad_signature");
    token = token_with(rsa_key, "RS256", "rsa1", claims_default());
    strrchr(token, '.')[1 + 340] = '\0';
    assert_reason(verdict(token), "bad_signature");
    token = token_with(ed_key, "EdDSA", "ed1", claims_default());
    strrchr(token, '.')[1] = '\0';
    assert_reason(verdict(token), "bad_signature");
}

static char *compact(const char *header, const char *payload, const char *signature)
{
    char *h = b64(header, strlen(header)), *p = b64(payload, strlen(payload));
    char *token = malloc(strlen(h) + strlen(p) + strlen(signature) + 3);

    sprintf(token, "%s.%s.%s", h, p, signature);
    free(h);
    free(p);
    return token;
}

static char *claims_text(void)
{
    json_t *claims = claims_default();
    char *text = json_dumps(claims, JSON_COMPACT);

    json_decref(claims);
    return text;
}

static void test_alg_none(void **state)
{
    char *payload = claims_text();

    assert_reason(verdict(compact("{\"alg\":\"none\"}", payload, "")), "unsupported_alg");
    assert_reason(verdict(compact("{\"alg\":\"none\",\"kid\":\"ed1\"}", payload, "AAAA")), "unsupported_alg");
    assert_reason(verdict(compact("{\"alg\":\"None\"}", payload, "")), "unsupported_alg");
    assert_reason(verdict(compact("{\"alg\":\"eddsa\"}", payload, "")), "unsupported_alg");
    assert_reason(verdict(compact("{\"alg\":\"RS384\"}", payload, "")), "unsupported_alg");
    assert_reason(verdict(compact("{\"alg\":\"PS256\"}", payload, "")), "unsupported_alg");
    assert_reason(verdict(compact("{\"alg\":\"ES256K\"}", payload, "")), "unsupported_alg");
    assert_reason(verdict(compact("{\"alg\":\"\"}", payload, "")), "unsupported_alg");
    free(payload);
}

/* The classic confusion: HS256 keyed with the RSA public key, which a naive verifier would accept. */
static void test_alg_hs256(void **state)
{
    const char *secrets[2];
    char *payload = claims_text(), *pem;
    BIO *bio = BIO_new(BIO_s_mem());
    long pem_len;
    int i;

    assert_int_equal(PEM_write_bio_PUBKEY(bio, rsa_key), 1);
    pem_len = BIO_get_mem_data(bio, &pem);
    secrets[0] = pem;
    secrets[1] = jwks_text;
    for (i = 0; i < 2; ++i) {
        size_t secret_len = i == 0 ? (size_t)pem_len : strlen(jwks_text);
        const char *headers[] = {"{\"alg\":\"HS256\",\"kid\":\"rsa1\"}", "{\"alg\":\"HS256\"}"};
        int h;
        for (h = 0; h < 2; ++h) {
            char *token = compact(headers[h], payload, "");
            char *input = malloc(strlen(token) + 64);
            unsigned char mac[32];
            size_t mac_len = 0;
            strcpy(input, token);
            input[strlen(input) - 1] = '\0';
            assert_non_null(EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, secrets[i], secret_len,
                                      (unsigned char *)input, strlen(input), mac, sizeof(mac), &mac_len));
            strcat(input, ".");
            rl_base64url_encode(mac, mac_len, input + strlen(input));
            free(token);
            assert_reason(verdict(input), "unsupported_alg");
        }
    }
    BIO_free(bio);
    free(payload);
}

static void test_kid(void **state)
{
    assert_reason(verdict(token_with(ed_key, "EdDSA", "nope", claims_default())), "unknown_kid");
    assert_reason(verdict(token_with(ed_key, "EdDSA", "", claims_default())), "unknown_kid");
    assert_reason(verdict(token_with(ed_key, "EdDSA", "ED1", claims_default())), "unknown_kid");
}

static void test_key_type_confusion(void **state)
{
    /* An RSA key named for an ES256 header, whichever key actually signed. */
    assert_reason(verdict(token_with(ec_key, "ES256", "rsa1", claims_default())), "key_mismatch");
    assert_reason(verdict(token_with(rsa_key, "ES256", "rsa1", claims_default())), "key_mismatch");
    assert_reason(verdict(token_with(rsa_key, "RS256", "ec1", claims_default())), "key_mismatch");
    assert_reason(verdict(token_with(ed_key, "EdDSA", "rsa1", claims_default())), "key_mismatch");
    assert_reason(verdict(token_with(ec_key, "EdDSA", "ed1", claims_default())), "bad_signature");
    /* Without kid, an RSA signature under an ES256 header only meets EC keys. */
    assert_reason(verdict(token_with(rsa_key, "ES256", NULL, claims_default())), "bad_signature");
    assert_reason(verdict(token_with(ed_key, "RS256", NULL, claims_default())), "bad_signature");
}

static void test_no_key_for_alg(void **state)
{
    char *text = jwks_of(json_pack("[o]", jwk_of(ed_key, NULL)));
    rl_jwks_t *only_ed;
    rl_jwt_claims_t claims;
    const char *why;
    char *token = token_with(rsa_key, "RS256", NULL, claims_default());

    assert_int_equal(rl_jwks_parse(text, strlen(text), &only_ed), 0);
    assert_int_equal(rl_jwt_verify(only_ed, &policy, token, strlen(token), NOW, &claims, &why), -1);
    assert_string_equal(why, "no_key");
    free(token);
    token = token_with(ed_key, "EdDSA", "whatever", claims_default());
    assert_int_equal(rl_jwt_verify(only_ed, &policy, token, strlen(token), NOW, &claims, &why), -1);
    assert_string_equal(why, "unknown_kid");
    free(token);
    token = token_with(ed_key, "EdDSA", NULL, claims_default());
    assert_int_equal(rl_jwt_verify(only_ed, &policy, token, strlen(token), NOW, &claims, &why), 0);
    free(token);
    rl_jwks_unref(only_ed);
    free(text);
}

static void test_malformed(void **state)
{
    static const char *const tokens[] = {
        "",
        ".",
        "..",
        "abc",
        "a.b",
        "a.b.c.d",
        "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.AAAA.AAAA",
        ".eyJzdWIiOiJ4In0.AAAA",
        "eyJhbGciOiJFZERTQSJ9..AAAA",
        "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0",
        "eyJhbGciOiJFZERTQSJ9=.eyJzdWIiOiJ4In0.AAAA",
        "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0=.AAAA",
        "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.AAAA==",
        "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.AA+A",
        "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.AA/A",
        "eyJhbGciOiJFZERTQSJ9 .eyJzdWIiOiJ4In0.AAAA",
        "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.A",
        "Bearer eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.AAAA",
    };
    static const char *const headers[] = {
        "[]",
        "\"EdDSA\"",
        "{}",
        "{\"alg\":5}",
        "{\"alg\":null}",
        "{\"alg\":[\"EdDSA\"]}",
        "{\"alg\":\"EdDSA\"",
        "{\"alg\":\"EdDSA\"} ",
        "not json",
        "{\"alg\":\"none\",\"alg\":\"EdDSA\"}",
        "{\"alg\":\"EdDSA\",\"kid\":7}",
    };
    char *payload = claims_text();
    size_t i;

    for (i = 0; i < sizeof(tokens) / sizeof(tokens[0]); ++i) {
        rl_jwt_claims_t claims;
        const char *why = NULL;
        assert_int_equal(rl_jwt_verify(jwks, &policy, tokens[i], strlen(tokens[i]), NOW, &claims, &why), -1);
        if (strcmp(why, "malformed") != 0)
            fail_msg("token %zu: %s", i, why);
    }
    for (i = 0; i < sizeof(headers) / sizeof(headers[0]); ++i) {
        const char *why = verdict(compact(headers[i], payload, "AAAA"));
        /* Trailing whitespace is valid JSON; it fails later, on the signature. */
        if (strcmp(why, i == 7 ? "bad_signature" : "malformed") != 0)
            fail_msg("header %zu: %s", i, why);
    }
    assert_reason(verdict(compact("{\"alg\":\"EdDSA\",\"crit\":[\"b64\"],\"b64\":false}", payload, "AAAA")),
                  "unsupported_crit");
    /* A NUL inside a segment. */
    {
        char *token = token_with(ed_key, "EdDSA", "ed1", claims_default());
        rl_jwt_claims_t claims;
        const char *why;
        size_t len = strlen(token);
        token[5] = '\0';
        assert_int_equal(rl_jwt_verify(jwks, &policy, token, len, NOW, &claims, &why), -1);
        assert_string_equal(why, "malformed");
        free(token);
    }
    /* Non-canonical trailing bits: the last character of a 2-char group with spare bits set. */
    {
        char *token = token_with(ed_key, "EdDSA", "ed1", claims_default());
        char *last = token + strlen(token) - 1;
        assert_reason(verdict(strdup(token)), NULL);
        *last = *last == 'A' ? 'B' : (char)(*last + 1);
        assert_reason(verdict(token), "malformed");
    }
    free(payload);
}

static void test_payload_not_object(void **state)
{
    static const char *const payloads[] = {"[]", "\"x\"", "42", "null", "{\"sub\":\"a\",\"sub\":\"b\"}", "{"};
    size_t i;

    for (i = 0; i < sizeof(payloads) / sizeof(payloads[0]); ++i)
        assert_reason(verdict(sign_compact(ed_key, "{\"alg\":\"EdDSA\",\"kid\":\"ed1\"}", payloads[i])), "malformed");
}

static void test_sub(void **state)
{
    char long_sub[RL_JWT_SUB_MAX + 2];
    rl_jwt_claims_t claims;

    assert_reason(verdict(token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "sub", NULL))),
                  "missing_sub");
    assert_reason(verdict(token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "sub", json_string("")))),
                  "missing_sub");
    assert_reason(verdict(token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "sub", json_integer(5)))),
                  "missing_sub");
    assert_reason(verdict(token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "sub", json_string("a b")))),
                  "bad_sub");
    assert_reason(verdict(token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "sub", json_string("a\tb")))),
                  "bad_sub");
    assert_reason(
        verdict(token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "sub", json_string("caf\xc3\xa9")))),
        "bad_sub");
    assert_reason(
        verdict(token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "sub", json_string("a\x7f")))),
        "bad_sub");
    memset(long_sub, 'x', sizeof(long_sub) - 1);
    long_sub[RL_JWT_SUB_MAX + 1] = '\0';
    assert_reason(
        verdict(token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "sub", json_string(long_sub)))),
        "bad_sub");
    long_sub[RL_JWT_SUB_MAX] = '\0';
    assert_reason(
        verdict_policy(token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "sub", json_string(long_sub))),
                       &policy, &claims),
        NULL);
    assert_string_equal(claims.sub, long_sub);
    assert_reason(verdict_policy(token_with(ed_key, "EdDSA", "ed1",
                                            claims_set(claims_default(), "sub", json_string("auth0|abc:x@y.z"))),
                                 &policy, &claims),
                  NULL);
    assert_string_equal(claims.sub, "auth0|abc:x@y.z");
    /* Characters that JSON must escape are part of the rule: they are encoded, never refused or mangled. */
    assert_reason(verdict_policy(token_with(ed_key, "EdDSA", "ed1",
                                            claims_set(claims_default(), "sub", json_string("a\"b\\c</d>"))),
                                 &policy, &claims),
                  NULL);
    assert_string_equal(claims.sub, "a\"b\\c</d>");
}

static void test_too_long(void **state)
{
    char *token = malloc(RL_JWT_TOKEN_MAX + 2);
    rl_jwt_claims_t claims;
    const char *why;
    char *big_aud = malloc(RL_JWT_TOKEN_MAX);

    memset(token, 'A', RL_JWT_TOKEN_MAX + 1);
    token[RL_JWT_TOKEN_MAX + 1] = '\0';
    assert_int_equal(rl_jwt_verify(jwks, &policy, token, RL_JWT_TOKEN_MAX + 1, NOW, &claims, &why), -1);
    assert_string_equal(why, "too_long");
    assert_int_equal(rl_jwt_verify(jwks, &policy, token, RL_JWT_TOKEN_MAX, NOW, &claims, &why), -1);
    assert_string_equal(why, "malformed");
    free(token);

    /* A validly signed token that is simply too big. */
    memset(big_aud, 'a', RL_JWT_TOKEN_MAX - 1);
    big_aud[RL_JWT_TOKEN_MAX - 1] = '\0';
    assert_reason(verdict(token_with(ed_key, "EdDSA", "ed1",
                                     claims_set(claims_default(), "aud", json_pack("[s, s]", big_aud, AUDIENCE)))),
                  "too_long");
    free(big_aud);
}

static void test_claims_zeroed_on_failure(void **state)
{
    rl_jwt_claims_t claims;
    const char *why;
    char *token = token_with(ed_key, "EdDSA", "ed1", claims_set(claims_default(), "iss", json_string("x")));

    memset(&claims, 0x55, sizeof(claims));
    assert_int_equal(rl_jwt_verify(jwks, &policy, token, strlen(token), NOW, &claims, &why), -1);
    assert_int_equal(claims.exp, 0);
    assert_int_equal(claims.sub[0], '\0');
    free(token);
}

/* ---- JWKS parsing ---- */

static int parse_count(json_t *keys)
{
    char *text = jwks_of(keys);
    rl_jwks_t *parsed = NULL;
    int count;

    count = rl_jwks_parse(text, strlen(text), &parsed) == 0 ? (int)rl_jwks_count(parsed) : -1;
    if (count < 0)
        assert_null(parsed);
    rl_jwks_unref(parsed);
    free(text);
    return count;
}

static json_t *jwk_with(EVP_PKEY *key, const char *name, json_t *value)
{
    json_t *jwk = jwk_of(key, "k");

    if (value == NULL)
        json_object_del(jwk, name);
    else
        json_object_set_new(jwk, name, value);
    return jwk;
}

static void test_jwks_parse(void **state)
{
    EVP_PKEY *small = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)1024);
    EVP_PKEY *p384 = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-384");
    json_t *off_curve = jwk_of(ec_key, "bad");
    json_t *many = json_array();
    rl_jwks_t *parsed;
    int i;

    assert_int_equal(parse_count(json_pack("[o, o]", jwk_of(ed_key, NULL), jwk_of(rsa_key, NULL))), 2);
    assert_int_equal(parse_count(json_pack("[o, {s:s, s:s}]", jwk_of(ed_key, NULL), "kty", "oct", "k", "c2VjcmV0")), 1);
    assert_int_equal(parse_count(json_pack("[{s:s, s:s}]", "kty", "oct", "k", "c2VjcmV0")), -1);
    assert_int_equal(parse_count(json_array()), -1);
    assert_int_equal(parse_count(json_pack("[o]", jwk_with(ed_key, "use", json_string("enc")))), -1);
    assert_int_equal(parse_count(json_pack("[o]", jwk_with(ed_key, "use", json_string("sig")))), 1);
    assert_int_equal(parse_count(json_pack("[o]", jwk_with(ed_key, "use", json_integer(1)))), -1);
    assert_int_equal(parse_count(json_pack("[o]", jwk_with(rsa_key, "alg", json_string("RS256")))), 1);
    assert_int_equal(parse_count(json_pack("[o]", jwk_with(rsa_key, "alg", json_string("ES256")))), -1);
    assert_int_equal(parse_count(json_pack("[o]", jwk_with(rsa_key, "alg", json_string("RSA-OAEP")))), -1);
    assert_int_equal(parse_count(json_pack("[o]", jwk_with(ec_key, "key_ops", json_pack("[s]", "verify")))), 1);
    assert_int_equal(parse_count(json_pack("[o]", jwk_with(ec_key, "key_ops", json_pack("[s]", "encrypt")))), -1);
    assert_int_equal(parse_count(json_pack("[o]", jwk_with(ec_key, "crv", json_string("P-384")))), -1);
    assert_int_equal(parse_count(json_pack("[o]", jwk_with(ec_key, "crv", NULL))), -1);
    assert_int_equal(parse_count(json_pack("[o]", jwk_with(ed_key, "crv", json_string("X25519")))), -1);
    assert_int_equal(parse_count(json_pack("[o]", jwk_with(ed_key, "kid", json_integer(3)))), -1);
    assert_int_equal(parse_count(json_pack("[o]", jwk_with(ed_key, "x", json_string("AAAA")))), -1);
    assert_int_equal(parse_count(json_pack("[o]", jwk_with(ed_key, "x", json_string("!!!!")))), -1);
    assert_int_equal(parse_count(json_pack("[o]", jwk_with(rsa_key, "e", NULL))), -1);
    assert_int_equal(parse_count(json_pack("[o]", jwk_of(small, NULL))), -1);
    assert_int_equal(parse_count(json_pack("[o]", jwk_of(p384, NULL))), -1);
    assert_int_equal(parse_count(json_pack("[s, i, o]", "x", 1, jwk_of(ed_key, NULL))), 1);

    /* A point that is not on the curve. */
    json_object_set_new(off_curve, "y", json_string("AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"));
    assert_int_equal(parse_count(json_pack("[o]", off_curve)), -1);

    for (i = 0; i < 65; ++i)
        json_array_append_new(many, jwk_of(ed_key, NULL));
    assert_int_equal(parse_count(many), -1);

    assert_int_equal(rl_jwks_parse("", 0, &parsed), -1);
    assert_null(parsed);
    assert_int_equal(rl_jwks_parse("[]", 2, &parsed), -1);
    assert_int_equal(rl_jwks_parse("{\"keys\":{}}", 11, &parsed), -1);
    assert_int_equal(rl_jwks_parse("{\"keys\":[]", 10, &parsed), -1);
    assert_int_equal(rl_jwks_parse(jwks_text, strlen(jwks_text) - 1, &parsed), -1);
    {
        /* Duplicate member names are refused: two parsers must never see two different sets. */
        const char *dup = "{\"keys\":[],\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"11qYAYKxCrfVS_"
                          "7TyWQHOg7hcvPapiMlrwIaaPcHURo\"}]}";
        assert_int_equal(rl_jwks_parse(dup, strlen(dup), &parsed), -1);
    }
    EVP_PKEY_free(small);
    EVP_PKEY_free(p384);
}

static void test_jwks_refcount(void **state)
{
    rl_jwks_t *parsed, *again;

    assert_int_equal(rl_jwks_parse(jwks_text, strlen(jwks_text), &parsed), 0);
    again = rl_jwks_ref(parsed);
    assert_ptr_equal(again, parsed);
    rl_jwks_unref(parsed);
    assert_int_equal(rl_jwks_count(again), 3);
    rl_jwks_unref(again);
    assert_null(rl_jwks_ref(NULL));
    rl_jwks_unref(NULL);
}

/* ---- embedded issuer ---- */

static char *temp_dir(void)
{
    char *dir = strdup("/tmp/test_jwt.XXXXXX");

    assert_non_null(mkdtemp(dir));
    return dir;
}

static char *key_path(const char *dir)
{
    char *path = malloc(strlen(dir) + 16);

    sprintf(path, "%s/issuer.key", dir);
    return path;
}

static void remove_dir(char *dir)
{
    char *path = key_path(dir);

    unlink(path);
    assert_int_equal(rmdir(dir), 0);
    free(path);
    free(dir);
}

static void write_key(const char *path, EVP_PKEY *key, mode_t mode)
{
    BIO *bio = BIO_new_file(path, "w");

    assert_non_null(bio);
    assert_int_equal(PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL), 1);
    BIO_free(bio);
    assert_int_equal(chmod(path, mode), 0);
}

static void test_issuer_round_trip(void **state)
{
    char *dir = temp_dir(), *path = key_path(dir), *json, *json_again, *token;
    rl_jwt_issuer_t *issuer, *again;
    rl_jwt_claims_t claims;
    rl_jwt_policy_t relay_policy = {"https://relay.test", "relay", 30};
    const char *why;
    rl_jwks_t *keys;
    struct stat st;

    assert_int_equal(rl_jwt_issuer_open(dir, &issuer), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);
    json = rl_jwt_issuer_jwks_json(issuer);
    assert_non_null(json);
    assert_non_null(strstr(json, "\"kty\":\"OKP\""));
    assert_non_null(strstr(json, rl_jwt_issuer_kid(issuer)));
    assert_null(strstr(json, "\"d\""));

    assert_int_equal(rl_jwt_issuer_open(dir, &again), 0);
    json_again = rl_jwt_issuer_jwks_json(again);
    assert_string_equal(json, json_again);

    token = rl_jwt_issuer_sign(issuer, "https://relay.test", "relay", "alice", NOW, 3600);
    assert_non_null(token);
    keys = rl_jwt_issuer_jwks(again);
    assert_int_equal(rl_jwks_count(keys), 1);
    assert_int_equal(rl_jwt_verify(keys, &relay_policy, token, strlen(token), NOW + 10, &claims, &why), 0);
    assert_string_equal(claims.sub, "alice");
    assert_int_equal(claims.iat, NOW);
    assert_int_equal(claims.exp, NOW + 3600);
    assert_int_equal(rl_jwt_verify(keys, &relay_policy, token, strlen(token), NOW + 3600 + 30, &claims, &why), -1);
    assert_string_equal(why, "expired");
    relay_policy.audience = "other";
    assert_int_equal(rl_jwt_verify(keys, &relay_policy, token, strlen(token), NOW, &claims, &why), -1);
    assert_string_equal(why, "wrong_audience");
    /* The external-provider fixture set does not hold the embedded key. */
    relay_policy.audience = "relay";
    assert_int_equal(rl_jwt_verify(jwks, &relay_policy, token, strlen(token), NOW, &claims, &why), -1);
    assert_string_equal(why, "unknown_kid");
    free(token);

    assert_null(rl_jwt_issuer_sign(issuer, "https://relay.test", "relay", "has space", NOW, 3600));
    assert_null(rl_jwt_issuer_sign(issuer, "https://relay.test", "relay", "", NOW, 3600));
    assert_null(rl_jwt_issuer_sign(issuer, "https://relay.test", "relay", "bob", NOW, 0));
    assert_null(rl_jwt_issuer_sign(issuer, "https://relay.test", "relay", "bob", INT64_MAX - 5, 3600));
    assert_null(rl_jwt_issuer_sign(issuer, "", "relay", "bob", NOW, 3600));
    assert_null(rl_jwt_issuer_sign(issuer, "https://relay.test", NULL, "bob", NOW, 3600));

    rl_jwks_unref(keys);
    free(json);
    free(json_again);
    rl_jwt_issuer_free(issuer);
    rl_jwt_issuer_free(again);
    free(path);
    remove_dir(dir);
}

/* RFC 8037 appendix A: the Ed25519 test key and its RFC 7638 thumbprint. */
static void test_issuer_rfc8037_thumbprint(void **state)
{
    static const char d_b64[] = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A";
    unsigned char d[40];
    long d_len = rl_base64url_decode(d_b64, strlen(d_b64), d);
    EVP_PKEY *key = EVP_PKEY_new_raw_private_key_ex(NULL, "ED25519", NULL, d, (size_t)d_len);
    char *dir = temp_dir(), *path = key_path(dir), *json;
    rl_jwt_issuer_t *issuer;

    assert_non_null(key);
    write_key(path, key, 0600);
    assert_int_equal(rl_jwt_issuer_open(dir, &issuer), 0);
    assert_string_equal(rl_jwt_issuer_kid(issuer), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k");
    json = rl_jwt_issuer_jwks_json(issuer);
    assert_non_null(strstr(json, "\"x\":\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo\""));
    free(json);
    rl_jwt_issuer_free(issuer);
    EVP_PKEY_free(key);
    free(path);
    remove_dir(dir);
}

static void test_issuer_refuses(void **state)
{
    char *dir = temp_dir(), *path = key_path(dir);
    rl_jwt_issuer_t *issuer = (rl_jwt_issuer_t *)1;
    FILE *fp;

    /* Readable by others. */
    write_key(path, ed_key, 0644);
    assert_int_equal(rl_jwt_issuer_open(dir, &issuer), -1);
    assert_null(issuer);
    /* Not Ed25519. */
    write_key(path, ec_key, 0600);
    assert_int_equal(rl_jwt_issuer_open(dir, &issuer), -1);
    /* Not a key at all. */
    fp = fopen(path, "w");
    fputs("-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n", fp);
    fclose(fp);
    assert_int_equal(rl_jwt_issuer_open(dir, &issuer), -1);
    /* Empty. */
    fp = fopen(path, "w");
    fclose(fp);
    assert_int_equal(rl_jwt_issuer_open(dir, &issuer), -1);
    /* A folder that does not exist. */
    assert_int_equal(rl_jwt_issuer_open("/nonexistent/relay-data", &issuer), -1);
    free(path);
    remove_dir(dir);
}

/* ---- jwks_source ---- */

static void assert_source_verifies(rl_jwks_source_t *source, EVP_PKEY *key, const char *alg, const char *kid)
{
    rl_jwks_t *keys = rl_jwks_source_get(source);
    char *token = token_with(key, alg, kid, claims_default());
    rl_jwt_claims_t claims;
    const char *why;

    assert_non_null(keys);
    if (rl_jwt_verify(keys, &policy, token, strlen(token), NOW, &claims, &why) != 0)
        fail_msg("verify: %s", why);
    free(token);
    rl_jwks_unref(keys);
}

static void test_source_file(void **state)
{
    char *dir = temp_dir(), *path = key_path(dir);
    rl_jwks_source_t *source = (rl_jwks_source_t *)1;
    FILE *fp = fopen(path, "w");

    assert_int_equal(rl_jwks_source_open_file(path, &source), -1);
    assert_null(source);
    fputs(jwks_text, fp);
    fclose(fp);
    assert_int_equal(rl_jwks_source_open_file(path, &source), 0);
    assert_source_verifies(source, rsa_key, "RS256", "rsa1");
    assert_source_verifies(source, ed_key, "EdDSA", "ed1");
    rl_jwks_source_refresh_soon(source);
    rl_jwks_source_close(source);

    fp = fopen(path, "w");
    fputs("{\"keys\":[{\"kty\":\"oct\",\"k\":\"c2VjcmV0\"}]}", fp);
    fclose(fp);
    assert_int_equal(rl_jwks_source_open_file(path, &source), -1);
    assert_int_equal(rl_jwks_source_open_file("/nonexistent/jwks.json", &source), -1);
    assert_int_equal(rl_jwks_source_open_file(dir, &source), -1);
    free(path);
    remove_dir(dir);
    rl_jwks_source_close(NULL);
}

static void test_source_static(void **state)
{
    rl_jwks_source_t *source;
    rl_jwks_t *keys;

    assert_int_equal(rl_jwks_source_open_static(NULL, &source), -1);
    assert_int_equal(rl_jwks_source_open_static(jwks, &source), 0);
    keys = rl_jwks_source_get(source);
    assert_ptr_equal(keys, jwks);
    rl_jwks_unref(keys);
    assert_source_verifies(source, ec_key, "ES256", "ec1");
    rl_jwks_source_close(source);
    /* The fixture still holds its own reference. */
    assert_int_equal(rl_jwks_count(jwks), 3);
}

/* A one-connection-at-a-time HTTP server on a thread: enough to serve a JWKS and misbehave on demand. */
struct server {
    int fd;
    int port;
    pthread_t thread;
    pthread_mutex_t lock;
    int status;
    char *body;
    int hang; /* accept, read the request, never answer */
    atomic_int requests;
    atomic_bool stop;
};

static void *server_main(void *arg)
{
    struct server *server = arg;

    while (!atomic_load(&server->stop)) {
        struct pollfd pfd = {server->fd, POLLIN, 0};
        char request[4096], head[256], *body;
        size_t have = 0;
        int client, status, hang;

        if (poll(&pfd, 1, 20) <= 0)
            continue;
        client = accept(server->fd, NULL, NULL);
        if (client < 0)
            continue;
        /*
         * Empty before the first read: the buffer still held the previous
         * request's blank line, so a later request went unread, and closing
         * over its unread bytes reset the connection before the client read
         * the answer (a flaky "Connection reset by peer").
         */
        request[0] = '\0';
        while (have < sizeof(request) - 1 && strstr(request, "\r\n\r\n") == NULL) {
            ssize_t got = recv(client, request + have, sizeof(request) - 1 - have, 0);
            if (got <= 0)
                break;
            have += (size_t)got;
            request[have] = '\0';
        }
        atomic_fetch_add(&server->requests, 1);
        pthread_mutex_lock(&server->lock);
        status = server->status;
        body = strdup(server->body);
        hang = server->hang;
        pthread_mutex_unlock(&server->lock);
        while (hang && !atomic_load(&server->stop)) {
            usleep(10000);
            pthread_mutex_lock(&server->lock);
            hang = server->hang;
            pthread_mutex_unlock(&server->lock);
        }
        if (!hang) {
            int len = snprintf(head, sizeof(head),
                               "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                               "Connection: close\r\n\r\n",
                               status, strlen(body));
            if (send(client, head, (size_t)len, MSG_NOSIGNAL) < 0 ||
                send(client, body, strlen(body), MSG_NOSIGNAL) < 0) {
            }
        }
        free(body);
        close(client);
    }
    return NULL;
}

static void server_set(struct server *server, int status, const char *body, int hang)
{
    pthread_mutex_lock(&server->lock);
    server->status = status;
    free(server->body);
    server->body = strdup(body);
    server->hang = hang;
    pthread_mutex_unlock(&server->lock);
}

static void server_start(struct server *server)
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t addr_len = sizeof(addr);

    memset(server, 0, sizeof(*server));
    pthread_mutex_init(&server->lock, NULL);
    server->body = strdup("");
    server->fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(server->fd >= 0);
    assert_int_equal(bind(server->fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(listen(server->fd, 8), 0);
    assert_int_equal(getsockname(server->fd, (struct sockaddr *)&addr, &addr_len), 0);
    server->port = ntohs(addr.sin_port);
    assert_int_equal(pthread_create(&server->thread, NULL, server_main, server), 0);
}

static void server_stop(struct server *server)
{
    atomic_store(&server->stop, 1);
    pthread_join(server->thread, NULL);
    close(server->fd);
    free(server->body);
    pthread_mutex_destroy(&server->lock);
}

/* Waits up to 5 s for the source to hold a set that verifies key's tokens. */
static int source_wait_for(rl_jwks_source_t *source, EVP_PKEY *key, const char *alg, const char *kid)
{
    char *token = token_with(key, alg, kid, claims_default());
    int64_t deadline = rl_clock_mono_us() + 5000000;
    int ok = 0;

    while (!ok && rl_clock_mono_us() < deadline) {
        rl_jwks_t *keys = rl_jwks_source_get(source);
        rl_jwt_claims_t claims;
        const char *why;
        ok = rl_jwt_verify(keys, &policy, token, strlen(token), NOW, &claims, &why) == 0;
        rl_jwks_unref(keys);
        if (!ok)
            usleep(5000);
    }
    free(token);
    return ok;
}

static void wait_requests(struct server *server, int at_least)
{
    int64_t deadline = rl_clock_mono_us() + 5000000;

    while (atomic_load(&server->requests) < at_least && rl_clock_mono_us() < deadline)
        usleep(5000);
    assert_true(atomic_load(&server->requests) >= at_least);
}

static void test_source_url(void **state)
{
    struct server server;
    rl_jwks_source_t *source = (rl_jwks_source_t *)1;
    char url[128], *ed_set = jwks_of(json_pack("[o]", jwk_of(ed_key, "ed1")));
    char *ec_set = jwks_of(json_pack("[o]", jwk_of(ec_key, "ec1")));
    int64_t started;
    int requests;
    rl_jobs_t *jobs = rl_jobs_start();

    server_start(&server);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/.well-known/jwks.json", server.port);

    /* A failed first fetch fails the open. */
    server_set(&server, 404, "{}", 0);
    assert_int_equal(rl_jwks_source_open_url(url, 50, jobs, &source), -1);
    assert_null(source);
    server_set(&server, 200, "{\"keys\":[]}", 0);
    assert_int_equal(rl_jwks_source_open_url(url, 50, jobs, &source), -1);
    assert_int_equal(rl_jwks_source_open_url("ftp://127.0.0.1/jwks.json", 50, jobs, &source), -1);
    assert_int_equal(rl_jwks_source_open_url("not a url", 50, jobs, &source), -1);

    server_set(&server, 200, ed_set, 0);
    assert_int_equal(rl_jwks_source_open_url(url, 50, jobs, &source), 0);
    assert_source_verifies(source, ed_key, "EdDSA", "ed1");

    /* The refresh (a run on the jobs) swaps in the new set. */
    server_set(&server, 200, ec_set, 0);
    assert_true(source_wait_for(source, ec_key, "ES256", "ec1"));

    /* Failed refreshes keep the last good set. */
    server_set(&server, 500, "oops", 0);
    wait_requests(&server, atomic_load(&server.requests) + 2);
    assert_source_verifies(source, ec_key, "ES256", "ec1");
    server_set(&server, 200, "{\"keys\":[{\"kty\":\"oct\",\"k\":\"AA\"}]}", 0);
    wait_requests(&server, atomic_load(&server.requests) + 2);
    assert_source_verifies(source, ec_key, "ES256", "ec1");

    /* Stopping the jobs aborts a fetch that hangs (the refresh's interrupt), and then the source closes. */
    server_set(&server, 200, ec_set, 1);
    wait_requests(&server, atomic_load(&server.requests) + 1);
    started = rl_clock_mono_us();
    rl_jobs_stop(jobs);
    rl_jwks_source_close(source);
    assert_true(rl_clock_mono_us() - started < 3000000);
    server_set(&server, 200, ec_set, 0);

    /* An early refresh right after a fetch waits out RL_JWKS_EARLY_REFRESH_GAP_MS. */
    /* ... and a refresh waiting out its interval is woken by the stop, not left for an hour. */
    jobs = rl_jobs_start();
    assert_int_equal(rl_jwks_source_open_url(url, 3600 * 1000, jobs, &source), 0);
    requests = atomic_load(&server.requests);
    {
        /* The event waited for: the refresh, woken, decides again; it waits out the gap after its fetch. */
        rl_jwks_schedule_t before, now;
        int64_t deadline = rl_clock_mono_us() + 5000000;

        do {
            rl_jwks_source_schedule(source, &before);
        } while ((before.waits_until_us == 0 || before.rounds == 0) && rl_clock_mono_us() < deadline &&
                 poll(NULL, 0, 1) == 0);
        assert_true(before.waits_until_us > 0);
        rl_jwks_source_refresh_soon(source);
        do {
            rl_jwks_source_schedule(source, &now);
        } while (now.rounds == before.rounds && rl_clock_mono_us() < deadline && poll(NULL, 0, 1) == 0);
        assert_true(now.rounds > before.rounds);
        assert_int_equal(now.last_fetch_us, before.last_fetch_us);
        assert_true(now.waits_until_us == now.last_fetch_us + (int64_t)RL_JWKS_EARLY_REFRESH_GAP_MS * 1000);
    }
    assert_int_equal(atomic_load(&server.requests), requests);
    assert_source_verifies(source, ec_key, "ES256", "ec1");
    started = rl_clock_mono_us();
    rl_jobs_stop(jobs);
    assert_true(rl_clock_mono_us() - started < 3000000);
    rl_jwks_source_close(source);

    /* No refresh when refresh_ms <= 0 (no jobs needed); refresh_soon is then a no-op. */
    assert_int_equal(rl_jwks_source_open_url(url, 0, NULL, &source), 0);
    rl_jwks_source_refresh_soon(source);
    assert_source_verifies(source, ec_key, "ES256", "ec1");
    rl_jwks_source_close(source);

    server_stop(&server);
    /* Nothing listens here any more. */
    jobs = rl_jobs_start();
    assert_int_equal(rl_jwks_source_open_url(url, 50, jobs, &source), -1);
    rl_jobs_stop(jobs);
    free(ed_set);
    free(ec_set);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_each_alg),
        cmocka_unit_test(test_expired),
        cmocka_unit_test(test_not_yet_valid),
        cmocka_unit_test(test_leeway),
        cmocka_unit_test(test_issuer),
        cmocka_unit_test(test_audience),
        cmocka_unit_test(test_bad_signature),
        cmocka_unit_test(test_alg_none),
        cmocka_unit_test(test_alg_hs256),
        cmocka_unit_test(test_kid),
        cmocka_unit_test(test_key_type_confusion),
        cmocka_unit_test(test_no_key_for_alg),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_payload_not_object),
        cmocka_unit_test(test_sub),
        cmocka_unit_test(test_too_long),
        cmocka_unit_test(test_claims_zeroed_on_failure),
        cmocka_unit_test(test_jwks_parse),
        cmocka_unit_test(test_jwks_refcount),
        cmocka_unit_test(test_issuer_round_trip),
        cmocka_unit_test(test_issuer_rfc8037_thumbprint),
        cmocka_unit_test(test_issuer_refuses),
        cmocka_unit_test(test_source_file),
        cmocka_unit_test(test_source_static),
        cmocka_unit_test(test_source_url),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
