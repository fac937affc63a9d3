/* The client event stream (GET /v1/me/stream). Loop thread only. */
#ifndef RL_RELAY_STREAM_H
#define RL_RELAY_STREAM_H

#include "http/call.h"

int rl_stream_open(rl_call_t *call);

#endif
