/* Fuzz target: form percent-decoding and query parameter lookup on arbitrary request paths. */
#include <stdint.h>
#include <string.h>

#include "common/percent.h"
#include "http/query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    h2o_req_t req;
    const char *question;
    char out[64], big[4096];

    memset(&req, 0, sizeof(req));
    req.path = h2o_iovec_init(data, size);
    question = memchr(data, '?', size);
    req.query_at = question != NULL ? (size_t)(question - (const char *)data) : SIZE_MAX;
    rl_query_param(&req, "limit", out, sizeof(out));
    rl_query_param(&req, "before", out, sizeof(out));
    rl_query_param(&req, "", out, 1);
    int decoded = rl_percent_decode((const char *)data, size, big, sizeof(big), RL_PERCENT_FORM);
    if (decoded >= 0 && (strlen(big) != (size_t)decoded || (size_t)decoded >= sizeof(big)))
        __builtin_trap();
    return 0;
}
