#include <stdio.h>
#include <string.h>

#include "bridge/jsonrpc.h"

/* spec (JSON-RPC 2.0, Request object): an id is a string, a number or null; numbers SHOULD NOT have fractions. */
static int valid_id(const json_t *id)
{
    return json_is_string(id) || json_is_integer(id);
}

int rl_jsonrpc_parse(const char *line, size_t len, rl_jsonrpc_msg_t *msg, json_t **bad_id, char *err, size_t errsz)
{
    json_error_t jerr;
    json_t *version, *method;
    int has_result, has_error, result = RL_JSONRPC_INVALID_REQUEST;

    memset(msg, 0, sizeof(*msg));
    *bad_id = NULL;
    msg->root = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (msg->root == NULL) {
        snprintf(err, errsz, "not JSON (%s)", jerr.text);
        result = RL_JSONRPC_PARSE_ERROR;
        goto fail;
    }
    if (!json_is_object(msg->root)) {
        snprintf(err, errsz, "%s", json_is_array(msg->root) ? "a batch (never sent in ACP)" : "not an object");
        goto fail;
    }
    msg->id = json_object_get(msg->root, "id");
    if (msg->id != NULL && !json_is_null(msg->id) && !valid_id(msg->id)) {
        snprintf(err, errsz, "an id that is neither a string nor an integer");
        msg->id = NULL;
        goto fail;
    }
    if (json_is_null(msg->id))
        msg->id = NULL;
    version = json_object_get(msg->root, "jsonrpc");
    if (!json_is_string(version) || strcmp(json_string_value(version), "2.0") != 0) {
        snprintf(err, errsz, "no \"jsonrpc\": \"2.0\"");
        goto fail;
    }
    method = json_object_get(msg->root, "method");
    if (method != NULL) {
        if (!json_is_string(method)) {
            snprintf(err, errsz, "a method that is not a string");
            goto fail;
        }
        msg->method = json_string_value(method);
        msg->params = json_object_get(msg->root, "params");
        if (msg->params != NULL && !json_is_object(msg->params) && !json_is_array(msg->params) &&
            !json_is_null(msg->params)) {
            snprintf(err, errsz, "params that are neither an object nor an array");
            goto fail;
        }
        if (json_is_null(msg->params))
            msg->params = NULL;
        msg->kind = msg->id != NULL ? RL_JSONRPC_REQUEST : RL_JSONRPC_NOTIFICATION;
        return 0;
    }
    has_result = json_object_get(msg->root, "result") != NULL;
    has_error = json_object_get(msg->root, "error") != NULL;
    if (has_result == has_error) {
        snprintf(err, errsz, "neither a method nor exactly one of result and error");
        goto fail;
    }
    if (has_error && (!json_is_object(json_object_get(msg->root, "error")) ||
                      !json_is_integer(json_object_get(json_object_get(msg->root, "error"), "code")))) {
        snprintf(err, errsz, "an error that is not an object with an integer code");
        goto fail;
    }
    msg->kind = RL_JSONRPC_RESPONSE;
    msg->result = json_object_get(msg->root, "result");
    msg->error = json_object_get(msg->root, "error");
    return 0;
fail:
    if (msg->id != NULL)
        *bad_id = json_incref(msg->id);
    json_decref(msg->root);
    memset(msg, 0, sizeof(*msg));
    return result;
}

void rl_jsonrpc_msg_free(rl_jsonrpc_msg_t *msg)
{
    json_decref(msg->root);
    memset(msg, 0, sizeof(*msg));
}

json_t *rl_jsonrpc_request(json_int_t id, const char *method, json_t *params)
{
    return json_pack("{s:s, s:I, s:s, s:o}", "jsonrpc", "2.0", "id", id, "method", method, "params",
                     params != NULL ? params : json_object());
}

json_t *rl_jsonrpc_notification(const char *method, json_t *params)
{
    return json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", method, "params",
                     params != NULL ? params : json_object());
}

json_t *rl_jsonrpc_result(json_t *id, json_t *result)
{
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id != NULL ? id : json_null(), "result",
                     result != NULL ? result : json_null());
}

json_t *rl_jsonrpc_error(json_t *id, int code, const char *message)
{
    return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id != NULL ? id : json_null(), "error", "code",
                     code, "message", message);
}

int rl_jsonrpc_error_code(const rl_jsonrpc_msg_t *msg)
{
    return msg->error != NULL ? (int)json_integer_value(json_object_get(msg->error, "code")) : 0;
}

const char *rl_jsonrpc_error_message(const rl_jsonrpc_msg_t *msg)
{
    const char *text = json_string_value(json_object_get(msg->error, "message"));
    return text != NULL ? text : "";
}
