/*
 * End-to-end encryption (issue 26, docs/api.md "Encrypted sessions"): the
 * devices of a user (each a public key: a bridge's or a client's), which
 * bridges a client device confirmed (the short authentication string), the
 * session keys wrapped for each device, and the sessions a bridge creates.
 * relayd never holds a key that opens anything: it checks the syntax of
 * what it carries and routes it.
 */
#ifndef RL_RELAY_E2E_H
#define RL_RELAY_E2E_H

#include <stddef.h>

#include "http/call.h"
#include "http/validate.h"
#include "store/store.h"

/* A device public key: 64 lowercase hex digits (X25519, 32 bytes). 0 when valid, -1 otherwise. */
int rl_e2e_pubkey_check(const char *s, size_t len);
/*
 * A symmetric envelope: standard padded base64 of 0x01 ‖ nonce(12) ‖
 * ciphertext ‖ tag(16) (at least 29 bytes), or of the single byte 0x00 (the
 * authors' empty-value sentinel). 0 when valid, -1 otherwise. The bytes are
 * never opened: only the version byte and the length are looked at.
 */
int rl_e2e_envelope_check(const char *s, size_t len);
/* A wrapped session key: base64 of 0x02 ‖ ephemeral public key(32) ‖ envelope, at most 256 characters. */
int rl_e2e_wrap_check(const char *s, size_t len);
/* A blind index: base64url without padding, 1..64 characters. */
int rl_e2e_blind_index_check(const char *s, size_t len);

#define RL_E2E_ENVELOPE_MESSAGE "Expected a base64 envelope (0x01, nonce, ciphertext, tag; or the 0x00 sentinel)"
/* A *_ct field of a request body (its length cap is the route's, in base64 characters). */
#define RL_FIELD_CT(name_, flags_, max_)                                                                               \
    RL_FIELD_STRING_CHECK(name_, flags_, 1, max_, rl_e2e_envelope_check, RL_E2E_ENVELOPE_MESSAGE)

/*
 * Whether a request body obeys the plaintext-or-ciphertext rule of its
 * session: in an encrypted session none of plain[] (NULL-terminated) may be
 * present (null counts as absent); in a plain one no key ending in _ct may be. Returns 0, or
 * RL_E_INVALID_REQUEST with *field set to the first offending key (a
 * pointer into plain[] or into body's keys).
 */
int rl_e2e_body_check(const json_t *body, int encrypted, const char *const *plain, const char **field);
/* Answers a refusal of rl_e2e_body_check: 400 invalid_request with errors[] naming the field. */
void rl_e2e_fail_field(rl_call_t *call, const char *field, int encrypted);

int rl_bridge_device_register(rl_call_t *call);
int rl_device_register(rl_call_t *call);
int rl_devices_list(rl_call_t *call);
int rl_device_revoke(rl_call_t *call);
int rl_device_confirm(rl_call_t *call);
int rl_device_keys(rl_call_t *call);
int rl_bridge_session_create(rl_call_t *call);
int rl_recipients_put(rl_call_t *call); /* both sides: the principal says which */
int rl_bridge_notify_tool_file(rl_call_t *call);
int rl_session_files_list(rl_call_t *call);
int rl_session_file_read(rl_call_t *call);
int rl_session_file_read_plain(rl_call_t *call); /* ours: a plain session's file, by its path */
extern const rl_schema_t rl_bridge_device_schema, rl_device_register_schema, rl_device_confirm_schema,
    rl_bridge_session_schema, rl_recipients_schema, rl_notify_tool_file_schema, rl_file_read_plain_schema;

/*
 * In a transaction: the re-announcement (api.md "Encrypted sessions"). When
 * the bridge opens a message in an encrypted session it created, each of
 * the user's client devices that confirmed the bridge and holds no wrap of
 * the session's key is told to the bridge again as device_added (updates
 * are delivered at least once: a repeat is allowed), so that a bridge that
 * shares its keys on device_added shares this one too. *update_id is the
 * last update queued (unchanged when none). 0 or an error.
 */
int rl_e2e_reannounce(rl_txn_t *txn, const char *user_id, const char *installation_id, const char *session_id,
                      int64_t now, int64_t *update_id);

#endif
