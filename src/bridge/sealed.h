/*
 * Sealed attachments (issue 26; docs/api.md "Encrypted sessions",
 * attachments): in an encrypted session a user's file reaches relayd as an
 * envelope of its bytes, and the message's entry says what it is in meta_ct
 * ({name, mime, size, sha256}, blob path attachments/<sid>). relay-bridge
 * opens both before the agent sees the message, so that an agent reads the
 * file as it would in a plain session.
 */
#ifndef RL_BRIDGE_SEALED_H
#define RL_BRIDGE_SEALED_H

#include <jansson.h>

#include "bridge/keyring.h"

/*
 * Opens one item in place, described by meta ({name, mime, size, sha256},
 * already opened: a camera answer's answer_ct) or, when meta is NULL, by the
 * item's own meta_ct; sealed (sealed_len bytes) is what the item's signed url
 * gave, downloaded beforehand off the loop (fetcher.h), or NULL when that
 * download failed. The bytes are opened with the session's key, checked
 * (size and SHA-256) against the meta, and written (0600) under the config
 * folder's attachments/<key>/<name>. The item then carries the real name,
 * mime and size, path (the file) and url (file:// of it), and no meta_ct.
 * An item that cannot be opened keeps no url (the agent never gets sealed
 * bytes as if they were the file) and says why in "error" (unreadable,
 * download_failed, not_saved); the failure is logged. Returns NULL when
 * opened, else why not. Loop thread; sealed is not taken.
 */
const char *rl_sealed_attachment_open(const rl_keyring_t *keys, const char *session_id, json_t *item, json_t *meta,
                                      const char *sealed, size_t sealed_len);

#endif
