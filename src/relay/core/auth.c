/*
 * Authentication of API calls: user JWTs for /v1/me routes, bridge tokens for
 * /v1/bridge routes. Both end in rl_call_proceed; every refusal is one of the
 * spec's 401/403/410 codes and never says which part of a token was wrong.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/strmap.h"
#include "relay/core/auth.h"
#include "auth/jwks_source.h"
#include "bus/bus.h"
#include "auth/jwt.h"
#include "relay/core/ops.h"
#include "relay/core/ratelimit.h"
#include "relay/core/relay.h"
#include "auth/token.h"

#define KNOWN_USERS_MAX 100000
#define VERIFIED_MAX    100000
/* A verified user token is trusted for this long (or until its exp, if sooner). */
#define VERIFIED_TTL_MS (5 * 60 * 1000)
/* A bridge token's installation is looked up again after this long; a revocation drops it at once. */
#define BRIDGE_TTL_MS (30 * 1000)

/*
 * Verifying a signature costs far more than the rest of a request, so a
 * verified user token is remembered by its SHA-256, and a bridge token's
 * installation row by its id. Both caches are of this node: a revocation
 * drops the entry here at once and travels on the bus's auth topic to every
 * other node (installations.c, rl_auth_on_signal); a key removed from the
 * JWKS stops tokens signed with it within VERIFIED_TTL_MS.
 */
struct verified {
    char sub[RL_JWT_SUB_MAX + 1];
    int64_t until_ms;
};

struct bridge_entry {
    char secret_hash[RL_TOKEN_HASH_HEX + 1];
    /* The mac of the secret last found to match secret_hash: the same secret again needs no SHA-256. */
    unsigned char mac[RL_TOKEN_MAC_LEN];
    int mac_set;
    char user_id[RL_PRINCIPAL_MAX + 1];
    int revoked;
    int64_t until_ms;
};

struct rl_auth {
    rl_jwks_source_t *jwks;
    rl_jwt_policy_t policy;
    rl_strmap_t *known_users;     /* users already ensured in the store by this process */
    rl_strmap_t *verified_tokens; /* SHA-256 of a verified user token -> its sub, until it lapses */
    rl_strmap_t *bridge_tokens;   /* installation id -> its token hash, owner and state, briefly */
};

struct bridge_lookup {
    rl_call_t *call;
    rl_bridge_token_t token;
    int want_installation; /* 0: the bridge token was shown to a user route */
};

static const char *bearer(const rl_call_t *call, size_t *len)
{
    const char *value = rl_call_header(call, "authorization", len);

    if (value == NULL || *len < 7 || strncasecmp(value, "Bearer ", 7) != 0)
        return NULL;
    value += 7;
    *len -= 7;
    while (*len > 0 && value[*len - 1] == ' ')
        --*len;
    return *len > 0 ? value : NULL;
}

struct user_ensure {
    rl_op_t op;
    rl_user_row_t row;
};

static int user_ensure_run(rl_txn_t *txn, rl_store_op_t *base)
{
    return RL_TXN(txn, user_insert_ignore, &((struct user_ensure *)base)->row);
}

static const rl_store_op_type_t user_ensure_type = RL_OP_TYPE(user_ensure, 1, user_ensure_run);

static void on_user_ensured(rl_store_op_t *base)
{
    rl_call_t *call = base->arg;
    rl_relay_t *relay = call->app;
    rl_auth_t *auth = relay->auth;

    if (base->result == 0) {
        if (rl_strmap_size(auth->known_users) >= KNOWN_USERS_MAX) {
            rl_strmap_free(auth->known_users, NULL);
            auth->known_users = rl_strmap_new(KNOWN_USERS_MAX);
        }
        if (auth->known_users != NULL)
            rl_strmap_put(auth->known_users, call->principal, auth);
    }
    rl_call_proceed(call, base->result);
    rl_call_release(call);
}

