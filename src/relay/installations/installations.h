/* A user's installations: rename and emoji (PATCH), and revocation (DELETE). */
#ifndef RL_RELAY_INSTALLATIONS_H
#define RL_RELAY_INSTALLATIONS_H

#include "http/call.h"
#include "http/validate.h"

int rl_installation_patch(rl_call_t *call);
int rl_installation_revoke(rl_call_t *call);
extern const rl_schema_t rl_installation_patch_schema;

struct rl_installations_ctx;
/* The bridge's hello {version} (bridge_ws.c): stored as the installation's bridge_version. Loop thread. */
void rl_installation_hello(struct rl_installations_ctx *ctx, const char *installation_id, const char *version);

/* The topic every node joins for what concerns all of them (revocations, cache invalidation). */
#define RL_TOPIC_AUTH "auth"

#endif
