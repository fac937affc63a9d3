/*
 * End-to-end encryption: devices, confirmations, wrapped session keys and
 * bridge-made sessions (docs/api.md "Encrypted sessions"). Every write is
 * one store operation that also queues the bridge updates it causes; the
 * client events it causes are built on the worker and published when it
 * is done.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/base64.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/rand.h"
#include "http/query.h"
#include "relay/e2e/context.h"
#include "relay/e2e/e2e.h"
#include "relay/core/feature.h"
#include "relay/core/hub.h"
#include "relay/core/ops.h"
#include "relay/core/auth.h"
#include "common/log.h"
#include "relay/core/rpc.h"
#include "relay/sessions/sessions.h"
#include "relay/core/target.h"
#include "relay/core/updates.h"
#include "relay/core/views.h"

#define DEVICE_ID_CHARS  20
#define SESSION_ID_CHARS 20
#define LABEL_MAX        64
#define PLATFORM_MAX     16
#define ENROL_PROOF_MAX  128
#define WRAP_MAX         256
#define RECIPIENTS_MAX   50
#define TITLE_CT_MAX     1024
#define SOURCE_MAX       64

/* ---- syntax of what relayd carries ---- */

int rl_e2e_pubkey_check(const char *s, size_t len)
{
    size_t i;

    if (len != 64)
        return -1;
    for (i = 0; i < len; ++i)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return -1;
    return 0;
}

/* authors' wire: 0x01 ‖ nonce(12) ‖ ciphertext ‖ tag(16); the empty value is the lone byte 0x00. */
int rl_e2e_envelope_check(const char *s, size_t len)
{
    int first = 0;
    long n = rl_base64_check(s, len, &first);

    if (n == 1 && first == 0x00)
        return 0;
    return n >= 29 && first == 0x01 ? 0 : -1;
}

/* authors' wire: 0x02 ‖ ephemeral X25519 public key(32) ‖ envelope(29+). */
int rl_e2e_wrap_check(const char *s, size_t len)
{
    int first = 0;
    long n = len <= WRAP_MAX ? rl_base64_check(s, len, &first) : -1;

    return n >= 1 + 32 + 29 && first == 0x02 ? 0 : -1;
}

int rl_e2e_blind_index_check(const char *s, size_t len)
{
    size_t i;

    if (len == 0 || len > 64)
        return -1;
    for (i = 0; i < len; ++i)
        if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '-' || s[i] == '_'))
            return -1;
    return 0;
}

static int ends_with_ct(const char *key)
{
    size_t len = strlen(key);

    return len > 3 && strcmp(key + len - 3, "_ct") == 0;
}

int rl_e2e_body_check(const json_t *body, int encrypted, const char *const *plain, const char **field)
{
    const char *key;
    json_t *value;
    size_t i;

    if (encrypted) {
        for (i = 0; plain != NULL && plain[i] != NULL; ++i)
            /* A null carries nothing, so nothing is lost by taking it. */
            if (json_object_get(body, plain[i]) != NULL && !json_is_null(json_object_get(body, plain[i]))) {
                *field = plain[i];
                return RL_E_INVALID_REQUEST;
            }
        return 0;
    }
    json_object_foreach((json_t *)body, key, value)
    {
        if (ends_with_ct(key)) {
            *field = key;
            return RL_E_INVALID_REQUEST;
        }
    }
    return 0;
}

void rl_e2e_fail_field(rl_call_t *call, const char *field, int encrypted)
{
    char message[160];

    if (encrypted)
        snprintf(message, sizeof(message),
                 "This session is end-to-end encrypted: send %s_ct (a base64 envelope), not %s", field, field);
    else
        snprintf(message, sizeof(message), "This session is not encrypted: %s is refused (send the plain field)",
                 field);
    rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                      json_pack("[{s:s, s:s, s:s}]", "path", field, "code", "invalid_string", "message", message),
                      NULL);
}

/* ---- schemas ---- */

/* platform "bridge" is kept for bridges (POST /v1/bridge/devices). */
static int check_client_platform(const char *s, size_t len)
{
    (void)len;
    return strcmp(s, "bridge") == 0 ? -1 : 0;
}

static const rl_field_t bridge_device_fields[] = {
    RL_FIELD_STRING_CHECK("pubkey", RL_F_REQUIRED, 64, 64, rl_e2e_pubkey_check, "Expected 64 lowercase hex digits"),
    RL_FIELD_STRING("label", RL_F_NULLABLE, 0, LABEL_MAX),
    RL_FIELD_END,
};
const rl_schema_t rl_bridge_device_schema = RL_SCHEMA(bridge_device_fields);

static const rl_field_t device_register_fields[] = {
    RL_FIELD_STRING_CHECK("pubkey", RL_F_REQUIRED, 64, 64, rl_e2e_pubkey_check, "Expected 64 lowercase hex digits"),
    RL_FIELD_STRING("label", RL_F_NULLABLE, 0, LABEL_MAX),
    RL_FIELD_STRING_CHECK("platform", RL_F_REQUIRED, 1, PLATFORM_MAX, check_client_platform,
                          "A client device's platform cannot be bridge"),
    RL_FIELD_END,
};
const rl_schema_t rl_device_register_schema = RL_SCHEMA(device_register_fields);

static const rl_field_t device_confirm_fields[] = {
    RL_FIELD_STRING("bridge_device_id", RL_F_REQUIRED, 1, 64),
    /* ours: the device's proof, for the bridge, that it holds one of the bridge's enrolment codes. */
    RL_FIELD_STRING("enrol_proof", RL_F_NULLABLE, 1, ENROL_PROOF_MAX),
    RL_FIELD_END,
};
const rl_schema_t rl_device_confirm_schema = RL_SCHEMA(device_confirm_fields);

