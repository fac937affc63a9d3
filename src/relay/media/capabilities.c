/*
 * Device capability requests (ours, issue 28; docs/api.md "Device
 * capabilities"). The spec names the event device_capability_request and
 * gives it no shape; the protocol authors' RFC (SAP section 13) has the
 * agent call requestDeviceCapability with a capability, a reason and an
 * interaction, and answers it later as an update. This follows approvals
 * closely: a row in the store per request, the user's answer with the first
 * one winning, the pending ones in the snapshot, and expiry by the sweep of
 * the store once a second (sweeps.c), so it survives restarts and two nodes
 * never expire one twice.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/rand.h"
#include "http/validate.h"
#include "relay/media/attachments.h"
#include "relay/turn/bridge.h"
#include "relay/media/capabilities.h"
#include "relay/media/media.h"
#include "relay/e2e/e2e.h"
#include "relay/core/feature.h"
#include "relay/core/hub.h"
#include "relay/core/updates.h"
#include "relay/core/views.h"

#define SWEEP_MAX 500
#define ID_CHARS  20
/* A sealed location (or a photo's name and type) is a few hundred bytes; 4 KiB of base64 leaves room. */
#define ANSWER_CT_MAX 4096

/*
 * ours: the capabilities a browser can give without an app of its own
 * (navigator.geolocation, a camera capture). The RFC's others (calendar,
 * contacts, reminders, motion, media library, device info) have no web API
 * a phone's browser offers everywhere, so a request for them would only
 * ever be refused; they are left out until a client can answer them.
 */
static const struct {
    const char *capability;
    const char *answer_field; /* the field of the user's answer that carries it */
} capabilities[] = {
    {"location", "location"},
    {"camera", "attachment_key"},
};

#define NCAPABILITIES (sizeof(capabilities) / sizeof(capabilities[0]))

static const char *const capability_names[] = {"location", "camera", NULL};

const char *rl_capability_answer_field(const char *capability)
{
    size_t i;

    for (i = 0; capability != NULL && i < NCAPABILITIES; ++i) {
        if (strcmp(capabilities[i].capability, capability) == 0)
            return capabilities[i].answer_field;
    }
    return NULL;
}

const char *rl_capability_answer_given(json_t *body)
{
    static const char *const answers[] = {"location", "attachment_key", "refused"};
    const char *given = NULL;
    size_t i;

    for (i = 0; i < sizeof(answers) / sizeof(answers[0]); ++i) {
        json_t *value = json_object_get(body, answers[i]);
        /* null is absent (the schema allows it), and refused: false refuses nothing. */
        if (value == NULL || json_is_null(value) || json_is_false(value))
            continue;
        if (given != NULL)
            return NULL;
        given = answers[i];
    }
    return given;
}

static const rl_field_t request_fields[] = {
    RL_FIELD_STRING("session_id", RL_F_REQUIRED, 1, 64),
    RL_FIELD_STRING("interaction_id", 0, 1, 64), /* required but in a session the bridge created (target.h) */
    RL_FIELD_ENUM("capability", RL_F_REQUIRED, capability_names),
    /*
     * What the user reads before deciding: required, as the RFC's reason is;
     * in an encrypted session sealed instead (reason_ct, blob path
     * capabilities/<sid>), and then reason is refused (capability_plain).
     * 500 characters are at most 2000 bytes of UTF-8: the envelope's base64 fits 2800.
     */
    RL_FIELD_STRING("reason", RL_F_NULL_ABSENT, 1, 500),
    RL_FIELD_CT("reason_ct", 0, 2800),
    RL_FIELD_IDEMPOTENCY_KEY,
    RL_FIELD_END,
};
const rl_schema_t rl_request_capability_schema = RL_SCHEMA(request_fields);

