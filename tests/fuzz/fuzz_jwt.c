/*
 * Fuzz target for src/auth/jwt.c: every input is verified as a token
 * against a fixed key set (one key of each algorithm, with the corpus's valid
 * tokens signed by their private halves), and parsed as a JWKS; a set that
 * parses is then used to verify the fixed valid tokens. The clock is fixed,
 * so runs are deterministic.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "auth/jwt.h"

#define FUZZ_NOW 1700000000

/* Public halves of the keys that signed tests/fuzz/corpus/jwt/valid_*. */
static const char fuzz_jwks[] =
    "{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"rsa1\",\"use\":\"sig\",\"alg\":\"RS256\",\"n\":\"t71mvN5cHMTrg"
    "3ZDA8xfj02010Qs0IvsiLW69GUOQkKvApuVs2ioJdT9qyfSUH6gmc6b_TGMbpnYWkINhMpSK_CgTlkZNGFAH2n2DPvq_akLPeeOf"
    "iG5gEE67mjNrc3Hw_z2j8-ACIcacS6kKHamrdVmlZHUSlboLSFMgCCX-wozAO0R5lKUw80o61ZIZ3vg1-xyhk4eAp9rdGAbnDts-"
    "aGtsXLjnEcuzSBtrzF1UlWboHSahNj31RRIikHR-mJVTvk8AqC_z9FZ5I2VRjwVdq3Rqw3fZpKe26JLorNsASRqT7E38qcS5PvPN"
    "cDexOPeGQibcf0-6gvcLe7u5Nq7ew\",\"e\":\"AQAB\"},{\"kty\":\"EC\",\"kid\":\"ec1\",\"crv\":\"P-256\",\""
    "x\":\"YHbtm0w1gJS5I1WPHbOsf759lt79xzANQ7NLgTrbLew\",\"y\":\"bjURWemY05x9Lv-rM5tNFmzamdquh5_rFqfNAia-"
    "15k\"},{\"kty\":\"OKP\",\"kid\":\"ed1\",\"crv\":\"Ed25519\",\"x\":\"eTLid95AQ1RnookXcvYPLJhwIL-r4Fr3"
    "AO1uP0pyGd4\"}]}";

static const char *const fuzz_tokens[] = {
    "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCIsImtpZCI6InJzYTEifQ.eyJpc3MiOiJodHRwczovL2lkcC5mdXp6IiwiYXVkIjoic"
    "mVsYXkiLCJzdWIiOiJmdXp6LXVzZXIiLCJpYXQiOjE3MDAwMDAwMDAsImV4cCI6NDEwMjQ0NDgwMH0.CMh9KnOtd346H98VL5ANi"
    "6X0WQ4y1sUkWPWWgBgrOMg_anpRPrA4pGzq6H8Wxsw36UmcJknrnGGX017TCtf6tkyecjyps76b6eviXvehQGtPpeS81xvlh8F_0"
    "NIMy6meve3rKSWYmJC1nIPYHwwhn_lb2_FHximmsiXGAnVqcGBoCiYvpSLBOh4TGQTksjUC-j_kfceAw7unVfh96wauYHCe36s0Y"
    "wld7mM44GUmjT674TYYy7NLsEoztFygIZ8Ibn187Ej7jsuVlBHcxkvjtgnoF78R0sdORdm11EBjLUBJyGQMOogz1KP4PddDLGSb7"
    "CMrLP30IKPg2VMjkhqNGA",
    "eyJhbGciOiJFUzI1NiIsImtpZCI6ImVjMSJ9.eyJpc3MiOiJodHRwczovL2lkcC5mdXp6IiwiYXVkIjoicmVsYXkiLCJzdWIiOiJ"
    "mdXp6LXVzZXIiLCJpYXQiOjE3MDAwMDAwMDAsImV4cCI6NDEwMjQ0NDgwMH0.z4mY44hxwdvv8nOgoYv7xlu_kk0AJb2hQph6YoR"
    "Yhc8JAzH6HWLwGgacMllPC5mZEfrpVBWEtI-vJXEaJPbmaQ",
    "eyJhbGciOiJFZERTQSIsImtpZCI6ImVkMSJ9.eyJpc3MiOiJodHRwczovL2lkcC5mdXp6IiwiYXVkIjoicmVsYXkiLCJzdWIiOiJ"
    "mdXp6LXVzZXIiLCJpYXQiOjE3MDAwMDAwMDAsImV4cCI6NDEwMjQ0NDgwMH0.uI_vkESiQVE49GOXRSYoKv5tapVSyLLmYrLQitT"
    "kGZ8vY-bQ43ngGUASsWWym1QsWmTyC4LLXWDr-6N_Xbc7Bw",
};

static const rl_jwt_policy_t fuzz_policy = {"https://idp.fuzz", "relay", 30};

/* Checks what every caller relies on; a violation aborts so that the fuzzer reports it. */
static int verify_checked(const rl_jwks_t *keys, const char *token, size_t len)
{
    rl_jwt_claims_t claims;
    const char *why = NULL;
    int result = rl_jwt_verify(keys, &fuzz_policy, token, len, FUZZ_NOW, &claims, &why);
    size_t i, sub_len = strnlen(claims.sub, sizeof(claims.sub));

    if (result == 0) {
        if (why != NULL || sub_len == 0 || sub_len > RL_JWT_SUB_MAX || claims.exp <= FUZZ_NOW - 30)
            abort();
        for (i = 0; i < sub_len; ++i) {
            if ((unsigned char)claims.sub[i] <= 0x20 || (unsigned char)claims.sub[i] >= 0x7f)
                abort();
        }
    } else if (result != -1 || why == NULL || sub_len != 0 || claims.exp != 0) {
        abort();
    }
    return result;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static rl_jwks_t *keys;
    rl_jwks_t *parsed;
    size_t i;

    if (keys == NULL) {
        rl_log_set_level(RL_LOG_ERROR);
        if (rl_jwks_parse(fuzz_jwks, strlen(fuzz_jwks), &keys) != 0 || rl_jwks_count(keys) != 3)
            abort();
        for (i = 0; i < sizeof(fuzz_tokens) / sizeof(fuzz_tokens[0]); ++i) {
            if (verify_checked(keys, fuzz_tokens[i], strlen(fuzz_tokens[i])) != 0)
                abort();
        }
    }
    verify_checked(keys, (const char *)data, size);
    if (rl_jwks_parse((const char *)data, size, &parsed) == 0) {
        if (rl_jwks_count(parsed) == 0)
            abort();
        for (i = 0; i < sizeof(fuzz_tokens) / sizeof(fuzz_tokens[0]); ++i)
            verify_checked(parsed, fuzz_tokens[i], strlen(fuzz_tokens[i]));
        rl_jwks_unref(parsed);
    }
    return 0;
}
