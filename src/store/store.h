/*
 * The store: every durable fact of the relay, behind an asynchronous
 * interface so that a networked backend (PostgreSQL) can plug in without
 * blocking the event loop.
 *
 * Contract for every operation:
 * - it is called on the loop thread and never blocks on the network;
 * - its callback runs later, never inside the call itself, on the loop thread,
 *   with result 0 or a negative RL_E_* error and, on success, a JSON value
 *   (a new reference the callback owns; may be NULL for "nothing to return");
 * - a write's callback runs only after the write is durable against a crash
 *   of the process (kill -9);
 * - an operation that fails leaves the store as it was.
 *
 * Backends batch: the loop calls rl_store_flush() after each turn, which
 * commits what the turn wrote and then runs the callbacks.
 */
#ifndef RL_STORE_STORE_H
#define RL_STORE_STORE_H

#include <jansson.h>
#include <stdint.h>

typedef struct rl_store rl_store_t;
typedef void (*rl_store_cb)(int result, json_t *value, void *arg);

typedef struct rl_pairing_new {
    const char *poll_hash;       /* hex SHA-256 of the poll token */
    const char *code_hash;       /* hex SHA-256 of the 7-letter code */
    const char *installation_id; /* minted now, becomes the installation on claim */
    const char *connector_type;
    const char *host_label;
    int64_t created_at, expires_at; /* ms */
} rl_pairing_new_t;

struct rl_store_ops {
    const char *name;
    void (*close)(rl_store_t *store);
    int (*pending)(rl_store_t *store);
    void (*flush)(rl_store_t *store);
    void (*user_ensure)(rl_store_t *store, const char *user_id, int64_t now, rl_store_cb cb, void *arg);
    void (*pairing_insert)(rl_store_t *store, const rl_pairing_new_t *pairing, rl_store_cb cb, void *arg);
    void (*pairing_claim)(rl_store_t *store, const char *code_hash, const char *user_id, int64_t now,
                          rl_store_cb cb, void *arg);
    void (*pairing_poll)(rl_store_t *store, const char *poll_hash, const char *token_hash, const char *token_env,
                         int64_t now, rl_store_cb cb, void *arg);
    void (*installation_get)(rl_store_t *store, const char *installation_id, rl_store_cb cb, void *arg);
    void (*installation_set_manifest)(rl_store_t *store, const char *installation_id, const char *manifest,
                                      rl_store_cb cb, void *arg);
    void (*purge)(rl_store_t *store, int64_t now, rl_store_cb cb, void *arg);
};

struct rl_store {
    const struct rl_store_ops *ops;
};

/*
 * Opens the store named by location: a folder (the embedded SQLite default,
 * file relay.db inside it) or "sqlite:PATH". Applies pending schema
 * migrations. Blocking; call before the loop runs. 0 or -1 with a log line.
 */
int rl_store_open(const char *location, rl_store_t **out);
int rl_store__sqlite_open(const char *path, rl_store_t **out);

static inline void rl_store_close(rl_store_t *store)
{
    store->ops->close(store);
}
/* 1 when completions or uncommitted writes are waiting for rl_store_flush. */
static inline int rl_store_pending(rl_store_t *store)
{
    return store->ops->pending(store);
}
/* Commits the batch and runs every waiting callback, including ones queued by those callbacks. */
static inline void rl_store_flush(rl_store_t *store)
{
    store->ops->flush(store);
}

/* Creates the user on first sight; value NULL. */
static inline void rl_store_user_ensure(rl_store_t *store, const char *user_id, int64_t now, rl_store_cb cb,
                                        void *arg)
{
    store->ops->user_ensure(store, user_id, now, cb, arg);
}
/* Records a new pairing; RL_E_IDEMPOTENCY_CONFLICT when the code is already live (mint another). */
static inline void rl_store_pairing_insert(rl_store_t *store, const rl_pairing_new_t *pairing, rl_store_cb cb,
                                           void *arg)
{
    store->ops->pairing_insert(store, pairing, cb, arg);
}
/*
 * Consumes a pending, unexpired code for user_id and creates its
 * installation; value is the installation object. RL_E_PAIRING_NOT_FOUND for
 * an unknown, expired or consumed code.
 */
static inline void rl_store_pairing_claim(rl_store_t *store, const char *code_hash, const char *user_id,
                                          int64_t now, rl_store_cb cb, void *arg)
{
    store->ops->pairing_claim(store, code_hash, user_id, now, cb, arg);
}
/*
 * Polls a pairing: value {"status":"pending"} while unclaimed, or, once
 * claimed, stores token_hash on the installation and answers
 * {"status":"paired","installation_id":...}; after that the pairing is spent.
 * RL_E_PAIRING_EXPIRED past expiry, RL_E_PAIRING_NOT_FOUND for unknown or spent.
 */
static inline void rl_store_pairing_poll(rl_store_t *store, const char *poll_hash, const char *token_hash,
                                         const char *token_env, int64_t now, rl_store_cb cb, void *arg)
{
    store->ops->pairing_poll(store, poll_hash, token_hash, token_env, now, cb, arg);
}
/* value: the installation object, including "token_hash"; RL_E_INSTALLATION_NOT_FOUND. */
static inline void rl_store_installation_get(rl_store_t *store, const char *installation_id, rl_store_cb cb,
                                             void *arg)
{
    store->ops->installation_get(store, installation_id, cb, arg);
}
/* Replaces the installation's agent manifest (JSON text); value NULL. RL_E_INSTALLATION_NOT_FOUND. */
static inline void rl_store_installation_set_manifest(rl_store_t *store, const char *installation_id,
                                                      const char *manifest, rl_store_cb cb, void *arg)
{
    store->ops->installation_set_manifest(store, installation_id, manifest, cb, arg);
}
/* Removes expired, spent state (old pairings, ...); value NULL. */
static inline void rl_store_purge(rl_store_t *store, int64_t now, rl_store_cb cb, void *arg)
{
    store->ops->purge(store, now, cb, arg);
}

#endif
