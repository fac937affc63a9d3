#include "common/error.h"

struct error_row {
    int status;
    const char *code;
    const char *message;
};

static const struct error_row rows[] = {
#define RL__ERROR_ROW(name, status, code, message) {status, code, message},
    RL_ERROR_MAP(RL__ERROR_ROW)
#undef RL__ERROR_ROW
};

static const struct error_row *lookup(int err)
{
    int index = err - RL__ERROR_FIRST - 1;

    if (err <= RL__ERROR_FIRST || err >= RL__ERROR_LAST)
        return &rows[RL_E_INTERNAL - RL__ERROR_FIRST - 1];
    return &rows[index];
}

int rl_error_status(int err)
{
    return lookup(err)->status;
}

const char *rl_error_code(int err)
{
    return lookup(err)->code;
}

const char *rl_error_message(int err)
{
    return lookup(err)->message;
}
