/*
 * relay-bridge's keys (docs/bridge.md, "Encryption" and "Devices"): its
 * device key pair, the session keys it holds and the client devices it
 * accepted, on evidence the relay cannot make (a code from this machine, or
 * the owner's word here: bridge/enrol.h), and the ones that wait for it.
 * Files in the config folder, 0600: bridge-device.json,
 * bridge-session-keys.json, bridge-devices.json.
 *
 * Only accepted devices get session keys from the bridge, and only their
 * decisions are taken (rl_keyring_verify_decision). Loop thread only.
 */
#ifndef RL_BRIDGE_KEYRING_H
#define RL_BRIDGE_KEYRING_H

#include <jansson.h>
#include <stddef.h>

#include "bridge/rest.h"
#include "e2e/e2e.h"

typedef struct rl_keyring rl_keyring_t;

/*
 * Opens (making the device key on first use) the keyring in the config
 * folder (client/credentials.h; RELAY_CONFIG_DIR overrides it). NULL with
 * err set when a file is unreadable, malformed or readable by others.
 */
rl_keyring_t *rl_keyring_open(char *err, size_t errsz);
/*
 * The same, read only, for the devices commands beside a running bridge: no
 * key is made and nothing is written (the running bridge owns these files).
 */
rl_keyring_t *rl_keyring_peek(char *err, size_t errsz);
/*
 * Every client device this bridge knows, accepted first: each row
 * {device_id, state ("accepted" or "waiting"), pubkey, label, platform,
 * verified ("code" or "owner"), verified_at, phone_confirmed, reverify, sas
 * (waiting ones)}. A new reference.
 */
json_t *rl_keyring_devices(const rl_keyring_t *k);
void rl_keyring_free(rl_keyring_t *k);

/* The device's public key in hex (what POST /v1/bridge/devices registers). */
const char *rl_keyring_pubkey(const rl_keyring_t *k);
/* The device id the relay gave, "" before the first registration; setting it saves it. */
const char *rl_keyring_device_id(const rl_keyring_t *k);
void rl_keyring_set_device_id(rl_keyring_t *k, const char *device_id);

/* The SAS between this bridge and the device of pubkey (hex), as emoji. 0, or -1 for a malformed key. */
int rl_keyring_sas(const rl_keyring_t *k, const char *pubkey, char out[RL_E2E_SAS_TEXT_SIZE]);

/*
 * device_pending: remembers which key this bridge showed a SAS for (saved),
 * so that a device_added can be checked against it. 0, or -1 for a malformed key.
 */
int rl_keyring_pending(rl_keyring_t *k, const char *device_id, const char *pubkey, const char *label,
                       const char *platform);
/*
 * device_added: the relay says the user confirmed the device on it. That is
 * the relay's word, which a relay (or anyone with a user token) can say of a
 * key of its own, so it is not enough (docs/api.md, "A device the machine
 * accepted"): the device is accepted only when it is the one this bridge
 * showed a SAS for, with that very key, and enrol_proof spends one of this
 * machine's enrolment codes (bridge/enrol.h) or the owner confirmed it on
 * this machine. 0 when accepted now; 1 when it already was (same key); -1
 * for a malformed key or a failed save; -2 when the key is not the one the
 * SAS was shown for; -3 when the evidence is missing (it stays waiting,
 * marked as confirmed on the phone).
 */
int rl_keyring_accept(rl_keyring_t *k, const char *device_id, const char *pubkey, const char *label,
                      const char *platform, const char *enrol_proof);
/*
 * Applies the owner's word said on this machine (relay-bridge devices
 * confirm / revoke): accepts the waiting devices it confirms with their
 * very key, calling accepted for each, and forgets the ones it revokes.
 * The number accepted, or -1 when the owner file is unreadable.
 */
int rl_keyring_owner_sync(rl_keyring_t *k, void (*accepted)(void *user, const char *device_id), void *user);
/* device_revoked: forgets it (saved). 1 when it was known. */
int rl_keyring_revoke(rl_keyring_t *k, const char *device_id);
/* 1 when device_id is an accepted device. */
int rl_keyring_accepted(const rl_keyring_t *k, const char *device_id);

/*
 * session_key_granted addressed to this bridge, wrapped by the client device
 * by with grant_sig sig: keeps the key only when by is an accepted device and
 * sig is its grant signature of (session_id, wrapped, by). A sealed box does
 * not say who sealed it, so without the signature a relay could slip in a key
 * of its own under a confirmed device's name and read what the bridge seals.
 * 0; otherwise -1 with *why saying which check failed (for the log: never a
 * key), and nothing kept. A grant by a device that waits for this machine's
 * word, signed by its key, is held (saved, not taken) and 1 is returned with
 * *why saying so: it is taken when the device is accepted
 * (rl_keyring_take_received).
 */
