/*
 * Pairing (spec "Pairing"): a bridge starts, the user claims the 7-letter
 * code from a client, the bridge polls and receives its token once.
 *
 * Secrets at rest: the code and the poll token are stored as SHA-256 hashes,
 * and the bridge token is minted at the poll that hands it out, so that only
 * its hash is ever written.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/rand.h"
#include "http/validate.h"
#include "relay/hub.h"
#include "relay/ops.h"
#include "relay/pairing.h"
#include "relay/relay.h"
#include "relay/token.h"
#include "relay/views.h"

#define CODE_LEN         7
#define POLL_TOKEN_CHARS 32
#define MINT_ATTEMPTS    5

/* A claim may be typed with spaces, dashes or lower case; what remains must be 7 letters. */
static int normalize_code(const char *in, size_t len, char *out)
{
    size_t i, n = 0;

    for (i = 0; i < len; ++i) {
        unsigned char c = (unsigned char)in[i];
        if (c == ' ' || c == '-')
            continue;
        if (!isalpha(c) || c > 127 || n == CODE_LEN)
            return -1;
        out[n++] = (char)toupper(c);
    }
    out[n] = '\0';
    return n == CODE_LEN ? 0 : -1;
}

static int check_code(const char *s, size_t len)
{
    char code[CODE_LEN + 1];

    return normalize_code(s, len, code);
}

static int check_poll_token(const char *s, size_t len)
{
    return len > 2 && memcmp(s, "p_", 2) == 0 ? 0 : -1;
}

static const rl_field_t start_fields[] = {
    RL_FIELD_STRING("connector_type", RL_F_REQUIRED, 1, 64),
    RL_FIELD_STRING("host_label", RL_F_REQUIRED, 1, 255),
    RL_FIELD_END,
};
const rl_schema_t rl_pairing_start_schema = RL_SCHEMA(start_fields);

static const rl_field_t poll_fields[] = {
    RL_FIELD_STRING_CHECK("poll_token", RL_F_REQUIRED, 1, 128, check_poll_token, "Poll tokens start with p_"),
    RL_FIELD_END,
};
const rl_schema_t rl_pairing_poll_schema = RL_SCHEMA(poll_fields);

static const rl_field_t claim_fields[] = {
    RL_FIELD_STRING_CHECK("code", RL_F_REQUIRED, 1, 32, check_code, "Pairing codes are 7 letters"),
    RL_FIELD_END,
};
const rl_schema_t rl_pairing_claim_schema = RL_SCHEMA(claim_fields);

/* ---- start ---- */

struct pairing_insert {
    rl_op_t op;
    rl_pairing_row_t row;
};

static int pairing_insert_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct pairing_insert *op = (void *)base;
    /* A code that expired unclaimed may be minted again. */
    int result = RL_TXN(txn, pairing_delete_lapsed, op->row.code_hash, op->row.created_at);

    return result != 0 ? result : RL_TXN(txn, pairing_insert, &op->row);
}

static const rl_store_op_type_t pairing_insert_type = RL_OP_TYPE(pairing_insert, 1, pairing_insert_run);

struct pairing_start {
    rl_call_t *call;
    int attempts;
    char code[CODE_LEN + 1];
    char poll_token[2 + POLL_TOKEN_CHARS + 1];
    int64_t expires_at;
};

static void start_free(struct pairing_start *start)
{
    OPENSSL_cleanse(start, sizeof(*start));
    free(start);
}

static void start_insert(struct pairing_start *start);

static void on_start_inserted(rl_store_op_t *base)
{
    struct pairing_start *start = base->arg;
    rl_call_t *call = start->call;

    /* A live code collided with the new one: mint another (26^7 codes make this rare). */
    if (base->result == RL_E_CONFLICT && ++start->attempts < MINT_ATTEMPTS) {
        start_insert(start);
        return;
    }
    if (base->result != 0) {
        rl_call_fail(call, base->result == RL_E_CONFLICT ? RL_E_UNAVAILABLE : base->result, NULL);
    } else {
        /* spec: expires_at is in epoch seconds, 120 s ahead. */
        rl_call_reply(call, json_pack("{s:s, s:I, s:s}", "code", start->code, "expires_at",
                                      (json_int_t)(start->expires_at / 1000), "poll_token", start->poll_token));
    }
    rl_call_release(call);
    start_free(start);
}

