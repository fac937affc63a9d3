#include "relay/core/feature.h"
#include "relay/core/relay.h"

void *rl_feature_of(const rl_call_t *call, enum rl_feature feature)
{
    return rl_relay_feature(call->app, feature);
}

void *rl_relay_feature(const rl_relay_t *relay, enum rl_feature feature)
{
    return relay->features[feature];
}
