/* Streamed deltas on the fast path (relay/deltas.c). Loop thread only. */
#ifndef RL_RELAY_DELTAS_H
#define RL_RELAY_DELTAS_H

#include <jansson.h>
#include <stdint.h>

struct rl_relay;

int rl_deltas_init(struct rl_relay *relay);
/* Queues every pending delta for the store now; what is queued after lands after them. */
void rl_deltas_flush(struct rl_relay *relay);
/* Forgets records unused for a while; housekeeping. */
void rl_deltas_sweep(struct rl_relay *relay, int64_t now_ms);
/* A session was deleted: its messages' records must be reloaded. */
void rl_deltas_forget_session(struct rl_relay *relay, const char *session_id);
/* sendMessage opened a message: its record starts empty without asking the store. */
void rl_deltas_opened(struct rl_relay *relay, const char *message_id, const char *installation_id, const char *user_id,
                      json_t *session_id, json_t *interaction_id);
/* sendMessageEnd finalised a message: later deltas get 409. */
void rl_deltas_finalized(struct rl_relay *relay, const char *message_id);
/*
 * A sendMessageEnd for the message is in the store (ending = 1) or has come
 * back (ending = 0): meanwhile a new delta is refused like one after the end,
 * so that nothing is answered that the end would not fold in.
 */
void rl_deltas_ending(struct rl_relay *relay, const char *message_id, int ending);

#endif
