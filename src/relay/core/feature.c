#include <stdlib.h>
#include <string.h>

#include "relay/core/feature.h"
#include "relay/core/relay.h"

void *rl_feature_of(const rl_call_t *call, enum rl_feature feature)
{
    const rl_relay_t *relay = call->app;

    return relay->features[feature];
}

int rl_feature_copy(const void *ctx, size_t size, void **out)
{
    *out = malloc(size);
    if (*out == NULL)
        return -1;
    memcpy(*out, ctx, size);
    return 0;
}
