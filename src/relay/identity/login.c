#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "common/args.h"
#include "common/clock.h"
#include "common/duration.h"
#include "common/error.h"
#include "common/log.h"
#include "common/qr.h"
#include "common/rand.h"
#include "relay/core/auth.h"
#include "auth/jwt.h"
#include "relay/core/datalock.h"
#include "relay/core/feature.h"
#include "relay/identity/identity.h"
#include "relay/identity/login.h"
#include "relay/core/ops.h"
#include "auth/token.h"

struct rl_login {
    rl_jwt_issuer_t *issuer; /* NULL with an external provider */
};

/* ---- the store's side: one insert, and a redeem that spends the code whatever its age ---- */

struct code_insert {
    rl_store_op_t base;
    rl_login_code_row_t row;
};

static int code_insert_run(rl_txn_t *txn, rl_store_op_t *base)
{
    return RL_TXN(txn, login_code_insert, &((struct code_insert *)base)->row);
}

static const rl_store_op_type_t code_insert_type = {"login_code_insert", 1, code_insert_run, NULL};

struct code_redeem {
    rl_store_op_t base;
    const char *code_hash;
    int64_t now;
    rl_login_code_row_t row; /* result */
    int expired;
};

static int code_redeem_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct code_redeem *op = (void *)base;
    int result = RL_TXN(txn, login_code_get, op->code_hash, &op->row);

    if (result == RL_E_NOT_FOUND)
        return RL_E_INVALID_TOKEN;
    /* Single use: the code goes now, even when it has expired (that answer is an error, but not a rollback). */
    if (result != 0 || (result = RL_TXN(txn, login_code_delete, op->code_hash)) != 0)
        return result;
    op->expired = op->row.expires_at <= op->now;
    return 0;
}

static const rl_store_op_type_t code_redeem_type = {"login_code_redeem", 1, code_redeem_run, NULL};

static int check_code(const char *s, size_t len)
{
    size_t i;

    for (i = 0; i < len; ++i) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')))
            return -1;
    }
    return 0;
}

static const rl_field_t exchange_fields[] = {
    RL_FIELD_STRING_CHECK("code", RL_F_REQUIRED, 1, 64, check_code, "a sign-in code is letters and digits"),
    RL_FIELD_END,
};
const rl_schema_t rl_login_exchange_schema = RL_SCHEMA(exchange_fields);

int rl_login_open(const rl_config_t *config, rl_login_t **out)
{
    rl_login_t *login = calloc(1, sizeof(*login));

    *out = NULL;
    if (login == NULL)
        return -1;
    /* With an external provider, sign-in goes through it; the embedded key signs nothing there. */
    if (config->jwks_file[0] == '\0' && config->jwks_url[0] == '\0' &&
        rl_jwt_issuer_open(config->data, &login->issuer) != 0) {
        free(login);
        return -1;
    }
    *out = login;
    return 0;
}

void rl_login_close(rl_login_t *login)
{
    if (login == NULL)
        return;
    rl_jwt_issuer_free(login->issuer);
    free(login);
}

static void on_redeemed(rl_store_op_t *base)
{
    struct code_redeem *op = (void *)base;
    rl_call_t *call = base->arg;
    const rl_identity_t *identity = rl_feature_of(call, RL_FEATURE_IDENTITY);
    const char *user_id = op->row.user_id;
    int64_t now_s = rl_clock_now_ms() / 1000, ttl_s = identity->ctx.config->web_token_ttl / 1000;
    int result = base->result != 0 ? base->result : op->expired ? RL_E_INVALID_TOKEN : 0;
    char *token;

    if (result != 0) {
        rl_call_fail(call, result, "the sign-in link is unknown, used or expired: ask for a new one");
    } else if ((token = rl_jwt_issuer_sign(identity->login->issuer, RL_EMBEDDED_ISSUER, RL_EMBEDDED_AUDIENCE, user_id,
                                           now_s, ttl_s)) == NULL) {
        rl_call_fail(call, RL_E_INTERNAL, NULL);
    } else {
        rl_log_fields(RL_LOG_INFO, json_pack("{s:s, s:s, s:s}", "msg", "signed in with a link", "request_id",
                                             call->request_id, "user_id", user_id));
        rl_call_reply(call, json_pack("{s:s, s:s, s:I}", "token", token, "user_id", user_id, "expires_at",
                                      (json_int_t)(now_s + ttl_s) * 1000));
        OPENSSL_cleanse(token, strlen(token));
        free(token);
    }
    rl_call_release(call);
}

int rl_login_exchange(rl_call_t *call)
{
    const rl_identity_t *identity = rl_feature_of(call, RL_FEATURE_IDENTITY);
    const char *code = rl_body_string(call, "code");
    char hash[RL_TOKEN_HASH_HEX + 1];
    struct code_redeem *op;

    if (identity->login->issuer == NULL) {
        rl_call_fail(call, RL_E_PERMISSION_DENIED,
                     "this relay signs users in through its identity provider, not with links");
        return 0;
    }
    rl_token_hash(code, strlen(code), hash);
    op = rl_store_op_new(&code_redeem_type, sizeof(*op));
    op->code_hash = rl_arena_strdup(&op->base.arena, hash);
    op->now = rl_clock_now_ms();
    rl_op_submit_for(call, op, on_redeemed);
    return 0;
}

/* ---- relayd login-link ---- */

struct link_outcome {
    int done, result;
};

static void on_inserted(rl_store_op_t *base)
{
    struct link_outcome *outcome = base->arg;

    outcome->done = 1;
    outcome->result = base->result;
}

