#include <stdlib.h>

#include "relay/identity/identity.h"
#include "relay/identity/login.h"
#include "relay/identity/me.h"
#include "relay/identity/webapp.h"

int rl_identity_open(const rl_identity_ctx_t *ctx, rl_identity_t **out)
{
    rl_identity_t *identity = calloc(1, sizeof(*identity));

    *out = NULL;
    if (identity == NULL)
        return -1;
    identity->ctx = *ctx;
    identity->me_cache = rl_me_cache_new(ctx->hub);
    if (identity->me_cache == NULL || rl_webapp_open(ctx->config, &identity->webapp) != 0 ||
        rl_login_open(ctx->config, &identity->login) != 0) {
        rl_identity_close(identity);
        return -1;
    }
    *out = identity;
    return 0;
}

void rl_identity_close(rl_identity_t *identity)
{
    if (identity == NULL)
        return;
    rl_login_close(identity->login);
    rl_webapp_close(identity->webapp);
    /*
     * Each entry leaves the hub (which lives until the process exits); none is being read, since the
     * store has drained before the relay closes its features.
     */
    rl_me_cache_free(identity->me_cache);
    free(identity);
}

void rl_identity_sweep(rl_identity_t *identity, int64_t now_ms, unsigned parts)
{
    if (identity != NULL)
        rl_me_cache_sweep(identity->me_cache, now_ms, parts);
}
