#include <string.h>
#include <strings.h>

#include "catalog/type.h"

const rl_catalog_type_row_t rl_catalog_types[RL_CATALOG_TYPE_COUNT] = {
    [RL_CATALOG_TYPE_EVAL] = {"evals", "eval", "Evals"},
    [RL_CATALOG_TYPE_MODEL] = {"models", "model", "Models"},
    [RL_CATALOG_TYPE_TOOL] = {"tools", "tool", "Tools"},
    [RL_CATALOG_TYPE_LEADERBOARD] = {"leaderboards", "leaderboard", "Leaderboards"},
    [RL_CATALOG_TYPE_ORGANIZATION] = {"organizations", "organization", "Organizations"},
    [RL_CATALOG_TYPE_PERSON] = {"people", "person", "People"},
    [RL_CATALOG_TYPE_CAPABILITY] = {"capabilities", "capability", "Capabilities"},
    [RL_CATALOG_TYPE_PAPER] = {"papers", "paper", "Papers"},
};

static int same_name(const char *name, size_t len, const char *candidate)
{
    return strlen(candidate) == len && strncasecmp(name, candidate, len) == 0;
}

int rl_catalog_type_parse(const char *name, size_t len)
{
    int type;

    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type) {
        if (same_name(name, len, rl_catalog_types[type].plural) ||
            same_name(name, len, rl_catalog_types[type].singular))
            return type;
    }
    return -1;
}

static int is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

int rl_catalog_slug_is_valid(const char *s, size_t len)
{
    size_t i;

    if (len == 0 || len > RL_CATALOG_SLUG_MAX || !is_alnum(s[0]) || !is_alnum(s[len - 1]))
        return 0;
    for (i = 1; i < len; ++i) {
        if (is_alnum(s[i]))
            continue;
        if ((s[i] != '-' && s[i] != '.') || !is_alnum(s[i - 1]))
            return 0;
    }
    return 1;
}
