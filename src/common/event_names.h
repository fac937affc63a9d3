/*
 * The one catalogue of names on the wire that something other than a request
 * answers: every event of a user's stream (GET /v1/me/stream) and every update
 * a bridge is sent (GET /v1/bridge/ws). relayd publishes only through these
 * ids (rl_hub_publish, rl_update_append take them), so a name exists once.
 *
 * Each row: id, wire name, and which of our programs act on it (READ_WEB the
 * web app, READ_CLI the relay command, READ_BRIDGE relay-bridge; 0 when none
 * does: a client may still show it, as `relay watch` shows every event).
 * tests/check_event_names.py holds docs/api.md, web/app, src/client and
 * src/bridge against these rows: a name added here and forgotten there, or
 * read there and missing here, fails the unit suite.
 */
#ifndef RL_COMMON_EVENT_NAMES_H
#define RL_COMMON_EVENT_NAMES_H

#define RL_READ_WEB    1
#define RL_READ_CLI    2
#define RL_READ_BRIDGE 4

/* The stream's events. hello, heartbeat and resync carry no id; every other one does. */
#define RL_EVENT_MAP(X)                                                                                                \
    X(HELLO, "hello", RL_READ_WEB | RL_READ_CLI)                                                                       \
    X(HEARTBEAT, "heartbeat", RL_READ_WEB)                                                                             \
    X(RESYNC, "resync", RL_READ_WEB | RL_READ_CLI)                                                                     \
    X(INSTALLATION_CREATED, "installation_created", RL_READ_WEB)                                                       \
    X(INSTALLATION_UPDATED, "installation_updated", RL_READ_WEB)                                                       \
    X(INSTALLATION_REVOKED, "installation_revoked", RL_READ_WEB | RL_READ_CLI)                                         \
    X(AGENT_HEALTH_CHANGED, "agent_health_changed", RL_READ_WEB)                                                       \
    X(SESSION_CREATED, "session_created", RL_READ_WEB)                                                                 \
    X(SESSION_RENAMED, "session_renamed", RL_READ_WEB)                                                                 \
    X(SESSION_UPDATED, "session_updated", RL_READ_WEB)                                                                 \
    X(SESSION_DELETED, "session_deleted", RL_READ_WEB | RL_READ_CLI)                                                   \
    X(MESSAGE_ADDED, "message_added", RL_READ_WEB | RL_READ_CLI)                                                       \
    X(MESSAGE_DELTA, "message_delta", RL_READ_WEB | RL_READ_CLI)                                                       \
    X(MESSAGE_FINALIZED, "message_finalized", RL_READ_WEB | RL_READ_CLI)                                               \
    X(TASK_CREATED, "task_created", RL_READ_WEB | RL_READ_CLI)                                                         \
    X(TASK_PROGRESS, "task_progress", RL_READ_WEB | RL_READ_CLI)                                                       \
    X(TASK_COMPLETED, "task_completed", RL_READ_WEB | RL_READ_CLI)                                                     \
    X(TASK_FAILED, "task_failed", RL_READ_WEB | RL_READ_CLI)                                                           \
    X(TASK_CANCELLED, "task_cancelled", RL_READ_WEB | RL_READ_CLI)                                                     \
    X(APPROVAL_REQUESTED, "approval_requested", RL_READ_WEB | RL_READ_CLI)                                             \
    X(APPROVAL_RESOLVED, "approval_resolved", RL_READ_WEB | RL_READ_CLI)                                               \
    X(APPROVAL_EXPIRED, "approval_expired", RL_READ_WEB | RL_READ_CLI)                                                 \
    X(DEVICE_CAPABILITY_REQUEST, "device_capability_request", RL_READ_WEB | RL_READ_CLI)                               \
    X(DEVICE_CAPABILITY_RESOLVED, "device_capability_resolved", RL_READ_WEB | RL_READ_CLI)                             \
    X(GRANT_REVOKED, "grant_revoked", RL_READ_WEB)                                                                     \
    X(DEVICE_ADDED, "device_added", RL_READ_WEB)                                                                       \
    X(DEVICE_REVOKED, "device_revoked", RL_READ_WEB)                                                                   \
    X(SESSION_KEY_GRANTED, "session_key_granted", RL_READ_WEB)                                                         \
    X(SESSION_FILE_TOUCHED, "session_file_touched", RL_READ_WEB)                                                       \
    X(SESSION_STATE, "session_state", RL_READ_WEB)

/* The bridge's updates (frames {"type": "update", "update": {type, ...}}). */
#define RL_UPDATE_MAP(X)                                                                                               \
    X(SESSION_STARTED, "session.started", RL_READ_BRIDGE)                                                              \
    X(SESSION_MESSAGE, "session.message", RL_READ_BRIDGE)                                                              \
    X(SESSION_CANCELLED, "session.cancelled", RL_READ_BRIDGE)                                                          \
    X(SESSION_MODEL_CHANGED, "session.model.changed", RL_READ_BRIDGE)                                                  \
    X(APPROVAL_RESOLVED, "approval.resolved", RL_READ_BRIDGE)                                                          \
    X(APPROVAL_EXPIRED, "approval.expired", RL_READ_BRIDGE)                                                            \
    X(DEVICE_CAPABILITY_RESULT, "device_capability.result", RL_READ_BRIDGE)                                            \
    X(DEVICE_PENDING, "device_pending", RL_READ_BRIDGE)                                                                \
    X(DEVICE_ADDED, "device_added", RL_READ_BRIDGE)                                                                    \
    X(DEVICE_REVOKED, "device_revoked", RL_READ_BRIDGE)                                                                \
    X(SESSION_KEY_GRANTED, "session_key_granted", RL_READ_BRIDGE)                                                      \
    X(SESSION_CONFIG, "session.config", RL_READ_BRIDGE)                                                                \
    X(SESSION_CLOSED, "session.closed", RL_READ_BRIDGE)

#define RL_EVENT_ID(id, name, readers)  RL_EV_##id,
#define RL_UPDATE_ID(id, name, readers) RL_UP_##id,
typedef enum rl_event { RL_EVENT_MAP(RL_EVENT_ID) RL_EV_COUNT } rl_event_t;
typedef enum rl_update { RL_UPDATE_MAP(RL_UPDATE_ID) RL_UP_COUNT } rl_update_t;
#undef RL_EVENT_ID
#undef RL_UPDATE_ID

/* The wire name of an event or an update; "" for an id out of range. */
const char *rl_event_name(rl_event_t event);
const char *rl_update_name(rl_update_t update);
/* The id of a wire name, or -1 when the catalogue has none (a name from the wire). */
int rl_event_find(const char *name);

#endif