static const rl_field_t bridge_session_fields[] = {
    RL_FIELD_STRING("source", RL_F_NULLABLE, 0, SOURCE_MAX),
    RL_FIELD_CT("title_ct", RL_F_NULLABLE, TITLE_CT_MAX),
    RL_FIELD_END,
};
const rl_schema_t rl_bridge_session_schema = RL_SCHEMA(bridge_session_fields);

static const rl_field_t recipient_fields[] = {
    RL_FIELD_STRING("device_id", RL_F_REQUIRED, 1, 64),
    RL_FIELD_STRING_CHECK("wrapped_session_key", RL_F_REQUIRED, 1, WRAP_MAX, rl_e2e_wrap_check,
                          "Expected a base64 sealed box (0x02, ephemeral key, envelope), at most 256 characters"),
    /* Our clients' proof to a bridge of who wrapped the key (docs/api.md, "Signed grants"): carried as given. */
    RL_FIELD_STRING("grant_sig", RL_F_NULLABLE, 1, 128),
    RL_FIELD_END,
};
static const rl_schema_t recipient_schema = RL_SCHEMA(recipient_fields);
static const rl_field_t recipient_item = RL_FIELD_OBJECT(NULL, RL_F_REQUIRED, &recipient_schema);

static const rl_field_t recipients_fields[] = {
    RL_FIELD_ARRAY("recipients", RL_F_REQUIRED, 1, RECIPIENTS_MAX, &recipient_item),
    RL_FIELD_STRING("wrapped_by_device_id", RL_F_NULLABLE, 1, 64),
    RL_FIELD_END,
};
const rl_schema_t rl_recipients_schema = RL_SCHEMA(recipients_fields);

/* ---- the operation they all share ---- */

struct notice {
    const char *installation_id;
    int64_t update_id;
};

struct e2e_op {
    rl_op_t op;
    const char *user_id;    /* the user whose devices these are */
    const char *bridge;     /* the calling installation, or NULL for a client */
    const char *device_id;  /* the path's device, or the caller's (X-Relay-Device) */
    const char *session_id; /* the path's session, or a new one */
    const char *new_id;     /* an id minted on the loop for a new row */
    json_t *body;           /* a reference to the call's body */
    int64_t now, since, delete_grace;
    /* results */
    struct notice *notices; /* in the arena */
    size_t nnotices, notices_cap;
    json_t *events; /* [[name, data], ...] for the user's streams */
    /* notifyToolFile: the field that does not fit the session's kind (absent, or present from the other kind) */
    const char *misfit;
    int misfit_missing, misfit_encrypted;
};

static void e2e_dispose(rl_store_op_t *base)
{
    struct e2e_op *op = (void *)base;

    json_decref(op->body);
    json_decref(op->events);
    rl_op_dispose(base);
}

static struct e2e_op *e2e_new(rl_call_t *call, const rl_store_op_type_t *type)
{
    struct e2e_op *op = rl_op_new(type, sizeof(*op));
    int bridge = call->principal_kind == RL_PRINCIPAL_INSTALLATION;

    op->user_id = rl_op_str(op, bridge ? call->owner : call->principal);
    op->bridge = bridge ? rl_op_str(op, call->principal) : NULL;
    op->body = json_incref(call->body);
    op->now = rl_clock_now_ms();
    op->events = json_array();
    return op;
}

/* In a transaction: queues an update for a bridge and remembers whom to wake. Steals payload. */
static int tell_bridge(rl_txn_t *txn, struct e2e_op *op, const char *installation_id, rl_update_t type,
                       const char *session_id, json_t *payload)
{
    int64_t update_id = 0;
    int result;

    if (rl_target_installation_check(txn, installation_id) != 0) {
        json_decref(payload); /* a revoked installation hears nothing more */
        return 0;
    }
    result = rl_update_append(txn, installation_id, type, session_id, NULL, payload, op->now, &update_id);
    if (result != 0)
        return result;
    op->notices = rl_arena_grow(txn->arena, op->notices, op->nnotices, &op->notices_cap, sizeof(*op->notices));
    op->notices[op->nnotices++] = (struct notice){rl_arena_strdup(txn->arena, installation_id), update_id};
    return 0;
}

static void tell_clients(struct e2e_op *op, rl_event_t event, json_t *data)
{
    json_array_append_new(op->events, json_pack("[i, o]", (int)event, data));
}

/* On the loop: wakes the bridges and publishes the events of a successful operation. */
static void e2e_announce(const rl_e2e_ctx_t *ctx, struct e2e_op *op)
{
    size_t i;
    json_t *event;

    for (i = 0; i < op->nnotices; ++i)
        rl_updates_notify(ctx->bus, op->notices[i].installation_id, op->notices[i].update_id);
    json_array_foreach(op->events, i, event)
    {
        rl_hub_publish(ctx->hub, op->user_id, (rl_event_t)json_integer_value(json_array_get(event, 0)),
                       json_incref(json_array_get(event, 1)));
    }
}

static void on_done(rl_store_op_t *base)
{
    struct e2e_op *op = (void *)base;
    rl_call_t *call = base->arg;

    if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
    } else {
        e2e_announce(rl_feature_of(call, RL_FEATURE_E2E), op);
        rl_call_reply(call, json_incref(op->op.value));
    }
    rl_call_release(call);
}

static json_t *device_view(const rl_device_row_t *row)
{
    return json_pack("{s:s, s:s, s:s?, s:s?, s:s, s:I}", "device_id", row->id, "platform", row->platform, "label",
                     row->label, "installation_id", row->installation_id, "pubkey", row->pubkey, "created_at",
                     (json_int_t)row->created_at);
}

/* The device payload of device_pending and device_added (authors' shape, installation_id null for a client). */
static json_t *device_payload(const rl_device_row_t *row)
{
    return json_pack("{s:s, s:s, s:s?, s:s, s:s?}", "device_id", row->id, "pubkey", row->pubkey, "label", row->label,
                     "platform", row->platform, "installation_id", row->installation_id);
}

