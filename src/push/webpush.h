/*
 * Web Push messages as relayd sends them: the payload encrypted for one
 * subscription (RFC 8291, in the aes128gcm content coding of RFC 8188) and
 * the VAPID authorisation of the sender (RFC 8292). Pure computation with
 * OpenSSL: no I/O but the VAPID key file at open. Any thread, except where
 * a function says otherwise; an rl_vapid_t is immutable once open.
 */
#ifndef RL_RELAY_WEBPUSH_H
#define RL_RELAY_WEBPUSH_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#define RL_WEBPUSH_KEY_LEN  65 /* an uncompressed P-256 point: 0x04 || x || y */
#define RL_WEBPUSH_AUTH_LEN 16
#define RL_WEBPUSH_SALT_LEN 16
/* The body's header: salt, record size (4), key id length (1), the sender's key. */
#define RL_WEBPUSH_HEADER_LEN (RL_WEBPUSH_SALT_LEN + 4 + 1 + RL_WEBPUSH_KEY_LEN)
/*
 * The record size announced in the header. A push service must take a body
 * of 4096 bytes (RFC 8030 §7.2, RFC 8291 §4): the header, the 16-byte tag and
 * the 0x02 delimiter leave 3993 bytes of payload in one record.
 */
#define RL_WEBPUSH_RECORD      4096
#define RL_WEBPUSH_BODY_MAX    4096
#define RL_WEBPUSH_PAYLOAD_MAX (RL_WEBPUSH_BODY_MAX - RL_WEBPUSH_HEADER_LEN - 16 - 1)
/* Size of a body for a payload of len bytes. */
#define RL_WEBPUSH_BODY_LEN(len) (RL_WEBPUSH_HEADER_LEN + (len) + 1 + 16)

/*
 * Encrypts payload for the subscription whose keys are ua_public (the
 * p256dh key) and auth (its authentication secret), into out (outsz >=
 * RL_WEBPUSH_BODY_LEN(len)). sender is the ephemeral key pair and salt the
 * 16-byte salt; NULL makes fresh ones (always, outside tests). Returns the
 * body's length, or -1 when len exceeds RL_WEBPUSH_PAYLOAD_MAX, ua_public is
 * not a point on the curve, or OpenSSL fails.
 */
long rl_webpush_encrypt(const unsigned char *ua_public, const unsigned char *auth, EVP_PKEY *sender,
                        const unsigned char *salt, const void *payload, size_t len, unsigned char *out, size_t outsz);

/* A P-256 key from its private scalar d (32 bytes) and public point (65 bytes); NULL when invalid. For tests. */
EVP_PKEY *rl_webpush_p256_key(const unsigned char *d, const unsigned char *point);
/* Whether point (len bytes) is an uncompressed P-256 point on the curve: what a p256dh key must be. */
int rl_webpush_point_is_valid(const unsigned char *point, size_t len);

/* The sender's identity (RFC 8292): one P-256 key, kept in the data folder. */
typedef struct rl_vapid rl_vapid_t;

/*
 * Loads DIR/vapid.key, creating it (mode 0600) on first use. 0 and *out, or
 * -1 with the cause logged. Startup thread.
 */
int rl_vapid_open(const char *dir, rl_vapid_t **out);
/* A VAPID identity from a key the caller made (tests); takes the key. NULL on failure. */
rl_vapid_t *rl_vapid_from_key(EVP_PKEY *key);
void rl_vapid_free(rl_vapid_t *vapid);
/* The public key, base64url of the uncompressed point: the app's applicationServerKey and the k= parameter. */
const char *rl_vapid_public_key(const rl_vapid_t *vapid);
/*
 * The Authorization header value for a push to endpoint:
 *   vapid t=<ES256 JWT {aud: endpoint's origin, exp: now_s + ttl_s, sub: subject}>, k=<public key>
 * ttl_s is at most 24 hours (RFC 8292). Returns a malloc'd string, or NULL
 * when endpoint is not an absolute http(s) URL or signing fails.
 */
char *rl_vapid_authorization(const rl_vapid_t *vapid, const char *endpoint, const char *subject, int64_t now_s,
                             int64_t ttl_s);

#endif
