/*
 * The relay's signing keys: the embedded issuer's Ed25519 key
 * (DATA/issuer.key, signs user tokens), the URL-signing key
 * (DATA/url.key, signs attachment links) and the Web Push VAPID key
 * (DATA/vapid.key, P-256). Every node of a relay must sign
 * with the same ones, so the store holds them (its secrets), and each
 * node's data folder holds a copy (mode 0600), which is what the code that
 * signs reads.
 */
#ifndef RL_RELAY_KEYS_H
#define RL_RELAY_KEYS_H

#include "store/store.h"

/*
 * Makes the data folder's key files the store's. A key the store lacks is
 * taken from the data folder (a relay that ran before keys were shared),
 * or made; then written to the store (the first node to write wins) and to
 * the folder. A folder key that differs from the store's is refused with
 * the reason logged. Blocking: start-up and one-shot commands. 0 or -1.
 */
int rl_keys_sync(rl_store_t *store, const char *data_dir);

#endif
