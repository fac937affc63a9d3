#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "relay/core/auth.h"
#include "relay/core/hub.h"
#include "relay/core/feature.h"
#include "relay/installations/context.h"
#include "relay/installations/bridge_ws.h"
#include "relay/installations/installations.h"
#include "relay/installations/pairing.h"
#include "relay/core/ops.h"
#include "relay/core/views.h"

static const rl_field_t installation_patch_fields[] = {
    RL_FIELD_STRING("custom_display_name", RL_F_NULLABLE, 1, 64),
    RL_FIELD_STRING("custom_emoji", RL_F_NULLABLE, 1, 16),
    RL_FIELD_END,
};
const rl_schema_t rl_installation_patch_schema = RL_SCHEMA(installation_patch_fields);

struct installation_change {
    rl_op_t op;
    const char *user_id, *installation_id;
    int set_name, set_emoji, revoke;
    const char *name, *emoji;
    int64_t now;
    int changed;
    rl_installation_row_t row; /* result */
};

/* The user's installation; anyone else's is not found. */
static int users_installation(rl_txn_t *txn, const char *user_id, const char *id, rl_installation_row_t *row)
{
    int result = RL_TXN(txn, installation_get, id, row);

    if (result == RL_E_NOT_FOUND || (result == 0 && strcmp(row->user_id, user_id) != 0))
        return RL_E_INSTALLATION_NOT_FOUND;
    return result;
}

static int revoke_bridge_device(rl_txn_t *txn, struct installation_change *op)
{
    rl_device_row_t *rows;
    size_t count, i;
    int result = RL_TXN(txn, devices_of_user, op->user_id, &rows, &count);

    for (i = 0; result == 0 && i < count; ++i) {
        if (rows[i].installation_id == NULL || strcmp(rows[i].installation_id, op->installation_id) != 0)
            continue;
        rows[i].revoked_at = op->now;
        if ((result = RL_TXN(txn, device_update, &rows[i])) == 0 &&
            (result = RL_TXN(txn, confirmations_delete, rows[i].id)) == 0)
            result = RL_TXN(txn, recipients_delete, rows[i].id);
    }
    return result;
}

static int installation_change_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct installation_change *op = (void *)base;
    int result = users_installation(txn, op->user_id, op->installation_id, &op->row);

    if (result != 0)
        return result;
    if (op->revoke) {
        /* Revoking twice changes nothing and says so. */
        op->changed = strcmp(op->row.state, "revoked") != 0;
        if (!op->changed)
            return 0;
        op->row.state = "revoked";
        op->row.revoked_at = op->now;
        /* issue 26: its bridge device goes too, with what was wrapped for it and the confirmations of it. */
        if ((result = revoke_bridge_device(txn, op)) != 0)
            return result;
    } else {
        /* brief: a client acting on a revoked installation gets 403 installation_revoked. */
        if (strcmp(op->row.state, "revoked") == 0)
            return RL_E_INSTALLATION_REVOKED;
        if (op->set_name)
            op->row.custom_display_name = op->name;
        if (op->set_emoji)
            op->row.custom_emoji = op->emoji;
        op->changed = 1;
    }
    return RL_TXN(txn, installation_update, &op->row);
}

static const rl_store_op_type_t installation_change_type = RL_OP_TYPE(installation_change, 1, installation_change_run);

static void on_patched(rl_store_op_t *base)
{
    struct installation_change *op = (void *)base;
    rl_call_t *call = base->arg;
    rl_installations_ctx_t *ctx = &rl_installations_of(call)->ctx;

    if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
    } else {
        json_t *view = rl_view_installation(&op->row, rl_bus_presence_get(ctx->bus, op->row.id));
        rl_hub_publish(ctx->hub, call->principal, RL_EV_INSTALLATION_UPDATED,
                       json_pack("{s:s, s:O}", "installation_id", op->row.id, "installation", view));
        rl_call_reply(call, json_pack("{s:o}", "installation", view));
    }
    rl_call_release(call);
}

static struct installation_change *change_new(rl_call_t *call, const char *installation_id)
{
    struct installation_change *op = rl_op_new(&installation_change_type, sizeof(*op));

    op->user_id = rl_op_str(op, call->principal);
    op->installation_id = rl_op_str(op, installation_id);
    op->now = rl_clock_now_ms();
    return op;
}

int rl_installation_patch(rl_call_t *call)
{
    struct installation_change *op;
    char installation_id[40];
    int result = rl_path_id(call, 0, installation_id, sizeof(installation_id), RL_E_INSTALLATION_NOT_FOUND);

    if (result != 0)
        return result;
    if (json_object_get(call->body, "custom_display_name") == NULL &&
        json_object_get(call->body, "custom_emoji") == NULL) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, "nothing to change",
                          json_pack("[{s:s, s:s, s:s}]", "path", "", "code", "too_small", "message",
                                    "Give custom_display_name, custom_emoji or both"),
                          NULL);
        return 0;
    }
    op = change_new(call, installation_id);
    op->set_name = json_object_get(call->body, "custom_display_name") != NULL;
    op->set_emoji = json_object_get(call->body, "custom_emoji") != NULL;
    op->name = rl_op_str(op, rl_body_string(call, "custom_display_name"));
    op->emoji = rl_op_str(op, rl_body_string(call, "custom_emoji"));
    rl_op_submit_for(call, op, on_patched);
    return 0;
}