static void start_insert(struct pairing_start *start)
{
    rl_call_t *call = start->call;
    rl_relay_t *relay = call->app;
    struct pairing_insert *op = rl_op_new(&pairing_insert_type, sizeof(*op));
    char hash[RL_TOKEN_HASH_HEX + 1], installation_id[RL_INSTALLATION_ID_LEN + 1];
    int64_t now = rl_clock_now_ms();

    rl_rand_upper(start->code, CODE_LEN);
    memcpy(start->poll_token, "p_", 2);
    rl_rand_base62(start->poll_token + 2, POLL_TOKEN_CHARS);
    rl_rand_id(installation_id, sizeof(installation_id), "inst_", 16);
    rl_token_hash(start->code, CODE_LEN, hash);
    op->row.code_hash = rl_op_str(op, hash);
    rl_token_hash(start->poll_token, strlen(start->poll_token), hash);
    op->row.poll_hash = rl_op_str(op, hash);
    op->row.installation_id = rl_op_str(op, installation_id);
    op->row.connector_type = rl_op_str(op, rl_body_string(call, "connector_type"));
    op->row.host_label = rl_op_str(op, rl_body_string(call, "host_label"));
    op->row.state = "pending";
    op->row.created_at = now;
    op->row.expires_at = start->expires_at = now + relay->config.pairing_ttl;
    op->row.claimed_at = RL_NO_TIME;
    rl_store_submit(relay->store, &op->op.base, on_start_inserted, start);
}

int rl_pairing_start(rl_call_t *call)
{
    struct pairing_start *start = calloc(1, sizeof(*start));

    if (start == NULL)
        return RL_E_INTERNAL;
    start->call = call;
    rl_call_hold(call);
    start_insert(start);
    return 0;
}

/* ---- poll ---- */

struct pairing_poll {
    rl_op_t op;
    const char *poll_hash, *token_hash, *token_env;
    int64_t now;
    int paired;                  /* result: the token goes out now */
    const char *installation_id; /* result */
};

static int pairing_poll_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct pairing_poll *op = (void *)base;
    rl_pairing_row_t pairing;
    rl_installation_row_t installation;
    int result = RL_TXN(txn, pairing_by_poll, op->poll_hash, &pairing);

    if (result != 0)
        return result == RL_E_NOT_FOUND ? RL_E_PAIRING_NOT_FOUND : result;
    if (strcmp(pairing.state, "pending") == 0)
        return pairing.expires_at <= op->now ? RL_E_PAIRING_EXPIRED : 0;
    /* The token is handed out once; a spent pairing is gone. */
    if (strcmp(pairing.state, "claimed") != 0)
        return RL_E_PAIRING_NOT_FOUND;
    if ((result = RL_TXN(txn, installation_get, pairing.installation_id, &installation)) != 0)
        return result == RL_E_NOT_FOUND ? RL_E_PAIRING_NOT_FOUND : result;
    installation.token_hash = op->token_hash;
    installation.token_env = op->token_env;
    pairing.state = "delivered";
    if ((result = RL_TXN(txn, installation_update, &installation)) != 0 ||
        (result = RL_TXN(txn, pairing_update, &pairing)) != 0)
        return result;
    op->paired = 1;
    op->installation_id = pairing.installation_id;
    return 0;
}

static const rl_store_op_type_t pairing_poll_type = RL_OP_TYPE(pairing_poll, 1, pairing_poll_run);

struct poll_secret {
    rl_call_t *call;
    char token[RL_TOKEN_MAX];
};

static void on_polled(rl_store_op_t *base)
{
    struct pairing_poll *op = (void *)base;
    struct poll_secret *secret = base->arg;
    rl_call_t *call = secret->call;

    if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
    } else if (op->paired) {
        char whole[RL_TOKEN_MAX + RL_INSTALLATION_ID_LEN + 2];
        /* The secret was minted before the installation id was known; join them now. */
        snprintf(whole, sizeof(whole), "%s:%s", op->installation_id, secret->token);
        rl_call_reply(call, json_pack("{s:s, s:s, s:s}", "status", "paired", "installation_id", op->installation_id,
                                      "token", whole));
        OPENSSL_cleanse(whole, sizeof(whole));
        rl_log_info("pairing delivered a token for installation %s", op->installation_id);
    } else {
        rl_call_reply(call, json_pack("{s:s}", "status", "pending"));
    }
    rl_call_release(call);
    OPENSSL_cleanse(secret, sizeof(*secret));
    free(secret);
}

