#include "client/backoff.h"

void rl_backoff_init(rl_backoff_t *b, long first_ms, long cap_ms)
{
    b->first_ms = first_ms > 0 ? first_ms : 1000;
    b->cap_ms = cap_ms > 0 ? cap_ms : 30000;
    b->next_ms = b->first_ms;
}

long rl_backoff_next(rl_backoff_t *b)
{
    long delay = b->next_ms;

    b->next_ms = delay >= b->cap_ms / 2 ? b->cap_ms : delay * 2;
    return delay < b->cap_ms ? delay : b->cap_ms;
}

void rl_backoff_reset(rl_backoff_t *b)
{
    b->next_ms = b->first_ms;
}
