#include <string.h>

#include "bridge/agent.h"

static const rl_agent_adapter_t *const adapters[] = {&rl_agent_exec, &rl_agent_jsonl, &rl_agent_openai, &rl_agent_acp};

const rl_agent_adapter_t *rl_agent_find(const char *spec, const char **arg)
{
    size_t i;

    for (i = 0; i < sizeof(adapters) / sizeof(adapters[0]); i++) {
        size_t n = strlen(adapters[i]->scheme);
        if (strncmp(spec, adapters[i]->scheme, n) == 0 && spec[n] == ':' && spec[n + 1] != '\0') {
            *arg = spec + n + 1;
            return adapters[i];
        }
    }
    return NULL;
}
