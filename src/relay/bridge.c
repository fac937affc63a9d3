/*
 * The bridge's REST writes under /v1/bridge: streamed messages, tasks, approval
 * requests and uploads. Every write of one (session, interaction) is applied
 * and published in arrival order: requests reach the store in the order h2o
 * hands them over and the store completes them in that order, so a delta
 * never overtakes its placeholder.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/rand.h"
#include "http/validate.h"
#include "relay/attachments.h"
#include "relay/deltas.h"
#include "relay/relay.h"
#include "relay/token.h"

#define ID_CHARS  20
#define TEXT_MAX  0 /* unbounded: the 1 MB body limit bounds a text (issue 11) */
#define DELTA_MAX 65536

static const char *const finish_reasons[] = {"stop", "length", "content_filter", "tool_call", NULL};
static const char *const task_statuses[] = {"completed", "failed", "cancelled", NULL};
static const char *const severities[] = {"low", "medium", "high", NULL};

static const rl_field_t usage_fields[] = {
    RL_FIELD_INTEGER_MIN("input_tokens", 0, 0),      RL_FIELD_INTEGER_MIN("output_tokens", 0, 0),
    RL_FIELD_NUMBER_MIN("estimated_cost_usd", 0, 0), RL_FIELD_STRING("model", 0, 0, 128),
    RL_FIELD_STRING("provider", 0, 0, 128),          RL_FIELD_END,
};
static const rl_schema_t usage_schema = RL_SCHEMA(usage_fields);

#define IDEMPOTENCY_KEY RL_FIELD_STRING("idempotency_key", RL_F_REQUIRED, 1, 256)

static const rl_field_t send_message_fields[] = {
    RL_FIELD_STRING("session_id", RL_F_REQUIRED, 1, 64),
    RL_FIELD_STRING("interaction_id", RL_F_NULLABLE, 1, 64),
    RL_FIELD_STRING("text", RL_F_REQUIRED, 0, TEXT_MAX),
    RL_FIELD_ARRAY("attachments", 0, 0, 10, &rl_attachment_ref_item),
    RL_FIELD_STRING("reply_to", RL_F_NULLABLE, 1, 64),
    RL_FIELD_OBJECT("usage", RL_F_NULLABLE, &usage_schema),
    IDEMPOTENCY_KEY,
    RL_FIELD_END,
};
const rl_schema_t rl_send_message_schema = RL_SCHEMA(send_message_fields);

static const rl_field_t send_delta_fields[] = {
    RL_FIELD_STRING("message_id", RL_F_REQUIRED, 1, 64),
    RL_FIELD_STRING("delta", RL_F_REQUIRED, 0, DELTA_MAX),
    IDEMPOTENCY_KEY,
    RL_FIELD_END,
};
const rl_schema_t rl_send_delta_schema = RL_SCHEMA(send_delta_fields);

static const rl_field_t send_end_fields[] = {
    RL_FIELD_STRING("message_id", RL_F_REQUIRED, 1, 64),
    RL_FIELD_STRING("text", 0, 0, TEXT_MAX),
    RL_FIELD_OBJECT("usage", RL_F_NULLABLE, &usage_schema),
    RL_FIELD_ENUM("finish_reason", 0, finish_reasons),
    IDEMPOTENCY_KEY,
    RL_FIELD_END,
};
const rl_schema_t rl_send_end_schema = RL_SCHEMA(send_end_fields);

#define TASK_TARGET                                                                                                    \
    RL_FIELD_STRING("session_id", RL_F_REQUIRED, 1, 64), RL_FIELD_STRING("interaction_id", RL_F_REQUIRED, 1, 64),      \
        RL_FIELD_STRING("task_id", RL_F_REQUIRED, 1, 256)

static const rl_field_t create_task_fields[] = {
    TASK_TARGET,
    RL_FIELD_STRING("kind", RL_F_REQUIRED, 1, 64),
    RL_FIELD_STRING("name", 0, 1, 128),
    RL_FIELD_STRING("status_label", RL_F_NULLABLE, 0, 200),
    RL_FIELD_OBJECT("args", RL_F_NULLABLE, NULL),
    RL_FIELD_END,
};
const rl_schema_t rl_create_task_schema = RL_SCHEMA(create_task_fields);

