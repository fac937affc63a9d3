/*
 * The one table of every error relayd and catalogd can return.
 *
 * Each row: internal name, HTTP status, the spec's snake_case code, and a
 * default human message. Internal codes are negative so that functions can
 * return 0 on success or -RL_E_* style values directly (see rl_error_t).
 * catalogd's own rows (marked) are listed in docs/catalog.md; its answers use
 * the same envelope, so that one client decoder reads both services.
 */
#ifndef RL_COMMON_ERROR_H
#define RL_COMMON_ERROR_H

#define RL_ERROR_MAP(X)                                                                                                \
    X(INVALID_REQUEST, 400, "invalid_request", "the request body is malformed or fails validation")                    \
    X(INVALID_QUERY, 400, "invalid_query", "the search query is missing or cannot be searched") /* catalogd */         \
    X(INVALID_PARAMETER, 400, "invalid_parameter",                                              /* catalogd */         \
      "a query parameter has a value outside its range")                                                               \
    X(INVALID_TOKEN_LOCATION, 400, "invalid_token_location",                                                           \
      "tokens must be sent in the Authorization header, never in the URL")                                             \
    X(INVALID_TOKEN, 401, "invalid_token", "the token is unknown, malformed, expired or revoked")                      \
    X(INVALID_SIGNATURE, 401, "invalid_signature", "the request signature does not match")                             \
    X(PERMISSION_DENIED, 403, "permission_denied", "the token does not grant this operation")                          \
    X(INSTALLATION_REVOKED, 403, "installation_revoked", "the installation has been revoked")                          \
    X(NOT_REDISTRIBUTABLE, 403, "not_redistributable", /* catalogd */                                                  \
      "the paper's licence does not permit the catalog to redistribute it")                                            \
    X(NOT_FOUND, 404, "not_found", "no such route")                                                                    \
    X(TYPE_NOT_FOUND, 404, "type_not_found", "no such entity type")                      /* catalogd */                \
    X(ENTITY_NOT_FOUND, 404, "entity_not_found", "no entity of this type has this slug") /* catalogd */                \
    X(SESSION_NOT_FOUND, 404, "session_not_found", "the session does not exist")                                       \
    X(INTERACTION_NOT_FOUND, 404, "interaction_not_found", "the interaction does not exist")                           \
    X(INSTALLATION_NOT_FOUND, 404, "installation_not_found", "the installation does not exist")                        \
    X(APPROVAL_NOT_FOUND, 404, "approval_not_found", "the approval does not exist")                                    \
    X(CAPABILITY_NOT_FOUND, 404, "capability_request_not_found", "the capability request does not exist")              \
    X(MESSAGE_NOT_FOUND, 404, "message_not_found", "the message does not exist")                                       \
    X(TASK_NOT_FOUND, 404, "task_not_found", "the task does not exist")                                                \
    X(PAIRING_NOT_FOUND, 404, "pairing_not_found", "no pending pairing matches this code or poll token")               \
    X(GRANT_NOT_FOUND, 404, "grant_not_found", "the grant does not exist")                                             \
    X(DEVICE_NOT_FOUND, 404, "device_not_found", "the device does not exist or was revoked")                           \
    /* relayd's agent files (issue 26); catalogd's missing paper file always says its own message */                   \
    X(FILE_NOT_FOUND, 404, "file_not_found", "the agent touched no such file in this session")                         \
    X(METHOD_NOT_ALLOWED, 405, "method_not_allowed", "this route does not accept that method")                         \
    X(IDEMPOTENCY_CONFLICT, 409, "idempotency_conflict",                                                               \
      "this idempotency key was already used with a different body")                                                   \
    X(MESSAGE_FINALIZED, 409, "message_finalized", "the message is already finalised")                                 \
    X(TASK_FINISHED, 409, "task_finished", "the task has already ended")                                               \
    X(CONFLICT, 409, "conflict", "a resource with this key already exists")                                            \
    X(DEVICE_UNCONFIRMED, 409, "device_unconfirmed",                                                                   \
      "the device has not confirmed this session's bridge (compare the emoji, then confirm)")                          \
    X(SESSION_NOT_ENCRYPTED, 409, "session_not_encrypted", "the session is not end-to-end encrypted")                  \
    X(SESSION_ENCRYPTED, 409, "session_encrypted", "the session is end-to-end encrypted: ask by blind index")          \
    X(DEVICE_MISMATCH, 409, "device_mismatch", "X-Relay-Device must name the device being confirmed")                  \
    X(APPROVAL_AMBIGUOUS, 409, "approval_ambiguous",                                                                   \
      "several of your installations use this approval id; name one with installation_id")                             \
    X(APPROVAL_EXPIRED, 410, "approval_expired", "the approval expired before a decision")                             \
    X(CAPABILITY_EXPIRED, 410, "capability_request_expired", "the capability request expired before an answer")        \
    X(INSTALLATION_GONE, 410, "installation_revoked", "the installation was revoked")                                  \
    X(SESSION_DELETED, 410, "session_deleted", "the session was deleted")                                              \
    X(INTERACTION_EXPIRED, 410, "interaction_expired", "the follow-up window of this interaction has closed")          \
    X(PAIRING_EXPIRED, 410, "pairing_expired", "the pairing code expired before it was claimed")                       \
    X(PAYLOAD_TOO_LARGE, 413, "payload_too_large", "the request body is too large")                                    \
    X(MESSAGE_TOO_LARGE, 413, "message_too_large", "the message's text would pass this relay's size limit")            \
    X(QUOTA_EXCEEDED, 413, "quota_exceeded", "this upload would pass your storage quota for attachments")              \
    X(TOOL_NOT_DECLARED, 422, "tool_not_declared", "the tool is not declared in the agent manifest")                   \
    X(AGENT_NOT_DECLARED, 422, "agent_not_declared", "the agent is not declared in the installation's manifest")       \
    X(RATE_LIMITED, 429, "rate_limited", "too many requests; retry later")                                             \
    X(BRIDGE_BUSY, 429, "bridge_busy", "too many requests already wait for the bridge's answers; retry later")         \
    X(CONTENT_BLOCKED, 451, "content_blocked", "the content filter blocked this output")                               \
    X(INTERNAL, 500, "internal_error", "internal server error")                                                        \
    X(UPSTREAM, 502, "upstream_error", "the bridge bus failed")                                                        \
    X(UNAVAILABLE, 503, "temporarily_unavailable", "the store (PostgreSQL) is unreachable; retry later")               \
    X(STORAGE_FULL, 503, "storage_full", "the relay's disk is full; retry later")                                      \
    X(BRIDGE_OFFLINE, 503, "bridge_offline", "the installation's bridge is not connected")                             \
    X(BRIDGE_TIMEOUT, 504, "bridge_timeout", "the bridge did not answer in time")                                      \
    X(AGENT_DEGRADED, 503, "agent_degraded", "the agent is not answering; retry later")

typedef enum rl_error {
    RL_OK = 0,
#define RL__ERROR_ENUM(name, status, code, message) RL_E_##name,
    RL__ERROR_FIRST = -1000,
    RL_ERROR_MAP(RL__ERROR_ENUM)
#undef RL__ERROR_ENUM
        RL__ERROR_LAST
} rl_error_t;

/* HTTP status of an error; 500 for anything outside the table. */
int rl_error_status(int err);
/* The spec's code ("invalid_token"); "internal_error" for anything outside the table. */
const char *rl_error_code(int err);
/* Default human message of an error. */
const char *rl_error_message(int err);

#endif
