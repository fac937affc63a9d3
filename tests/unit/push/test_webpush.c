/*
 * Web Push message encryption against RFC 8291's own example (Appendix A),
 * and VAPID tokens (RFC 8292) checked with the public key they announce.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>

#include "common/base64.h"
#include "push/webpush.h"

/* RFC 8291, Appendix A. */
#define PLAINTEXT  "When I grow up, I want to be a watermelon"
#define AS_PRIVATE "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
#define AS_PUBLIC  "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
#define UA_PUBLIC  "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
#define AUTH       "BTBZMqHH6r4Tts7J_aSIgg"
#define SALT       "DGv6ra1nlYgDCS1FRnbzlw"
#define BODY                                                                                                              \
    "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_" \
    "yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"

static __attribute__((noinline)) size_t decode(const char *text, unsigned char *out)
{
    long len = rl_base64url_decode(text, strlen(text), out);

    assert_true(len >= 0);
    return (size_t)len;
}

static void test_rfc8291_example(void **state)
{
    unsigned char d[40], as_public[70], ua_public[70], auth[20], salt[20], expected[200], body[200];
    EVP_PKEY *sender;
    long len;

    assert_int_equal(decode(AS_PRIVATE, d), 32);
    assert_int_equal(decode(AS_PUBLIC, as_public), 65);
    assert_int_equal(decode(UA_PUBLIC, ua_public), 65);
    assert_int_equal(decode(AUTH, auth), 16);
    assert_int_equal(decode(SALT, salt), 16);
    sender = rl_webpush_p256_key(d, as_public);
    assert_non_null(sender);
    len = rl_webpush_encrypt(ua_public, auth, sender, salt, PLAINTEXT, strlen(PLAINTEXT), body, sizeof(body));
    assert_int_equal(len, (long)decode(BODY, expected));
    assert_int_equal((long)RL_WEBPUSH_BODY_LEN(strlen(PLAINTEXT)), len);
    assert_memory_equal(body, expected, (size_t)len);
    EVP_PKEY_free(sender);
}

static void test_fresh_keys_each_time(void **state)
{
    unsigned char ua_public[70], auth[20], a[200], b[200];
    long la, lb;

    decode(UA_PUBLIC, ua_public);
    decode(AUTH, auth);
    la = rl_webpush_encrypt(ua_public, auth, NULL, NULL, PLAINTEXT, strlen(PLAINTEXT), a, sizeof(a));
    lb = rl_webpush_encrypt(ua_public, auth, NULL, NULL, PLAINTEXT, strlen(PLAINTEXT), b, sizeof(b));
    assert_int_equal(la, (long)RL_WEBPUSH_BODY_LEN(strlen(PLAINTEXT)));
    assert_int_equal(lb, la);
    /* A new salt and a new ephemeral key per message: nothing of the header or body repeats. */
    assert_memory_not_equal(a, b, 16);
    assert_memory_not_equal(a + 21, b + 21, 65);
    assert_int_equal(a[20], 65);
    assert_int_equal(a[16] << 24 | a[17] << 16 | a[18] << 8 | a[19], 4096);
}

static void test_refusals(void **state)
{
    unsigned char ua_public[70], auth[20], body[RL_WEBPUSH_RECORD + 200], big[RL_WEBPUSH_PAYLOAD_MAX + 1];

    decode(UA_PUBLIC, ua_public);
    decode(AUTH, auth);
    memset(big, 'x', sizeof(big));
    /* A body of 4096 bytes is all a push service must take. */
    assert_int_equal(rl_webpush_encrypt(ua_public, auth, NULL, NULL, big, sizeof(big), body, sizeof(body)), -1);
    assert_int_equal(rl_webpush_encrypt(ua_public, auth, NULL, NULL, big, sizeof(big) - 1, body, sizeof(body)), 4096);
    assert_int_equal(rl_webpush_encrypt(ua_public, auth, NULL, NULL, "x", 1, body, 10), -1);
    /* A key that is not a point of the curve. */
    ua_public[64] ^= 1;
    assert_false(rl_webpush_point_is_valid(ua_public, 65));
    assert_int_equal(rl_webpush_encrypt(ua_public, auth, NULL, NULL, "x", 1, body, sizeof(body)), -1);
    ua_public[64] ^= 1;
    assert_true(rl_webpush_point_is_valid(ua_public, 65));
    assert_false(rl_webpush_point_is_valid(ua_public, 64));
    ua_public[0] = 0x02;
    assert_false(rl_webpush_point_is_valid(ua_public, 65));
}

