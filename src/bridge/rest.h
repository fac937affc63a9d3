/*
 * The bridge's writer: one thread that makes the bridge's REST calls in the
 * order they were submitted, so the socket loop never blocks on HTTP.
 *
 * Design (docs/bridge.md, "Inside"): the loop builds each call's body,
 * idempotency key included, and submits it; the writer sends calls one at
 * a time in FIFO order. That serialises writes per (session_id,
 * interaction_id) (spec delivery rule 6) — indeed globally, which is simple
 * and, with deltas batched, well within the relay's buckets. Before a call
 * the writer waits for its bucket when the last answer of that bucket said
 * Remaining 0 (wait Reset-After). Errors follow the spec's client handling
 * rules through rl_retry_decide: a retry resends the same body, hence the
 * same idempotency key; 410 drops the rest of the turn's work; every error
 * is logged with its X-Request-ID. Consecutive deltas of one message still
 * waiting in the queue are merged before their first attempt, so a bridge
 * held back by a 429 catches up in fewer calls without reordering text.
 *
 * Results the loop needs (a turn's end, an approval's answer, a revoked
 * installation) come back through rl_rest_results(), signalled on an
 * eventfd the loop polls.
 */
#ifndef RL_BRIDGE_REST_H
#define RL_BRIDGE_REST_H

#include <jansson.h>

#include "client/client.h"

typedef struct rl_rest rl_rest_t;

/* A turn: the agent's answer to one user message, i.e. one agent message. */
typedef struct rl_turn {
    int refs; /* atomic */
    char session_id[64], interaction_id[64];
    char message_id[64]; /* written by the writer thread once sendMessage answered */
    int dropped;         /* writer thread: a 410 made the rest of the turn moot */
    int lost_text;       /* atomic: a delta was not delivered (dropped from a full queue, or given up) */
    /*
     * Loop thread, set before the END is submitted, only for a reply longer
     * than relayd's text cap: its start and the incomplete note. Should a
     * delta have been lost, the writer ends the message with this text and no
     * finish_reason instead of leaving a hole. Freed with the turn.
     */
    char *incomplete_text;
    int encrypted; /* set before the first submit: the session is encrypted, incomplete_text is a text_ct */
    void *owner;   /* the loop's own data, untouched by the writer */
} rl_turn_t;

rl_turn_t *rl_turn_new(const char *session_id, const char *interaction_id);
void rl_turn_ref(rl_turn_t *turn);
void rl_turn_unref(rl_turn_t *turn);

typedef enum rl_call {
    RL_CALL_SEND_MESSAGE, /* opens turn's message; result sets turn->message_id */
    RL_CALL_DELTA,        /* body gets turn's message_id */
    RL_CALL_END,          /* same; always reported back */
    RL_CALL_CREATE_TASK,
    RL_CALL_UPDATE_TASK,
    RL_CALL_FINISH_TASK,
    RL_CALL_REQUEST_APPROVAL, /* always reported back */
    RL_CALL_SET_MANIFEST,
    RL_CALL_REQUEST_CAPABILITY, /* always reported back */
    RL_CALL_REGISTER_DEVICE,    /* POST /v1/bridge/devices; always reported back */
    RL_CALL_ADD_RECIPIENTS,     /* body's "session_id" goes into the path: /v1/bridge/sessions/:id/recipients */
    RL_CALL_NOTIFY_TOOL_FILE,
    RL_CALL_SESSION_STATE, /* body's "session_id" goes into the path: /v1/bridge/sessions/:id/state */
} rl_call_t;

typedef struct rl_rest_result {
    struct rl_rest_result *next;
    rl_call_t call;
    rl_turn_t *turn; /* a reference, or NULL */
    int ok;          /* the call succeeded */
    json_t *body;    /* the submitted body (a reference) */
    json_t *result;  /* the answer's "result", or NULL */
    char code[64];   /* error code when !ok ("" when no answer came) */
} rl_rest_result_t;

typedef struct rl_rest_options {
    long retry_backoff_ms; /* first backoff of rule 3; 0: 1000 */
    long outage_ms;        /* a call that gets no answer is retried this long (rl_retry_policy_t); 0: rule 3 only */
    size_t max_queued;     /* bytes of deltas waiting in the queue; 0: RL_REST_MAX_QUEUED */
} rl_rest_options_t;

/*
 * What the writer keeps of deltas not sent yet, during an outage of the
 * relay say: past it a new delta is dropped (the turn's lost_text is set),
 * because the message's END carries the whole text anyway (bridge/reply.h).
 */
#define RL_REST_MAX_QUEUED (16u * 1024u * 1024u)

/*
 * Starts the writer over client (which it then owns: it is used on the
 * writer thread only) with the bridge token. NULL on failure.
 */
rl_rest_t *rl_rest_start(rl_client_t *client, const char *token, const rl_rest_options_t *options);
/* Stops the thread (an in-flight call is finished or times out), frees everything. */
void rl_rest_stop(rl_rest_t *rest);
/* The eventfd that becomes readable when results are waiting. */
int rl_rest_fd(const rl_rest_t *rest);
/* Queues a call; steals body; takes its own reference on turn (may be NULL). Loop thread. */
void rl_rest_submit(rl_rest_t *rest, rl_call_t call, rl_turn_t *turn, json_t *body);
/* Takes every waiting result, oldest first; free each with rl_rest_result_free. Loop thread. */
rl_rest_result_t *rl_rest_results(rl_rest_t *rest);
void rl_rest_result_free(rl_rest_result_t *result);
/* 1 once the relay said the installation is revoked (401 or 410 installation_revoked). */
int rl_rest_revoked(rl_rest_t *rest);
/* Calls queued or in flight. */
int rl_rest_pending(rl_rest_t *rest);

/* A fresh idempotency key (a random UUID v4). */
void rl_rest_new_key(char out[37]);

#endif