/* WGS 84 degrees, and the browser's accuracy radius in metres (GeolocationCoordinates). */
static const rl_field_t location_fields[] = {
    RL_FIELD_NUMBER_RANGE("latitude", RL_F_REQUIRED, -90, 90),
    RL_FIELD_NUMBER_RANGE("longitude", RL_F_REQUIRED, -180, 180),
    RL_FIELD_NUMBER_MIN("accuracy", RL_F_REQUIRED, 0),
    RL_FIELD_END,
};
static const rl_schema_t location_schema = RL_SCHEMA(location_fields);

/* Exactly one of the three; which one fits is the request's capability (checked against the stored row). */
static const rl_field_t answer_fields[] = {
    RL_FIELD_OBJECT("location", RL_F_NULLABLE, &location_schema),
    RL_FIELD_STRING("attachment_key", RL_F_NULLABLE, 1, 128),
    RL_FIELD_BOOLEAN("refused", RL_F_NULLABLE),
    /* issue 26: the answer sealed for the bridge in an encrypted session (api.md "Device capabilities"). */
    RL_FIELD_CT("answer_ct", RL_F_NULLABLE, ANSWER_CT_MAX),
    RL_FIELD_END,
};
const rl_schema_t rl_capability_answer_schema = RL_SCHEMA(answer_fields);

/* ---- views ---- */

static const char *request_field(const rl_capability_row_t *row, json_t **request, const char *field)
{
    if (*request == NULL)
        *request = rl_view_json(row->request, json_object());
    return json_string_value(json_object_get(*request, field));
}

/* The pending entry: the snapshot's pending_capability_requests[] and the device_capability_request event. */
static json_t *pending_view(const rl_capability_row_t *row)
{
    json_t *request = NULL;
    const char *reason = request_field(row, &request, "reason");
    json_t *view = json_pack("{s:s, s:s, s:n, s:s, s:s, s:s, s:s?, s:I, s:I}", "request_id", row->id, "installation_id",
                             row->installation_id, "agent_id", "session_id", row->session_id, "interaction_id",
                             row->interaction_id, "capability", row->capability, "reason", reason, "expires_at",
                             (json_int_t)row->expires_at, "ts", (json_int_t)row->created_at);
    const char *reason_ct = request_field(row, &request, "reason_ct");

    /* issue 26: an encrypted session's entry carries the sealed reason as given (reason stays null). */
    if (reason_ct != NULL)
        json_object_set_new(view, "reason_ct", json_string(reason_ct));
    json_decref(request);
    return view;
}

/* device_capability_resolved to the user's clients: what became of it, never the location or photo itself. */
static json_t *resolved_event(const rl_capability_row_t *row)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s}", "request_id", row->id, "session_id", row->session_id,
                     "interaction_id", row->interaction_id, "capability", row->capability, "status", row->state);
}

/* The bridge's device_capability.result: the status, and the location or the photo (hydrated at delivery). */
static json_t *result_update(const rl_capability_row_t *row)
{
    json_t *update =
        json_pack("{s:s, s:s, s:s}", "request_id", row->id, "capability", row->capability, "status", row->state);
    json_t *answer = rl_view_json(row->answer, json_null());

    if (json_is_object(answer))
        json_object_update(update, answer);
    json_decref(answer);
    return update;
}

/* ---- the bridge's request ---- */

struct capability_request {
    rl_bridge_write_t w;
    char id[40];
    int64_t expires_at;
};

static int capability_request_apply(rl_txn_t *txn, rl_bridge_write_t *w)
{
    struct capability_request *op = (void *)w;
    const char *field = w->session.encrypted ? "reason_ct" : "reason";
    json_t *request;
    char *request_text;
    rl_capability_row_t row;
    int result;

    if ((result = rl_bridge_write_require(w, field)) != 0)
        return result;
    request = json_pack("{s:O}", field, json_object_get(w->body, field));
    request_text = json_dumps(request, JSON_COMPACT);
    json_decref(request);
    if (request_text == NULL)
        return RL_E_INTERNAL;
    row = (rl_capability_row_t){
        .id = op->id,
        .installation_id = w->target.installation_id,
        .user_id = w->session.user_id,
        .session_id = w->target.session_id,
        .interaction_id = w->target.interaction_id,
        .capability = json_string_value(json_object_get(w->body, "capability")),
        .request = rl_arena_strdup(txn->arena, request_text),
        .state = "pending",
        .answer = NULL,
        .created_at = w->target.now,
        .expires_at = op->expires_at,
        .answered_at = RL_NO_TIME,
    };
    free(request_text);
    if ((result = RL_TXN(txn, capability_insert, &row)) != 0)
        return result;
    w->response = json_pack("{s:s, s:s, s:s, s:I}", "request_id", row.id, "capability", row.capability, "status",
                            "pending", "expires_at", (json_int_t)row.expires_at);
    w->op.value = pending_view(&row);
    return 0;
}

