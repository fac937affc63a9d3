#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "bridge/agent.h"
#include "bridge/bridge.h"

static const rl_agent_adapter_t *const adapters[] = {&rl_agent_exec, &rl_agent_jsonl, &rl_agent_openai, &rl_agent_acp};

int rl_agent_name_valid(const char *name, size_t len)
{
    return len >= 1 && len <= RL_AGENT_NAME_MAX && strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") >= len;
}

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

static int add_agent(struct rl_bridge_options *o, const char *name, const char *spec, char *err, size_t errsz)
{
    if (o->nagents == RL_BRIDGE_AGENTS_MAX) {
        snprintf(err, errsz, "at most %d agents", RL_BRIDGE_AGENTS_MAX);
        return -1;
    }
    o->agents[o->nagents].name = name;
    o->agents[o->nagents++].spec = spec;
    return 0;
}

int rl_agent_option(const char *value, struct rl_bridge_options *o, char *err, size_t errsz)
{
    static char names[RL_BRIDGE_AGENTS_MAX][RL_AGENT_NAME_MAX + 1];
    size_t len = strcspn(value, "=:");

    /* A spec begins with its scheme and a colon, so an "=" before any colon ends a name: NAME=SPEC. */
    if (value[len] != '=')
        return add_agent(o, "default", value, err, errsz);
    if (!rl_agent_name_valid(value, len)) {
        snprintf(err, errsz, "--agent NAME=SPEC: names are 1-%d of a-z, 0-9, _ and -", RL_AGENT_NAME_MAX);
        return -1;
    }
    if (o->nagents == RL_BRIDGE_AGENTS_MAX)
        return add_agent(o, NULL, NULL, err, errsz);
    snprintf(names[o->nagents], sizeof(names[0]), "%.*s", (int)len, value);
    return add_agent(o, names[o->nagents], value + len + 1, err, errsz);
}

static char *trim(char *text)
{
    char *end;

    while (isspace((unsigned char)*text))
        text++;
    end = text + strlen(text);
    while (end > text && isspace((unsigned char)end[-1]))
        *--end = '\0';
    return text;
}

int rl_agents_conf_parse(char *text, struct rl_bridge_options *o, char *err, size_t errsz)
{
    char *line = text, *next, *key, *value, *eq;
    const char *arg;
    int number = 0;

    for (; line != NULL; line = next) {
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        number++;
        line[strcspn(line, "#")] = '\0';
        line = trim(line);
        if (line[0] == '\0')
            continue;
        eq = strchr(line, '=');
        if (eq == NULL) {
            snprintf(err, errsz, "agents.conf line %d: NAME = SPEC, default = NAME or root = DIR", number);
            return -1;
        }
        *eq = '\0';
        key = trim(line);
        value = trim(eq + 1);
        /* A value with a scheme is an agent's spec, whatever its name; otherwise default and root are settings. */
        if (rl_agent_find(value, &arg) != NULL) {
            if (!rl_agent_name_valid(key, strlen(key))) {
                snprintf(err, errsz, "agents.conf line %d: names are 1-%d of a-z, 0-9, _ and -", number,
                         RL_AGENT_NAME_MAX);
                return -1;
            }
            if (add_agent(o, key, value, err, errsz) != 0)
                return -1;
        } else if (strcmp(key, "default") == 0 && value[0] != '\0') {
            o->default_agent = value;
        } else if (strcmp(key, "root") == 0 && value[0] != '\0') {
            if (o->nroots == RL_BRIDGE_ROOTS_MAX) {
                snprintf(err, errsz, "agents.conf line %d: at most %d roots", number, RL_BRIDGE_ROOTS_MAX);
                return -1;
            }
            o->roots[o->nroots++] = value;
        } else {
            snprintf(err, errsz, "agents.conf line %d: %s is not exec:, jsonl:, acp: or openai:", number, key);
            return -1;
        }
    }
    return 0;
}