/* The user's live device id, or RL_E_DEVICE_NOT_FOUND. */
static int users_device(rl_txn_t *txn, const char *user_id, const char *id, rl_device_row_t *row)
{
    int result = RL_TXN(txn, device_get, id, row);

    if (result == RL_E_NOT_FOUND ||
        (result == 0 && (strcmp(row->user_id, user_id) != 0 || row->revoked_at != RL_NO_TIME)))
        return RL_E_DEVICE_NOT_FOUND;
    return result;
}

/* The live bridge device of installation_id among the user's devices, or NULL. */
static const rl_device_row_t *bridge_device_of(const rl_device_row_t *rows, size_t count, const char *installation_id)
{
    size_t i;

    for (i = 0; i < count; ++i)
        if (rows[i].installation_id != NULL && strcmp(rows[i].installation_id, installation_id) == 0)
            return &rows[i];
    return NULL;
}

int rl_e2e_reannounce(rl_txn_t *txn, const char *user_id, const char *installation_id, const char *session_id,
                      int64_t now, int64_t *update_id)
{
    rl_device_row_t *rows;
    const rl_device_row_t *bridge;
    size_t count, i;
    int result = RL_TXN(txn, devices_of_user, user_id, &rows, &count);

    if (result != 0 || (bridge = bridge_device_of(rows, count, installation_id)) == NULL)
        return result;
    for (i = 0; i < count && result == 0; ++i) {
        if (rows[i].installation_id != NULL)
            continue;
        if ((result = RL_TXN(txn, confirmation_get, rows[i].id, bridge->id)) == RL_E_NOT_FOUND)
            result = 0; /* not confirmed: it gets no key until it is (device_confirm tells the bridge then) */
        else if (result == 0 && (result = RL_TXN(txn, recipient_get, session_id, rows[i].id)) == RL_E_NOT_FOUND)
            result = rl_update_append(txn, installation_id, RL_UP_DEVICE_ADDED, NULL, NULL, device_payload(&rows[i]),
                                      now, update_id);
    }
    return result;
}

/* ---- bridge: POST /v1/bridge/devices ---- */

static int bridge_device_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct e2e_op *op = (void *)base;
    const char *pubkey = json_string_value(json_object_get(op->body, "pubkey"));
    const char *label = json_string_value(json_object_get(op->body, "label"));
    rl_device_row_t *rows, device;
    const rl_device_row_t *mine;
    size_t count, i;
    int changed = 0, result = RL_TXN(txn, devices_of_user, op->user_id, &rows, &count);

    if (result != 0)
        return result;
    mine = bridge_device_of(rows, count, op->bridge);
    if (mine != NULL) {
        device = *mine;
        changed = strcmp(device.pubkey, pubkey) != 0;
        device.pubkey = pubkey;
        if (label != NULL)
            device.label = label;
        if ((result = RL_TXN(txn, device_update, &device)) != 0)
            return result;
        /* A new key cannot open what was wrapped for the old one, and the user compared the old one's emoji. */
        if (changed && ((result = RL_TXN(txn, confirmations_delete, device.id)) != 0 ||
                        (result = RL_TXN(txn, recipients_delete, device.id)) != 0))
            return result;
    } else {
        device = (rl_device_row_t){op->new_id, op->user_id, op->bridge, "bridge", label, pubkey, op->now, RL_NO_TIME};
        changed = 1;
        if ((result = RL_TXN(txn, device_insert, &device)) != 0)
            return result;
        tell_clients(op, RL_EV_DEVICE_ADDED, device_view(&device));
    }
    /* A bridge that has a new key meets every client device again: each must be compared and confirmed anew. */
    for (i = 0; changed && i < count; ++i)
        if (rows[i].installation_id == NULL &&
            (result = tell_bridge(txn, op, op->bridge, RL_UP_DEVICE_PENDING, NULL, device_payload(&rows[i]))) != 0)
            return result;
    op->op.value = json_pack("{s:s, s:b, s:o}", "device_id", device.id, "pubkey_changed", mine != NULL && changed,
                             "device", device_view(&device));
    return 0;
}

static const rl_store_op_type_t bridge_device_type = {"bridge_device", 1, bridge_device_run, e2e_dispose};

/* A device's registration, the bridge's or a client's: its id is drawn here, before the store sees it. */
static int register_device(rl_call_t *call, const rl_store_op_type_t *type)
{
    struct e2e_op *op = e2e_new(call, type);
    char id[32];

    rl_rand_id(id, sizeof(id), "dev_", DEVICE_ID_CHARS);
    op->new_id = rl_op_str(op, id);
    rl_op_submit_for(call, op, on_done);
    return 0;
}

int rl_bridge_device_register(rl_call_t *call)
{
    return register_device(call, &bridge_device_type);
}

/* ---- client: POST /v1/me/devices ---- */

static int device_register_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct e2e_op *op = (void *)base;
    const char *pubkey = json_string_value(json_object_get(op->body, "pubkey"));
    rl_device_row_t *rows, device;
    size_t count, i;
    int result = RL_TXN(txn, devices_of_user, op->user_id, &rows, &count);

    if (result != 0)
        return result;
    /* The same key registered again is the same device (a reload, a retry). */
    for (i = 0; i < count; ++i)
        if (rows[i].installation_id == NULL && strcmp(rows[i].pubkey, pubkey) == 0) {
            op->op.value =
                json_pack("{s:s, s:o, s:b}", "device_id", rows[i].id, "device", device_view(&rows[i]), "created", 0);
            return 0;
        }
    device = (rl_device_row_t){op->new_id,
                               op->user_id,
                               NULL,
                               json_string_value(json_object_get(op->body, "platform")),
                               json_string_value(json_object_get(op->body, "label")),
                               pubkey,
                               op->now,
                               RL_NO_TIME};
    if ((result = RL_TXN(txn, device_insert, &device)) != 0)
        return result;
    /* ours: each bridge shows the emoji of this device and its own, for the user to compare on the phone. */
    for (i = 0; i < count; ++i)
        if (rows[i].installation_id != NULL &&
            (result = tell_bridge(txn, op, rows[i].installation_id, RL_UP_DEVICE_PENDING, NULL,
                                  device_payload(&device))) != 0)
            return result;
    tell_clients(op, RL_EV_DEVICE_ADDED, device_view(&device));
    op->op.value = json_pack("{s:s, s:o, s:b}", "device_id", device.id, "device", device_view(&device), "created", 1);
    return 0;
}