static int verify_user(rl_auth_t *auth, const char *token, size_t len, rl_jwt_claims_t *claims, const char **why)
{
    rl_jwks_t *keys;
    char digest[RL_TOKEN_HASH_HEX + 1];
    struct verified *hit;
    int64_t now = rl_clock_now_ms();
    int result;

    rl_token_hash(token, len, digest);
    hit = auth->verified_tokens != NULL ? rl_strmap_get(auth->verified_tokens, digest) : NULL;
    if (hit != NULL && hit->until_ms > now) {
        memset(claims, 0, sizeof(*claims));
        memcpy(claims->sub, hit->sub, sizeof(claims->sub));
        return 0;
    }
    keys = rl_jwks_source_get(auth->jwks);
    if (keys == NULL) {
        *why = "no_keys";
        return -1;
    }
    result = rl_jwt_verify(keys, &auth->policy, token, len, rl_clock_now_ms() / 1000, claims, why);
    rl_jwks_unref(keys);
    /* A key we have never seen may be a rotation at the provider: fetch its set again soon. */
    if (result != 0 && strcmp(*why, "unknown_kid") == 0)
        rl_jwks_source_refresh_soon(auth->jwks);
    if (result == 0 && auth->verified_tokens != NULL) {
        struct verified *entry = hit != NULL ? hit : malloc(sizeof(*entry));
        if (entry != NULL) {
            memcpy(entry->sub, claims->sub, sizeof(entry->sub));
            entry->until_ms = now + VERIFIED_TTL_MS;
            /* exp counts in seconds; the leeway is not extended by the cache. */
            if (claims->exp > 0 && claims->exp * 1000 < entry->until_ms)
                entry->until_ms = claims->exp * 1000;
            if (hit == NULL && rl_strmap_put(auth->verified_tokens, digest, entry) != 0)
                free(entry);
        }
    }
    return result;
}

/* As snprintf(out, outsz, "%s", id). */
static void copy_id(char *out, size_t outsz, const char *id)
{
    size_t len = strlen(id);

    if (len > outsz - 1)
        len = outsz - 1;
    memcpy(out, id, len);
    out[len] = '\0';
}

/*
 * Whether a presented token's secret is the one whose SHA-256 the entry
 * holds. The SHA-256 is taken once per entry: a secret that matched leaves
 * its mac (token.h), and the same secret again is known by it. A mac can
 * only be one a matching secret left, and it lives and goes with the entry
 * (a revocation or a new token drops the entry, BRIDGE_TTL_MS renews it).
 */
static int bridge_secret_matches(struct bridge_entry *entry, rl_bridge_token_t *token)
{
    if (entry->secret_hash[0] == '\0')
        return 0;
    if (entry->mac_set && rl_bridge_token_mac_equal(token, entry->mac))
        return 1;
    if (rl_bridge_token_hash(token) != 0 || !rl_token_hash_equal(entry->secret_hash, token->secret_hash))
        return 0;
    memcpy(entry->mac, token->mac, sizeof(entry->mac));
    entry->mac_set = 1;
    return 1;
}

/* Decides a bridge token against its installation's entry. */
static int judge_bridge(rl_call_t *call, rl_bridge_token_t *token, struct bridge_entry *entry, int want_installation)
{
    if (!bridge_secret_matches(entry, token))
        return RL_E_INVALID_TOKEN;
    /* A genuine bridge token on a user route: the token is real but lacks the scope. */
    if (!want_installation)
        return RL_E_PERMISSION_DENIED;
    /* brief: the upgrade gets 401 invalid_token, REST calls 410 installation_revoked. */
    if (entry->revoked)
        return call->route->auth == RL_AUTH_BRIDGE ? RL_E_INSTALLATION_GONE : RL_E_INVALID_TOKEN;
    call->principal_kind = RL_PRINCIPAL_INSTALLATION;
    /* Copied, not snprintf'd: this runs for every bridge request, and "%s" showed in the profile. */
    copy_id(call->principal, sizeof(call->principal), token->installation_id);
    copy_id(call->owner, sizeof(call->owner), entry->user_id);
    return 0;
}

struct installation_get {
    rl_op_t op;
    const char *id;
    rl_installation_row_t row;
    struct bridge_lookup *lookup;
};

static int installation_get_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct installation_get *op = (void *)base;

    return RL_TXN(txn, installation_get, op->id, &op->row);
}

static const rl_store_op_type_t installation_get_type = RL_OP_TYPE(installation_get, 0, installation_get_run);

