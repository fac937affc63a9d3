/*
 * End-to-end encryption on the protocol authors' wire (docs/api.md,
 * "Encrypted sessions"): the primitives relay-bridge and relay share.
 * relayd never links this: it only stores what these functions produce.
 *
 * Layouts (byte-exact with the authors' bridge, whose test vectors are in
 * tests/unit/e2e/test_e2e.c):
 *   envelope   0x01 | nonce(12) | AES-256-GCM ciphertext | tag(16), or the
 *              single byte 0x00 for an empty plaintext;
 *   wrap       0x02 | ephemeral X25519 public key(32) | envelope, the
 *              envelope keyed by HKDF(crypto_box_beforenm(...), "sophon/v1/sealed-box");
 *   blob key   HKDF-SHA256(session key, no salt, "sophon/v1/blob/" + path);
 *   blind idx  HMAC-SHA256(HKDF(session key, "sophon/v1/blind-index"), scope (0xFF input)*)[0..16], base64url;
 *   SAS        HKDF(crypto_box_beforenm(their pub, my secret), "sophon/v1/sas", 4 bytes), 4 emoji;
 *   decision   ours: HMAC-SHA256 under HKDF(crypto_box_beforenm(...), "relay/v1/decision"), docs/api.md;
 *   grant      ours: the same under "relay/v1/grant", over a wrap a device made for a bridge;
 *   enrolment  ours: HMAC-SHA256 under HKDF(a one-time code shown by the bridge, "relay/v1/enrol")
 *              over a client device's key, the evidence the relay cannot make.
 *
 * Every function is pure apart from the random nonces and key pairs, and
 * safe on any thread once rl_e2e_init() returned. Keys are never logged;
 * callers wipe theirs with rl_e2e_wipe().
 */
#ifndef RL_E2E_E2E_H
#define RL_E2E_E2E_H

#include <stddef.h>
#include <stdint.h>

#define RL_E2E_KEY_LEN        32 /* session keys, blob keys, X25519 keys */
#define RL_E2E_NONCE_LEN      12
#define RL_E2E_TAG_LEN        16
#define RL_E2E_OVERHEAD       (1 + RL_E2E_NONCE_LEN + RL_E2E_TAG_LEN)
#define RL_E2E_WRAP_OVERHEAD  (1 + RL_E2E_KEY_LEN + RL_E2E_OVERHEAD)
#define RL_E2E_SAS_LEN        4
#define RL_E2E_BLIND_IDX_SIZE 23 /* 16 bytes in base64url, and the NUL */
#define RL_E2E_SIG_SIZE       45 /* 32 bytes in standard base64, and the NUL */
#define RL_E2E_PUBHEX_SIZE    65 /* a public key in lowercase hex, and the NUL */
#define RL_E2E_SAS_TEXT_SIZE  64 /* 4 emoji of up to 4 UTF-8 bytes each, 3 spaces, the NUL */
#define RL_E2E_ENROL_LEN      20 /* an enrolment code's characters: 100 bits */
#define RL_E2E_ENROL_TEXT     25 /* as shown, 5 groups of 4 joined by '-', and the NUL */

enum {
    RL_E2E_E_FORMAT = -1,  /* truncated, not base64, wrong length */
    RL_E2E_E_VERSION = -2, /* a first byte this code does not know */
    RL_E2E_E_AUTH = -3,    /* wrong key or altered bytes (GCM said no): indistinguishable by design */
    RL_E2E_E_CRYPTO = -4,  /* the library failed (out of memory, bad public key) */
    RL_E2E_E_IO = -5,      /* a key file could not be read or written */
};

typedef struct rl_e2e_keypair {
    uint8_t pub[RL_E2E_KEY_LEN];
    uint8_t sec[RL_E2E_KEY_LEN];
} rl_e2e_keypair_t;

/* Initialises libsodium. 0, or -1 when it cannot (no entropy): no key can be made then. Call once, early. */
int rl_e2e_init(void);

/* Zeroes len bytes in a way the compiler keeps (sodium_memzero). */
void rl_e2e_wipe(void *p, size_t len);

/* A fresh X25519 key pair. 0, or RL_E2E_E_CRYPTO. */
int rl_e2e_keypair_new(rl_e2e_keypair_t *kp);
/* The key pair of a secret key (its public half computed): for key files and test vectors. */
int rl_e2e_keypair_from_secret(rl_e2e_keypair_t *kp, const uint8_t sec[RL_E2E_KEY_LEN]);
/* 32 random bytes: a fresh session key. */
void rl_e2e_session_key_new(uint8_t key[RL_E2E_KEY_LEN]);

/*
 * Seals plain under key into out, which must hold len + RL_E2E_OVERHEAD
 * bytes; *outlen gets 1 for an empty plaintext (the sentinel 0x00), len +
 * RL_E2E_OVERHEAD otherwise. A fresh random nonce each call. 0 or RL_E2E_E_CRYPTO.
 */
