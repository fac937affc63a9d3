#include "relay/core/feature.h"
#include "relay/core/relay.h"

void *rl_feature_of(const rl_call_t *call, enum rl_feature feature)
{
    const rl_relay_t *relay = call->app;

    return relay->features[feature];
}
