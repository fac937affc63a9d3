/*
 * Bridge tokens (spec "Authentication" rule 1):
 *   inst_<16 base62>:s_<live|test>_<32 or more base62>, at least 50 characters.
 * Only a SHA-256 of the secret part is ever stored; comparisons are constant
 * time. Pure functions, any thread.
 */
#ifndef RL_RELAY_TOKEN_H
#define RL_RELAY_TOKEN_H

#include <stddef.h>

#define RL_INSTALLATION_ID_LEN 21  /* "inst_" + 16 */
#define RL_TOKEN_SECRET_CHARS  40  /* base62 characters we mint; the spec asks for 32 or more */
#define RL_TOKEN_MAX           256 /* longer input is refused before any work */
#define RL_TOKEN_HASH_HEX      64

#define RL_TOKEN_MAC_LEN       16

typedef struct rl_bridge_token {
    char installation_id[RL_INSTALLATION_ID_LEN + 1];
    char env[5]; /* "live" or "test" */
    /*
     * SipHash-2-4 (128 bits) of the part after the colon under a key this
     * process drew at random: a cheap memo of a secret already checked
     * against its stored SHA-256 (rl_bridge_token_mac_equal). It is no
     * stored hash and means nothing to another process.
     */
    unsigned char mac[RL_TOKEN_MAC_LEN];
    /* Hex SHA-256 of the part after the colon: "" until rl_bridge_token_hash. */
    char secret_hash[RL_TOKEN_HASH_HEX + 1];
    /* The part after the colon, in the parsed text (NULL once hashed): valid while that text is. */
    const char *secret;
    size_t secret_len;
} rl_bridge_token_t;

/* Returns 1 when id is "inst_" followed by exactly 16 base62 characters. */
int rl_installation_id_is_valid(const char *id, size_t len);
/*
 * Parses a presented token and takes its mac; 0, or -1 when malformed. out
 * points into token until rl_bridge_token_hash.
 */
int rl_bridge_token_parse(const char *token, size_t len, rl_bridge_token_t *out);
/*
 * Fills token->secret_hash (once) and lets go of the parsed text. 0, or -1
 * when the text is gone unhashed.
 */
int rl_bridge_token_hash(rl_bridge_token_t *token);
/* Constant-time comparison of a token's mac with a remembered one; 1 when equal. */
int rl_bridge_token_mac_equal(const rl_bridge_token_t *token, const unsigned char mac[RL_TOKEN_MAC_LEN]);
/*
 * Mints a new secret for an installation: writes the whole token into out
 * (outsz >= RL_TOKEN_MAX) and the hex hash of its secret into hash_out
 * (65 bytes). env is "live" or "test".
 */
void rl_bridge_token_mint(const char *installation_id, const char *env, char *out, size_t outsz, char *hash_out);
/* Constant-time comparison of two hex hashes of equal length; 1 when equal. */
int rl_token_hash_equal(const char *a, const char *b);
/* Hex SHA-256 of arbitrary bytes into out (65 bytes); for secrets such as poll tokens and codes. */
void rl_token_hash(const void *bytes, size_t len, char *out);
/*
 * Returns 1 when a URL path or query appears to carry a credential: a bridge
 * token, a JWT, or a non-empty query parameter named like a credential
 * (token, access_token, ...), as written or after percent-decoding (up to
 * three layers of it, so %2E, %65yJ and %252E are all seen through). Used for
 * 400 invalid_token_location. Returns 1 too when memory runs out.
 */
int rl_url_carries_token(const char *url, size_t len);

#endif
