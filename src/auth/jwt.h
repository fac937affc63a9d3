/*
 * User tokens: JWKS parsing, compact JWS verification and the embedded issuer.
 *
 * Users authenticate with a JWT bearer token signed by an issuer the relay is
 * configured to trust. An external identity provider and the embedded issuer
 * (the relay's own Ed25519 key, created in the data folder on first start) go
 * through the same verifier, rl_jwt_verify, over the same rl_jwks_t.
 *
 * Accepted algorithms are RS256, ES256 and EdDSA (Ed25519) and nothing else:
 * no "none", no HMAC. An algorithm only ever verifies with a key of its own
 * type. Nothing here logs or returns token material.
 */
#ifndef RL_RELAY_JWT_H
#define RL_RELAY_JWT_H

#include <stddef.h>
#include <stdint.h>

/* Tokens longer than this are refused before anything is decoded. */
#define RL_JWT_TOKEN_MAX 8192
/* JWKS documents longer than this are refused (files and HTTP bodies alike). */
#define RL_JWKS_DOC_MAX (1024 * 1024)
/* RSA keys outside these modulus sizes are skipped when a JWKS is parsed. */
#define RL_JWKS_RSA_MIN_BITS 2048
#define RL_JWKS_RSA_MAX_BITS 8192

/* An immutable set of public verification keys, reference counted. */
typedef struct rl_jwks rl_jwks_t;

/*
 * Parses a JWKS document ({"keys":[...]}) of len bytes; json need not be
 * NUL-terminated. Usable keys: kty RSA (n, e; 2048..8192 bits), kty EC crv
 * P-256 (x, y; the point must be on the curve) and kty OKP crv Ed25519 (x).
 * A key is skipped (logged at debug level) when its kty or crv is
 * unsupported, its "use" is present and not "sig", its "key_ops" is present
 * without "verify", its "alg" is present and not the one algorithm its type
 * can verify, its "kid" is present and not a string of at most 256 bytes, or
 * its material is malformed. Returns 0 and *out with one reference owned by
 * the caller, or -1 (malformed JSON, duplicate member names, "keys" missing
 * or holding more than 64 entries, or zero usable keys). Any thread.
 */
int rl_jwks_parse(const char *json, size_t len, rl_jwks_t **out);
/* Adds a reference and returns keys (NULL passes through). Any thread. */
rl_jwks_t *rl_jwks_ref(rl_jwks_t *keys);
/* Drops a reference; the set is freed with the last one. NULL is ignored. Any thread. */
void rl_jwks_unref(rl_jwks_t *keys);
/* Number of usable keys in the set (at least 1). Any thread. */
size_t rl_jwks_count(const rl_jwks_t *keys);

typedef struct rl_jwt_policy {
    const char *issuer;   /* required match of "iss"; NULL refuses every token */
    const char *audience; /* required match of "aud" (string, or array containing it); NULL refuses all */
    int64_t leeway_s;     /* clock skew allowed on exp/nbf/iat, e.g. 30; clamped to 0..3600 */
} rl_jwt_policy_t;

#define RL_JWT_SUB_MAX 255
typedef struct rl_jwt_claims {
    char sub[RL_JWT_SUB_MAX + 1];
    int64_t exp, iat, nbf; /* 0 when absent */
} rl_jwt_claims_t;

/*
 * Verifies a compact JWS of len bytes (need not be NUL-terminated) against
 * keys and policy at time now_s (epoch seconds).
 *
 * Returns 0 and fills *claims, or -1 with *claims zeroed and *why set to a
 * static, log-safe reason:
 *   "too_long"         longer than RL_JWT_TOKEN_MAX
 *   "malformed"        not three canonical unpadded base64url segments, header
 *                      or payload not a JSON object (duplicate names refused),
 *                      header without a string "alg", a claim of the wrong type
 *   "unsupported_alg"  alg other than RS256, ES256, EdDSA (including "none", HS*)
 *   "unsupported_crit" the header has "crit" (no extension is understood)
 *   "unknown_kid"      the header's kid names no key in the set
 *   "key_mismatch"     the kid names a key whose type or alg cannot verify this alg
 *   "no_key"           no kid, and no key in the set fits the alg
 *   "bad_signature"    no candidate key verifies the signature
 *   "missing_exp"      no "exp" claim
 *   "expired"          now - leeway >= exp
 *   "not_yet_valid"    nbf > now + leeway
 *   "iat_in_future"    iat > now + leeway
 *   "wrong_issuer"     iss absent or not equal to policy->issuer
 *   "wrong_audience"   aud absent, or neither equal to nor an array containing policy->audience
 *   "missing_sub"      sub absent, not a string, or empty
 *   "bad_sub"          sub longer than RL_JWT_SUB_MAX or not printable ASCII without spaces
 *                      (0x21..0x7e; '"' and '\\' are accepted and must be encoded by whoever shows them)
 * The key is chosen by the header's "kid" when present, else every key whose
 * type fits the alg is tried. The signature is checked before any claim.
 * Never logs. Any thread; keys is only read.
 */
int rl_jwt_verify(const rl_jwks_t *keys, const rl_jwt_policy_t *policy, const char *token, size_t len, int64_t now_s,
                  rl_jwt_claims_t *claims, const char **why);

/* The relay's own token issuer: one Ed25519 key in the data folder. Immutable once open. */
typedef struct rl_jwt_issuer rl_jwt_issuer_t;

/*
 * Loads <dir>/issuer.key (PEM PKCS#8 Ed25519), creating it with mode 0600 on
 * first use; dir must exist. Creation is atomic (temporary file, then link),
 * so concurrent first starts end with one key. A key file readable or
 * writable by group or others, not a regular file, encrypted, or not Ed25519
 * is refused. Returns 0 and *out (caller frees with rl_jwt_issuer_free), or -1
 * with the cause logged (path and strerror, never key material). Startup
 * thread.
 */
int rl_jwt_issuer_open(const char *dir, rl_jwt_issuer_t **out);
/* Frees the issuer and its private key. NULL is ignored. */
void rl_jwt_issuer_free(rl_jwt_issuer_t *issuer);
/*
 * JWKS holding the issuer's public key (kid = RFC 7638 thumbprint, use "sig",
 * alg "EdDSA"), built with rl_jwks_parse from rl_jwt_issuer_jwks_json, so it
 * is verified exactly like an external provider's set. Returns a new
 * reference the caller unrefs. Any thread.
 */
rl_jwks_t *rl_jwt_issuer_jwks(rl_jwt_issuer_t *issuer);
/* JWKS JSON text of the public key (for publishing); caller frees with free(). NULL on allocation failure. */
char *rl_jwt_issuer_jwks_json(rl_jwt_issuer_t *issuer);
/* The key's kid (RFC 7638 thumbprint, base64url); owned by the issuer. */
const char *rl_jwt_issuer_kid(const rl_jwt_issuer_t *issuer);
/*
 * Signs {"iss","aud","sub","iat","exp"} with exp = iat + ttl_s, header
 * {"alg":"EdDSA","typ":"JWT","kid":...}. Returns a malloc'd compact token
 * (caller frees), or NULL when iss or aud is NULL or empty, sub would be
 * refused by rl_jwt_verify, ttl_s <= 0, exp overflows, or on allocation
 * failure. Any thread.
 */
char *rl_jwt_issuer_sign(rl_jwt_issuer_t *issuer, const char *iss, const char *aud, const char *sub, int64_t iat,
                         int64_t ttl_s);

#endif
