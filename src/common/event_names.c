#include "common/event_names.h"

#include <string.h>

#define RL_NAME_OF(id, name, readers) name,
static const char *const event_names[] = {RL_EVENT_MAP(RL_NAME_OF)};
static const char *const update_names[] = {RL_UPDATE_MAP(RL_NAME_OF)};
#undef RL_NAME_OF

const char *rl_event_name(rl_event_t event)
{
    return (unsigned)event < RL_EV_COUNT ? event_names[event] : "";
}

const char *rl_update_name(rl_update_t update)
{
    return (unsigned)update < RL_UP_COUNT ? update_names[update] : "";
}

int rl_event_find(const char *name)
{
    int i;

    for (i = 0; i < RL_EV_COUNT; ++i)
        if (strcmp(event_names[i], name) == 0)
            return i;
    return -1;
}
