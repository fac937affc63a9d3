#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "common/error.h"
#include "common/hex.h"
#include "relay/core/idempotency.h"
#include "auth/token.h"

static void digest_of(const char *bytes, size_t len, rl_body_digest_t digest, char out[RL_BODY_HASH_HEX + 1])
{
    unsigned char raw[32];

    if (digest == RL_BODY_SHA256) {
        rl_token_hash(bytes, len, out);
        return;
    }
    crypto_generichash(raw, sizeof(raw), (const unsigned char *)bytes, len, NULL, 0);
    rl_hex_encode(raw, sizeof(raw), out);
}

int rl_idempotency_body_digest(json_t *body, rl_body_digest_t digest, char out[RL_BODY_HASH_HEX + 1])
{
    char *canonical = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);

    if (canonical == NULL)
        return -1;
    digest_of(canonical, strlen(canonical), digest, out);
    free(canonical);
    return 0;
}

int rl_idempotency_body_digest_flat(const rl_json_flat_t *body, rl_body_digest_t digest,
                                    char out[RL_BODY_HASH_HEX + 1])
{
    rl_json_out_t canonical;
    int result = -1;

    rl_json_out_init(&canonical);
    rl_json_flat_canonical(body, &canonical);
    if (!canonical.failed) {
        digest_of(canonical.bytes, canonical.len, digest, out);
        result = 0;
    }
    rl_json_out_free(&canonical);
    return result;
}

int rl_idempotency_body_hash(json_t *body, char out[RL_BODY_HASH_HEX + 1])
{
    return rl_idempotency_body_digest(body, RL_BODY_SHA256, out);
}

int rl_idempotency_body_hash_flat(const rl_json_flat_t *body, char out[RL_BODY_HASH_HEX + 1])
{
    return rl_idempotency_body_digest_flat(body, RL_BODY_SHA256, out);
}

void rl_idempotency_copy(rl_arena_t *arena, rl_idempotency_t *dst, const rl_idempotency_t *src)
{
    dst->owner = rl_arena_strdup(arena, src->owner);
    dst->scope = rl_arena_strdup(arena, src->scope);
    dst->key = rl_arena_strdup(arena, src->key);
    dst->body_hash = rl_arena_strdup(arena, src->body_hash);
    dst->expired_before = src->expired_before;
}

int rl_idempotency_check(rl_txn_t *txn, const rl_idempotency_t *idem, const char **response)
{
    rl_idempotency_row_t row;
    int result;

    if (idem->key == NULL)
        return 0;
    result = RL_TXN(txn, idempotency_get, idem->owner, idem->scope, idem->key, &row);
    if (result == RL_E_NOT_FOUND)
        return 0;
    if (result != 0)
        return result;
    /* spec: keys are unique for 24 hours, then recycled: a lapsed record is absent even before housekeeping runs. */
    if (row.created_at < idem->expired_before) {
        result = RL_TXN(txn, idempotency_delete, idem->owner, idem->scope, idem->key);
        return result == RL_E_NOT_FOUND ? 0 : result;
    }
    /* spec: the same key with another body is a conflict. */
    if (strcmp(row.body_hash, idem->body_hash) != 0)
        return RL_E_IDEMPOTENCY_CONFLICT;
    *response = row.response;
    return 1;
}

int rl_idempotency_record(rl_txn_t *txn, const rl_idempotency_t *idem, json_t *response, int64_t now)
{
    rl_idempotency_row_t row;
    char *text;
    int result;

    if (idem->key == NULL)
        return 0;
    text = json_dumps(response, JSON_COMPACT);
    if (text == NULL)
        return RL_E_INTERNAL;
    row.owner = idem->owner;
    row.scope = idem->scope;
    row.key = idem->key;
    row.body_hash = idem->body_hash;
    row.response = text;
    row.created_at = now;
    result = RL_TXN(txn, idempotency_insert, &row);
    free(text);
    return result;
}