static const rl_store_op_type_t device_register_type = {"device_register", 1, device_register_run, e2e_dispose};

int rl_device_register(rl_call_t *call)
{
    return register_device(call, &device_register_type);
}

/* The calling client device (header X-Relay-Device), or NULL. */
static const char *caller_device(rl_call_t *call, struct e2e_op *op)
{
    size_t len = 0;
    const char *value = rl_call_header(call, "x-relay-device", &len);
    char id[65];

    if (value == NULL || len == 0 || len >= sizeof(id))
        return NULL;
    memcpy(id, value, len);
    id[len] = '\0';
    return rl_op_str(op, id);
}

/* ---- client: GET /v1/me/devices ---- */

static int devices_list_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct e2e_op *op = (void *)base;
    rl_device_row_t *rows;
    size_t count, i;
    json_t *devices;
    int result = RL_TXN(txn, devices_of_user, op->user_id, &rows, &count);

    if (result != 0)
        return result;
    devices = json_array();
    for (i = 0; i < count; ++i) {
        json_t *view = device_view(&rows[i]);
        if (op->device_id != NULL && rows[i].installation_id != NULL) {
            result = RL_TXN(txn, confirmation_get, op->device_id, rows[i].id);
            if (result != 0 && result != RL_E_NOT_FOUND) {
                json_decref(view);
                json_decref(devices);
                return result;
            }
            json_object_set_new(view, "confirmed_by_me", json_boolean(result == 0));
        }
        json_array_append_new(devices, view);
    }
    op->op.value = json_pack("{s:o}", "devices", devices);
    return 0;
}

static const rl_store_op_type_t devices_list_type = {"devices_list", 0, devices_list_run, e2e_dispose};

int rl_devices_list(rl_call_t *call)
{
    struct e2e_op *op = e2e_new(call, &devices_list_type);

    op->device_id = caller_device(call, op);
    rl_op_submit_for(call, op, on_done);
    return 0;
}

/* ---- client: DELETE /v1/me/devices/:id ---- */

static int device_revoke_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct e2e_op *op = (void *)base;
    rl_device_row_t device, *rows;
    size_t count, i;
    int result = users_device(txn, op->user_id, op->device_id, &device);

    if (result != 0)
        return result;
    device.revoked_at = op->now;
    /* No trace of what was wrapped for it is kept: a lost phone finds no key here any more. */
    if ((result = RL_TXN(txn, device_update, &device)) != 0 ||
        (result = RL_TXN(txn, confirmations_delete, device.id)) != 0 ||
        (result = RL_TXN(txn, recipients_delete, device.id)) != 0 ||
        (result = RL_TXN(txn, devices_of_user, op->user_id, &rows, &count)) != 0)
        return result;
    for (i = 0; i < count; ++i)
        if (rows[i].installation_id != NULL &&
            (result = tell_bridge(txn, op, rows[i].installation_id, RL_UP_DEVICE_REVOKED, NULL,
                                  json_pack("{s:s}", "device_id", device.id))) != 0)
            return result;
    tell_clients(op, RL_EV_DEVICE_REVOKED, json_pack("{s:s}", "device_id", device.id));
    op->op.value = json_pack("{s:s, s:I}", "device_id", device.id, "revoked_at", (json_int_t)device.revoked_at);
    return 0;
}

static const rl_store_op_type_t device_revoke_type = {"device_revoke", 1, device_revoke_run, e2e_dispose};

static int path_device(rl_call_t *call, struct e2e_op *op)
{
    char id[65];
    int result = rl_path_id(call, 0, id, sizeof(id), RL_E_DEVICE_NOT_FOUND);

    if (result == 0)
        op->device_id = rl_op_str(op, id);
    return result;
}

int rl_device_revoke(rl_call_t *call)
{
    struct e2e_op *op = e2e_new(call, &device_revoke_type);
    int result = path_device(call, op);

    if (result != 0) {
        rl_store_op_free(&op->op.base);
        return result;
    }
    rl_op_submit_for(call, op, on_done);
    return 0;
}

/* ---- client: POST /v1/me/devices/:id/confirm ---- */

static int device_confirm_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct e2e_op *op = (void *)base;
    const char *bridge_id = json_string_value(json_object_get(op->body, "bridge_device_id"));
    json_t *proof = json_object_get(op->body, "enrol_proof"), *payload;
    rl_device_row_t device, bridge;
    int result = users_device(txn, op->user_id, op->device_id, &device);

    if (result != 0)
        return result;
    if ((result = users_device(txn, op->user_id, bridge_id, &bridge)) != 0)
        return result;
    if (device.installation_id != NULL || bridge.installation_id == NULL)
        return RL_E_DEVICE_MISMATCH;
    if ((result = RL_TXN(txn, confirmation_put, device.id, bridge.id, op->now)) != 0)
        return result;
    /*
     * authors' shape: only now may that bridge wrap session keys for this device. Ours: relay-bridge wraps
     * nothing on this word alone; the proof it checks travels in the same update, as the device gave it.
     */
    payload = device_payload(&device);
    if (json_is_string(proof))
        json_object_set(payload, "enrol_proof", proof);
    if ((result = tell_bridge(txn, op, bridge.installation_id, RL_UP_DEVICE_ADDED, NULL, payload)) != 0)
        return result;
    op->op.value = json_pack("{s:s, s:s, s:b}", "device_id", device.id, "bridge_device_id", bridge.id, "confirmed", 1);
    return 0;
}

