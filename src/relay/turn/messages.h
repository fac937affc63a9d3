/* The client's messages: history (GET .../messages) and send (POST .../send). */
#ifndef RL_RELAY_MESSAGES_H
#define RL_RELAY_MESSAGES_H

#include "http/call.h"
#include "http/validate.h"

int rl_messages_list(rl_call_t *call);
/*
 * The paging parameters of a history read (docs/api.md "History"): limit
 * 1-100 (default 50) and before, a cursor of at most beforesz - 1 bytes
 * ("" when absent). 0; or 1 when the call was answered 400 with errors[].
 * Loop thread.
 */
int rl_page_query(rl_call_t *call, int *limit, char *before, size_t beforesz);
int rl_message_send(rl_call_t *call);
extern const rl_schema_t rl_message_send_schema;

#endif