/* Splits "vapid t=JWT, k=KEY" and checks the JWT's ES256 signature with KEY. */
static json_t *verify_vapid(const char *header, const char *public_key)
{
    char jwt[2048], key[200], *dot1, *dot2;
    unsigned char point[70], raw[70], claims_text[1024], der[80], *p = der;
    ECDSA_SIG *sig;
    BIGNUM *r, *s;
    EVP_PKEY *key_pkey = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    OSSL_PARAM params[3];
    long claims_len;
    int der_len;
    json_t *claims;

    assert_int_equal(sscanf(header, "vapid t=%2047[^,], k=%199s", jwt, key), 2);
    assert_string_equal(key, public_key);
    assert_int_equal(decode(key, point), 65);
    params[0] = OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0);
    params[1] = OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, point, 65);
    params[2] = OSSL_PARAM_construct_end();
    assert_int_equal(EVP_PKEY_fromdata_init(ctx), 1);
    assert_int_equal(EVP_PKEY_fromdata(ctx, &key_pkey, EVP_PKEY_PUBLIC_KEY, params), 1);
    dot1 = strchr(jwt, '.');
    dot2 = dot1 != NULL ? strchr(dot1 + 1, '.') : NULL;
    assert_non_null(dot2);
    assert_int_equal(decode(dot2 + 1, raw), 64);
    sig = ECDSA_SIG_new();
    r = BN_bin2bn(raw, 32, NULL);
    s = BN_bin2bn(raw + 32, 32, NULL);
    ECDSA_SIG_set0(sig, r, s);
    der_len = i2d_ECDSA_SIG(sig, &p);
    assert_int_equal(EVP_DigestVerifyInit_ex(md, NULL, "SHA256", NULL, NULL, key_pkey, NULL), 1);
    assert_int_equal(EVP_DigestVerify(md, der, (size_t)der_len, (unsigned char *)jwt, (size_t)(dot2 - jwt)), 1);
    *dot2 = '\0';
    claims_len = rl_base64url_decode(dot1 + 1, strlen(dot1 + 1), claims_text);
    assert_true(claims_len > 0);
    claims = json_loadb((const char *)claims_text, (size_t)claims_len, 0, NULL);
    assert_non_null(claims);
    ECDSA_SIG_free(sig);
    EVP_MD_CTX_free(md);
    EVP_PKEY_CTX_free(ctx);
    EVP_PKEY_free(key_pkey);
    return claims;
}

static void test_vapid_key_file_and_token(void **state)
{
    char dir[] = "/tmp/rl_vapid_XXXXXX", path[64], *header;
    rl_vapid_t *vapid = NULL, *again = NULL;
    struct stat st;
    json_t *claims;

    assert_non_null(mkdtemp(dir));
    assert_int_equal(rl_vapid_open(dir, &vapid), 0);
    snprintf(path, sizeof(path), "%s/vapid.key", dir);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    /* Created once: the next start reads the same key, so browsers' subscriptions stay valid. */
    assert_int_equal(rl_vapid_open(dir, &again), 0);
    assert_string_equal(rl_vapid_public_key(vapid), rl_vapid_public_key(again));
    assert_int_equal(strlen(rl_vapid_public_key(vapid)), 87);

    header = rl_vapid_authorization(vapid, "https://push.example.net:8443/wpush/v2/abc?x=1", "mailto:ops@example.org",
                                    1700000000, 12 * 3600);
    assert_non_null(header);
    claims = verify_vapid(header, rl_vapid_public_key(vapid));
    assert_string_equal(json_string_value(json_object_get(claims, "aud")), "https://push.example.net:8443");
    assert_int_equal(json_integer_value(json_object_get(claims, "exp")), 1700000000 + 12 * 3600);
    assert_string_equal(json_string_value(json_object_get(claims, "sub")), "mailto:ops@example.org");
    json_decref(claims);
    free(header);
    /* RFC 8292: no more than 24 hours. */
    header = rl_vapid_authorization(vapid, "https://push.example.net/x", "mailto:a@b", 1700000000, 7 * 24 * 3600);
    claims = verify_vapid(header, rl_vapid_public_key(vapid));
    assert_int_equal(json_integer_value(json_object_get(claims, "exp")), 1700000000 + 24 * 3600);
    json_decref(claims);
    free(header);
    assert_null(rl_vapid_authorization(vapid, "ftp://push.example.net/x", "mailto:a@b", 1700000000, 60));
    assert_null(rl_vapid_authorization(vapid, "https:///x", "mailto:a@b", 1700000000, 60));

    /* A key file others can read is refused, as for every key of the data folder. */
    rl_vapid_free(again);
    again = NULL;
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(rl_vapid_open(dir, &again), -1);
    assert_null(again);
    rl_vapid_free(vapid);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc8291_example),
        cmocka_unit_test(test_fresh_keys_each_time),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_vapid_key_file_and_token),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
