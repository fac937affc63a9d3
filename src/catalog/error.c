#include "catalog/error.h"

struct error_row {
    int status;
    const char *code;
    const char *message;
};

static const struct error_row rows[] = {
#define RL__CATALOG_ERROR_ROW(name, status, code, message) {status, code, message},
    RL_CATALOG_ERROR_MAP(RL__CATALOG_ERROR_ROW)
#undef RL__CATALOG_ERROR_ROW
};

static const struct error_row *lookup(int err)
{
    if (err <= RL__CATALOG_ERROR_FIRST || err >= RL__CATALOG_ERROR_LAST)
        return &rows[RL_CATALOG_E_INTERNAL - RL__CATALOG_ERROR_FIRST - 1];
    return &rows[err - RL__CATALOG_ERROR_FIRST - 1];
}

int rl_catalog_error_status(int err)
{
    return lookup(err)->status;
}

const char *rl_catalog_error_code(int err)
{
    return lookup(err)->code;
}

const char *rl_catalog_error_message(int err)
{
    return lookup(err)->message;
}