int rl_keyring_grant(rl_keyring_t *k, const char *session_id, const char *wrapped, const char *by, const char *sig,
                     const char **why);
/*
 * The sessions whose keys were taken from held grants when their devices
 * were accepted, since the last call: [{session_id, by}], a new reference
 * (an empty array when none), so that the bridge passes them on to its other
 * accepted devices.
 */
json_t *rl_keyring_take_received(rl_keyring_t *k);
/* A fresh key for a session this bridge creates. 0 or RL_E2E_E_IO. */
int rl_keyring_create(rl_keyring_t *k, const char *session_id);
/* 1 when the bridge holds a key of session_id. */
int rl_keyring_has(const rl_keyring_t *k, const char *session_id);
/* Sessions with keys, for the fan-out to a new device. */
size_t rl_keyring_sessions(const rl_keyring_t *k);
const char *rl_keyring_session(const rl_keyring_t *k, size_t i);
/*
 * The body of POST /v1/bridge/sessions/:id/recipients with the newest key of
 * session_id wrapped for device_id, or for every accepted device but
 * except when device_id is NULL; the session id is in "session_id" (the
 * writer moves it into the path). NULL when there is no key or no device.
 */
json_t *rl_keyring_recipients(const rl_keyring_t *k, const char *session_id, const char *device_id, const char *except);

/* Seals plain for the field family kind ("messages", "tasks", ...) of session_id: base64, malloc'd, or NULL. */
char *rl_keyring_seal(const rl_keyring_t *k, const char *session_id, const char *kind, const void *plain, size_t len);
/* Opens one: 0 with *out malloc'd and NUL-terminated, or an RL_E2E_E_* error. */
int rl_keyring_open_field(const rl_keyring_t *k, const char *session_id, const char *kind, const char *b64, char **out);
/* The same under an explicit blob path (agent_files/<sid>/<blind_idx>). */
char *rl_keyring_seal_path(const rl_keyring_t *k, const char *session_id, const char *path, const void *plain,
                           size_t len);
int rl_keyring_open_path(const rl_keyring_t *k, const char *session_id, const char *path, const char *b64, char **out);
/*
 * Opens raw envelope bytes (0x01 ‖ nonce ‖ ciphertext ‖ tag, as a sealed
 * attachment is uploaded) of the field family kind: 0 with *out malloc'd
 * (*outlen bytes, NUL-terminated past them), or an RL_E2E_E_* error.
 */
int rl_keyring_open_bytes(const rl_keyring_t *k, const char *session_id, const char *kind, const void *envelope,
                          size_t len, char **out, size_t *outlen);
/* The blind index of an agent file (scope agent_files, inputs session id and path). 0 or an RL_E2E_E_* error. */
int rl_keyring_file_index(const rl_keyring_t *k, const char *session_id, const char *path,
                          char out[RL_E2E_BLIND_IDX_SIZE]);

/*
 * Seals the content fields of a call's body for an encrypted session, in
 * place, from one table (docs/api.md, "Encrypted sessions"): text, delta,
 * status_label, args, partial_result, error, result become their *_ct
 * (args and results as JSON text), an approval's title, message, command,
 * host, tool_call_id and content become one details_ct. 0, or -1 when a
 * field could not be sealed (then nothing of the body may be sent).
 */
int rl_keyring_seal_call(const rl_keyring_t *k, rl_call_t call, const char *session_id, json_t *body);

/*
 * Checks an approval decision's decision_sig against the accepted device
 * device_id. 0 when it verifies; otherwise -1 with *why saying which check
 * failed (for the log: never a key).
 */
int rl_keyring_verify_decision(const rl_keyring_t *k, const char *approval_id, const char *session_id,
                               const char *decision, const char *scope, const char *device_id, const char *sig,
                               const char **why);
/*
 * Checks a session setting's config_sig (docs/api.md, "Steering") against the
 * accepted device device_id: 0 when it verifies; otherwise -1 with *why (for
 * the log). The freshness of ts is the caller's rule.
 */
int rl_keyring_verify_config(const rl_keyring_t *k, const char *session_id, const char *option_id, const char *value,
                             long long ts, const char *device_id, const char *sig, const char **why);
/*
 * plain sealed to the accepted device device_id (docs/api.md, "Projects"):
 * base64(nonce(24) || crypto_box_easy(plain, nonce, device pub, this
 * bridge's secret)), malloc'd; NULL when the device is not accepted.
 */
char *rl_keyring_seal_to_device(const rl_keyring_t *k, const char *device_id, const void *plain, size_t len);

#endif
