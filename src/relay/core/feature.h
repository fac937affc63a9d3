/*
 * A feature's own context (docs/internals/layout.md, "The relay by
 * feature"): a feature that keeps state of its own gives its handlers that
 * state, which holds only the services the feature uses, so that they never
 * reach the whole relay. The relay fills each when it opens the feature
 * (relay.c). Loop thread only.
 */
#ifndef RL_RELAY_CORE_FEATURE_H
#define RL_RELAY_CORE_FEATURE_H

#include "http/call.h"

/* The relay's features, each with a context of its own (layout.md, "A feature's context"). */
enum rl_feature {
    RL_FEATURE_PUSH,
    RL_FEATURE_IDENTITY,
    RL_FEATURE_MEDIA,
    RL_FEATURE_SESSIONS,
    RL_FEATURE_E2E,
    RL_FEATURE_INSTALLATIONS,
    RL_FEATURE_TURN,
    RL_FEATURE_COUNT
};

/* The context of feature on call's relay, or NULL while the feature is not open. */
void *rl_feature_of(const rl_call_t *call, enum rl_feature feature);

/*
 * The open of a feature whose context is all it keeps (sessions, e2e, turn):
 * *out becomes a heap copy of the size bytes at ctx, which its close frees.
 * 0, or -1 out of memory.
 */
int rl_feature_copy(const void *ctx, size_t size, void **out);

#endif
