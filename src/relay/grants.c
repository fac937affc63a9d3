#include <string.h>

#include "common/error.h"
#include "relay/grants.h"

/* Which field of a request a scope's value names; NULL for scope all (and anything unknown). */
static const char *subject_field(const char *scope)
{
    static const struct {
        const char *scope, *field;
    } table[] = {{"session", "session_id"}, {"tool", "command"}, {"domain", "host"}};
    size_t i;

    for (i = 0; i < sizeof(table) / sizeof(table[0]); ++i)
        if (strcmp(scope, table[i].scope) == 0)
            return table[i].field;
    return NULL;
}

int rl_grant_covers(const rl_grant_row_t *grant, json_t *request)
{
    const char *field, *subject;

    if (strcmp(grant->scope, "all") == 0)
        return 1;
    field = subject_field(grant->scope);
    subject = field != NULL ? json_string_value(json_object_get(request, field)) : NULL;
    return subject != NULL && strcmp(subject, grant->scope_value) == 0;
}

int rl_grant_find(rl_txn_t *txn, const char *installation_id, const char *action, json_t *request, rl_grant_row_t *out)
{
    rl_grant_row_t *grants;
    size_t count, i;
    int result = RL_TXN(txn, grants_of, installation_id, action, &grants, &count);

    if (result != 0)
        return result;
    for (i = 0; i < count; ++i) {
        if (rl_grant_covers(&grants[i], request)) {
            *out = grants[i];
            return 0;
        }
    }
    return RL_E_NOT_FOUND;
}

void rl_grant_of_decision(json_t *approval, const char **scope, const char **value)
{
    const char *field;

    if (*scope == NULL)
        *scope = "all";
    if (*value != NULL)
        return;
    field = subject_field(*scope);
    *value = field != NULL ? json_string_value(json_object_get(approval, field)) : NULL;
    if (*value == NULL)
        *value = "";
}
