/*
 * Web Push to the user's devices (docs/web.md): the subscription routes,
 * which events become a push, and the sender.
 *
 * The loop decides and queues; a sender thread encrypts each message for its
 * subscription (webpush.h), signs the VAPID token and POSTs it to the push
 * service with libcurl, so that no crypto or network round trip ever runs on
 * the loop (libcurl resolves names on threads of its own, so a slow DNS
 * server stalls neither). Each user's pushes wait in a queue of their own,
 * served in turn with a few in flight at most, so that one user's endpoints
 * cannot starve anyone else's; every address connected to is checked
 * against the policy of push_endpoint.h. Outcomes come back through a pipe
 * the loop watches: a subscription the push service calls gone (404, 410)
 * is deleted, and so is one whose pushes keep failing, after a back-off.
 * Loop thread only, except where noted.
 */
#ifndef RL_RELAY_PUSH_H
#define RL_RELAY_PUSH_H

#include <jansson.h>
#include <stdint.h>

#include "http/call.h"
#include "http/validate.h"
#include "relay/core/config.h"
#include "store/store.h"

struct rl_relay;

/*
 * Pushes waiting for the sender past this many, all users together, are
 * dropped (and logged): a stuck push service costs bounded memory. Each user
 * has a smaller share of it, --push-user-max.
 */
#define RL_PUSH_QUEUE_MAX 1024
/* Subscriptions kept per user; a new one past this replaces the oldest. */
#define RL_PUSH_SUBSCRIPTIONS_MAX 20
#define RL_PUSH_ENDPOINT_MAX      2048

typedef struct rl_push rl_push_t;

struct rl_hub;
struct rl_jobs;
/*
 * What push uses of the relay, and nothing more: the settings, the store
 * (subscriptions), the hub (is the user's stream open on this node?) and the
 * background jobs (the sender). Copied by rl_push_open; each must outlive it.
 */
typedef struct rl_push_ctx {
    const rl_config_t *config;
    rl_store_t *store;
    struct rl_hub *hub;
    struct rl_jobs *jobs;
} rl_push_ctx_t;

/*
 * Loads (or creates) the VAPID key and starts the sender. Startup; 0 or -1
 * with the cause logged. *out is also the handlers' context (RL_FEATURE_PUSH).
 */
int rl_push_open(const rl_push_ctx_t *ctx, rl_push_t **out);
/* Stops the sender (pushes still queued are dropped) and frees what it holds. NULL is ignored. */
void rl_push_close(rl_push_t *push);
/* Pushes not sent since the start, by why (the metrics): each is logged once in a hundred. */
typedef struct rl_push_skipped {
    uint64_t backing_off;     /* to an endpoint resting after failures (--push-backoff) */
    uint64_t queue_full;      /* the sender's queue held RL_PUSH_QUEUE_MAX */
    uint64_t user_queue_full; /* the user had --push-user-max waiting */
} rl_push_skipped_t;

/* What rl_push_skipped_t says, for push; zeros for NULL. Loop thread. */
void rl_push_skipped(const rl_push_t *push, rl_push_skipped_t *out);
/* The VAPID public key (base64url): the app's applicationServerKey. NULL for a NULL push. */
const char *rl_push_public_key(rl_push_t *push);
/* An approval_requested event (borrowed) for the user: pushed to each of their subscriptions. */
void rl_push_approval_requested(rl_push_t *push, const char *user_id, json_t *event);
/*
 * A finalised message (borrowed): an agent's reply is pushed when the user
 * has no event stream open on this node (docs/web.md says why per node).
 */
void rl_push_reply_finalized(rl_push_t *push, const char *user_id, json_t *message);

/*
 * POST /v1/me/push-subscriptions {endpoint, keys: {p256dh, auth}} (the
 * endpoint checked against the policy: 400; another user's endpoint with
 * other keys: 409 conflict) and DELETE with {endpoint}.
 */
int rl_push_subscribe(rl_call_t *call);
int rl_push_unsubscribe(rl_call_t *call);
extern const rl_schema_t rl_push_subscribe_schema, rl_push_unsubscribe_schema;

#endif
