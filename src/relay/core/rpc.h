/*
 * Requests from relayd to a bridge over its socket (issue 26, the protocol
 * authors' wire): a frame {type: "<name>.req", req_id, ...} that the bridge
 * answers with {type: "<name>.resp", req_id, ...}. The node that asks may
 * not hold the bridge's socket: the request goes out on the installation's
 * bus topic (bridge_ws.c sends it where the socket is), and the answer comes
 * back on the asking node's topic "rpc:<node>", named by its req_id
 * ("rq_<node>.<random>"). Loop thread only.
 */
#ifndef RL_RELAY_RPC_H
#define RL_RELAY_RPC_H

#include <jansson.h>

#include "http/call.h"

/*
 * How long a client waits for the bridge's answer, and the largest answer
 * relayd passes on: a file of up to 2 MiB in base64 (relay-bridge sends
 * files up to 1.5 MiB, sealed) with its JSON around it. A bridge socket
 * takes frames this large only while a request to it waits (bridge_ws.c).
 */
#define RL_RPC_TIMEOUT_MS 10000
#define RL_RPC_REPLY_MAX  (3 * 1024 * 1024)

struct rl_relay;
typedef struct rl_rpc rl_rpc_t;

/* The node's pending requests; joins its answer topic. NULL when out of memory. */
rl_rpc_t *rl_rpc_new(struct rl_relay *relay);
/* Answers what still waits with 503 and frees it. */
void rl_rpc_free(rl_rpc_t *rpc);
/*
 * Sends frame (stolen; its type set, req_id added) to the installation's
 * bridge for call, which is held until answer(call, reply, error) runs: with
 * the bridge's frame (borrowed) and 0, or NULL and RL_E_BRIDGE_OFFLINE (no
 * socket anywhere) or RL_E_BRIDGE_TIMEOUT. answer must reply. A request
 * over a cap (16 waiting for the installation, 64 for the user, 4096 on the
 * node) is answered here, 429 bridge_busy or 503, and answer does not run.
 * Only the installation asked can answer (its req_id from another is dropped).
 */
void rl_rpc_ask(rl_rpc_t *rpc, rl_call_t *call, const char *installation_id, json_t *frame,
                void (*answer)(rl_call_t *call, json_t *reply, int error));
/*
 * An answer function for rl_rpc_ask: the bridge's answer as it sent it (but
 * for its type and req_id), its error {code, message} as 502 upstream_error
 * with details.bridge_error, or relayd's own error.
 */
void rl_rpc_pass_on(rl_call_t *call, json_t *reply, int error);
/* bridge_ws.c: a frame with a req_id came from a bridge on this node; it goes to the node that asked. */
void rl_rpc_bridge_answered(rl_rpc_t *rpc, const char *installation_id, json_t *frame, size_t len);
/* relay.c: a signal on this node's "rpc:" topic. */
void rl_rpc_on_signal(struct rl_relay *relay, const char *topic, json_t *message);

#endif
