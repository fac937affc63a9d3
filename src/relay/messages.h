/* The client's messages: history (GET .../messages) and send (POST .../send). */
#ifndef RL_RELAY_MESSAGES_H
#define RL_RELAY_MESSAGES_H

#include "http/call.h"
#include "http/validate.h"

int rl_messages_list(rl_call_t *call);
int rl_message_send(rl_call_t *call);
extern const rl_schema_t rl_message_send_schema;

#endif