static const rl_store_op_type_t device_confirm_type = {"device_confirm", 1, device_confirm_run, e2e_dispose};

int rl_device_confirm(rl_call_t *call)
{
    struct e2e_op *op = e2e_new(call, &device_confirm_type);
    const char *caller = caller_device(call, op);
    int result = path_device(call, op);

    /* The device confirms for itself: the emoji were compared on its screen. */
    if (result == 0 && (caller == NULL || strcmp(caller, op->device_id) != 0))
        result = RL_E_DEVICE_MISMATCH;
    if (result != 0) {
        rl_store_op_free(&op->op.base);
        return result;
    }
    rl_op_submit_for(call, op, on_done);
    return 0;
}

/* ---- client: GET /v1/me/devices/:id/keys ---- */

static int device_keys_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct e2e_op *op = (void *)base;
    rl_device_row_t device;
    rl_recipient_row_t *rows;
    size_t count, i;
    json_t *keys;
    int result = users_device(txn, op->user_id, op->device_id, &device);

    if (result != 0 || (result = RL_TXN(txn, recipients_of_device, device.id, op->since, &rows, &count)) != 0)
        return result;
    keys = json_array();
    for (i = 0; i < count; ++i)
        json_array_append_new(keys, json_pack("{s:s, s:s, s:s?, s:I, s:s*}", "session_id", rows[i].session_id,
                                              "wrapped_session_key", rows[i].wrapped_session_key,
                                              "wrapped_by_device_id", rows[i].wrapped_by_device_id, "created_at",
                                              (json_int_t)rows[i].created_at, "grant_sig", rows[i].grant_sig));
    op->op.value = json_pack("{s:o}", "keys", keys);
    return 0;
}

static const rl_store_op_type_t device_keys_type = {"device_keys", 0, device_keys_run, e2e_dispose};

int rl_device_keys(rl_call_t *call)
{
    struct e2e_op *op = e2e_new(call, &device_keys_type);
    long long since = 0;
    int result = path_device(call, op);
    int found = call->req != NULL ? rl_query_integer(call->req, "since", &since) : 1;

    /* A number of any length is read (a far future is simply later than every wrap); anything else is 400. */
    if (result == 0 && (found < 0 || since < 0)) {
        rl_store_op_free(&op->op.base);
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                          json_pack("[{s:s, s:s, s:s}]", "path", "since", "code", "invalid_type", "message",
                                    "Expected milliseconds since the epoch"),
                          NULL);
        return 0;
    }
    op->since = since;
    if (result != 0) {
        rl_store_op_free(&op->op.base);
        return result;
    }
    rl_op_submit_for(call, op, on_done);
    return 0;
}

/* ---- bridge: POST /v1/bridge/createSession ---- */

static int bridge_session_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct e2e_op *op = (void *)base;
    rl_session_row_t session = {op->new_id, op->user_id, op->bridge, NULL, "active", op->now, op->now, RL_NO_TIME};
    rl_interaction_row_t turn = {NULL, op->new_id, op->now};
    char turn_id[96];
    json_t *view;
    int result;

    /* Sessions a bridge makes are encrypted: the authors' bridge speaks nothing else. */
    session.encrypted = 1;
    session.title = json_string_value(json_object_get(op->body, "title_ct"));
    if ((result = RL_TXN(txn, session_insert, &session)) != 0)
        return result;
    /*
     * No user message starts this session's first turn: the bridge's turn
     * does (target.h), so that its writes need no interaction_id and still
     * belong to a turn the user can cancel, with its follow-up window.
     */
    if (rl_target_turn_id(session.id, turn_id, sizeof(turn_id)) != 0)
        return RL_E_INTERNAL;
    turn.id = turn_id;
    if ((result = RL_TXN(txn, interaction_insert, &turn)) != 0)
        return result;
    view = rl_view_session(&session, op->delete_grace);
    tell_clients(op, RL_EV_SESSION_CREATED, json_pack("{s:s, s:O}", "session_id", session.id, "session", view));
    op->op.value = json_pack("{s:s, s:s, s:o}", "session_id", session.id, "interaction_id", turn_id, "session", view);
    return 0;
}

static const rl_store_op_type_t bridge_session_type = {"bridge_session", 1, bridge_session_run, e2e_dispose};

int rl_bridge_session_create(rl_call_t *call)
{
    const rl_e2e_ctx_t *ctx = rl_feature_of(call, RL_FEATURE_E2E);
    struct e2e_op *op = e2e_new(call, &bridge_session_type);
    char id[32];

    rl_rand_id(id, sizeof(id), "ses_", SESSION_ID_CHARS);
    op->new_id = rl_op_str(op, id);
    op->delete_grace = ctx->config->delete_grace;
    rl_op_submit_for(call, op, on_done);
    return 0;
}

/* ---- both sides: POST /v1/{bridge,me}/sessions/:id/recipients ---- */

