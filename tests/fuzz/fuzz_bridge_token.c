/* Fuzz target: the bridge token parser and the credentials-in-URL detector. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "auth/token.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rl_bridge_token_t token;

    if (rl_bridge_token_parse((const char *)data, size, &token) == 0) {
        /* An accepted token is always detected when placed in a URL. */
        char url[RL_TOKEN_MAX + 16];
        int len = snprintf(url, sizeof(url), "/v1/x/%.*s", (int)size, (const char *)data);
        if (strlen(token.installation_id) != RL_INSTALLATION_ID_LEN || !rl_url_carries_token(url, (size_t)len))
            __builtin_trap();
    }
    rl_url_carries_token((const char *)data, size);
    return 0;
}
