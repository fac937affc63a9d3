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
#include "http/query.h"
#include "http/sse.h"
#include "http/validate.h"
#include "relay/core/hub.h"
#include "relay/core/ops.h"
#include "relay/installations/context.h"
#include "relay/installations/pairing.h"
#include "auth/token.h"
#include "relay/core/views.h"

#define CODE_LEN         7
#define POLL_TOKEN_CHARS 32
#define MINT_ATTEMPTS    5
/* pairings.redeem_by: the poll token only, or "addr:" and the first code poller's address. */
#define REDEEM_POLL_TOKEN "poll_token"
#define REDEEM_ADDR       "addr:"
/* Long polls held at once for one client address (its IPv6 /64), past which it is answered 429. */
#define WAITS_PER_ADDR 4
/* The longest a code's long poll is held, and its default. */
#define WAIT_MAX_S 25

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
    /* one of the two is required: connector_type_id is the protocol authors' name for it (issue 26) */
    {.name = "connector_type",
     .type = RL_FT_STRING,
     .flags = RL_F_REQUIRED,
     .min_len = 1,
     .max_len = 64,
     .unless = "connector_type_id"},
    RL_FIELD_STRING("connector_type_id", 0, 1, 64),
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

/*
 * The protocol authors' answer (issue 26): expires_at in milliseconds, the
 * web client's pair page for the code, and how to install a bridge. The
 * poll token stays, for a bridge that polls the spec's way.
 */
static json_t *authors_start_answer(rl_call_t *call, const struct pairing_start *start)
{
    rl_installations_ctx_t *ctx = &rl_installations_of(call)->ctx;
    const char *connector = rl_body_string(call, "connector_type_id");
    char url[700], command[700], steps[1600];

    snprintf(url, sizeof(url), "%s/pair?code=%s", ctx->config->public_url, start->code);
    snprintf(command, sizeof(command), "relay-bridge pair --server %s", ctx->config->public_url);
    snprintf(steps, sizeof(steps),
             "1. Open %s on your phone, signed in to this relay.\n"
             "2. Check that it shows the code **%s** and confirm.\n"
             "3. Or type the code in the web client's pairing screen.",
             url, start->code);
    return json_pack("{s:s, s:I, s:s, s:s, s:s, s:s, s:{s:s, s:s}}", "code", start->code, "expires_at",
                     (json_int_t)start->expires_at, "poll_token", start->poll_token, "browser_url", url,
                     "install_command", command, "install_steps_md", steps, "connector", "id", connector,
                     "display_name", connector);
}

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
    } else if (rl_body_string(call, "connector_type_id") != NULL) {
        rl_call_reply(call, authors_start_answer(call, start));
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
    rl_installations_ctx_t *ctx = &rl_installations_of(call)->ctx;
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
    op->row.connector_type =
        rl_op_str(op, rl_body_string(call, rl_body_string(call, "connector_type") != NULL ? "connector_type"
                                                                                          : "connector_type_id"));
    op->row.host_label = rl_op_str(op, rl_body_string(call, "host_label"));
    op->row.state = "pending";
    op->row.created_at = now;
    op->row.expires_at = start->expires_at = now + ctx->config->pairing_ttl;
    op->row.claimed_at = RL_NO_TIME;
    /*
     * A spec start is redeemed by its poll token alone: the code is shown on
     * screens and typed by people, so it must not be a bearer of the token
     * (docs/api.md, "Who redeems a pairing"). An authors' start is bound by
     * its first poll.
     */
    op->row.redeem_by = rl_body_string(call, "connector_type_id") != NULL ? NULL : REDEEM_POLL_TOKEN;
    rl_store_submit(ctx->store, &op->op.base, on_start_inserted, start);
}

int rl_pairing_start(rl_call_t *call)
{
    struct pairing_start *start;

    start = calloc(1, sizeof(*start));
    if (start == NULL)
        return RL_E_INTERNAL;
    start->call = call;
    rl_call_hold(call);
    start_insert(start);
    return 0;
}

/*
 * A bridge token's secret part, s_<env>_ and random base62, into token (size
 * bytes, at least RL_TOKEN_MAX), and its hash, which is what the store keeps.
 */