static int recipients_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct e2e_op *op = (void *)base;
    const char *by = json_string_value(json_object_get(op->body, "wrapped_by_device_id"));
    json_t *recipients = json_object_get(op->body, "recipients"), *item, *granted;
    rl_session_row_t session;
    rl_device_row_t *rows;
    const rl_device_row_t *session_bridge;
    size_t count, i;
    int result = RL_TXN(txn, session_get, op->session_id, &session);

    /* Another user's session, or (for a bridge) another installation's, looks like none at all. */
    if (result == RL_E_NOT_FOUND ||
        (result == 0 && (strcmp(session.user_id, op->user_id) != 0 ||
                         (op->bridge != NULL && strcmp(session.installation_id, op->bridge) != 0))))
        return RL_E_SESSION_NOT_FOUND;
    if (result != 0)
        return result;
    if (session.deleted_at != RL_NO_TIME)
        return RL_E_SESSION_DELETED;
    if (!session.encrypted)
        return RL_E_SESSION_NOT_ENCRYPTED;
    if ((result = RL_TXN(txn, devices_of_user, op->user_id, &rows, &count)) != 0)
        return result;
    session_bridge = bridge_device_of(rows, count, session.installation_id);
    granted = json_array();
    json_array_foreach(recipients, i, item)
    {
        const char *device_id = json_string_value(json_object_get(item, "device_id"));
        rl_recipient_row_t row = {
            session.id, device_id, json_string_value(json_object_get(item, "wrapped_session_key")),
            by,         op->now,   json_string_value(json_object_get(item, "grant_sig"))};
        rl_device_row_t device;
        json_t *payload;

        if ((result = users_device(txn, op->user_id, device_id, &device)) != 0)
            break;
        /* The user compared this device's emoji with the session's bridge, or it gets no key. */
        if (device.installation_id == NULL &&
            (session_bridge == NULL ||
             (result = RL_TXN(txn, confirmation_get, device.id, session_bridge->id)) == RL_E_NOT_FOUND)) {
            result = RL_E_DEVICE_UNCONFIRMED;
            break;
        }
        if (result != 0 || (result = RL_TXN(txn, recipient_put, &row)) != 0)
            break;
        payload = json_pack("{s:s, s:s, s:s, s:s?}", "session_id", session.id, "device_id", device.id,
                            "wrapped_session_key", row.wrapped_session_key, "wrapped_by_device_id", by);
        /* Only when given: a grant without one keeps the authors' shape. */
        if (json_is_string(json_object_get(item, "grant_sig")))
            json_object_set(payload, "grant_sig", json_object_get(item, "grant_sig"));
        json_array_append_new(granted, json_string(device.id));
        if (device.installation_id != NULL)
            result = tell_bridge(txn, op, device.installation_id, RL_UP_SESSION_KEY_GRANTED, session.id, payload);
        else
            tell_clients(op, RL_EV_SESSION_KEY_GRANTED, payload);
        if (result != 0)
            break;
    }
    if (result != 0) {
        json_decref(granted);
        return result;
    }
    op->op.value = json_pack("{s:s, s:o}", "session_id", session.id, "granted", granted);
    return 0;
}

static const rl_store_op_type_t recipients_type = {"recipients", 1, recipients_run, e2e_dispose};

int rl_recipients_put(rl_call_t *call)
{
    struct e2e_op *op = e2e_new(call, &recipients_type);
    char id[65];
    int result = rl_path_id(call, 0, id, sizeof(id), RL_E_SESSION_NOT_FOUND);

    if (result != 0) {
        rl_store_op_free(&op->op.base);
        return result;
    }
    op->session_id = rl_op_str(op, id);
    rl_op_submit_for(call, op, on_done);
    return 0;
}

/* ---- files agents touched: POST /v1/bridge/notifyToolFile, GET /v1/me/sessions/:id/files[/:blind_idx] ---- */

static const char *const tools[] = {"read", "edit", "write", NULL};

/* A plain path or name: no control characters (a NUL is refused by the JSON parser already). */
static int plain_name_check(const char *s, size_t len)
{
    size_t i;

    for (i = 0; i < len; ++i)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] == 0x7f)
            return -1;
    return 0;
}

#define PLAIN_NAME_MESSAGE "Expected text without control characters"

static const rl_field_t notify_tool_file_fields[] = {
    RL_FIELD_STRING("session_id", RL_F_REQUIRED, 1, 64),
    RL_FIELD_ENUM("tool", RL_F_REQUIRED, tools),
    {.name = "size_bytes", .type = RL_FT_INTEGER, .flags = RL_F_NULLABLE, .has_min = 1, .min = 0},
    RL_FIELD_STRING("mime", RL_F_NULLABLE, 1, 128),
    /* One form or the other, as the session is encrypted or not: notify_tool_file_run says which is required. */
    RL_FIELD_CT("path_ct", 0, 8192),
    RL_FIELD_CT("display_name_ct", 0, 2048),
    RL_FIELD_STRING_CHECK("path_blind_idx", 0, 1, 64, rl_e2e_blind_index_check, "Expected base64url without padding"),
    RL_FIELD_STRING_CHECK("path", 0, 1, 4096, plain_name_check, PLAIN_NAME_MESSAGE),
    RL_FIELD_STRING_CHECK("display_name", 0, 1, 1024, plain_name_check, PLAIN_NAME_MESSAGE),
    RL_FIELD_END,
};
const rl_schema_t rl_notify_tool_file_schema = RL_SCHEMA(notify_tool_file_fields);

static const rl_field_t file_read_plain_fields[] = {
    RL_FIELD_STRING_CHECK("path", RL_F_REQUIRED, 1, 4096, plain_name_check, PLAIN_NAME_MESSAGE),
    RL_FIELD_END,
};
const rl_schema_t rl_file_read_plain_schema = RL_SCHEMA(file_read_plain_fields);

/* The fields of a file report in each kind of session; the other kind's are refused by name. */
static const char *const sealed_file_fields[] = {"path_ct", "display_name_ct", "path_blind_idx", NULL};
static const char *const plain_file_fields[] = {"path", "display_name", NULL};

/* What a files route needs of its session. */
enum files_kind { FILES_ANY, FILES_SEALED, FILES_PLAIN };

