/*
 * GET /v1/me/sessions/:id/timeline (ours, issue 22): a session as it
 * happened, its messages, tasks and approvals in one list, newest first,
 * paged like the history (docs/api.md "Timeline").
 */
#ifndef RL_RELAY_TIMELINE_H
#define RL_RELAY_TIMELINE_H

#include "http/call.h"

int rl_timeline_list(rl_call_t *call);

#endif