/* The same rule as a token's sub: printable ASCII without spaces, at most 255 bytes. */
static int user_id_ok(const char *user)
{
    size_t len = strlen(user), i;

    if (len == 0 || len > 255)
        return 0;
    for (i = 0; i < len; ++i) {
        if (user[i] <= 0x20 || user[i] >= 0x7f)
            return 0;
    }
    return 1;
}

static int usage(void)
{
    fprintf(stderr, "usage: relayd login-link USER [--data DIR] [--store URL] [--ttl DURATION] [--public-url URL] "
                    "[--listen HOST:PORT]\n");
    return 2;
}

static const char *set(const char *value)
{
    return value != NULL && value[0] != '\0' ? value : NULL;
}

/*
 * Where the link points: what this command is told (--public-url, else
 * --listen), else the address the relayd on this data folder serves (it
 * writes DATA/relayd.url once it listens: its own --public-url, or the
 * address it listens on, the one make run picked included), else the
 * environment (RELAY_PUBLIC_URL, RELAY_LISTEN), else relayd's default.
 * The running relayd goes before the environment: a shell's RELAY_LISTEN may
 * be another relay's, the file is this folder's.
 */
static void link_base(const char *data, const char *public_url, const char *listen, char *served, size_t servedsz,
                      char *base, size_t basesz)
{
    if (set(public_url) != NULL)
        snprintf(base, basesz, "%s", public_url);
    else if (set(listen) != NULL)
        snprintf(base, basesz, "http://%s", listen);
    else if (rl_dataurl_read(data, served, servedsz) == 0)
        snprintf(base, basesz, "%s", served);
    else if (set(getenv("RELAY_PUBLIC_URL")) != NULL)
        snprintf(base, basesz, "%s", getenv("RELAY_PUBLIC_URL"));
    else if (set(getenv("RELAY_LISTEN")) != NULL)
        snprintf(base, basesz, "http://%s", getenv("RELAY_LISTEN"));
    else
        snprintf(base, basesz, "http://127.0.0.1:8080");
}

int rl_login_link_command(int argc, char **argv)
{
    const char *user = NULL, *data = getenv("RELAY_DATA"), *ttl_text = RL_LOGIN_TTL_DEFAULT;
    const char *public_url = NULL, *listen = NULL;
    const char *location = getenv("RELAY_STORE");
    char code[RL_LOGIN_CODE_CHARS + 1], hash[RL_TOKEN_HASH_HEX + 1], base[600], served[RL_DATAURL_MAX];
    struct link_outcome outcome = {0, 0};
    struct code_insert *op;
    rl_store_t *store = NULL;
    int64_t ttl_ms, now;
    size_t len;
    int i;

    if (data == NULL)
        data = "data";
    for (i = 2; i < argc; ++i) {
        if (rl_arg_value(argc, argv, &i, "--data", &data) || rl_arg_value(argc, argv, &i, "--store", &location) ||
            rl_arg_value(argc, argv, &i, "--ttl", &ttl_text) ||
            rl_arg_value(argc, argv, &i, "--public-url", &public_url) ||
            rl_arg_value(argc, argv, &i, "--listen", &listen))
            continue;
        if (argv[i][0] != '-' && user == NULL)
            user = argv[i];
        else
            return usage();
    }
    if (user == NULL)
        return usage();
    if (!user_id_ok(user)) {
        fprintf(stderr, "relayd login-link: user ids are printable ASCII without spaces, at most 255 bytes\n");
        return 2;
    }
    if (rl_duration_parse(ttl_text, &ttl_ms) != 0 || ttl_ms < 1000 || ttl_ms > RL_LOGIN_TTL_MAX_MS) {
        fprintf(stderr, "relayd login-link: --ttl needs a duration from 1s to 24h, such as 10m\n");
        return 2;
    }
    link_base(data, public_url, listen, served, sizeof(served), base, sizeof(base));
    len = strlen(base);
    while (len > 0 && base[len - 1] == '/')
        base[--len] = '\0';
    if (strncmp(base, "http://", 7) != 0 && strncmp(base, "https://", 8) != 0) {
        fprintf(stderr, "relayd login-link: --public-url must start with http:// or https://\n");
        return 2;
    }
    if (mkdir(data, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "relayd login-link: cannot create %s: %s\n", data, strerror(errno));
        return 1;
    }
    /*
     * The relay's own store (the one its nodes share, with --store); beside a running relayd, SQLite's WAL
     * lets this second connection write between the relay's batches.
     */
    if (rl_store_open_inline(location != NULL && location[0] != '\0' ? location : data, &store) != 0)
        return 1;
    rl_rand_base62(code, RL_LOGIN_CODE_CHARS);
    rl_token_hash(code, RL_LOGIN_CODE_CHARS, hash);
    now = rl_clock_now_ms();
    op = rl_store_op_new(&code_insert_type, sizeof(*op));
    op->row.code_hash = rl_arena_strdup(&op->base.arena, hash);
    op->row.user_id = rl_arena_strdup(&op->base.arena, user);
    op->row.created_at = now;
    op->row.expires_at = now + ttl_ms;
    rl_store_submit(store, &op->base, on_inserted, &outcome);
    rl_store_drain(store);
    rl_store_close(store);
    if (!outcome.done || outcome.result != 0) {
        OPENSSL_cleanse(code, sizeof(code));
        fprintf(stderr, "relayd login-link: cannot store the sign-in code in %s\n", data);
        return 1;
    }
    snprintf(base + len, sizeof(base) - len, "/login#code=%s", code);
    OPENSSL_cleanse(code, sizeof(code));
    if (isatty(STDOUT_FILENO)) {
        printf("Open this link on your phone to sign in as %s (once, within %s):\n\n", user, ttl_text);
        rl_qr_print(stdout, base);
        printf("\n");
    }
    printf("%s\n", base);
    OPENSSL_cleanse(base, sizeof(base));
    return 0;
}