/* The session for a files route: the user's (client) or the installation's (bridge), not deleted, of that kind. */
static int files_session(rl_txn_t *txn, struct e2e_op *op, enum files_kind kind, rl_session_row_t *session)
{
    int result = RL_TXN(txn, session_get, op->session_id, session);

    if (result == RL_E_NOT_FOUND ||
        (result == 0 && (strcmp(session->user_id, op->user_id) != 0 ||
                         (op->bridge != NULL && strcmp(session->installation_id, op->bridge) != 0))))
        return RL_E_SESSION_NOT_FOUND;
    if (result != 0)
        return result;
    if (session->deleted_at != RL_NO_TIME)
        return RL_E_SESSION_DELETED;
    /* A path asked for in clear in an encrypted session, or by blind index in a plain one, is refused. */
    if (kind == FILES_SEALED && !session->encrypted)
        return RL_E_SESSION_NOT_ENCRYPTED;
    if (kind == FILES_PLAIN && session->encrypted)
        return RL_E_SESSION_ENCRYPTED;
    return 0;
}

/*
 * A file as clients see it. A plain session's row keeps the path and name in
 * clear in the columns an encrypted one's envelopes use (its key being a hash
 * of the path), so each kind is shown under its own names.
 */
static json_t *agent_file_view(const rl_agent_file_row_t *row, int encrypted)
{
    json_t *size = row->size_bytes == RL_NO_TIME ? json_null() : json_integer(row->size_bytes);

    if (!encrypted)
        return json_pack("{s:s, s:o, s:s?, s:s, s:s, s:I}", "tool", row->tool, "size_bytes", size, "mime", row->mime,
                         "path", row->path_ct, "display_name", row->display_name_ct, "updated_at",
                         (json_int_t)row->updated_at);
    return json_pack("{s:s, s:s, s:o, s:s?, s:s, s:s, s:I}", "path_blind_idx", row->path_blind_idx, "tool", row->tool,
                     "size_bytes", size, "mime", row->mime, "path_ct", row->path_ct, "display_name_ct",
                     row->display_name_ct, "updated_at", (json_int_t)row->updated_at);
}

/* The store key of a plain session's file: base64url of SHA-256 of its path (the path is no secret there). */
static int plain_file_key(const char *path, char key[RL_BASE64URL_ENCODED_SIZE(32)])
{
    unsigned char digest[32];
    unsigned int len = 0;

    if (EVP_Digest(path, strlen(path), digest, &len, EVP_sha256(), NULL) != 1 || len != sizeof(digest))
        return RL_E_INTERNAL;
    rl_base64url_encode(digest, sizeof(digest), key);
    return 0;
}

/* The first field of want absent from body, or of refused present; NULL when the body fits the session's kind. */
static const char *misfit_field(const json_t *body, const char *const *want, const char *const *refused, int *missing)
{
    size_t i;

    for (i = 0; refused[i] != NULL; ++i)
        if (json_object_get(body, refused[i]) != NULL) {
            *missing = 0;
            return refused[i];
        }
    for (i = 0; want[i] != NULL; ++i)
        if (json_object_get(body, want[i]) == NULL) {
            *missing = 1;
            return want[i];
        }
    return NULL;
}

static int notify_tool_file_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct e2e_op *op = (void *)base;
    json_t *size = json_object_get(op->body, "size_bytes");
    rl_session_row_t session;
    char key[RL_BASE64URL_ENCODED_SIZE(32)];
    rl_agent_file_row_t row = {op->session_id,
                               json_string_value(json_object_get(op->body, "path_blind_idx")),
                               json_string_value(json_object_get(op->body, "tool")),
                               json_string_value(json_object_get(op->body, "mime")),
                               json_string_value(json_object_get(op->body, "path_ct")),
                               json_string_value(json_object_get(op->body, "display_name_ct")),
                               json_is_integer(size) ? (int64_t)json_integer_value(size) : RL_NO_TIME,
                               op->now};
    int result = files_session(txn, op, FILES_ANY, &session);

    if (result != 0)
        return result;
    op->misfit = session.encrypted ? misfit_field(op->body, sealed_file_fields, plain_file_fields, &op->misfit_missing)
                                   : misfit_field(op->body, plain_file_fields, sealed_file_fields, &op->misfit_missing);
    op->misfit_encrypted = session.encrypted;
    if (op->misfit != NULL)
        return RL_E_INVALID_REQUEST;
    if (!session.encrypted) {
        row.path_ct = json_string_value(json_object_get(op->body, "path"));
        row.display_name_ct = json_string_value(json_object_get(op->body, "display_name"));
        if ((result = plain_file_key(row.path_ct, key)) != 0)
            return result;
        row.path_blind_idx = key;
    }
    if ((result = RL_TXN(txn, agent_file_put, &row)) != 0)
        return result;
    tell_clients(op, RL_EV_SESSION_FILE_TOUCHED,
                 json_pack("{s:s, s:o}", "session_id", session.id, "file", agent_file_view(&row, session.encrypted)));
    op->op.value = session.encrypted
                       ? json_pack("{s:s, s:s}", "session_id", session.id, "path_blind_idx", row.path_blind_idx)
                       : json_pack("{s:s, s:s}", "session_id", session.id, "path", row.path_ct);
    return 0;
}

/* A report of the other kind of session is refused by the field that gives it away, or by the one it lacks. */
static void on_notify_done(rl_store_op_t *base)
{
    struct e2e_op *op = (void *)base;
    rl_call_t *call = base->arg;
    char message[160];

    if (base->result != RL_E_INVALID_REQUEST || op->misfit == NULL) {
        on_done(base);
        return;
    }
    if (op->misfit_missing)
        snprintf(message, sizeof(message), "Required (the session is %s)",
                 op->misfit_encrypted ? "end-to-end encrypted" : "not encrypted");
    else
        snprintf(message, sizeof(message), "This session is %s: %s is refused",
                 op->misfit_encrypted ? "end-to-end encrypted" : "not encrypted", op->misfit);
    rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                      json_pack("[{s:s, s:s, s:s}]", "path", op->misfit, "code",
                                op->misfit_missing ? "invalid_type" : "invalid_string", "message", message),
                      NULL);
    rl_call_release(call);
}

