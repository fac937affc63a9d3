/*
 * Unit tests of src/e2e. The fixed inputs and expected outputs of the
 * authors' bridge (packages/openclaw-bridge/src/crypto.test.ts, version
 * 0.13.7) are reproduced as data: the wire must match them byte for byte.
 * e2e.c is included to reach box_derive, with which the authors' install-key
 * vector is checked.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "e2e/e2e.c"
#include "e2e/keystore.h"

/* The authors' fixed inputs. */
#define INSTALL_KEY_HEX   "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define BRIDGE_SECRET_HEX "1111111111111111111111111111111111111111111111111111111111111111"
#define BRIDGE_PUBLIC_HEX "7b4e909bbe7ffe44c465a220037d608ee35897d31ef972f07f74892cb0f73f13"
#define IOS_SECRET_HEX    "2222222222222222222222222222222222222222222222222222222222222222"
#define IOS_PUBLIC_HEX    "0faa684ed28867b97f4a6a2dee5df8ce974e76b7018e3f22a1c4cf2678570f20"
/* Their expected outputs. */
#define BLOB_KEY_MESSAGES_ABC_HEX "0e63257899b5f60d7bfde449cf46a92633c14aacc10e619b5c9485e6947464ec"
#define BLIND_IDX_KEY_HEX         "4502be12df6ca509e22785edb957f143250f5c78ad1ad0156157c68f28394b8e"
#define BLIND_IDX_AGENT_FILES     "CC425Syg8HVCm_atfoI6lg"
#define INSTALL_FROM_ECDH_HEX     "aa52bee1cc39d680ba05ccb4cef8541b0c80f05f1fe4321cfcd34ff2478ff11a"
#define SAS_FROM_ECDH_HEX         "e2fb1f8a"
#define DECISION_SIG_VECTOR       "H1i7jZB4Tv2bTAyOLx5A9DMV/YJvbrN9iJGAq/wsJek="
/* The grant signature of GRANT_WRAP in ses_1 by dev_1, iOS secret to bridge public: also in
 * tests/browser/unit/crypto.test.js. */
#define GRANT_WRAP       "AhEiM0RVZneImaq7zN3u/w=="
#define GRANT_SIG_VECTOR "oLfyUC6L3kYta5DwGjLhnRIh8lnAUuyDQN6vcP9AQNk="

static void from_hex(const char *hex, uint8_t *out, size_t len)
{
    assert_int_equal(rl_hex_decode(hex, strlen(hex), out, len), 0);
}

static void assert_hex(const uint8_t *bytes, size_t len, const char *expected)
{
    char hex[256];

    rl_hex_encode(bytes, len, hex);
    assert_string_equal(hex, expected);
}

static int setup(void **state)
{
    return rl_e2e_init();
}

/* ---- the authors' pinned vectors -------------------------------------------------------------------- */

static void test_blob_key_vector(void **state)
{
    uint8_t ikm[32], key[32], other[32];

    from_hex(INSTALL_KEY_HEX, ikm, 32);
    assert_int_equal(rl_e2e_blob_key(ikm, "messages/abc", key), 0);
    assert_hex(key, 32, BLOB_KEY_MESSAGES_ABC_HEX);
    /* Deterministic, and separated by path. */
    assert_int_equal(rl_e2e_blob_key(ikm, "tasks/x/input", key), 0);
    assert_int_equal(rl_e2e_blob_key(ikm, "tasks/x/input", other), 0);
    assert_memory_equal(key, other, 32);
    assert_int_equal(rl_e2e_blob_key(ikm, "messages/xyz", other), 0);
    assert_int_equal(rl_e2e_blob_key(ikm, "messages/abc", key), 0);
    assert_memory_not_equal(key, other, 32);
}