int rl_pairing_poll(rl_call_t *call)
{
    rl_relay_t *relay = call->app;
    struct poll_secret *secret = calloc(1, sizeof(*secret));
    struct pairing_poll *op;
    char hash[RL_TOKEN_HASH_HEX + 1];

    if (secret == NULL)
        return RL_E_INTERNAL;
    secret->call = call;
    op = rl_op_new(&pairing_poll_type, sizeof(*op));
    /* Only the secret part is minted here (s_<env>_...); its hash is what the store keeps. */
    snprintf(secret->token, sizeof(secret->token), "s_%s_", relay->config.token_env);
    rl_rand_base62(secret->token + strlen(secret->token), RL_TOKEN_SECRET_CHARS);
    rl_token_hash(secret->token, strlen(secret->token), hash);
    op->token_hash = rl_op_str(op, hash);
    op->token_env = rl_op_str(op, relay->config.token_env);
    rl_token_hash(rl_body_string(call, "poll_token"), strlen(rl_body_string(call, "poll_token")), hash);
    op->poll_hash = rl_op_str(op, hash);
    op->now = rl_clock_now_ms();
    rl_call_hold(call);
    rl_store_submit(relay->store, &op->op.base, on_polled, secret);
    return 0;
}

/* ---- claim ---- */

struct pairing_claim {
    rl_op_t op;
    const char *code_hash, *user_id;
    int64_t now;
    rl_installation_row_t installation; /* result */
};

static int pairing_claim_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct pairing_claim *op = (void *)base;
    rl_pairing_row_t pairing;
    rl_user_row_t user = {op->user_id, op->now};
    int result = RL_TXN(txn, pairing_by_code, op->code_hash, &pairing);

    /* spec: a code is valid 120 s and consumed once; unknown, expired and consumed look the same. */
    if (result == RL_E_NOT_FOUND || (result == 0 && pairing.expires_at <= op->now))
        return RL_E_PAIRING_NOT_FOUND;
    if (result != 0)
        return result;
    pairing.state = "claimed";
    pairing.user_id = op->user_id;
    pairing.claimed_at = op->now;
    op->installation = (rl_installation_row_t){
        .id = pairing.installation_id,
        .user_id = op->user_id,
        .token_env = "live",
        .connector_type = pairing.connector_type,
        .host_label = pairing.host_label,
        .state = "live",
        .created_at = op->now,
        .revoked_at = RL_NO_TIME,
    };
    if ((result = RL_TXN(txn, user_insert_ignore, &user)) != 0 || (result = RL_TXN(txn, pairing_update, &pairing)) != 0)
        return result;
    return RL_TXN(txn, installation_insert, &op->installation);
}

static const rl_store_op_type_t pairing_claim_type = RL_OP_TYPE(pairing_claim, 1, pairing_claim_run);

static void on_claimed(rl_store_op_t *base)
{
    struct pairing_claim *op = (void *)base;
    rl_call_t *call = base->arg;
    rl_relay_t *relay = call->app;

    if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
    } else {
        json_t *view = rl_view_installation(&op->installation, rl_bus_presence_get(relay->bus, op->installation.id));
        rl_log_info("installation %s paired", op->installation.id);
        /* spec: claiming creates the installation and emits installation_created. */
        rl_hub_publish(relay->hub, call->principal, "installation_created",
                       json_pack("{s:s, s:O}", "installation_id", op->installation.id, "installation", view));
        rl_call_reply(call, json_pack("{s:s, s:o}", "installation_id", op->installation.id, "installation", view));
    }
    rl_call_release(call);
}

int rl_pairing_claim(rl_call_t *call)
{
    const char *typed = rl_body_string(call, "code");
    char code[CODE_LEN + 1], code_hash[RL_TOKEN_HASH_HEX + 1];
    struct pairing_claim *op;

    if (normalize_code(typed, strlen(typed), code) != 0)
        return RL_E_INVALID_REQUEST;
    rl_token_hash(code, CODE_LEN, code_hash);
    op = rl_op_new(&pairing_claim_type, sizeof(*op));
    op->code_hash = rl_op_str(op, code_hash);
    op->user_id = rl_op_str(op, call->principal);
    op->now = rl_clock_now_ms();
    rl_op_submit_for(call, op, on_claimed);
    return 0;
}
