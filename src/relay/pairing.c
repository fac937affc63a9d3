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
#include "relay/relay.h"
#include "relay/token.h"

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

struct pairing_start {
    rl_call_t *call;
    int attempts;
    char code[CODE_LEN + 1];
    char poll_token[2 + POLL_TOKEN_CHARS + 1];
    char poll_hash[RL_TOKEN_HASH_HEX + 1];
    char code_hash[RL_TOKEN_HASH_HEX + 1];
    char installation_id[RL_INSTALLATION_ID_LEN + 1];
    rl_pairing_new_t row;
};

static void start_free(struct pairing_start *start)
{
    OPENSSL_cleanse(start, sizeof(*start));
    free(start);
}

static void start_insert(struct pairing_start *start);

static void on_start_inserted(int result, json_t *value, void *arg)
{
    struct pairing_start *start = arg;
    rl_call_t *call = start->call;

    json_decref(value);
    /* A live code collided with the new one: mint another (26^7 codes make this rare). */
    if (result == RL_E_IDEMPOTENCY_CONFLICT && ++start->attempts < MINT_ATTEMPTS) {
        start_insert(start);
        return;
    }
    if (result != 0) {
        rl_call_fail(call, result == RL_E_IDEMPOTENCY_CONFLICT ? RL_E_UNAVAILABLE : result, NULL);
    } else {
        /* spec: expires_at is in epoch seconds, 120 s ahead. */
        rl_call_reply(call, json_pack("{s:s, s:I, s:s}", "code", start->code, "expires_at",
                                      (json_int_t)(start->row.expires_at / 1000), "poll_token", start->poll_token));
    }
    rl_call_release(call);
    start_free(start);
}

static void start_insert(struct pairing_start *start)
{
    rl_relay_t *relay = start->call->app;
    int64_t now = rl_clock_now_ms();

    rl_rand_upper(start->code, CODE_LEN);
    memcpy(start->poll_token, "p_", 2);
    rl_rand_base62(start->poll_token + 2, POLL_TOKEN_CHARS);
    rl_rand_id(start->installation_id, sizeof(start->installation_id), "inst_", 16);
    rl_token_hash(start->code, CODE_LEN, start->code_hash);
    rl_token_hash(start->poll_token, strlen(start->poll_token), start->poll_hash);
    start->row.poll_hash = start->poll_hash;
    start->row.code_hash = start->code_hash;
    start->row.installation_id = start->installation_id;
    start->row.created_at = now;
    start->row.expires_at = now + relay->config.pairing_ttl;
    rl_store_pairing_insert(relay->store, &start->row, on_start_inserted, start);
}

int rl_pairing_start(rl_call_t *call)
{
    struct pairing_start *start = calloc(1, sizeof(*start));

    if (start == NULL)
        return RL_E_INTERNAL;
    start->call = call;
    start->row.connector_type = json_string_value(json_object_get(call->body, "connector_type"));
    start->row.host_label = json_string_value(json_object_get(call->body, "host_label"));
    rl_call_hold(call);
    start_insert(start);
    return 0;
}

struct pairing_poll {
    rl_call_t *call;
    char token[RL_TOKEN_MAX];
    char token_hash[RL_TOKEN_HASH_HEX + 1];
};

static void on_polled(int result, json_t *value, void *arg)
{
    struct pairing_poll *poll = arg;
    rl_call_t *call = poll->call;

    if (result != 0) {
        rl_call_fail(call, result, NULL);
    } else if (strcmp(json_string_value(json_object_get(value, "status")), "paired") == 0) {
        const char *installation_id = json_string_value(json_object_get(value, "installation_id"));
        char whole[RL_TOKEN_MAX + RL_INSTALLATION_ID_LEN + 2];
        /* The secret was minted before the installation id was known; join them now. */
        snprintf(whole, sizeof(whole), "%s:%s", installation_id, poll->token);
        rl_call_reply(
            call, json_pack("{s:s, s:s, s:s}", "status", "paired", "installation_id", installation_id, "token", whole));
        OPENSSL_cleanse(whole, sizeof(whole));
        rl_log_info("pairing delivered a token for installation %s", installation_id);
    } else {
        rl_call_reply(call, json_pack("{s:s}", "status", "pending"));
    }
    json_decref(value);
    rl_call_release(call);
    OPENSSL_cleanse(poll, sizeof(*poll));
    free(poll);
}

int rl_pairing_poll(rl_call_t *call)
{
    rl_relay_t *relay = call->app;
    const char *poll_token = json_string_value(json_object_get(call->body, "poll_token"));
    struct pairing_poll *poll = calloc(1, sizeof(*poll));
    char poll_hash[RL_TOKEN_HASH_HEX + 1];

    if (poll == NULL)
        return RL_E_INTERNAL;
    poll->call = call;
    /* Only the secret part is minted here (s_<env>_...); its hash is what the store keeps. */
    snprintf(poll->token, sizeof(poll->token), "s_%s_", relay->config.token_env);
    rl_rand_base62(poll->token + strlen(poll->token), RL_TOKEN_SECRET_CHARS);
    rl_token_hash(poll->token, strlen(poll->token), poll->token_hash);
    rl_token_hash(poll_token, strlen(poll_token), poll_hash);
    rl_call_hold(call);
    rl_store_pairing_poll(relay->store, poll_hash, poll->token_hash, relay->config.token_env, rl_clock_now_ms(),
                          on_polled, poll);
    return 0;
}

static void on_claimed(int result, json_t *installation, void *arg)
{
    rl_call_t *call = arg;

    if (result != 0) {
        rl_call_fail(call, result, NULL);
    } else {
        json_t *view = rl_installation_view(call->app, installation);
        installation = NULL;
        rl_log_info("installation %s paired", json_string_value(json_object_get(view, "id")));
        /* spec: claiming creates the installation and emits installation_created. */
        rl_relay_publish(call->app, call->principal, "installation_created",
                         json_pack("{s:O, s:O}", "installation_id", json_object_get(view, "id"), "installation", view));
        rl_call_reply(call,
                      json_pack("{s:O, s:o}", "installation_id", json_object_get(view, "id"), "installation", view));
    }
    json_decref(installation);
    rl_call_release(call);
}

int rl_pairing_claim(rl_call_t *call)
{
    rl_relay_t *relay = call->app;
    const char *typed = json_string_value(json_object_get(call->body, "code"));
    char code[CODE_LEN + 1], code_hash[RL_TOKEN_HASH_HEX + 1];

    if (normalize_code(typed, strlen(typed), code) != 0)
        return RL_E_INVALID_REQUEST;
    rl_token_hash(code, CODE_LEN, code_hash);
    rl_call_hold(call);
    rl_store_pairing_claim(relay->store, code_hash, call->principal, rl_clock_now_ms(), on_claimed, call);
    return 0;
}