static void test_blind_index_vectors(void **state)
{
    uint8_t ikm[32], idx_key[32];
    char idx[RL_E2E_BLIND_IDX_SIZE];
    const char *inputs[] = {"ses_abc", "/Users/foo/bar.swift"};
    const char *short_inputs[] = {"ses_abc", "/x"};
    size_t i;

    from_hex(INSTALL_KEY_HEX, ikm, 32);
    assert_int_equal(rl_e2e_blind_index_key(ikm, idx_key), 0);
    assert_hex(idx_key, 32, BLIND_IDX_KEY_HEX);
    assert_int_equal(rl_e2e_blind_index(idx_key, "agent_files", inputs, 2, idx), 0);
    assert_string_equal(idx, BLIND_IDX_AGENT_FILES);
    /* base64url without padding: 16 bytes are 22 characters of [A-Za-z0-9_-]. */
    assert_int_equal(rl_e2e_blind_index(idx_key, "agent_files", short_inputs, 2, idx), 0);
    assert_int_equal(strlen(idx), 22);
    for (i = 0; i < 22; i++)
        assert_non_null(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-", idx[i]));
    /* The separator keeps inputs apart: ("ab", "c") is not ("a", "bc"). */
    {
        const char *a[] = {"ab", "c"}, *b[] = {"a", "bc"};
        char ia[RL_E2E_BLIND_IDX_SIZE], ib[RL_E2E_BLIND_IDX_SIZE];
        assert_int_equal(rl_e2e_blind_index(idx_key, "s", a, 2, ia), 0);
        assert_int_equal(rl_e2e_blind_index(idx_key, "s", b, 2, ib), 0);
        assert_string_not_equal(ia, ib);
    }
}

static void test_public_keys_from_the_fixed_secrets(void **state)
{
    uint8_t sec[32];
    rl_e2e_keypair_t kp;

    from_hex(BRIDGE_SECRET_HEX, sec, 32);
    assert_int_equal(rl_e2e_keypair_from_secret(&kp, sec), 0);
    assert_hex(kp.pub, 32, BRIDGE_PUBLIC_HEX);
    from_hex(IOS_SECRET_HEX, sec, 32);
    assert_int_equal(rl_e2e_keypair_from_secret(&kp, sec), 0);
    assert_hex(kp.pub, 32, IOS_PUBLIC_HEX);
    assert_int_equal(rl_e2e_keypair_new(&kp), 0);
    assert_int_equal(sizeof(kp.pub), 32);
    assert_int_equal(sizeof(kp.sec), 32);
}

/* The install key vector pins the shared secret: crypto_box_beforenm (X25519 then HSalsa20), not raw X25519. */
static void test_install_key_vector_pins_box_beforenm(void **state)
{
    uint8_t bsec[32], bpub[32], isec[32], ipub[32], a[32], b[32], raw[32];

    from_hex(BRIDGE_SECRET_HEX, bsec, 32);
    from_hex(BRIDGE_PUBLIC_HEX, bpub, 32);
    from_hex(IOS_SECRET_HEX, isec, 32);
    from_hex(IOS_PUBLIC_HEX, ipub, 32);
    assert_int_equal(box_derive(bsec, ipub, "sophon/v1/install_key", a, 32), 0);
    assert_hex(a, 32, INSTALL_FROM_ECDH_HEX);
    assert_int_equal(box_derive(isec, bpub, "sophon/v1/install_key", b, 32), 0);
    assert_memory_equal(a, b, 32);
    /* HKDF over the raw X25519 output gives another key: the vector would catch that mistake. */
    assert_int_equal(crypto_scalarmult(raw, bsec, ipub), 0);
    assert_int_equal(rl_e2e_hkdf(raw, 32, "sophon/v1/install_key", b, 32), 0);
    assert_memory_not_equal(a, b, 32);
}

static void test_sas_vector_and_emoji(void **state)
{
    uint8_t bsec[32], bpub[32], isec[32], ipub[32], a[4], b[4];
    char text[RL_E2E_SAS_TEXT_SIZE];

    from_hex(BRIDGE_SECRET_HEX, bsec, 32);
    from_hex(BRIDGE_PUBLIC_HEX, bpub, 32);
    from_hex(IOS_SECRET_HEX, isec, 32);
    from_hex(IOS_PUBLIC_HEX, ipub, 32);
    assert_int_equal(rl_e2e_sas(bsec, ipub, a), 0);
    assert_hex(a, 4, SAS_FROM_ECDH_HEX);
    assert_int_equal(rl_e2e_sas(isec, bpub, b), 0);
    assert_memory_equal(a, b, 4);
    /* e2 fb 1f 8a: 226 % 32 = 2 mouse, 251 % 32 = 27 fire, 31 gift, 138 % 32 = 10 cow. */
    rl_e2e_sas_text(a, text);
    assert_string_equal(text, "\xF0\x9F\x90\xAD \xF0\x9F\x94\xA5 \xF0\x9F\x8E\x81 \xF0\x9F\x90\xAE");
    /* The ends of the table: 0 cat, 25 star (3 bytes), 28 zap, 31 gift. */
    rl_e2e_sas_text((const uint8_t[]){0, 25, 28, 63}, text);
    assert_string_equal(text, "\xF0\x9F\x90\xB1 \xE2\xAD\x90 \xE2\x9A\xA1 \xF0\x9F\x8E\x81");
}

/* ---- the symmetric envelope ------------------------------------------------------------------------- */

static void test_envelope_round_trip_and_layout(void **state)
{
    uint8_t key[32], env[64], env2[64], plain[64];
    size_t len, len2, plen;

    from_hex(INSTALL_KEY_HEX, key, 32);
    assert_int_equal(rl_e2e_seal(key, "hello sophon e2e", 16, env, &len), 0);
    assert_int_equal(len, 16 + 29);
    assert_int_equal(rl_e2e_open(key, env, len, plain, &plen), 0);
    assert_int_equal(plen, 16);
    assert_memory_equal(plain, "hello sophon e2e", 16);
    /* 1 version + 12 nonce + 1 ciphertext + 16 tag for "x". */
    assert_int_equal(rl_e2e_seal(key, "x", 1, env, &len), 0);
    assert_int_equal(env[0], 0x01);
    assert_int_equal(len, 1 + 12 + 1 + 16);
    /* A fresh nonce per call. */
    assert_int_equal(rl_e2e_seal(key, "same", 4, env, &len), 0);
    assert_int_equal(rl_e2e_seal(key, "same", 4, env2, &len2), 0);
    assert_memory_not_equal(env + 1, env2 + 1, 12);
}

static void test_envelope_sentinel(void **state)
{
    uint8_t key[32], env[64], plain[8];
    size_t len, plen = 99;

    from_hex(INSTALL_KEY_HEX, key, 32);
    assert_int_equal(rl_e2e_seal(key, "", 0, env, &len), 0);
    assert_int_equal(len, 1);
    assert_int_equal(env[0], 0x00);
    assert_int_equal(rl_e2e_open(key, env, 1, plain, &plen), 0);
    assert_int_equal(plen, 0);
}

static void test_envelope_refuses_tampering_wrong_keys_and_truncation(void **state)
{
    uint8_t key[32], wrong[32] = {0}, env[64], bad[64], plain[64];
    size_t len, plen;
    int i;

    from_hex(INSTALL_KEY_HEX, key, 32);
    assert_int_equal(rl_e2e_seal(key, "hi", 2, env, &len), 0);
    /* Any altered byte: nonce, ciphertext or tag. */
    for (i = 1; i < (int)len; i++) {
        memcpy(bad, env, len);
        bad[i] ^= 0xff;
        assert_int_equal(rl_e2e_open(key, bad, len, plain, &plen), RL_E2E_E_AUTH);
    }
    assert_int_equal(rl_e2e_open(wrong, env, len, plain, &plen), RL_E2E_E_AUTH);
    memcpy(bad, env, len);
    bad[0] = 0x99;
    assert_int_equal(rl_e2e_open(key, bad, len, plain, &plen), RL_E2E_E_VERSION);
    assert_int_equal(rl_e2e_open(key, env, 5, plain, &plen), RL_E2E_E_FORMAT);
    assert_int_equal(rl_e2e_open(key, env, 0, plain, &plen), RL_E2E_E_FORMAT);
    /* Cut off the end: still long enough to parse, but the tag is gone. */
    assert_int_equal(rl_e2e_open(key, env, len - 1, plain, &plen), RL_E2E_E_AUTH);
}

static void test_fields_travel_as_base64(void **state)
{
    uint8_t key[32];
    char *b64, *plain = NULL;
    size_t len;

    rl_e2e_session_key_new(key);
    b64 = rl_e2e_seal_field(key, "messages/ses_1", "a reply", 7);
    assert_non_null(b64);
    assert_int_equal(strlen(b64) % 4, 0);
    assert_int_equal(rl_e2e_open_field(key, "messages/ses_1", b64, &plain, &len), 0);
    assert_string_equal(plain, "a reply");
    assert_int_equal(len, 7);
    free(plain);
    /* Another path is another key. */
    assert_int_equal(rl_e2e_open_field(key, "tasks/ses_1", b64, &plain, &len), RL_E2E_E_AUTH);
    assert_null(plain);
    assert_int_equal(rl_e2e_open_field(key, "messages/ses_1", "not base64!", &plain, &len), RL_E2E_E_FORMAT);
    free(b64);
    b64 = rl_e2e_seal_field(key, "messages/ses_1", "", 0);
    assert_string_equal(b64, "AA==");
    assert_int_equal(rl_e2e_open_field(key, "messages/ses_1", b64, &plain, &len), 0);
    assert_string_equal(plain, "");
    free(plain);
    free(b64);
}

/* ---- sealed boxes ----------------------------------------------------------------------------------- */

static void test_sealed_box(void **state)
{
    rl_e2e_keypair_t r, wrong;
    uint8_t session_key[32], out[64], raw[128];
    size_t len, i;
    char *a, *b;
    long rawlen;

    assert_int_equal(rl_e2e_keypair_new(&r), 0);
    assert_int_equal(rl_e2e_keypair_new(&wrong), 0);
    for (i = 0; i < 32; i++)
        session_key[i] = (uint8_t)((i * 7 + 11) & 0xff);
    a = rl_e2e_wrap(r.pub, session_key, 32);
    assert_non_null(a);
    /* [0x02][ephemeral public key 32][envelope starting 0x01]. */
    rawlen = rl_base64_decode(a, strlen(a), raw);
    assert_int_equal(rawlen, 1 + 32 + 32 + 29);
    assert_int_equal(raw[0], 0x02);
    assert_int_equal(raw[33], 0x01);
    assert_int_equal(rl_e2e_unwrap_key(r.sec, a, out), 0);
    assert_memory_equal(out, session_key, 32);
    assert_int_equal(rl_e2e_unwrap_key(wrong.sec, a, out), RL_E2E_E_AUTH);
    /* A fresh ephemeral key each time. */
    b = rl_e2e_wrap(r.pub, session_key, 32);
    assert_string_not_equal(a, b);
    free(b);
    /* Any other payload round-trips, but is not a session key. */
    b = rl_e2e_wrap(r.pub, (const uint8_t *)"hello sealed-box, recipient-only", 32);
    assert_int_equal(rl_e2e_unwrap(r.sec, b, out, sizeof(out), &len), 0);
    assert_memory_equal(out, "hello sealed-box, recipient-only", 32);
    free(b);
    b = rl_e2e_wrap(r.pub, (const uint8_t *)"\xaa\xbb", 2);
    assert_int_equal(rl_e2e_unwrap_key(r.sec, b, out), RL_E2E_E_FORMAT);
    free(b);
    /* A wrong version, a truncated box. */
    raw[0] = 0x99;
    {
        char text[256];
        rl_base64_encode(raw, (size_t)rawlen, text);
        assert_int_equal(rl_e2e_unwrap_key(r.sec, text, out), RL_E2E_E_VERSION);
        rl_base64_encode((const uint8_t[]){0x02, 0, 0}, 3, text);
        assert_int_equal(rl_e2e_unwrap_key(r.sec, text, out), RL_E2E_E_FORMAT);
        raw[0] = 0x02;
        rl_base64_encode(raw, 40, text);
        assert_int_equal(rl_e2e_unwrap_key(r.sec, text, out), RL_E2E_E_FORMAT);
    }
    free(a);
}

/* ---- decision signatures (ours) ------------------------------------------------------------------- */

static void test_decision_signature(void **state)
{
    uint8_t bsec[32], bpub[32], isec[32], ipub[32];
    rl_e2e_keypair_t other;
    char sig[RL_E2E_SIG_SIZE], sig2[RL_E2E_SIG_SIZE];

    from_hex(BRIDGE_SECRET_HEX, bsec, 32);
    from_hex(BRIDGE_PUBLIC_HEX, bpub, 32);
    from_hex(IOS_SECRET_HEX, isec, 32);
    from_hex(IOS_PUBLIC_HEX, ipub, 32);
    /* The device signs with the bridge's public key; the bridge checks with the device's. */
    assert_int_equal(rl_e2e_decision_sig(isec, bpub, "apr_1", "ses_1", "approve", NULL, "dev_1", sig), 0);
    assert_int_equal(strlen(sig), 44);
    /* Pinned, so that the web client's implementation can be checked against the same bytes. */
    assert_string_equal(sig, DECISION_SIG_VECTOR);
    assert_int_equal(rl_e2e_decision_verify(bsec, ipub, "apr_1", "ses_1", "approve", NULL, "dev_1", sig), 0);
    assert_int_equal(rl_e2e_decision_verify(bsec, ipub, "apr_1", "ses_1", "approve", "", "dev_1", sig), 0);
    /* Every signed part counts. */
    assert_int_equal(rl_e2e_decision_verify(bsec, ipub, "apr_2", "ses_1", "approve", NULL, "dev_1", sig),
                     RL_E2E_E_AUTH);
    assert_int_equal(rl_e2e_decision_verify(bsec, ipub, "apr_1", "ses_2", "approve", NULL, "dev_1", sig),
                     RL_E2E_E_AUTH);
    assert_int_equal(rl_e2e_decision_verify(bsec, ipub, "apr_1", "ses_1", "deny", NULL, "dev_1", sig), RL_E2E_E_AUTH);
    assert_int_equal(rl_e2e_decision_verify(bsec, ipub, "apr_1", "ses_1", "approve", "session", "dev_1", sig),
                     RL_E2E_E_AUTH);
    assert_int_equal(rl_e2e_decision_verify(bsec, ipub, "apr_1", "ses_1", "approve", NULL, "dev_2", sig),
                     RL_E2E_E_AUTH);
    /* Missing, malformed, or made by a device the bridge did not accept. */
    assert_int_equal(rl_e2e_decision_verify(bsec, ipub, "apr_1", "ses_1", "approve", NULL, "dev_1", NULL),
                     RL_E2E_E_AUTH);
    assert_int_equal(rl_e2e_decision_verify(bsec, ipub, "apr_1", "ses_1", "approve", NULL, "dev_1", "x"),
                     RL_E2E_E_AUTH);
    assert_int_equal(rl_e2e_keypair_new(&other), 0);
    assert_int_equal(rl_e2e_decision_sig(other.sec, bpub, "apr_1", "ses_1", "approve", NULL, "dev_1", sig2), 0);
    assert_int_equal(rl_e2e_decision_verify(bsec, ipub, "apr_1", "ses_1", "approve", NULL, "dev_1", sig2),
                     RL_E2E_E_AUTH);
}

static void test_grant_signature(void **state)
{
    uint8_t bsec[32], bpub[32], isec[32], ipub[32];
    rl_e2e_keypair_t other;
    char sig[RL_E2E_SIG_SIZE], sig2[RL_E2E_SIG_SIZE], decision[RL_E2E_SIG_SIZE];

    from_hex(BRIDGE_SECRET_HEX, bsec, 32);
    from_hex(BRIDGE_PUBLIC_HEX, bpub, 32);
    from_hex(IOS_SECRET_HEX, isec, 32);
    from_hex(IOS_PUBLIC_HEX, ipub, 32);
    assert_int_equal(rl_e2e_grant_sig(isec, bpub, "ses_1", GRANT_WRAP, "dev_1", sig), 0);
    /* The same bytes as the web client's grantSig (and as Node's own HKDF and HMAC there). */
    assert_string_equal(sig, GRANT_SIG_VECTOR);
    assert_int_equal(rl_e2e_grant_verify(bsec, ipub, "ses_1", GRANT_WRAP, "dev_1", sig), 0);
    /* Every signed part counts: the session, the wrap's text, the wrapping device. */
    assert_int_equal(rl_e2e_grant_verify(bsec, ipub, "ses_2", GRANT_WRAP, "dev_1", sig), RL_E2E_E_AUTH);
    assert_int_equal(rl_e2e_grant_verify(bsec, ipub, "ses_1", "AhEiM0RVZneImaq7zN3u/x==", "dev_1", sig), RL_E2E_E_AUTH);
    assert_int_equal(rl_e2e_grant_verify(bsec, ipub, "ses_1", GRANT_WRAP, "dev_2", sig), RL_E2E_E_AUTH);
    /* Missing, malformed, a key of another device, NULL parts. */
    assert_int_equal(rl_e2e_grant_verify(bsec, ipub, "ses_1", GRANT_WRAP, "dev_1", NULL), RL_E2E_E_AUTH);
    assert_int_equal(rl_e2e_grant_verify(bsec, ipub, "ses_1", GRANT_WRAP, "dev_1", ""), RL_E2E_E_AUTH);
    assert_int_equal(rl_e2e_grant_verify(bsec, ipub, "ses_1", NULL, "dev_1", sig), RL_E2E_E_AUTH);
    assert_int_equal(rl_e2e_grant_sig(isec, bpub, "ses_1", NULL, "dev_1", sig2), RL_E2E_E_FORMAT);
    assert_int_equal(rl_e2e_keypair_new(&other), 0);
    assert_int_equal(rl_e2e_grant_sig(other.sec, bpub, "ses_1", GRANT_WRAP, "dev_1", sig2), 0);
    assert_int_equal(rl_e2e_grant_verify(bsec, ipub, "ses_1", GRANT_WRAP, "dev_1", sig2), RL_E2E_E_AUTH);
    /* Its own key: a decision signature over the same strings is not a grant signature. */
    assert_int_equal(rl_e2e_decision_sig(isec, bpub, "ses_1", GRANT_WRAP, "dev_1", NULL, "dev_1", decision), 0);
    assert_string_not_equal(decision, sig);
}

/* The contract's vector (docs/api.md, "Enrolment codes"; web/app's enrolProof is held to the same bytes). */
#define ENROL_PUB   "1111111111111111111111111111111111111111111111111111111111111111"
#define ENROL_PROOF "TBQSpeUbhle8y0ZdY6Lc4i9JROohoQzGxa64frFmlMM="

static void test_enrolment_code_and_proof(void **state)
{
    uint8_t key[32], again[32], other[32];
    char proof[RL_E2E_SIG_SIZE], code[RL_E2E_ENROL_TEXT];
    size_t i;

    (void)state;
    assert_int_equal(rl_e2e_enrol_key("ABCD-EFGH-JKLM-NPQR-ST23", key), 0);
    assert_int_equal(rl_e2e_enrol_proof(key, "dev_BRIDGE0000000000000", "dev_PHONE00000000000000", ENROL_PUB, proof),
                     0);
    assert_string_equal(proof, ENROL_PROOF);
    assert_int_equal(
        rl_e2e_enrol_verify(key, "dev_BRIDGE0000000000000", "dev_PHONE00000000000000", ENROL_PUB, ENROL_PROOF), 0);
    /* Typed as a person would: lower case, spaces, no dashes. */
    assert_int_equal(rl_e2e_enrol_key(" abcd efghjklm-npqr st23\n", again), 0);
    assert_memory_equal(key, again, 32);
    /* Every bound part counts: the bridge, the device, its key. */
    assert_int_equal(
        rl_e2e_enrol_verify(key, "dev_BRIDGE0000000000001", "dev_PHONE00000000000000", ENROL_PUB, ENROL_PROOF),
        RL_E2E_E_AUTH);
    assert_int_equal(
        rl_e2e_enrol_verify(key, "dev_BRIDGE0000000000000", "dev_PHONE00000000000001", ENROL_PUB, ENROL_PROOF),
        RL_E2E_E_AUTH);
    assert_int_equal(rl_e2e_enrol_verify(key, "dev_BRIDGE0000000000000", "dev_PHONE00000000000000",
                                         "2111111111111111111111111111111111111111111111111111111111111111",
                                         ENROL_PROOF),
                     RL_E2E_E_AUTH);
    assert_int_equal(rl_e2e_enrol_verify(key, "dev_BRIDGE0000000000000", "dev_PHONE00000000000000", ENROL_PUB, NULL),
                     RL_E2E_E_AUTH);
    assert_int_equal(rl_e2e_enrol_verify(key, "dev_BRIDGE0000000000000", NULL, ENROL_PUB, ENROL_PROOF), RL_E2E_E_AUTH);
    /* Another code, a letter the alphabet leaves out (I, O, 0, 1), too short, too long, nothing. */
    assert_int_equal(rl_e2e_enrol_key("ABCD-EFGH-JKLM-NPQR-ST24", other), 0);
    assert_int_equal(
        rl_e2e_enrol_verify(other, "dev_BRIDGE0000000000000", "dev_PHONE00000000000000", ENROL_PUB, ENROL_PROOF),
        RL_E2E_E_AUTH);
    assert_int_equal(rl_e2e_enrol_key("ABCD-EFGH-JKLM-NPQR-ST2I", other), RL_E2E_E_FORMAT);
    assert_int_equal(rl_e2e_enrol_key("ABCD-EFGH-JKLM-NPQR-ST20", other), RL_E2E_E_FORMAT);
    assert_int_equal(rl_e2e_enrol_key("ABCD-EFGH-JKLM-NPQR-ST2", other), RL_E2E_E_FORMAT);
    assert_int_equal(rl_e2e_enrol_key("ABCD-EFGH-JKLM-NPQR-ST234", other), RL_E2E_E_FORMAT);
    assert_int_equal(rl_e2e_enrol_key("", other), RL_E2E_E_FORMAT);
    assert_int_equal(rl_e2e_enrol_key(NULL, other), RL_E2E_E_FORMAT);
    /* A new code has the shown shape and is a code. */
    rl_e2e_enrol_new(code);
    assert_int_equal(strlen(code), RL_E2E_ENROL_TEXT - 1);
    for (i = 0; i < strlen(code); i++)
        assert_true((i % 5 == 4) ? code[i] == '-' : strchr("ABCDEFGHJKLMNPQRSTUVWXYZ23456789", code[i]) != NULL);
    assert_int_equal(rl_e2e_enrol_key(code, other), 0);
}

/* ---- key files ---------------------------------------------------------------------------------------- */

static char dir[64];

static int make_dir(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/rl_e2e_test.XXXXXX");
    assert_non_null(mkdtemp(dir));
    return rl_e2e_init();
}

static int remove_dir(void **state)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_device_key_file(void **state)
{
    char path[128];
    rl_device_key_t a, b;
    struct stat st;

    snprintf(path, sizeof(path), "%s/device.json", dir);
    assert_int_equal(rl_device_key_load(path, 0, &a), RL_E2E_E_IO);
    assert_int_equal(rl_device_key_load(path, 1, &a), 1);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(rl_device_key_load(path, 1, &b), 0);
    assert_memory_equal(a.kp.sec, b.kp.sec, 32);
    assert_memory_equal(a.kp.pub, b.kp.pub, 32);
    assert_string_equal(b.device_id, "");
    snprintf(a.device_id, sizeof(a.device_id), "dev_abc");
    assert_int_equal(rl_device_key_save(path, &a), 0);
    assert_int_equal(rl_device_key_load(path, 0, &b), 0);
    assert_string_equal(b.device_id, "dev_abc");
    /* Readable by others: not trusted. */
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(rl_device_key_load(path, 1, &b), RL_E2E_E_FORMAT);
    rl_device_key_wipe(&a);
    rl_device_key_wipe(&b);
}

/* The client side of "Signed grants": only a signed grant picks the key a client seals with. */
static void test_granted_keys_by_trust(void **state)
{
    char path[128];
    uint8_t real[32], injected[32], peer[32], next[32], first[32];
    rl_keystore_t *ks;
    char *ct, *plain;

    (void)state;
    snprintf(path, sizeof(path), "%s/granted-keys.json", dir);
    unlink(path);
    ks = rl_keystore_load(path);
    assert_non_null(ks);
    rl_e2e_session_key_new(real);
    rl_e2e_session_key_new(injected);
    rl_e2e_session_key_new(peer);
    rl_e2e_session_key_new(next);
    rl_e2e_session_key_new(first);
    /* A forged grant is never taken, not even for a session with no key. */
    assert_int_equal(rl_keystore_take_grant(ks, "ses_1", injected, RL_GRANT_FORGED), RL_E2E_E_AUTH);
    assert_null(rl_keystore_key(ks, "ses_1", 0));
    /* First key wins: an unsigned grant (the authors' bridge) for a session with none. */
    assert_int_equal(rl_keystore_take_grant(ks, "ses_1", real, RL_GRANT_UNSIGNED), 1);
    assert_int_equal(rl_keystore_take_grant(ks, "ses_1", real, RL_GRANT_UNSIGNED), 0);
    /* The relay's own key, unsigned or forged, neither replaces nor joins it. */
    assert_int_equal(rl_keystore_take_grant(ks, "ses_1", injected, RL_GRANT_UNSIGNED), RL_E2E_E_AUTH);
    assert_int_equal(rl_keystore_take_grant(ks, "ses_1", injected, RL_GRANT_FORGED), RL_E2E_E_AUTH);
    assert_memory_equal(rl_keystore_key(ks, "ses_1", 0), real, 32);
    assert_null(rl_keystore_key(ks, "ses_1", 1));
    /* Another phone's rotation: kept to read with, and what this client seals next still opens with the real key. */
    assert_int_equal(rl_keystore_take_grant(ks, "ses_1", peer, RL_GRANT_PEER), 2);
    assert_memory_equal(rl_keystore_key(ks, "ses_1", 0), real, 32);
    assert_memory_equal(rl_keystore_key(ks, "ses_1", 1), peer, 32);
    ct = rl_keystore_seal_field(ks, "ses_1", "messages/ses_1", "hi", 2);
    assert_non_null(ct);
    assert_int_equal(rl_e2e_open_field(peer, "messages/ses_1", ct, &plain, NULL), RL_E2E_E_AUTH);
    assert_int_equal(rl_e2e_open_field(injected, "messages/ses_1", ct, &plain, NULL), RL_E2E_E_AUTH);
    assert_int_equal(rl_e2e_open_field(real, "messages/ses_1", ct, &plain, NULL), 0);
    assert_string_equal(plain, "hi");
    free(plain);
    free(ct);
    /* A signed grant (the confirmed bridge's rotation) becomes the sealing key. */
    assert_int_equal(rl_keystore_take_grant(ks, "ses_1", next, RL_GRANT_SIGNED), 1);
    assert_memory_equal(rl_keystore_key(ks, "ses_1", 0), next, 32);
    /* A peer grant for a session with no key yet is its first key. */
    assert_int_equal(rl_keystore_take_grant(ks, "ses_2", first, RL_GRANT_PEER), 1);
    assert_memory_equal(rl_keystore_key(ks, "ses_2", 0), first, 32);
    rl_keystore_free(ks);
    /* What was kept survives a reload, in its order. */
    ks = rl_keystore_load(path);
    assert_non_null(ks);
    assert_memory_equal(rl_keystore_key(ks, "ses_1", 0), next, 32);
    assert_memory_equal(rl_keystore_key(ks, "ses_1", 1), real, 32);
    assert_memory_equal(rl_keystore_key(ks, "ses_1", 2), peer, 32);
    assert_null(rl_keystore_key(ks, "ses_1", 3));
    rl_keystore_free(ks);
}

static void test_session_key_store_keeps_old_keys(void **state)
{
    char path[128], tmp[140];
    uint8_t k1[32], k2[32];
    rl_keystore_t *ks;
    char *old_ct, *new_ct, *plain;
    struct stat st;

    snprintf(path, sizeof(path), "%s/session-keys.json", dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    ks = rl_keystore_load(path);
    assert_non_null(ks);
    assert_int_equal(rl_keystore_count(ks), 0);
    assert_null(rl_keystore_seal_field(ks, "ses_1", "messages/ses_1", "x", 1));
    rl_e2e_session_key_new(k1);
    rl_e2e_session_key_new(k2);
    assert_int_equal(rl_keystore_add(ks, "ses_1", k1), 1);
    assert_int_equal(rl_keystore_add(ks, "ses_1", k1), 0);
    old_ct = rl_keystore_seal_field(ks, "ses_1", "messages/ses_1", "before", 6);
    /* A rotation: the new key seals, the old one still opens what it sealed. */
    assert_int_equal(rl_keystore_add(ks, "ses_1", k2), 1);
    assert_memory_equal(rl_keystore_key(ks, "ses_1", 0), k2, 32);
    assert_memory_equal(rl_keystore_key(ks, "ses_1", 1), k1, 32);
    assert_null(rl_keystore_key(ks, "ses_1", 2));
    new_ct = rl_keystore_seal_field(ks, "ses_1", "messages/ses_1", "after", 5);
    assert_int_equal(rl_e2e_open_field(k1, "messages/ses_1", new_ct, &plain, NULL), RL_E2E_E_AUTH);
    rl_keystore_free(ks);

    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_not_equal(access(tmp, F_OK), 0);
    ks = rl_keystore_load(path);
    assert_non_null(ks);
    assert_int_equal(rl_keystore_count(ks), 1);
    assert_string_equal(rl_keystore_session(ks, 0), "ses_1");
    assert_memory_equal(rl_keystore_key(ks, "ses_1", 0), k2, 32);
    assert_int_equal(rl_keystore_open_field(ks, "ses_1", "messages/ses_1", old_ct, &plain, NULL), 0);
    assert_string_equal(plain, "before");
    free(plain);
    assert_int_equal(rl_keystore_open_field(ks, "ses_1", "messages/ses_1", new_ct, &plain, NULL), 0);
    assert_string_equal(plain, "after");
    free(plain);
    assert_int_equal(rl_keystore_open_field(ks, "ses_2", "messages/ses_2", new_ct, &plain, NULL), RL_E2E_E_AUTH);
    assert_int_equal(rl_keystore_forget(ks, "ses_1"), 0);
    assert_null(rl_keystore_key(ks, "ses_1", 0));
    rl_keystore_free(ks);
    free(old_ct);
    free(new_ct);

    /* Not a store, or open to others: refused rather than overwritten. */
    {
        FILE *f = fopen(path, "w");
        fputs("[1,2]", f);
        fclose(f);
        chmod(path, 0600);
        assert_null(rl_keystore_load(path));
        chmod(path, 0640);
        assert_null(rl_keystore_load(path));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blob_key_vector),
        cmocka_unit_test(test_blind_index_vectors),
        cmocka_unit_test(test_public_keys_from_the_fixed_secrets),
        cmocka_unit_test(test_install_key_vector_pins_box_beforenm),
        cmocka_unit_test(test_sas_vector_and_emoji),
        cmocka_unit_test(test_envelope_round_trip_and_layout),
        cmocka_unit_test(test_envelope_sentinel),
        cmocka_unit_test(test_envelope_refuses_tampering_wrong_keys_and_truncation),
        cmocka_unit_test(test_fields_travel_as_base64),
        cmocka_unit_test(test_sealed_box),
        cmocka_unit_test(test_decision_signature),
        cmocka_unit_test(test_grant_signature),
    };
    const struct CMUnitTest files[] = {
        cmocka_unit_test(test_enrolment_code_and_proof),
        cmocka_unit_test(test_device_key_file),
        cmocka_unit_test(test_session_key_store_keeps_old_keys),
        cmocka_unit_test(test_granted_keys_by_trust),
    };
    int failed = cmocka_run_group_tests(tests, setup, NULL);

    return failed + cmocka_run_group_tests(files, make_dir, remove_dir);
}
