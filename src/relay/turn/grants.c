#include <string.h>

#include <openssl/evp.h>

#include "common/error.h"
#include "common/hex.h"
#include "relay/turn/grants.h"
#include "relay/core/hub.h"
#include "relay/core/ops.h"
#include "relay/core/feature.h"
#include "relay/turn/turn.h"

/* Which field of a request a scope's value names; NULL for scope all (and anything unknown). */
static const char *subject_field(const char *scope)
{
    static const struct {
        const char *scope, *field;
    } table[] = {{"session", "session_id"}, {"tool", "command"}, {"domain", "host"}};
    size_t i;

    for (i = 0; i < sizeof(table) / sizeof(table[0]); ++i)
        if (strcmp(scope, table[i].scope) == 0)
            return table[i].field;
    return NULL;
}

int rl_grant_covers(const rl_grant_row_t *grant, json_t *request)
{
    const char *field, *subject;

    if (strcmp(grant->scope, "all") == 0)
        return 1;
    field = subject_field(grant->scope);
    subject = field != NULL ? json_string_value(json_object_get(request, field)) : NULL;
    return subject != NULL && strcmp(subject, grant->scope_value) == 0;
}

int rl_grant_find(rl_txn_t *txn, const char *installation_id, const char *action, json_t *request, rl_grant_row_t *out)
{
    rl_grant_row_t *grants;
    size_t count, i;
    int result = RL_TXN(txn, grants_of, installation_id, action, &grants, &count);

    if (result != 0)
        return result;
    for (i = 0; i < count; ++i) {
        if (rl_grant_covers(&grants[i], request)) {
            *out = grants[i];
            return 0;
        }
    }
    return RL_E_NOT_FOUND;
}

void rl_grant_of_decision(json_t *approval, const char **scope, const char **value)
{
    const char *field;

    if (*scope == NULL)
        *scope = "all";
    if (*value != NULL)
        return;
    field = subject_field(*scope);
    *value = field != NULL ? json_string_value(json_object_get(approval, field)) : NULL;
    if (*value == NULL)
        *value = "";
}

/* ---- the user's grants: list and revoke ---- */

void rl_grant_id(const rl_grant_row_t *grant, char *out)
{
    const char *parts[] = {grant->installation_id, grant->action, grant->scope, grant->scope_value};
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char digest[32];
    unsigned int len = 0;
    size_t i;

    memset(digest, 0, sizeof(digest));
    if (ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1) {
        /* Each part with its NUL, so that ("ab", "c") and ("a", "bc") differ. */
        for (i = 0; i < sizeof(parts) / sizeof(parts[0]); ++i)
            EVP_DigestUpdate(ctx, parts[i] != NULL ? parts[i] : "", strlen(parts[i] != NULL ? parts[i] : "") + 1);
        EVP_DigestFinal_ex(ctx, digest, &len);
    }
    EVP_MD_CTX_free(ctx);
    memcpy(out, "grt_", 4);
    rl_hex_encode(digest, 8, out + 4);
}

struct user_grants {
    rl_store_op_t base;
    const char *user_id;
    const char *grant_id;   /* revoke: the one to delete */
    rl_grant_row_t *grants; /* result: list, or the revoked one first */
    size_t count;
};

/* Every grant of the user's installations, revoked ones included (their grants no longer matter but still exist). */
static int user_grants_read(rl_txn_t *txn, struct user_grants *op)
{
    rl_installation_row_t *installations;
    size_t ninstallations, capacity = 0, i, j;
    int result = RL_TXN(txn, installations_of_user, op->user_id, &installations, &ninstallations);

    for (i = 0; i < ninstallations && result == 0; ++i) {
        rl_grant_row_t *rows;
        size_t count;
        if ((result = RL_TXN(txn, grants_of_installation, installations[i].id, &rows, &count)) != 0)
            break;
        for (j = 0; j < count; ++j) {
            op->grants = rl_arena_grow(&op->base.arena, op->grants, op->count, &capacity, sizeof(*op->grants));
            op->grants[op->count++] = rows[j];
        }
    }
    return result;
}

static int grants_list_run(rl_txn_t *txn, rl_store_op_t *base)
{
    return user_grants_read(txn, (void *)base);
}

static int grant_revoke_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct user_grants *op = (void *)base;
    char id[RL_GRANT_ID_LEN + 1];
    size_t i;
    int result = user_grants_read(txn, op);

    if (result != 0)
        return result;
    for (i = 0; i < op->count; ++i) {
        rl_grant_id(&op->grants[i], id);
        if (strcmp(id, op->grant_id) == 0) {
            op->grants[0] = op->grants[i];
            op->count = 1;
            return RL_TXN(txn, grant_delete, &op->grants[0]);
        }
    }
    /* Another user's grant is as unknown as one that never was. */
    return RL_E_GRANT_NOT_FOUND;
}

static const rl_store_op_type_t grants_list_type = {"grants_list", 0, grants_list_run, NULL};
static const rl_store_op_type_t grant_revoke_type = {"grant_revoke", 1, grant_revoke_run, NULL};

static json_t *grant_view(const rl_grant_row_t *grant)
{
    char id[RL_GRANT_ID_LEN + 1];

    rl_grant_id(grant, id);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "id", id, "installation_id", grant->installation_id, "action",
                     grant->action, "scope", grant->scope, "scope_value", grant->scope_value, "created_at",
                     (json_int_t)grant->created_at);
}

static void on_listed(rl_store_op_t *base)
{
    struct user_grants *op = (void *)base;
    rl_call_t *call = base->arg;
    json_t *grants;
    size_t i;

    if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
    } else {
        grants = json_array();
        for (i = 0; i < op->count; ++i)
            json_array_append_new(grants, grant_view(&op->grants[i]));
        rl_call_reply(call, json_pack("{s:o}", "grants", grants));
    }
    rl_call_release(call);
}

int rl_grants_list(rl_call_t *call)
{
    struct user_grants *op = rl_store_op_new(&grants_list_type, sizeof(*op));

    op->user_id = rl_op_str(op, call->principal);
    rl_op_submit_for(call, op, on_listed);
    return 0;
}

static void on_revoked(rl_store_op_t *base)
{
    struct user_grants *op = (void *)base;
    rl_call_t *call = base->arg;
    const rl_turn_ctx_t *turn = rl_feature_of(call, RL_FEATURE_TURN);

    if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
    } else {
        json_t *view = grant_view(&op->grants[0]);
        /* The user's other devices drop it from their lists. */
        rl_hub_publish(turn->hub, call->principal, RL_EV_GRANT_REVOKED,
                       json_pack("{s:O, s:O}", "grant_id", json_object_get(view, "id"), "grant", view));
        rl_call_reply(call, json_pack("{s:O, s:o}", "grant_id", json_object_get(view, "id"), "grant", view));
    }
    rl_call_release(call);
}

int rl_grant_revoke(rl_call_t *call)
{
    char id[RL_GRANT_ID_LEN + 2];
    struct user_grants *op;

    if (rl_call_param(call, 0, id, sizeof(id)) != 0 || strlen(id) != RL_GRANT_ID_LEN || strncmp(id, "grt_", 4) != 0)
        return RL_E_GRANT_NOT_FOUND;
    op = rl_store_op_new(&grant_revoke_type, sizeof(*op));
    op->user_id = rl_op_str(op, call->principal);
    op->grant_id = rl_op_str(op, id);
    rl_op_submit_for(call, op, on_revoked);
    return 0;
}