static void on_revoked(rl_store_op_t *base)
{
    struct installation_change *op = (void *)base;
    rl_call_t *call = base->arg;
    rl_installations_ctx_t *ctx = &rl_installations_of(call)->ctx;
    json_t *view;

    if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
        rl_call_release(call);
        return;
    }
    view = rl_view_installation(&op->row, rl_bus_presence_get(ctx->bus, op->row.id));
    if (op->changed) {
        rl_log_info("installation %s revoked", op->row.id);
        rl_hub_publish(ctx->hub, call->principal, RL_EV_INSTALLATION_REVOKED,
                       json_pack("{s:s, s:O}", "installation_id", op->row.id, "installation", view));
        rl_auth_forget_installation(ctx->auth, op->row.id);
        /*
         * Every node forgets what it remembers of the token at once, and the
         * node holding the bridge's socket closes it with 4401 (bridge_ws.c).
         */
        rl_bus_signal(ctx->bus, RL_TOPIC_AUTH,
                      json_pack("{s:s, s:s}", "type", "installation_revoked", "installation_id", op->row.id));
    }
    rl_call_reply(call, json_pack("{s:o}", "installation", view));
    rl_call_release(call);
}

int rl_installation_revoke(rl_call_t *call)
{
    struct installation_change *op;
    char installation_id[40];
    int result = rl_path_id(call, 0, installation_id, sizeof(installation_id), RL_E_INSTALLATION_NOT_FOUND);

    if (result != 0)
        return result;
    op = change_new(call, installation_id);
    op->revoke = 1;
    rl_op_submit_for(call, op, on_revoked);
    return 0;
}

/* ---- the bridge's hello {version} ---- */

struct hello {
    rl_op_t op;
    const char *installation_id, *version;
    int changed;
    rl_installation_row_t row; /* result */
};

static int hello_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct hello *op = (void *)base;
    rl_installation_row_t installation;
    int result = RL_TXN(txn, installation_get, op->installation_id, &installation);

    if (result != 0)
        return result;
    if (installation.bridge_version != NULL && strcmp(installation.bridge_version, op->version) == 0)
        return 0;
    installation.bridge_version = op->version;
    op->row = installation;
    op->changed = 1;
    return RL_TXN(txn, installation_update, &installation);
}

static const rl_store_op_type_t hello_type = RL_OP_TYPE(bridge_hello, 1, hello_run);

static void on_hello(rl_store_op_t *base)
{
    struct hello *op = (void *)base;
    rl_installations_ctx_t *ctx = base->arg;
    json_t *view;

    if (base->result != 0) {
        rl_log_info("bridge %s: could not record its version", op->installation_id);
        return;
    }
    if (!op->changed)
        return;
    /* The user's clients (and the cached /v1/me) learn the version as any change of the installation. */
    view = rl_view_installation(&op->row, rl_bus_presence_get(ctx->bus, op->row.id));
    rl_hub_publish(ctx->hub, op->row.user_id, RL_EV_INSTALLATION_UPDATED,
                   json_pack("{s:s, s:o}", "installation_id", op->row.id, "installation", view));
}

void rl_installation_hello(rl_installations_ctx_t *ctx, const char *installation_id, const char *version)
{
    struct hello *op;
    size_t i, len = version != NULL ? strlen(version) : 0;

    /* A version is short printable text; anything else is not kept. */
    for (i = 0; i < len; ++i)
        if ((unsigned char)version[i] < 0x20 || (unsigned char)version[i] > 0x7e)
            break;
    if (len == 0 || len > 64 || i < len) {
        rl_log_info("bridge %s said hello without a usable version", installation_id);
        return;
    }
    op = rl_op_new(&hello_type, sizeof(*op));
    op->installation_id = rl_op_str(op, installation_id);
    op->version = rl_op_str(op, version);
    rl_store_submit(ctx->store, &op->op.base, on_hello, ctx);
}

int rl_installations_open(const rl_installations_ctx_t *ctx, rl_installations_t **out)
{
    rl_installations_t *installations = calloc(1, sizeof(*installations));

    *out = NULL;
    if (installations == NULL)
        return -1;
    installations->ctx = *ctx;
    installations->sockets = rl_bridge_ws_new(&installations->ctx);
    installations->pair_waits = rl_pair_waits_new(&installations->ctx);
    if (installations->sockets == NULL || installations->pair_waits == NULL) {
        rl_installations_close(installations);
        return -1;
    }
    *out = installations;
    return 0;
}

void rl_installations_close(rl_installations_t *installations)
{
    if (installations == NULL)
        return;
    rl_pair_waits_free(installations->pair_waits);
    installations->pair_waits = NULL;
    /*
     * A socket whose connection is still open (--shutdown-timeout passed)
     * keeps the feature it points to until the process exits, as h2o keeps
     * the connection.
     */
    if (rl_bridge_ws_count(installations->sockets) > 0)
        return;
    rl_bridge_ws_free(installations->sockets);
    free(installations);
}
