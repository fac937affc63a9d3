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

/* The features that hold a context; the others still read the relay (layout.md lists which). */
enum rl_feature {
    RL_FEATURE_PUSH,
    RL_FEATURE_IDENTITY,
    RL_FEATURE_MEDIA,
    RL_FEATURE_SESSIONS,
    RL_FEATURE_E2E,
    RL_FEATURE_INSTALLATIONS,
    RL_FEATURE_COUNT
};

/* The context of feature on call's relay, or NULL while the feature is not open. */
void *rl_feature_of(const rl_call_t *call, enum rl_feature feature);

struct rl_relay;
/*
 * The same from the relay itself: for a feature's call that another feature,
 * one still reading the relay, makes (rl_attachments_hydrate), until that one
 * has a context of its own too.
 */
void *rl_relay_feature(const struct rl_relay *relay, enum rl_feature feature);

#endif