static const rl_field_t update_task_fields[] = {
    TASK_TARGET,
    RL_FIELD_NUMBER_RANGE("progress_percent", RL_F_NULLABLE, 0, 100),
    RL_FIELD_ANY("partial_result", 0),
    RL_FIELD_STRING("status_label", RL_F_NULLABLE, 0, 200),
    RL_FIELD_STRING("idempotency_key", 0, 1, 256),
    RL_FIELD_END,
};
const rl_schema_t rl_update_task_schema = RL_SCHEMA(update_task_fields);

static const rl_field_t finish_task_fields[] = {
    TASK_TARGET,
    RL_FIELD_ENUM("status", RL_F_REQUIRED, task_statuses),
    RL_FIELD_STRING("name", 0, 1, 128),
    RL_FIELD_STRING("status_label", RL_F_NULLABLE, 0, 200),
    RL_FIELD_ANY("error", 0),
    RL_FIELD_ANY("result", 0),
    RL_FIELD_END,
};
const rl_schema_t rl_finish_task_schema = RL_SCHEMA(finish_task_fields);

static const rl_field_t request_approval_fields[] = {
    RL_FIELD_STRING("session_id", RL_F_REQUIRED, 1, 64),
    RL_FIELD_STRING("interaction_id", RL_F_REQUIRED, 1, 64),
    RL_FIELD_STRING("approval_id", RL_F_REQUIRED, 1, 128),
    RL_FIELD_STRING("action", RL_F_REQUIRED, 1, 128),
    RL_FIELD_STRING("title", RL_F_REQUIRED, 1, 200),
    RL_FIELD_STRING("message", RL_F_REQUIRED, 0, 4000),
    RL_FIELD_STRING("command", RL_F_NULLABLE, 0, 8192),
    RL_FIELD_STRING("host", RL_F_NULLABLE, 0, 255),
    RL_FIELD_ENUM("severity", RL_F_REQUIRED, severities),
    RL_FIELD_STRING("tool_call_id", RL_F_NULLABLE, 1, 128),
    IDEMPOTENCY_KEY,
    RL_FIELD_END,
};
const rl_schema_t rl_request_approval_schema = RL_SCHEMA(request_approval_fields);

static const char *body_string(const rl_call_t *call, const char *key)
{
    return json_string_value(json_object_get(call->body, key));
}

/* The state a bridge write carries from its handler to its completion. */
struct write {
    rl_call_t *call;
    char scope[320];
    char body_hash[65];
    rl_idempotency_t idem;
    rl_bridge_target_t target;
    char message_id[32];
};

/* spec: same key, same body gives the cached response; the body is compared through its canonical hash. */
static struct write *write_new(rl_call_t *call, const char *scope_kind, const char *scope_id, const char *key)
{
    rl_relay_t *relay = call->app;
    struct write *write = calloc(1, sizeof(*write));
    char *canonical;

    if (write == NULL)
        return NULL;
    canonical = json_dumps(call->body, JSON_COMPACT | JSON_SORT_KEYS);
    if (canonical == NULL) {
        free(write);
        return NULL;
    }
    rl_token_hash(canonical, strlen(canonical), write->body_hash);
    free(canonical);
    snprintf(write->scope, sizeof(write->scope), "%s:%s", scope_kind, scope_id != NULL ? scope_id : "");
    write->call = call;
    write->idem.owner = call->principal;
    write->idem.scope = write->scope;
    write->idem.key = key;
    write->idem.body_hash = write->body_hash;
    write->target.installation_id = call->principal;
    write->target.session_id = body_string(call, "session_id");
    write->target.interaction_id = body_string(call, "interaction_id");
    write->target.now = rl_clock_now_ms();
    write->target.followup_ms = relay->config.followup_window;
    rl_call_hold(call);
    return write;
}

static void write_done(struct write *write)
{
    rl_call_release(write->call);
    free(write);
}

