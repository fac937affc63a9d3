/*
 * JSON-RPC 2.0 messages, one per line (the Agent Client Protocol's stdio
 * transport): the parser of what an agent writes, and the builders of what
 * the bridge writes back. The parser takes untrusted bytes and is fuzzed
 * (tests/fuzz/fuzz_bridge_jsonrpc.c). Pure; any thread.
 */
#ifndef RL_BRIDGE_JSONRPC_H
#define RL_BRIDGE_JSONRPC_H

#include <jansson.h>
#include <stddef.h>

/* JSON-RPC 2.0's reserved codes, and the Agent Client Protocol's own. */
enum {
    RL_JSONRPC_PARSE_ERROR = -32700,
    RL_JSONRPC_INVALID_REQUEST = -32600,
    RL_JSONRPC_METHOD_NOT_FOUND = -32601,
    RL_JSONRPC_INVALID_PARAMS = -32602,
    RL_JSONRPC_INTERNAL_ERROR = -32603,
    RL_JSONRPC_REQUEST_CANCELLED = -32800, /* ACP */
    RL_JSONRPC_AUTH_REQUIRED = -32000,     /* ACP */
    RL_JSONRPC_RESOURCE_NOT_FOUND = -32002 /* ACP */
};

typedef enum rl_jsonrpc_kind {
    RL_JSONRPC_REQUEST,      /* method, params, id: must be answered */
    RL_JSONRPC_NOTIFICATION, /* method, params, no id */
    RL_JSONRPC_RESPONSE,     /* id, and result or error */
} rl_jsonrpc_kind_t;

typedef struct rl_jsonrpc_msg {
    rl_jsonrpc_kind_t kind;
    json_t *root;       /* the whole message; owns everything below */
    json_t *id;         /* request, response: a string or an integer (a response may carry null) */
    const char *method; /* request, notification */
    json_t *params;     /* request, notification: an object, an array or NULL */
    json_t *result;     /* response: NULL when it is an error */
    json_t *error;      /* response: the error object {code, message, data?}, or NULL */
} rl_jsonrpc_msg_t;

/*
 * Parses one line (without its newline). 0 with *msg filled (free with
 * rl_jsonrpc_msg_free), or the JSON-RPC error code that answers it:
 * RL_JSONRPC_PARSE_ERROR when it is not JSON, RL_JSONRPC_INVALID_REQUEST
 * when it is JSON but not a valid message (no "jsonrpc":"2.0", an id that is
 * neither a string nor an integer, a method that is not a string, params
 * that are neither object nor array, a response with both or neither of
 * result and error, a batch: the Agent Client Protocol sends none). err says
 * what, for the log. On an invalid request whose id could be read, *bad_id
 * is set to a new reference to it (else NULL) so that the answer can name it.
 */
int rl_jsonrpc_parse(const char *line, size_t len, rl_jsonrpc_msg_t *msg, json_t **bad_id, char *err, size_t errsz);
void rl_jsonrpc_msg_free(rl_jsonrpc_msg_t *msg);

/* Builders: new references (NULL only when out of memory). params and result are stolen; id is not. */
json_t *rl_jsonrpc_request(json_int_t id, const char *method, json_t *params);
json_t *rl_jsonrpc_notification(const char *method, json_t *params);
json_t *rl_jsonrpc_result(json_t *id, json_t *result);
/* id NULL answers with "id": null (the spec's rule when the request's id could not be read). */
json_t *rl_jsonrpc_error(json_t *id, int code, const char *message);

/* The error's code, or 0 when msg is not an error response. */
int rl_jsonrpc_error_code(const rl_jsonrpc_msg_t *msg);
/* The error's message, or "" when none. */
const char *rl_jsonrpc_error_message(const rl_jsonrpc_msg_t *msg);

#endif