static void on_installation(rl_store_op_t *base)
{
    struct installation_get *op = (void *)base;
    struct bridge_lookup *lookup = op->lookup;
    rl_call_t *call = lookup->call;
    rl_relay_t *relay = call->app;
    int err = RL_E_INVALID_TOKEN;

    if (base->result == 0) {
        struct bridge_entry *entry = calloc(1, sizeof(*entry));
        if (entry != NULL) {
            snprintf(entry->secret_hash, sizeof(entry->secret_hash), "%s",
                     op->row.token_hash != NULL ? op->row.token_hash : "");
            snprintf(entry->user_id, sizeof(entry->user_id), "%s", op->row.user_id);
            entry->revoked = strcmp(op->row.state, "revoked") == 0;
            entry->until_ms = rl_clock_now_ms() + BRIDGE_TTL_MS;
            err = judge_bridge(call, &lookup->token, entry, lookup->want_installation);
            free(rl_strmap_remove(relay->auth->bridge_tokens, lookup->token.installation_id));
            if (rl_strmap_put(relay->auth->bridge_tokens, lookup->token.installation_id, entry) != 0)
                free(entry);
        } else {
            err = RL_E_INTERNAL;
        }
    } else if (base->result != RL_E_NOT_FOUND) {
        err = base->result;
    }
    rl_call_proceed(call, err);
    rl_call_release(call);
    free(lookup);
}

static void lookup_bridge(rl_relay_t *relay, rl_call_t *call, rl_bridge_token_t *token, int want_installation)
{
    struct bridge_entry *entry = rl_strmap_get(relay->auth->bridge_tokens, token->installation_id);
    struct bridge_lookup *lookup;
    struct installation_get *op;

    /* A socket is opened from the store's word alone: a cached entry may not know of a revocation on another node. */
    if (entry != NULL && entry->until_ms > rl_clock_now_ms() && call->route->auth != RL_AUTH_BRIDGE_UPGRADE) {
        rl_call_proceed(call, judge_bridge(call, token, entry, want_installation));
        return;
    }
    lookup = malloc(sizeof(*lookup));
    /* The store answers later, when the request's text may be gone: the secret travels as its hash. */
    if (lookup == NULL || rl_bridge_token_hash(token) != 0) {
        free(lookup);
        rl_call_proceed(call, RL_E_INTERNAL);
        return;
    }
    lookup->call = call;
    lookup->token = *token;
    lookup->want_installation = want_installation;
    op = rl_op_new(&installation_get_type, sizeof(*op));
    op->id = rl_op_str(op, token->installation_id);
    op->lookup = lookup;
    rl_op_submit_for(call, op, on_installation);
}

void rl_relay_authenticate(rl_call_t *call)
{
    rl_relay_t *relay = call->app;
    rl_bridge_token_t token;
    rl_jwt_claims_t claims;
    const char *why = NULL, *value;
    size_t len;

    value = bearer(call, &len);
    if (value == NULL) {
        rl_call_proceed(call, RL_E_INVALID_TOKEN);
        return;
    }
    if (call->route->auth == RL_AUTH_USER) {
        if (rl_bridge_token_parse(value, len, &token) == 0) {
            lookup_bridge(relay, call, &token, 0);
            return;
        }
        if (verify_user(relay->auth, value, len, &claims, &why) != 0) {
            rl_log_fields(RL_LOG_INFO, json_pack("{s:s, s:s, s:s}", "msg", "user token refused", "request_id",
                                                 call->request_id, "reason", why));
            rl_call_proceed(call, RL_E_INVALID_TOKEN);
            return;
        }
        call->principal_kind = RL_PRINCIPAL_USER;
        snprintf(call->principal, sizeof(call->principal), "%s", claims.sub);
        if (relay->auth->known_users != NULL && rl_strmap_get(relay->auth->known_users, claims.sub) != NULL) {
            rl_call_proceed(call, 0);
            return;
        }
        /* spec/brief: users are created on first sight of their sub. */
        {
            struct user_ensure *op = rl_op_new(&user_ensure_type, sizeof(*op));
            op->row.id = rl_op_str(op, claims.sub);
            op->row.created_at = rl_clock_now_ms();
            rl_op_submit_for(call, op, on_user_ensured);
        }
        return;
    }
    if (rl_bridge_token_parse(value, len, &token) == 0) {
        lookup_bridge(relay, call, &token, 1);
        return;
    }
    /* A valid user token on a bridge route lacks the bridge scope; anything else is not a token at all. */
    rl_call_proceed(call, verify_user(relay->auth, value, len, &claims, &why) == 0 ? RL_E_PERMISSION_DENIED
                                                                                   : RL_E_INVALID_TOKEN);
}

