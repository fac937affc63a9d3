/*
 * The keys a device keeps on disk: its X25519 key pair (the device key file)
 * and the session keys it holds (the session key store). Both files are
 * JSON, mode 0600, replaced atomically (written beside, fsync'd, renamed), so
 * a crash leaves the old file or the new one, never half of one.
 *
 * A session may have several keys: a client rotates a session's key after it
 * revokes a device, and the messages sealed before stay readable with the
 * older key. New fields are sealed with the newest key; opening tries the
 * keys newest first (an envelope names no key: GCM tells which one fits).
 *
 * Not thread-safe: one thread owns a store. Freed memory is wiped.
 */
#ifndef RL_E2E_KEYSTORE_H
#define RL_E2E_KEYSTORE_H

#include <stddef.h>
#include <stdint.h>

#include "e2e/e2e.h"

typedef struct rl_device_key {
    rl_e2e_keypair_t kp;
    char device_id[64]; /* what the relay answered at registration; "" until then */
    char label[65];     /* the label it was registered with */
} rl_device_key_t;

/*
 * Reads the device key file at path into dk. When the file does not exist
 * and create is set, makes a fresh key pair and writes it (device_id empty).
 * 0 when read, 1 when created, RL_E2E_E_IO when it cannot be read or written
 * (a missing file without create included), RL_E2E_E_FORMAT when it is not a
 * key file, or is readable by others than its owner (a key file someone else
 * could read is not trusted).
 */
int rl_device_key_load(const char *path, int create, rl_device_key_t *dk);
/* Writes dk to path (0600, atomic). 0 or RL_E2E_E_IO. */
int rl_device_key_save(const char *path, const rl_device_key_t *dk);
void rl_device_key_wipe(rl_device_key_t *dk);

typedef struct rl_keystore rl_keystore_t;

/*
 * Opens the session key store at path (a missing file is an empty store; path
 * is kept to save to). NULL when the file exists and is not a store, or
 * cannot be read.
 */
rl_keystore_t *rl_keystore_load(const char *path);
/* Wipes every key and frees the store. NULL is a no-op. */
void rl_keystore_free(rl_keystore_t *ks);
/*
 * Adds key as the newest key of session_id and saves the store. 1 when added,
 * 0 when the session already had this key (nothing changes, not even its
 * order), RL_E2E_E_IO when saving failed (the key is kept in memory).
 */
int rl_keystore_add(rl_keystore_t *ks, const char *session_id, const uint8_t key[RL_E2E_KEY_LEN]);
/*
 * How far a client trusts a session key granted to it (docs/api.md, "Signed
 * grants"). The relay could wrap a key of its own for any device: only a
 * grant it cannot make may choose the key a client seals with.
 */
typedef enum rl_grant_trust {
    RL_GRANT_SIGNED,   /* grant_sig verifies: a bridge device this client confirmed, or this device itself */
    RL_GRANT_UNSIGNED, /* no grant_sig (the authors' bridge, a key fetched back from the keys route) */
    RL_GRANT_PEER,     /* made by another client device of the user: no signature a client can check */
    RL_GRANT_FORGED,   /* a grant_sig that does not verify, or a signer this client did not confirm */
} rl_grant_trust_t;

/*
 * Takes a granted key by the rule of "Signed grants": a signed grant becomes
 * the session's newest (sealing) key; an unsigned or peer grant is taken only
 * for a session with no key yet (first key wins); a peer grant for a session
 * already held is kept as its oldest key, to read with, never to seal with; an
 * unsigned grant never adds to a session already held; a forged one is never
 * taken. 1 when taken as the sealing key, 2 when kept to read only, 0 when
 * the key was known already, RL_E2E_E_AUTH when refused, RL_E2E_E_IO when
 * saving failed.
 */
int rl_keystore_take_grant(rl_keystore_t *ks, const char *session_id, const uint8_t key[RL_E2E_KEY_LEN],
                           rl_grant_trust_t trust);
/* The i-th newest key of session_id (0: the one to seal with), or NULL. Valid until the next add or free. */
const uint8_t *rl_keystore_key(const rl_keystore_t *ks, const char *session_id, size_t i);
/* Sessions in the store, and the id of the i-th (in no particular order), for fan-outs to a new device. */
size_t rl_keystore_count(const rl_keystore_t *ks);
const char *rl_keystore_session(const rl_keystore_t *ks, size_t i);
/* Drops a session's keys (wiped) and saves. 0 or RL_E2E_E_IO. */
int rl_keystore_forget(rl_keystore_t *ks, const char *session_id);

/* rl_e2e_seal_field with the newest key of session_id; NULL when the store has none or on failure. */
char *rl_keystore_seal_field(const rl_keystore_t *ks, const char *session_id, const char *path, const void *plain,
                             size_t len);
/*
 * rl_e2e_open_field with each key of session_id, newest first: 0 with *out
 * (malloc'd, NUL-terminated) from the first that opens it; RL_E2E_E_AUTH when
 * no key does (or the store has none), RL_E2E_E_FORMAT / RL_E2E_E_VERSION for a
 * malformed envelope.
 */
int rl_keystore_open_field(const rl_keystore_t *ks, const char *session_id, const char *path, const char *b64,
                           char **out, size_t *outlen);

/* The paths of the field families (docs/api.md): "<kind>/<session_id>" into out. 0, or -1 when it does not fit. */
int rl_e2e_path(char *out, size_t outsz, const char *kind, const char *session_id);

#endif