int rl_e2e_seal(const uint8_t key[RL_E2E_KEY_LEN], const void *plain, size_t len, uint8_t *out, size_t *outlen);
/*
 * Opens an envelope into out (len bytes suffice); *outlen gets the plaintext
 * length (0 for the sentinel). 0, RL_E2E_E_FORMAT, RL_E2E_E_VERSION or RL_E2E_E_AUTH.
 */
int rl_e2e_open(const uint8_t key[RL_E2E_KEY_LEN], const uint8_t *env, size_t len, uint8_t *out, size_t *outlen);

/* HKDF-SHA256(ikm, no salt, info, outlen): the one derivation every key here goes through. 0 or RL_E2E_E_CRYPTO. */
int rl_e2e_hkdf(const uint8_t *ikm, size_t ikmlen, const char *info, uint8_t *out, size_t outlen);
/* The key of one field family: HKDF(session key, "sophon/v1/blob/" + path). */
int rl_e2e_blob_key(const uint8_t session_key[RL_E2E_KEY_LEN], const char *path, uint8_t out[RL_E2E_KEY_LEN]);
/* The blind index key of a session: HKDF(session key, "sophon/v1/blind-index"). */
int rl_e2e_blind_index_key(const uint8_t session_key[RL_E2E_KEY_LEN], uint8_t out[RL_E2E_KEY_LEN]);
/* The blind index of scope and inputs[0..n) under index_key, base64url without padding (22 characters). */
int rl_e2e_blind_index(const uint8_t index_key[RL_E2E_KEY_LEN], const char *scope, const char *const *inputs, size_t n,
                       char out[RL_E2E_BLIND_IDX_SIZE]);

/*
 * Field envelopes as they travel: base64 text. rl_e2e_seal_field derives the
 * blob key of path from session_key and returns a malloc'd base64 envelope
 * (NULL on failure). rl_e2e_open_field opens one into a malloc'd,
 * NUL-terminated *out (its length in *outlen, may be NULL); errors as rl_e2e_open.
 */
char *rl_e2e_seal_field(const uint8_t session_key[RL_E2E_KEY_LEN], const char *path, const void *plain, size_t len);
int rl_e2e_open_field(const uint8_t session_key[RL_E2E_KEY_LEN], const char *path, const char *b64, char **out,
                      size_t *outlen);

/*
 * Wraps plain (a session key) for the holder of recipient_pub: a malloc'd
 * base64 sealed box, or NULL. The ephemeral secret is wiped before return.
 */
char *rl_e2e_wrap(const uint8_t recipient_pub[RL_E2E_KEY_LEN], const uint8_t *plain, size_t len);
/*
 * Unwraps a base64 sealed box with sec into out (outsz bytes, at least the
 * plaintext's length); *outlen the length. 0, RL_E2E_E_FORMAT, RL_E2E_E_VERSION or RL_E2E_E_AUTH.
 */
int rl_e2e_unwrap(const uint8_t sec[RL_E2E_KEY_LEN], const char *b64, uint8_t *out, size_t outsz, size_t *outlen);
/*
 * Opens a box sealed between two devices' long-lived keys (a bridge's list
 * sealed to this device, issue 36): b64 is base64(nonce(24) ||
 * crypto_box_easy). 0 with *out a malloc'd NUL-terminated plaintext of
 * *outlen bytes; RL_E2E_E_FORMAT or RL_E2E_E_AUTH (not for us, or forged).
 */
int rl_e2e_box_open(const uint8_t my_sec[RL_E2E_KEY_LEN], const uint8_t their_pub[RL_E2E_KEY_LEN], const char *b64,
                    char **out, size_t *outlen);
/* Unwraps a session key: as rl_e2e_unwrap, and RL_E2E_E_FORMAT unless the plaintext is exactly 32 bytes. */
int rl_e2e_unwrap_key(const uint8_t sec[RL_E2E_KEY_LEN], const char *b64, uint8_t key[RL_E2E_KEY_LEN]);

/* The 4 SAS bytes between my secret and their public key (the same on both sides). */
int rl_e2e_sas(const uint8_t my_sec[RL_E2E_KEY_LEN], const uint8_t their_pub[RL_E2E_KEY_LEN],
               uint8_t out[RL_E2E_SAS_LEN]);
/* The SAS as the 4 emoji of the authors' table, separated by spaces (what both screens show). */
void rl_e2e_sas_text(const uint8_t sas[RL_E2E_SAS_LEN], char out[RL_E2E_SAS_TEXT_SIZE]);

/*
 * decision_sig (docs/api.md, "Signed decisions"): base64 of
 * HMAC-SHA256(K, "relay/v1/decision" 0xFF approval_id 0xFF session_id 0xFF
 * decision 0xFF scope-or-empty 0xFF device_id), K = HKDF(crypto_box_beforenm(their
 * pub, my sec), "relay/v1/decision"). The device signs with (bridge pub,
 * device sec), the bridge checks with (device pub, bridge sec). scope may be NULL.
 */