int rl_auth_known_owner(rl_auth_t *auth, const char *authorization, size_t len, char *user, size_t usersz)
{
    char digest[RL_TOKEN_HASH_HEX + 1];
    const struct verified *verified;
    struct bridge_entry *entry;
    rl_bridge_token_t token;
    int64_t now = rl_clock_now_ms();

    if (authorization == NULL || len < 7 || strncasecmp(authorization, "Bearer ", 7) != 0)
        return -1;
    authorization += 7;
    len -= 7;
    while (len > 0 && authorization[len - 1] == ' ')
        --len;
    if (len == 0)
        return -1;
    if (rl_bridge_token_parse(authorization, len, &token) == 0) {
        entry = auth->bridge_tokens != NULL ? rl_strmap_get(auth->bridge_tokens, token.installation_id) : NULL;
        if (entry == NULL || entry->until_ms <= now || entry->revoked || !bridge_secret_matches(entry, &token))
            return -1;
        snprintf(user, usersz, "%s", entry->user_id);
        return 0;
    }
    rl_token_hash(authorization, len, digest);
    verified = auth->verified_tokens != NULL ? rl_strmap_get(auth->verified_tokens, digest) : NULL;
    if (verified == NULL || verified->until_ms <= now)
        return -1;
    snprintf(user, usersz, "%s", verified->sub);
    return 0;
}

/*
 * Per-address buckets count the client's address group (an IPv6 /64; behind
 * trusted proxies, the client they name). An authenticated route whose
 * bucket also has a per-address row takes from both, the address first, and
 * reports whichever has less left. Both takes may answer later (a shared
 * bucket); the call is held meanwhile.
 */
struct limit {
    rl_call_t *call;
    rl_call_rate_t by_address;
};

static void limit_done(struct limit *limit, int result)
{
    rl_call_t *call = limit->call;

    /*
     * Only a shared bucket is ever unavailable: the bus's server is away, and
     * the node's local shares have stopped serving (docs/operations.md).
     */
    if (result == RL_E_UNAVAILABLE && rl_call_alive(call))
        rl_call_fail(call, result, "the event bus (Redis) is unreachable; retry later");
    else
        rl_call_limited(call, result);
    rl_call_release(call);
    free(limit);
}

static void on_principal_taken(int result, void *arg)
{
    struct limit *limit = arg;

    if (result == 0 && limit->by_address.set && limit->by_address.remaining < limit->call->rate.remaining)
        limit->call->rate = limit->by_address;
    limit_done(limit, result);
}

static void on_address_taken(int result, void *arg)
{
    struct limit *limit = arg;
    rl_call_t *call = limit->call;
    rl_relay_t *relay = call->app;
    const char *scope = call->principal_kind == RL_PRINCIPAL_USER ? "user" : "installation";

    if (result != 0) {
        call->rate = limit->by_address;
        limit_done(limit, result);
        return;
    }
    rl_ratelimit_take(relay->limiter, scope, call->principal, call->route->bucket, rl_clock_now_ms(), &call->rate,
                      on_principal_taken, limit);
}

void rl_relay_limit(rl_call_t *call)
{
    rl_relay_t *relay = call->app;
    struct limit *limit = calloc(1, sizeof(*limit));

    if (limit == NULL) {
        rl_call_limited(call, RL_E_INTERNAL);
        return;
    }
    limit->call = call;
    rl_call_hold(call);
    if (call->principal_kind == RL_PRINCIPAL_NONE)
        rl_ratelimit_take(relay->limiter, "ip", call->peer_group, call->route->bucket, rl_clock_now_ms(), &call->rate,
                          on_principal_taken, limit);
    else
        rl_ratelimit_take_address(relay->limiter, call->peer_group, call->route->bucket, rl_clock_now_ms(),
                                  &limit->by_address, on_address_taken, limit);
}

