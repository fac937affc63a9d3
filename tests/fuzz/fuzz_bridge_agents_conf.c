/*
 * Fuzz target: relay-bridge's agents.conf and --agent values
 * (bridge/agent.c, docs/bridge.md "agents.conf"). The file is the user's
 * own, not a peer's, but it is parsed in place with pointers kept into it:
 * the input is the file, then each of its lines as an --agent value. Besides
 * the sanitizers it checks what is taken: at most RL_BRIDGE_AGENTS_MAX agents
 * and RL_BRIDGE_ROOTS_MAX roots, each agent with a valid name and a spec an
 * adapter knows.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bridge/agent.h"
#include "bridge/bridge.h"

static void check(const rl_bridge_options_t *o)
{
    size_t i;

    if (o->nagents > RL_BRIDGE_AGENTS_MAX || o->nroots > RL_BRIDGE_ROOTS_MAX)
        __builtin_trap();
    for (i = 0; i < o->nagents; i++) {
        if (o->agents[i].name == NULL || o->agents[i].spec == NULL ||
            !rl_agent_name_valid(o->agents[i].name, strlen(o->agents[i].name)))
            __builtin_trap();
    }
    for (i = 0; i < o->nroots; i++)
        if (o->roots[i] == NULL || o->roots[i][0] == '\0')
            __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rl_bridge_options_t o;
    char *text = malloc(size + 1), *copy, *line, *next;
    char err[256];
    const char *arg;

    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    copy = strdup(text);
    err[0] = '\0';
    memset(&o, 0, sizeof(o));
    if (rl_agents_conf_parse(text, &o, err, sizeof(err)) == 0) {
        check(&o);
        for (size_t i = 0; i < o.nagents; i++)
            if (rl_agent_find(o.agents[i].spec, &arg) == NULL)
                __builtin_trap();
    } else if (err[0] == '\0') {
        __builtin_trap();
    }
    memset(&o, 0, sizeof(o));
    for (line = copy; line != NULL && copy != NULL; line = next) {
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        if (rl_agent_option(line, &o, err, sizeof(err)) != 0)
            continue;
        check(&o);
    }
    free(copy);
    free(text);
    return 0;
}