static int capability_request_run(rl_txn_t *txn, rl_store_op_t *base)
{
    return rl_bridge_write_run(txn, (void *)base, NULL, capability_request_apply);
}

static const rl_store_op_type_t capability_request_type = {"capability_request", 1, capability_request_run,
                                                           rl_bridge_write_dispose};

static void on_capability_requested(rl_store_op_t *base)
{
    struct capability_request *op = (void *)base;
    rl_call_t *call = base->arg;
    const rl_media_t *media = rl_feature_of(call, RL_FEATURE_MEDIA);

    if (base->result != 0)
        rl_bridge_write_fail(call, &op->w, base->result);
    else if (!rl_bridge_write_answer(call, &op->w))
        /* spec: device_capability_request (its shape is ours). A replay told the user already. */
        rl_hub_publish(media->ctx.hub, op->w.session.user_id, RL_EV_DEVICE_CAPABILITY_REQUEST,
                       json_incref(op->w.op.value));
    rl_call_release(call);
}

/* The plaintext an encrypted session refuses (rl_e2e_body_check): the reason is sealed there. */
static const char *const capability_plain[] = {"reason", NULL};

int rl_bridge_request_capability(rl_call_t *call)
{
    const rl_media_t *media = rl_feature_of(call, RL_FEATURE_MEDIA);
    struct capability_request *op = rl_bridge_write_new(call, &capability_request_type, sizeof(*op), "capability", "",
                                                        rl_body_string(call, "idempotency_key"));

    if (op == NULL)
        return RL_E_INTERNAL;
    rl_rand_id(op->id, sizeof(op->id), "dcr_", ID_CHARS);
    op->expires_at = op->w.target.now + media->ctx.config->capability_ttl;
    op->w.target.turn_bound = 1;
    op->w.plain = capability_plain;
    rl_op_submit_for(call, op, on_capability_requested);
    return 0;
}

/* ---- the user's answer ---- */

struct capability_answer {
    rl_op_t op;
    const char *user_id, *request_id;
    const char *given_field; /* location, attachment_key, or NULL for a refusal */
    double latitude, longitude, accuracy;
    const char *attachment_key;
    const char *answer_ct; /* issue 26: the sealed answer, or NULL */
    int64_t now;
    /* results */
    int changed;
    const char *problem_path, *problem; /* an answer that does not fit the request: errors[] */
    rl_capability_row_t row;
};

/*
 * The answer as stored: {location} or {attachments: [the photo]}; in an
 * encrypted session {answer_ct} or {answer_ct, attachments: [the sealed
 * photo]}, where answer_ct is kept as the client sealed it.
 */