void rl_auth_forget_installation(rl_auth_t *auth, const char *installation_id)
{
    free(rl_strmap_remove(auth->bridge_tokens, installation_id));
}

static int any_entry(const char *key, void *value, void *arg)
{
    return 1;
}

void rl_auth_on_signal(rl_auth_t *auth, json_t *message)
{
    const char *type = json_string_value(json_object_get(message, "type"));
    const char *installation_id = json_string_value(json_object_get(message, "installation_id"));

    if (type != NULL && strcmp(type, "installation_revoked") == 0 && installation_id != NULL)
        rl_auth_forget_installation(auth, installation_id);
    else if (type != NULL && strcmp(type, RL_BUS_MISSED) == 0)
        /* A revocation may have been among the signals lost: every bridge token is looked up again. */
        rl_strmap_sweep(auth->bridge_tokens, any_entry, NULL, free);
}

static int verified_lapsed(const char *key, void *value, void *arg)
{
    return ((struct verified *)value)->until_ms <= *(int64_t *)arg;
}

static int bridge_lapsed(const char *key, void *value, void *arg)
{
    return ((struct bridge_entry *)value)->until_ms <= *(int64_t *)arg;
}

void rl_auth_sweep(rl_auth_t *auth, int64_t now_ms, unsigned parts)
{
    rl_strmap_sweep_part(auth->verified_tokens, verified_lapsed, &now_ms, free, parts);
    rl_strmap_sweep_part(auth->bridge_tokens, bridge_lapsed, &now_ms, free, parts);
}

/* brief: an external OpenID Connect issuer's JWKS, or the embedded issuer's key; the same verifier for both. */
int rl_auth_open(rl_relay_t *relay, rl_auth_t **out)
{
    rl_config_t *config = &relay->config;
    rl_auth_t *auth = calloc(1, sizeof(*auth));
    rl_jwt_issuer_t *issuer = NULL;
    rl_jwks_t *keys;
    int result = -1;

    if (auth == NULL)
        return -1;
    auth->known_users = rl_strmap_new(KNOWN_USERS_MAX);
    auth->verified_tokens = rl_strmap_new(VERIFIED_MAX);
    auth->bridge_tokens = rl_strmap_new(KNOWN_USERS_MAX);
    if (auth->known_users == NULL || auth->verified_tokens == NULL || auth->bridge_tokens == NULL)
        goto out;
    auth->policy.leeway_s = 30;
    if (config->jwks_file[0] != '\0' || config->jwks_url[0] != '\0') {
        auth->policy.issuer = config->jwt_issuer;
        auth->policy.audience = config->jwt_audience;
        result = config->jwks_file[0] != '\0'
                     ? rl_jwks_source_open_file(config->jwks_file, &auth->jwks)
                     : rl_jwks_source_open_url(config->jwks_url, config->jwks_refresh, relay->jobs, &auth->jwks);
        goto out;
    }
    if (rl_jwt_issuer_open(config->data, &issuer) != 0)
        goto out;
    keys = rl_jwt_issuer_jwks(issuer);
    rl_jwt_issuer_free(issuer);
    if (keys == NULL)
        goto out;
    auth->policy.issuer = RL_EMBEDDED_ISSUER;
    auth->policy.audience = RL_EMBEDDED_AUDIENCE;
    result = rl_jwks_source_open_static(keys, &auth->jwks);
    rl_jwks_unref(keys);
out:
    if (result != 0) {
        rl_auth_close(auth);
        return -1;
    }
    *out = auth;
    return 0;
}

void rl_auth_close(rl_auth_t *auth)
{
    if (auth == NULL)
        return;
    if (auth->jwks != NULL)
        rl_jwks_source_close(auth->jwks);
    rl_strmap_free(auth->known_users, NULL);
    rl_strmap_free(auth->verified_tokens, free);
    rl_strmap_free(auth->bridge_tokens, free);
    free(auth);
}
