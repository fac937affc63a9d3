/*
 * Idempotent bridge writes (spec "Limits"): a key is unique per (owner,
 * scope) for the idempotency TTL. The same key with the same body replays
 * the stored response with "idempotent": true; the same key with another body
 * is 409 idempotency_conflict. The body is compared through the SHA-256 of
 * its canonical JSON (keys sorted, compact).
 */
#ifndef RL_RELAY_IDEMPOTENCY_H
#define RL_RELAY_IDEMPOTENCY_H

#include <jansson.h>
#include <stdint.h>

#include "common/json_flat.h"
#include "store/store.h"

#define RL_BODY_HASH_HEX 64

typedef struct rl_idempotency {
    const char *owner; /* the installation */
    const char *scope; /* e.g. "sendMessage:ses_..." */
    const char *key;   /* NULL: the write carries no key and is not idempotent */
    const char *body_hash;
    /*
     * Records created before this (now minus --idempotency-ttl) are past their
     * lifetime and count as absent, whether or not housekeeping removed them.
     */
    int64_t expired_before;
} rl_idempotency_t;

/* Hex SHA-256 of body's canonical JSON into out. 0, or -1 when out of memory. Any thread. */
int rl_idempotency_body_hash(json_t *body, char out[RL_BODY_HASH_HEX + 1]);
/*
 * The same hash of a body read by the flat reader: its canonical bytes are
 * written by json_flat's writer, which writes what jansson writes, so a hash
 * stored by either path matches the other's. 0, or -1 when out of memory.
 */
int rl_idempotency_body_hash_flat(const rl_json_flat_t *body, char out[RL_BODY_HASH_HEX + 1]);
/*
 * The digest a body is compared through. SHA-256 for every idempotency
 * record, and for the keys of deltas stored before BLAKE2b-256 took over
 * there: a delta is the relay's most frequent request, and BLAKE2b costs
 * about a quarter of SHA-256 on its canonical bytes (docs/internals/
 * performance.md). Both are 64 hex characters; a delta's stored key is
 * compared under BLAKE2b first and, when that differs, under SHA-256.
 */
typedef enum rl_body_digest { RL_BODY_SHA256, RL_BODY_BLAKE2B } rl_body_digest_t;
int rl_idempotency_body_digest(json_t *body, rl_body_digest_t digest, char out[RL_BODY_HASH_HEX + 1]);
int rl_idempotency_body_digest_flat(const rl_json_flat_t *body, rl_body_digest_t digest,
                                    char out[RL_BODY_HASH_HEX + 1]);
/* Copies src into dst with its strings in arena. */
void rl_idempotency_copy(rl_arena_t *arena, rl_idempotency_t *dst, const rl_idempotency_t *src);

/*
 * In a writing transaction: 0 when the key is new, absent or past its
 * lifetime (a lapsed record is deleted, making way for this write's), 1 for
 * a replay with *response the stored response (JSON text in the arena), or
 * RL_E_IDEMPOTENCY_CONFLICT.
 */
int rl_idempotency_check(rl_txn_t *txn, const rl_idempotency_t *idem, const char **response);
/* In a transaction: remembers response (not stolen) as the answer to the key. 0 or an error. */
int rl_idempotency_record(rl_txn_t *txn, const rl_idempotency_t *idem, json_t *response, int64_t now);

#endif