static int answer_of(rl_txn_t *txn, struct capability_answer *op, int encrypted, json_t **answer)
{
    json_t *refs, *resolved = NULL;
    int result;

    if (strcmp(op->given_field, "answer_ct") == 0) {
        *answer = json_pack("{s:s}", "answer_ct", op->answer_ct);
        return 0;
    }
    if (strcmp(op->given_field, "location") == 0) {
        *answer = json_pack("{s:{s:f, s:f, s:f}}", "location", "latitude", op->latitude, "longitude", op->longitude,
                            "accuracy", op->accuracy);
        return 0;
    }
    refs = json_pack("[{s:s}]", "key", op->attachment_key);
    result =
        rl_attachments_resolve(txn, op->user_id, refs, encrypted ? RL_ATTACHMENTS_SEALED_BYTES : RL_ATTACHMENTS_PLAIN,
                               &resolved, &op->problem);
    json_decref(refs);
    if (result == RL_E_INVALID_REQUEST) {
        op->problem_path = "attachment_key";
        return result;
    }
    if (result == RL_E_NOT_FOUND) {
        op->problem_path = "attachment_key";
        op->problem = "not one of your uploads (POST /v1/me/attachments)";
        return RL_E_INVALID_REQUEST;
    }
    if (result != 0)
        return result;
    /* A sealed photo is application/octet-stream to relayd: its real type is inside answer_ct. */
    if (!encrypted &&
        strncmp(json_string_value(json_object_get(json_array_get(resolved, 0), "mime")), "image/", 6) != 0) {
        json_decref(resolved);
        op->problem_path = "attachment_key";
        op->problem = "a camera request is answered with an image";
        return RL_E_INVALID_REQUEST;
    }
    /* The photo is kept as long as the session, as a message's attachments are. */
    if ((result = rl_attachments_use(txn, resolved, op->row.session_id, op->now)) != 0) {
        json_decref(resolved);
        return result;
    }
    *answer = json_pack("{s:o}", "attachments", resolved);
    if (encrypted)
        json_object_set_new(*answer, "answer_ct", json_string(op->answer_ct));
    return 0;
}

/*
 * issue 26: the plaintext-or-ciphertext rule for an answer. In an encrypted
 * session a location is sealed whole (answer_ct alone) and a photo is a
 * sealed upload (attachment_key) with its name and type sealed (answer_ct);
 * a plain location is refused, as answer_ct is in a plain session. A
 * refusal carries nothing either way. 0, or RL_E_INVALID_REQUEST with the
 * problem set.
 */
static int answer_sealing_check(struct capability_answer *op, int encrypted)
{
    const char *given = op->given_field;

    if (!encrypted) {
        if (op->answer_ct == NULL)
            return 0;
        op->problem_path = "answer_ct";
        op->problem = "This session is not encrypted: answer_ct is refused (send the plain answer)";
        return RL_E_INVALID_REQUEST;
    }
    if (given != NULL && strcmp(given, "location") == 0) {
        op->problem_path = "location";
        op->problem = "This session is end-to-end encrypted: send answer_ct (a base64 envelope), not location";
        return RL_E_INVALID_REQUEST;
    }
    if (given != NULL && strcmp(given, "attachment_key") == 0 && op->answer_ct == NULL) {
        op->problem_path = "answer_ct";
        op->problem = "This session is end-to-end encrypted: a photo's name and type come sealed in answer_ct";
        return RL_E_INVALID_REQUEST;
    }
    return 0;
}