/* Answers a write: the stored response, marked when it is a replay. Returns 1 when it was a replay. */
static int answer(rl_call_t *call, json_t *value)
{
    json_t *response = json_deep_copy(json_object_get(value, "response"));
    int replay = json_is_true(json_object_get(value, "idempotent"));

    if (replay)
        json_object_set_new(response, "idempotent", json_true());
    rl_call_reply(call, response);
    return replay;
}

/* ---- messages ---- */

static void on_message_opened(int result, json_t *value, void *arg)
{
    struct write *write = arg;
    rl_call_t *call = write->call;

    if (result == RL_E_NOT_FOUND) {
        rl_call_fail_full(call, RL_E_INVALID_REQUEST, NULL,
                          json_pack("[{s:s, s:s, s:s}]", "path", "attachments", "code", "invalid_string", "message",
                                    "Unknown attachment key"),
                          NULL);
    } else if (result != 0) {
        rl_call_fail(call, result, NULL);
    } else if (!answer(call, value)) {
        json_t *message = json_object_get(value, "message");
        rl_deltas_opened(call->app, json_string_value(json_object_get(message, "message_id")), call->principal,
                         json_string_value(json_object_get(value, "user_id")), json_object_get(message, "session_id"),
                         json_object_get(message, "interaction_id"));
        /* spec: the agent placeholder is announced as message_added. */
        rl_attachments_hydrate(call->app, json_object_get(message, "attachments"));
        rl_relay_publish(call->app, json_string_value(json_object_get(value, "user_id")), "message_added",
                         json_incref(message));
    }
    json_decref(value);
    write_done(write);
}

int rl_bridge_send_message(rl_call_t *call)
{
    rl_relay_t *relay = call->app;
    struct write *write =
        write_new(call, "sendMessage", body_string(call, "session_id"), body_string(call, "idempotency_key"));

    if (write == NULL)
        return RL_E_INTERNAL;
    rl_rand_id(write->message_id, sizeof(write->message_id), "msg_", ID_CHARS);
    rl_store_message_open(relay->store, &write->idem, &write->target, write->message_id, call->owner, call->body,
                          on_message_opened, write);
    return 0;
}

static void on_message_ended(int result, json_t *value, void *arg)
{
    struct write *write = arg;
    rl_call_t *call = write->call;

    rl_deltas_ending(call->app, body_string(call, "message_id"), 0);
    if (result != 0) {
        rl_call_fail(call, result, NULL);
    } else if (!answer(call, value)) {
        json_t *message = json_object_get(value, "message");
        rl_deltas_finalized(call->app, json_string_value(json_object_get(message, "message_id")));
        rl_attachments_hydrate(call->app, json_object_get(message, "attachments"));
        rl_relay_publish(call->app, json_string_value(json_object_get(value, "user_id")), "message_finalized",
                         json_incref(message));
    }
    json_decref(value);
    write_done(write);
}

int rl_bridge_send_end(rl_call_t *call)
{
    rl_relay_t *relay = call->app;
    const char *message_id = body_string(call, "message_id");
    struct write *write = write_new(call, "message", message_id, body_string(call, "idempotency_key"));

    if (write == NULL)
        return RL_E_INTERNAL;
    /* The deltas answered so far land before the end that folds them into the canonical text. */
    rl_deltas_flush(relay);
    rl_deltas_ending(relay, message_id, 1);
    rl_store_message_end(relay->store, &write->idem, call->principal, message_id, call->body, write->target.now,
                         on_message_ended, write);
    return 0;
}

/* ---- tasks ---- */