static void mint_token(const rl_installations_ctx_t *ctx, char *token, size_t size, char *hash)
{
    snprintf(token, size, "s_%s_", ctx->config->token_env);
    rl_rand_base62(token + strlen(token), RL_TOKEN_SECRET_CHARS);
    rl_token_hash(token, strlen(token), hash);
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
    if (strcmp(pairing.state, "pending") == 0 && pairing.expires_at <= op->now)
        return RL_E_PAIRING_EXPIRED;
    /*
     * The poll token is the starter's own secret and always redeems; polled
     * before any long poll by code, it shuts that way out.
     */
    if (pairing.redeem_by == NULL) {
        pairing.redeem_by = REDEEM_POLL_TOKEN;
        result = RL_TXN(txn, pairing_update, &pairing);
        if (result != 0)
            return result;
    }
    if (strcmp(pairing.state, "pending") == 0)
        return 0;
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
    rl_installations_ctx_t *ctx = &rl_installations_of(call)->ctx;
    struct poll_secret *secret = calloc(1, sizeof(*secret));
    struct pairing_poll *op;
    char hash[RL_TOKEN_HASH_HEX + 1];

    if (secret == NULL)
        return RL_E_INTERNAL;
    secret->call = call;
    op = rl_op_new(&pairing_poll_type, sizeof(*op));
    /* Only the secret part is minted here (s_<env>_...); its hash is what the store keeps. */
    mint_token(ctx, secret->token, sizeof(secret->token), hash);
    op->token_hash = rl_op_str(op, hash);
    op->token_env = rl_op_str(op, ctx->config->token_env);
    rl_token_hash(rl_body_string(call, "poll_token"), strlen(rl_body_string(call, "poll_token")), hash);
    op->poll_hash = rl_op_str(op, hash);
    op->now = rl_clock_now_ms();
    rl_call_hold(call);
    rl_store_submit(ctx->store, &op->op.base, on_polled, secret);
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
    rl_installations_ctx_t *ctx = &rl_installations_of(call)->ctx;

    if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
    } else {
        json_t *view = rl_view_installation(&op->installation, rl_bus_presence_get(ctx->bus, op->installation.id));
        rl_log_info("installation %s paired", op->installation.id);
        /* spec: claiming creates the installation and emits installation_created. */
        rl_hub_publish(ctx->hub, call->principal, RL_EV_INSTALLATION_CREATED,
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

/* ---- the authors' long poll by code (issue 26) ---- */

struct pair_wait {
    rl_call_t *call;
    rl_pair_waits_t *waits;
    char code[CODE_LEN + 1];
    char code_hash[RL_TOKEN_HASH_HEX + 1];
    char redeemer[sizeof(REDEEM_ADDR) + RL_ADDR_TEXT_MAX]; /* "addr:" and the client's address (its /64) */
    int64_t deadline;
    int checking; /* a store read is under way */
    int gone;     /* the client hung up while the read was under way */
    h2o_timeout_entry_t tick;
    rl_http_hangup_t hangup;
    struct wait_guard *guard; /* in the request's pool while both last */
    struct pair_wait *next, **prev;
};

/*
 * h2o disposes of a request whose connection it closes (after which it closes
 * the socket): the poll then stops watching the socket and gives its place
 * back, whatever closed it.
 */
struct wait_guard {
    struct pair_wait *wait;
};

struct rl_pair_waits {
    const rl_installations_ctx_t *ctx;
    h2o_timeout_t tick;
    struct pair_wait *list;
    size_t count;
    int closing;
};

struct pair_check {
    rl_op_t op;
    const char *code_hash, *token_hash, *token_env, *redeemer;
    int64_t now;
    const char *status;          /* result: pending, claimed, expired */
    const char *installation_id; /* result, when claimed */
};

/*
 * Whether the code's pairing was claimed (the token is handed out now, once),
 * is pending, or is over, for this poller. A pairing this poller may not
 * redeem (a spec start's, or one an earlier poll bound to another address)
 * is "expired" at once, as an unknown code is: the code poll tells a guesser
 * nothing about the codes of others.
 */
static int pair_check_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct pair_check *op = (void *)base;
    rl_pairing_row_t pairing;
    rl_installation_row_t installation;
    int result = RL_TXN(txn, pairing_by_code_any, op->code_hash, &pairing);
    int live;

    /* Unknown, expired and spent look the same, as for a claim. */
    op->status = "expired";
    if (result == RL_E_NOT_FOUND)
        return 0;
    if (result != 0)
        return result;
    live = strcmp(pairing.state, "claimed") == 0 ||
           (strcmp(pairing.state, "pending") == 0 && pairing.expires_at > op->now);
    if (!live || (pairing.redeem_by != NULL && strcmp(pairing.redeem_by, op->redeemer) != 0))
        return 0;
    /* The first poll binds an authors' pairing: from then on, only its address polls it by code. */
    if (pairing.redeem_by == NULL) {
        pairing.redeem_by = op->redeemer;
        result = RL_TXN(txn, pairing_update, &pairing);
        if (result != 0)
            return result;
    }
    if (strcmp(pairing.state, "pending") == 0) {
        op->status = "pending";
        return 0;
    }
    if ((result = RL_TXN(txn, installation_get, pairing.installation_id, &installation)) != 0)
        return result == RL_E_NOT_FOUND ? 0 : result;
    installation.token_hash = op->token_hash;
    installation.token_env = op->token_env;
    pairing.state = "delivered";
    if ((result = RL_TXN(txn, installation_update, &installation)) != 0 ||
        (result = RL_TXN(txn, pairing_update, &pairing)) != 0)
        return result;
    op->status = "claimed";
    op->installation_id = pairing.installation_id;
    return 0;
}

static const rl_store_op_type_t pair_check_type = RL_OP_TYPE(pairing_wait, 1, pair_check_run);

struct pair_check_secret {
    struct pair_wait *wait;
    char token[RL_TOKEN_MAX];
};

/* The poll lets go of its request's guard and of the request's socket. */
static void wait_detach(struct pair_wait *wait)
{
    if (wait->guard != NULL)
        wait->guard->wait = NULL;
    wait->guard = NULL;
    rl__http_hangup_stop(&wait->hangup);
}

/* Gives the poll's place back; it was answered, or its client is gone. */
static void wait_end(struct pair_wait *wait)
{
    wait_detach(wait);
    if (h2o_timeout_is_linked(&wait->tick))
        h2o_timeout_unlink(&wait->tick);
    *wait->prev = wait->next;
    if (wait->next != NULL)
        wait->next->prev = wait->prev;
    wait->waits->count--;
    rl_call_release(wait->call);
    free(wait);
}

/* Answers the poll (steals answer) and ends it; the watch of its connection stops first. */
static void wait_answer(struct pair_wait *wait, json_t *answer)
{
    wait_detach(wait);
    rl_call_reply(wait->call, answer);
    wait_end(wait);
}

static void wait_check(struct pair_wait *wait);

static void on_pair_checked(rl_store_op_t *base)
{
    struct pair_check *op = (void *)base;
    struct pair_check_secret *secret = base->arg;
    struct pair_wait *wait = secret->wait;
    rl_call_t *call = wait->call;
    const rl_installations_ctx_t *ctx = wait->waits->ctx;

    wait->checking = 0;
    if (base->result != 0) {
        wait_detach(wait);
        rl_call_fail(call, base->result, NULL);
        wait_end(wait);
    } else if (strcmp(op->status, "claimed") == 0) {
        char whole[RL_TOKEN_MAX + RL_INSTALLATION_ID_LEN + 2], ws[600];
        const char *url = ctx->config->public_url;
        /* authors' wire: the socket's URL, ws:// or wss:// as the relay's own scheme says. */
        snprintf(ws, sizeof(ws), "%s%s/v1/bridge/ws", strncmp(url, "https:", 6) == 0 ? "wss:" : "ws:",
                 strchr(url, ':') != NULL ? strchr(url, ':') + 1 : url);
        snprintf(whole, sizeof(whole), "%s:%s", op->installation_id, secret->token);
        wait_answer(wait, json_pack("{s:s, s:s, s:s, s:s}", "status", "claimed", "bot_token", whole, "installation_id",
                                    op->installation_id, "sophon_ws_url", ws));
        OPENSSL_cleanse(whole, sizeof(whole));
        rl_log_info("pairing delivered a token for installation %s", op->installation_id);
    } else if (strcmp(op->status, "expired") == 0 || wait->gone || !rl_call_alive(call) || wait->waits->closing ||
               rl_clock_now_ms() >= wait->deadline - RL_PAIR_WAIT_TICK_MS / 10) {
        wait_answer(wait, json_pack("{s:s}", "status", rl_call_alive(call) ? op->status : "pending"));
    } else {
        h2o_timeout_link(ctx->loop, &wait->waits->tick, &wait->tick);
    }
    OPENSSL_cleanse(secret, sizeof(*secret));
    free(secret);
}

static void wait_check(struct pair_wait *wait)
{
    const rl_installations_ctx_t *ctx = wait->waits->ctx;
    struct pair_check_secret *secret = calloc(1, sizeof(*secret));
    struct pair_check *op;
    char hash[RL_TOKEN_HASH_HEX + 1];

    if (secret == NULL) {
        wait_detach(wait);
        rl_call_fail(wait->call, RL_E_INTERNAL, NULL);
        wait_end(wait);
        return;
    }
    secret->wait = wait;
    op = rl_op_new(&pair_check_type, sizeof(*op));
    /* As the spec's poll: the secret is minted here, and only its hash is stored, if the claim is there. */
    mint_token(ctx, secret->token, sizeof(secret->token), hash);
    op->token_hash = rl_op_str(op, hash);
    op->token_env = rl_op_str(op, ctx->config->token_env);
    op->code_hash = rl_op_str(op, wait->code_hash);
    op->redeemer = rl_op_str(op, wait->redeemer);
    op->now = rl_clock_now_ms();
    wait->checking = 1;
    rl_store_submit(ctx->store, &op->op.base, on_pair_checked, secret);
}

static void on_wait_tick(h2o_timeout_entry_t *entry)
{
    struct pair_wait *wait = H2O_STRUCT_FROM_MEMBER(struct pair_wait, tick, entry);

    wait_check(wait);
}

/*
 * An HTTP/1 client hung up (HTTP/2 disposes of the request, seen at the next
 * tick): the poll's place is given back now, not at its timeout. The answer
 * makes h2o write and so close the connection; a poll whose store read is
 * under way ends when the read is back.
 */
static void on_wait_hangup(rl_http_hangup_t *hangup)
{
    struct pair_wait *wait = H2O_STRUCT_FROM_MEMBER(struct pair_wait, hangup, hangup);

    if (wait->checking) {
        wait->gone = 1;
        return;
    }
    wait_answer(wait, json_pack("{s:s}", "status", "pending"));
}

static void on_wait_disposed(void *p)
{
    struct wait_guard *guard = p;
    struct pair_wait *wait = guard->wait;

    if (wait == NULL)
        return;
    wait_detach(wait);
    if (wait->checking)
        wait->gone = 1;
    else
        wait_end(wait);
}

/* The polls this client address holds now (a node holds at most RL_PAIR_WAITS_MAX). */
size_t rl_pair_waits_count(const rl_pair_waits_t *waits)
{
    return waits != NULL ? waits->count : 0;
}

static size_t waits_of(const rl_pair_waits_t *waits, const char *redeemer)
{
    const struct pair_wait *wait;
    size_t count = 0;

    for (wait = waits->list; wait != NULL; wait = wait->next)
        count += strcmp(wait->redeemer, redeemer) == 0;
    return count;
}

int rl_pairing_wait(rl_call_t *call)
{
    rl_pair_waits_t *waits = rl_installations_of(call)->pair_waits;
    char typed[40], redeemer[sizeof(((struct pair_wait *)NULL)->redeemer)];
    struct pair_wait *wait;
    long timeout = WAIT_MAX_S;
    long long seconds = 0;
    int found = call->req != NULL ? rl_query_param(call->req, "code", typed, sizeof(typed)) : 1;
    json_t *errors = json_array();

    if (found != 0 || normalize_code(typed, strlen(typed), typed) != 0)
        json_array_append_new(errors, json_pack("{s:s, s:s, s:s}", "path", "code", "code",
                                                found != 0 ? "invalid_type" : "invalid_string", "message",
                                                found != 0 ? "Required" : "Pairing codes are 7 letters"));
    found = call->req != NULL ? rl_query_integer(call->req, "timeout", &seconds) : 1;
    if (found == 0) {
        /* Any whole number is taken, clamped: a client asking for a day waits the longest we hold. */
        timeout = seconds < 0 ? 0 : seconds > WAIT_MAX_S ? WAIT_MAX_S : (long)seconds;
    } else if (found != 1) {
        json_array_append_new(errors,
                              json_pack("{s:s, s:s, s:s}", "path", "timeout", "code", "invalid_type", "message",
                                        found == RL_QUERY_TWICE ? "Given more than once" : "Expected whole seconds"));
    }
    if (json_array_size(errors) > 0) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL, errors, NULL);
        return 0;
    }
    json_decref(errors);
    snprintf(redeemer, sizeof(redeemer), "%s%s", REDEEM_ADDR, call->peer_group);
    /* A node holds a bounded number of polls; past it, the bridge comes back a little later. */
    if (waits == NULL || waits->closing || waits->count >= RL_PAIR_WAITS_MAX) {
        call->rate.retry_after_ms = 1000;
        rl_call_fail(call, RL_E_UNAVAILABLE, "too many pairing polls wait on this node; retry later");
        return 0;
    }
    /* One address may not take the node's places: a few polls each, enough for a few bridges behind one NAT. */
    if (waits_of(waits, redeemer) >= WAITS_PER_ADDR) {
        call->rate.retry_after_ms = 2000;
        rl_call_fail(call, RL_E_RATE_LIMITED, "too many pairing polls from this address wait at once; retry later");
        return 0;
    }
    wait = calloc(1, sizeof(*wait));
    if (wait == NULL)
        return RL_E_INTERNAL;
    wait->call = call;
    wait->waits = waits;
    memcpy(wait->code, typed, sizeof(wait->code));
    memcpy(wait->redeemer, redeemer, sizeof(wait->redeemer));
    rl_token_hash(wait->code, CODE_LEN, wait->code_hash);
    wait->deadline = rl_clock_now_ms() + timeout * 1000;
    wait->tick.cb = on_wait_tick;
    wait->next = waits->list;
    wait->prev = &waits->list;
    if (waits->list != NULL)
        waits->list->prev = &wait->next;
    waits->list = wait;
    waits->count++;
    rl_call_hold(call);
    if (call->req != NULL) {
        wait->guard = h2o_mem_alloc_shared(&call->req->pool, sizeof(*wait->guard), on_wait_disposed);
        wait->guard->wait = wait;
        (void)rl__http_hangup_watch(&wait->hangup, call->req, on_wait_hangup);
    }
    wait_check(wait);
    return 0;
}

rl_pair_waits_t *rl_pair_waits_new(const rl_installations_ctx_t *ctx)
{
    rl_pair_waits_t *waits = calloc(1, sizeof(*waits));

    if (waits == NULL)
        return NULL;
    waits->ctx = ctx;
    h2o_timeout_init(ctx->loop, &waits->tick, RL_PAIR_WAIT_TICK_MS);
    return waits;
}

void rl_pair_waits_close(rl_pair_waits_t *waits)
{
    struct pair_wait *wait, *next;

    if (waits == NULL)
        return;
    waits->closing = 1;
    /* Those waiting for their tick answer now; one in the store answers when its read is back. */
    for (wait = waits->list; wait != NULL; wait = next) {
        next = wait->next;
        if (!wait->checking)
            wait_answer(wait, json_pack("{s:s}", "status", "pending"));
    }
}

void rl_pair_waits_free(rl_pair_waits_t *waits)
{
    if (waits == NULL)
        return;
    rl_pair_waits_close(waits);
    h2o_timeout_dispose(waits->ctx->loop, &waits->tick);
    free(waits);
}
