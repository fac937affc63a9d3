#include <stdlib.h>

#include "relay/core/feature.h"
#include "relay/turn/turn.h"

int rl_turn_open(const rl_turn_ctx_t *ctx, rl_turn_ctx_t **out)
{
    void *copy;
    int result = rl_feature_copy(ctx, sizeof(*ctx), &copy);

    *out = copy;
    return result;
}

void rl_turn_close(rl_turn_ctx_t *turn)
{
    free(turn);
}