static int capability_answer_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct capability_answer *op = (void *)base;
    const char *wanted;
    json_t *answer = NULL;
    char *answer_text;
    int64_t update_id = 0;
    rl_session_row_t session;
    int result = RL_TXN(txn, capability_get, op->request_id, &op->row);

    /* Another user's request is as absent as one that never was. */
    if (result == RL_E_NOT_FOUND || (result == 0 && strcmp(op->row.user_id, op->user_id) != 0))
        return RL_E_CAPABILITY_NOT_FOUND;
    if (result != 0)
        return result;
    /* ours: the first answer wins; a later one gets it back, marked idempotent. */
    if (strcmp(op->row.state, "answered") == 0 || strcmp(op->row.state, "refused") == 0)
        return 0;
    if (strcmp(op->row.state, "pending") != 0 || op->row.expires_at <= op->now)
        return RL_E_CAPABILITY_EXPIRED;
    if ((result = RL_TXN(txn, session_get, op->row.session_id, &session)) != 0)
        return result == RL_E_NOT_FOUND ? RL_E_CAPABILITY_NOT_FOUND : result;
    if ((result = answer_sealing_check(op, session.encrypted)) != 0)
        return result;
    wanted = rl_capability_answer_field(op->row.capability);
    if (session.encrypted && wanted != NULL && strcmp(wanted, "location") == 0)
        wanted = "answer_ct";
    if (op->given_field != NULL && (wanted == NULL || strcmp(wanted, op->given_field) != 0)) {
        op->problem_path = op->given_field;
        op->problem = strcmp(op->row.capability, "location") != 0 ? "a camera request is answered with attachment_key"
                      : session.encrypted                         ? "a location request is answered with answer_ct"
                                                                  : "a location request is answered with location";
        return RL_E_INVALID_REQUEST;
    }
    if (op->given_field != NULL && (result = answer_of(txn, op, session.encrypted, &answer)) != 0)
        return result;
    answer_text = answer != NULL ? json_dumps(answer, JSON_COMPACT) : NULL;
    json_decref(answer);
    op->row.state = op->given_field != NULL ? "answered" : "refused";
    op->row.answer = answer_text != NULL ? rl_arena_strdup(txn->arena, answer_text) : NULL;
    op->row.answered_at = op->now;
    free(answer_text);
    if ((result = RL_TXN(txn, capability_update, &op->row)) != 0 ||
        (result = rl_update_append(txn, op->row.installation_id, RL_UP_DEVICE_CAPABILITY_RESULT, op->row.session_id,
                                   op->row.interaction_id, result_update(&op->row), op->now, &update_id)) != 0)
        return result;
    op->op.update_id = update_id;
    op->changed = 1;
    return 0;
}

static const rl_store_op_type_t capability_answer_type = RL_OP_TYPE(capability_answer, 1, capability_answer_run);

static void on_answered(rl_store_op_t *base)
{
    struct capability_answer *op = (void *)base;
    rl_call_t *call = base->arg;
    const rl_media_t *media = rl_feature_of(call, RL_FEATURE_MEDIA);
    json_t *reply;

    if (base->result == RL_E_INVALID_REQUEST && op->problem != NULL) {
        rl_call_fail_full(
            call, base->result, NULL,
            json_pack("[{s:s, s:s, s:s}]", "path", op->problem_path, "code", "invalid_answer", "message", op->problem),
            NULL);
    } else if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
    } else {
        reply = resolved_event(&op->row);
        if (op->changed) {
            rl_hub_publish(media->ctx.hub, call->principal, RL_EV_DEVICE_CAPABILITY_RESOLVED, json_incref(reply));
            rl_updates_notify(media->ctx.bus, op->row.installation_id, op->op.update_id);
        } else {
            json_object_set_new(reply, "idempotent", json_true());
        }
        rl_call_reply(call, reply);
    }
    rl_call_release(call);
}

int rl_capability_answer(rl_call_t *call)
{
    struct capability_answer *op;
    json_t *location = json_object_get(call->body, "location");
    const char *given = rl_capability_answer_given(call->body);
    const char *answer_ct = rl_body_string(call, "answer_ct");
    char request_id[64];

    if (rl_call_param(call, 0, request_id, sizeof(request_id)) != 0)
        return RL_E_CAPABILITY_NOT_FOUND;
    /*
     * Exactly one of the three (or, in an encrypted session, answer_ct alone
     * for a location): a field table cannot say that, so it is said here
     * once. A refusal with a sealed answer would drop the answer silently.
     */
    if (given == NULL && answer_ct != NULL && json_object_get(call->body, "location") == NULL &&
        json_object_get(call->body, "attachment_key") == NULL && !json_is_true(json_object_get(call->body, "refused")))
        given = "answer_ct";
    if (given == NULL || (strcmp(given, "refused") == 0 && answer_ct != NULL)) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                          json_pack("[{s:s, s:s, s:s}]", "path", "", "code", "invalid_answer", "message",
                                    "give exactly one of location (answer_ct in an encrypted session), "
                                    "attachment_key or refused: true"),
                          NULL);
        return 0;
    }
    op = rl_op_new(&capability_answer_type, sizeof(*op));
    op->user_id = rl_op_str(op, call->principal);
    op->request_id = rl_op_str(op, request_id);
    op->given_field = strcmp(given, "refused") != 0 ? given : NULL;
    if (strcmp(given, "location") == 0) {
        op->latitude = json_number_value(json_object_get(location, "latitude"));
        op->longitude = json_number_value(json_object_get(location, "longitude"));
        op->accuracy = json_number_value(json_object_get(location, "accuracy"));
    }
    op->attachment_key = rl_op_str(op, rl_body_string(call, "attachment_key"));
    op->answer_ct = answer_ct != NULL ? rl_op_str(op, answer_ct) : NULL;
    op->now = rl_clock_now_ms();
    rl_op_submit_for(call, op, on_answered);
    return 0;
}