static const rl_store_op_type_t notify_tool_file_type = {"notify_tool_file", 1, notify_tool_file_run, e2e_dispose};

int rl_bridge_notify_tool_file(rl_call_t *call)
{
    struct e2e_op *op = e2e_new(call, &notify_tool_file_type);

    op->session_id = rl_op_str(op, rl_body_string(call, "session_id"));
    rl_op_submit_for(call, op, on_notify_done);
    return 0;
}

/* Reads the session's files; with new_id set (a blind index), only that file, as the request to the bridge. */
static int files_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct e2e_op *op = (void *)base;
    rl_session_row_t session;
    rl_agent_file_row_t *rows;
    size_t count, i;
    json_t *files;
    int result = files_session(txn, op, op->new_id != NULL ? FILES_SEALED : FILES_ANY, &session);

    if (result != 0 || (result = RL_TXN(txn, agent_files_of_session, session.id, &rows, &count)) != 0)
        return result;
    if (op->new_id != NULL) {
        for (i = 0; i < count && strcmp(rows[i].path_blind_idx, op->new_id) != 0; ++i)
            ;
        if (i == count)
            return RL_E_FILE_NOT_FOUND;
        /* authors' wire: the bridge finds the file by its sealed path. */
        op->op.value =
            json_pack("{s:s, s:s, s:s, s:s, s:s}", "installation_id", session.installation_id, "type", "file.read.req",
                      "session_id", session.id, "blind_idx", rows[i].path_blind_idx, "path_ct", rows[i].path_ct);
        return 0;
    }
    files = json_array();
    for (i = 0; i < count; ++i)
        json_array_append_new(files, agent_file_view(&rows[i], session.encrypted));
    op->op.value = json_pack("{s:o}", "files", files);
    return 0;
}

/*
 * POST /v1/me/sessions/:id/files/read {path} (ours), a plain session only:
 * the path must be one the bridge reported in that session, as a blind index
 * must in an encrypted one; the bridge gets it in clear.
 */
static int file_read_plain_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct e2e_op *op = (void *)base;
    const char *path = json_string_value(json_object_get(op->body, "path"));
    rl_session_row_t session;
    rl_agent_file_row_t *rows;
    size_t count, i;
    char key[RL_BASE64URL_ENCODED_SIZE(32)];
    int result = files_session(txn, op, FILES_PLAIN, &session);

    if (result != 0 || (result = plain_file_key(path, key)) != 0 ||
        (result = RL_TXN(txn, agent_files_of_session, session.id, &rows, &count)) != 0)
        return result;
    for (i = 0; i < count && strcmp(rows[i].path_blind_idx, key) != 0; ++i)
        ;
    if (i == count || strcmp(rows[i].path_ct, path) != 0)
        return RL_E_FILE_NOT_FOUND;
    op->op.value = json_pack("{s:s, s:s, s:s, s:s}", "installation_id", session.installation_id, "type",
                             "file.read.req", "session_id", session.id, "path", path);
    return 0;
}

static const rl_store_op_type_t files_type = {"session_files", 0, files_run, e2e_dispose};
static const rl_store_op_type_t file_read_plain_type = {"session_file_read_plain", 0, file_read_plain_run, e2e_dispose};

static struct e2e_op *files_op(rl_call_t *call, const rl_store_op_type_t *type, int *result)
{
    struct e2e_op *op = e2e_new(call, type);
    char id[72];

    *result = rl_path_id(call, 0, id, sizeof(id), RL_E_SESSION_NOT_FOUND);
    if (*result != 0) {
        rl_store_op_free(&op->op.base);
        return NULL;
    }
    op->session_id = rl_op_str(op, id);
    return op;
}

int rl_session_files_list(rl_call_t *call)
{
    int result;
    struct e2e_op *op = files_op(call, &files_type, &result);

    if (op != NULL)
        rl_op_submit_for(call, op, on_done);
    return result;
}

static void on_file_found(rl_store_op_t *base)
{
    struct e2e_op *op = (void *)base;
    rl_call_t *call = base->arg;
    const rl_e2e_ctx_t *ctx = rl_feature_of(call, RL_FEATURE_E2E);
    json_t *frame;
    char installation_id[40];

    if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
    } else {
        frame = json_deep_copy(op->op.value);
        snprintf(installation_id, sizeof(installation_id), "%s",
                 json_string_value(json_object_get(frame, "installation_id")));
        json_object_del(frame, "installation_id");
        rl_rpc_ask(ctx->rpc, call, installation_id, frame, rl_rpc_pass_on);
    }
    rl_call_release(call);
}

int rl_session_file_read(rl_call_t *call)
{
    int result;
    struct e2e_op *op = files_op(call, &files_type, &result);
    char idx[72];

    if (op == NULL)
        return result;
    if (rl_call_param(call, 1, idx, sizeof(idx)) != 0 || rl_e2e_blind_index_check(idx, strlen(idx)) != 0) {
        rl_store_op_free(&op->op.base);
        return RL_E_FILE_NOT_FOUND;
    }
    op->new_id = rl_op_str(op, idx);
    rl_op_submit_for(call, op, on_file_found);
    return 0;
}

int rl_session_file_read_plain(rl_call_t *call)
{
    int result;
    struct e2e_op *op = files_op(call, &file_read_plain_type, &result);

    if (op != NULL)
        rl_op_submit_for(call, op, on_file_found);
    return result;
}

int rl_e2e_open(const rl_e2e_ctx_t *ctx, rl_e2e_ctx_t **out)
{
    void *copy;
    int result = rl_feature_copy(ctx, sizeof(*ctx), &copy);

    *out = copy;
    return result;
}

void rl_e2e_close(rl_e2e_ctx_t *e2e)
{
    free(e2e);
}