int rl_e2e_decision_sig(const uint8_t my_sec[RL_E2E_KEY_LEN], const uint8_t their_pub[RL_E2E_KEY_LEN],
                        const char *approval_id, const char *session_id, const char *decision, const char *scope,
                        const char *device_id, char out[RL_E2E_SIG_SIZE]);
/* 0 when sig is the decision's signature (constant-time compare), RL_E2E_E_AUTH otherwise. */
int rl_e2e_decision_verify(const uint8_t my_sec[RL_E2E_KEY_LEN], const uint8_t their_pub[RL_E2E_KEY_LEN],
                           const char *approval_id, const char *session_id, const char *decision, const char *scope,
                           const char *device_id, const char *sig);

/*
 * config_sig (docs/api.md, "Steering"): base64 of HMAC-SHA256(K,
 * "relay/v1/config" 0xFF session_id 0xFF option_id 0xFF value 0xFF
 * ts(decimal) 0xFF device_id), K = HKDF(crypto_box_beforenm(their pub, my
 * sec), "relay/v1/config"): a session setting changed from a device, signed
 * as a decision is, so that a relay cannot switch an agent to "ask nothing".
 */
int rl_e2e_config_sig(const uint8_t my_sec[RL_E2E_KEY_LEN], const uint8_t their_pub[RL_E2E_KEY_LEN],
                      const char *session_id, const char *option_id, const char *value, long long ts,
                      const char *device_id, char out[RL_E2E_SIG_SIZE]);
/* 0 when sig is that signature (constant-time compare), RL_E2E_E_AUTH otherwise (a NULL part too). */
int rl_e2e_config_verify(const uint8_t my_sec[RL_E2E_KEY_LEN], const uint8_t their_pub[RL_E2E_KEY_LEN],
                         const char *session_id, const char *option_id, const char *value, long long ts,
                         const char *device_id, const char *sig);

/*
 * grant_sig (docs/api.md, "Signed grants"): base64 of HMAC-SHA256(K,
 * "relay/v1/grant" 0xFF session_id 0xFF wrapped_session_key 0xFF device_id),
 * K = HKDF(crypto_box_beforenm(their pub, my sec), "relay/v1/grant"), where
 * wrapped_session_key is the wrap's base64 text exactly as sent and device_id
 * the wrapping device (wrapped_by_device_id). A sealed box does not say who
 * sealed it: this says it, to the one bridge that can check it. The device
 * signs with (bridge pub, device sec), the bridge checks with (device pub, bridge sec).
 */
int rl_e2e_grant_sig(const uint8_t my_sec[RL_E2E_KEY_LEN], const uint8_t their_pub[RL_E2E_KEY_LEN],
                     const char *session_id, const char *wrapped, const char *device_id, char out[RL_E2E_SIG_SIZE]);
/* 0 when sig is the grant's signature (constant-time compare), RL_E2E_E_AUTH otherwise. */
int rl_e2e_grant_verify(const uint8_t my_sec[RL_E2E_KEY_LEN], const uint8_t their_pub[RL_E2E_KEY_LEN],
                        const char *session_id, const char *wrapped, const char *device_id, const char *sig);

/*
 * Enrolment codes (docs/api.md, "Who may read: a device the machine
 * accepted"): 20 characters of ABCDEFGHJKLMNPQRSTUVWXYZ23456789 shown by the
 * bridge, typed or scanned on the client device, never sent to the relay.
 * rl_e2e_enrol_new makes one, as shown (with dashes). rl_e2e_enrol_key
 * normalises a typed code (case, dashes and white space do not matter) and
 * derives K = HKDF-SHA256(the 20 characters, "relay/v1/enrol"): 0, or
 * RL_E2E_E_FORMAT for anything that is not such a code.
 */
void rl_e2e_enrol_new(char out[RL_E2E_ENROL_TEXT]);
int rl_e2e_enrol_key(const char *code, uint8_t key[RL_E2E_KEY_LEN]);
/*
 * enrol_proof: base64 of HMAC-SHA256(K, "relay/v1/enrol" 0xFF bridge_device_id
 * 0xFF device_id 0xFF device_pubkey_hex): a client device's proof that it
 * holds the code, bound to its key and to the bridge device it confirms.
 * rl_e2e_enrol_verify: 0, or RL_E2E_E_AUTH (constant-time compare).
 */
int rl_e2e_enrol_proof(const uint8_t key[RL_E2E_KEY_LEN], const char *bridge_device_id, const char *device_id,
                       const char *pubkey_hex, char out[RL_E2E_SIG_SIZE]);
int rl_e2e_enrol_verify(const uint8_t key[RL_E2E_KEY_LEN], const char *bridge_device_id, const char *device_id,
                        const char *pubkey_hex, const char *proof);

/* Public keys travel as 64 lowercase hex characters. rl_e2e_pub_parse: 0 or RL_E2E_E_FORMAT. */
void rl_e2e_pub_hex(const uint8_t pub[RL_E2E_KEY_LEN], char out[RL_E2E_PUBHEX_SIZE]);
int rl_e2e_pub_parse(const char *hex, uint8_t pub[RL_E2E_KEY_LEN]);

#endif