/* ---- the snapshot ---- */

int rl_capabilities_pending(rl_txn_t *txn, const char *user_id, int64_t now, json_t **out)
{
    rl_capability_row_t *rows;
    size_t count, i;
    int result = RL_TXN(txn, capabilities_pending_of_user, user_id, now, &rows, &count);

    if (result != 0)
        return result;
    *out = json_array();
    for (i = 0; i < count; ++i)
        json_array_append_new(*out, pending_view(&rows[i]));
    return 0;
}

/* ---- expiry ---- */

struct expire {
    rl_op_t op;
    int64_t now;
    /* results: the requests this sweep expired, each {event, user_id, installation_id, update_id} */
};

static int expire_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct expire *op = (void *)base;
    rl_capability_row_t *rows;
    size_t count, i;
    int result = RL_TXN(txn, capabilities_due, op->now, SWEEP_MAX, &rows, &count);

    if (result != 0)
        return result;
    op->op.value = json_array();
    for (i = 0; i < count; ++i) {
        rl_capability_row_t *row = &rows[i];
        int64_t update_id = 0;
        row->state = "expired";
        row->answered_at = op->now;
        /* ours: the agent hears that nobody answered, as it would hear a refusal. */
        if ((result = RL_TXN(txn, capability_update, row)) != 0 ||
            (result = rl_update_append(txn, row->installation_id, RL_UP_DEVICE_CAPABILITY_RESULT, row->session_id,
                                       row->interaction_id, result_update(row), op->now, &update_id)) != 0)
            return result;
        json_array_append_new(op->op.value,
                              json_pack("{s:o, s:s, s:s, s:I}", "event", resolved_event(row), "user_id", row->user_id,
                                        "installation_id", row->installation_id, "update_id", (json_int_t)update_id));
    }
    return 0;
}

static const rl_store_op_type_t expire_type = RL_OP_TYPE(capabilities_expire, 1, expire_run);

rl_store_op_t *rl_capabilities_expiry(rl_media_t *media, int64_t now)
{
    struct expire *op = rl_op_new(&expire_type, sizeof(*op));

    (void)media;
    op->now = now;
    return &op->op.base;
}

void rl_capabilities_expired(rl_media_t *media, rl_store_op_t *base)
{
    struct expire *op = (void *)base;
    json_t *item;
    size_t i;

    if (base->result != 0) {
        /* The store logs its own outage once (RL_E_UNAVAILABLE): the sweep meeting it is not news each second. */
        if (base->result == RL_E_UNAVAILABLE)
            rl_log_debug("the capability expiry sweep found the store unavailable; it runs again in a second");
        else
            rl_log_warn("the capability expiry sweep failed; it runs again in a second");
        return;
    }
    json_array_foreach(op->op.value, i, item)
    {
        rl_hub_publish(media->ctx.hub, json_string_value(json_object_get(item, "user_id")),
                       RL_EV_DEVICE_CAPABILITY_RESOLVED, json_incref(json_object_get(item, "event")));
        rl_updates_notify(media->ctx.bus, json_string_value(json_object_get(item, "installation_id")),
                          json_integer_value(json_object_get(item, "update_id")));
    }
}