static void on_task(int result, json_t *value, void *arg)
{
    struct write *write = arg;
    rl_call_t *call = write->call;
    rl_task_step_t step = (rl_task_step_t)call->handler_tag;

    if (result != 0) {
        rl_call_fail(call, result, NULL);
    } else if (!answer(call, value)) {
        json_t *task = json_object_get(value, "task"), *event;
        const char *name = "task_created";
        event =
            json_pack("{s:O, s:O, s:O, s:O}", "task_id", json_object_get(task, "task_id"), "session_id",
                      json_object_get(task, "session_id"), "interaction_id", json_object_get(task, "interaction_id"),
                      "status_label", json_object_get(task, "status_label"));
        if (step == RL_TASK_CREATE) {
            json_object_set(event, "kind", json_object_get(task, "kind"));
            json_object_set(event, "args",
                            json_object_get(call->body, "args") != NULL ? json_object_get(call->body, "args")
                                                                        : json_null());
            if (json_is_string(json_object_get(task, "name")))
                json_object_set(event, "name", json_object_get(task, "name"));
        } else if (step == RL_TASK_UPDATE) {
            name = "task_progress";
            json_object_set(event, "progress_percent",
                            json_object_get(call->body, "progress_percent") != NULL
                                ? json_object_get(call->body, "progress_percent")
                                : json_null());
            if (json_object_get(call->body, "partial_result") != NULL)
                json_object_set(event, "partial_result", json_object_get(call->body, "partial_result"));
        } else {
            const char *status = json_string_value(json_object_get(call->body, "status"));
            name = strcmp(status, "completed") == 0 ? "task_completed"
                   : strcmp(status, "failed") == 0  ? "task_failed"
                                                    : "task_cancelled";
            if (json_is_string(json_object_get(task, "name")))
                json_object_set(event, "name", json_object_get(task, "name"));
            if (json_object_get(call->body, "result") != NULL)
                json_object_set(event, "result", json_object_get(call->body, "result"));
            if (json_object_get(call->body, "error") != NULL)
                json_object_set(event, "error", json_object_get(call->body, "error"));
            json_object_set_new(event, "status", json_string(status));
        }
        rl_relay_publish(call->app, json_string_value(json_object_get(value, "user_id")), name, event);
    }
    json_decref(value);
    write_done(write);
}

/* The task routes: the row says which step of the lifecycle (call->handler_tag). */
int rl_bridge_task(rl_call_t *call)
{
    rl_task_step_t step = (rl_task_step_t)call->handler_tag;
    rl_relay_t *relay = call->app;
    const char *task_id = body_string(call, "task_id");
    const char *kinds[] = {"task.create", "task.update", "task.finish"};
    struct write *write;

    /*
     * spec: the idempotency scope of the task routes is the task id: a create
     * and a finish each happen once per task; updates are distinct events
     * unless they carry an idempotency_key.
     */
    if (step == RL_TASK_UPDATE) {
        char scope_id[300];
        snprintf(scope_id, sizeof(scope_id), "%s", task_id);
        write = write_new(call, kinds[step], scope_id, body_string(call, "idempotency_key"));
    } else {
        write = write_new(call, kinds[step], "", task_id);
    }
    if (write == NULL)
        return RL_E_INTERNAL;
    rl_store_task_step(relay->store, &write->idem, &write->target, step, call->body, on_task, write);
    return 0;
}

/* ---- approvals ---- */

static void on_approval_requested(int result, json_t *value, void *arg)
{
    struct write *write = arg;
    rl_call_t *call = write->call;
    rl_relay_t *relay = call->app;

    if (result != 0) {
        rl_call_fail(call, result, NULL);
    } else if (!answer(call, value)) {
        json_t *approval = json_object_get(value, "approval");
        if (json_is_true(json_object_get(value, "auto_resolved"))) {
            rl_relay_update_queued(relay, call->principal, json_integer_value(json_object_get(value, "update_id")));
        } else {
            rl_relay_publish(relay, json_string_value(json_object_get(value, "user_id")), "approval_requested",
                             rl_approval_view(approval));
        }
    }
    json_decref(value);
    write_done(write);
}

int rl_bridge_request_approval(rl_call_t *call)
{
    rl_relay_t *relay = call->app;
    struct write *write = write_new(call, "approval", "", body_string(call, "approval_id"));

    if (write == NULL)
        return RL_E_INTERNAL;
    rl_store_approval_request(relay->store, &write->idem, &write->target, call->body,
                              write->target.now + relay->config.approval_ttl, on_approval_requested, write);
    return 0;
}

/* ---- uploads ---- */

int rl_bridge_upload(rl_call_t *call)
{
    /* A bridge's upload belongs to the installation's user, so that its messages can reference it. */
    return rl_attachment_upload_for(call, call->owner);
}
