#include <string.h>

#include "common/args.h"

int rl_arg_value(int argc, char **argv, int *i, const char *name, const char **value)
{
    const char *arg = argv[*i];
    size_t len = strlen(name);

    if (strcmp(arg, name) == 0 && *i + 1 < argc) {
        *value = argv[++*i];
        return 1;
    }
    if (strncmp(arg, name, len) == 0 && arg[len] == '=') {
        *value = arg + len + 1;
        return 1;
    }
    return 0;
}
