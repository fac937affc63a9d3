#include <stdlib.h>

#include "relay/turn/turn.h"

int rl_turn_open(const rl_turn_ctx_t *ctx, rl_turn_ctx_t **out)
{
    *out = malloc(sizeof(**out));
    if (*out == NULL)
        return -1;
    **out = *ctx;
    return 0;
}

void rl_turn_close(rl_turn_ctx_t *turn)
{
    free(turn);
}
