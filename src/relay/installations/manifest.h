/* The agent manifest (brief: POST /v1/bridge/setManifest) and the tool-declaration rule it sets up. */
#ifndef RL_RELAY_MANIFEST_H
#define RL_RELAY_MANIFEST_H

#include "http/call.h"
#include "http/validate.h"

int rl_manifest_set(rl_call_t *call);
extern const rl_schema_t rl_manifest_schema;
/*
 * brief: once a manifest lists tools, a task naming another tool is refused
 * (422 tool_not_declared). Whether manifest (its JSON text, NULL for none)
 * allows tool. Any thread.
 */
int rl_manifest_declares(const char *manifest, const char *tool);
/* ours (issue 36): whether manifest's agents name agent (a manifest without agents names none). Any thread. */
int rl_manifest_agent_declared(const char *manifest, const char *agent);

#endif
