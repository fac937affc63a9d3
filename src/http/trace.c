#include <stdio.h>
#include <string.h>

#include "common/hex.h"
#include "common/rand.h"
#include "http/trace.h"

int rl_request_id_is_valid(const char *value, size_t len)
{
    size_t i;

    if (len < 1 || len > RL_REQUEST_ID_MAX)
        return 0;
    for (i = 0; i < len; ++i) {
        char c = value[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == ':' || c == '-'))
            return 0;
    }
    return 1;
}

void rl_request_id_generate(char *out)
{
    memcpy(out, "req_", 4);
    rl_rand_hex(out + 4, 16);
}

static int lower_hex(const char *s, size_t len, int reject_zero)
{
    size_t i;
    int nonzero = 0;

    for (i = 0; i < len; ++i) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
        nonzero |= s[i] != '0';
    }
    return nonzero || !reject_zero;
}

int rl_traceparent_parse(const char *value, size_t len, rl_traceparent_t *out)
{
    if (len < RL_TRACEPARENT_LEN)
        return -1;
    if (!lower_hex(value, 2, 0) || memcmp(value, "ff", 2) == 0)
        return -1;
    if (memcmp(value, "00", 2) == 0 ? len != RL_TRACEPARENT_LEN
                                    : (len > RL_TRACEPARENT_LEN && value[RL_TRACEPARENT_LEN] != '-'))
        return -1;
    if (value[2] != '-' || value[35] != '-' || value[52] != '-')
        return -1;
    if (!lower_hex(value + 3, 32, 1) || !lower_hex(value + 36, 16, 1) || !lower_hex(value + 53, 2, 0))
        return -1;
    memcpy(out->trace_id, value + 3, 32);
    out->trace_id[32] = '\0';
    memcpy(out->parent_id, value + 36, 16);
    out->parent_id[16] = '\0';
    out->flags = (uint8_t)(rl_hex_value(value[53]) << 4 | rl_hex_value(value[54]));
    return 0;
}

void rl_traceparent_respond(const rl_traceparent_t *incoming, char *out, char *trace_id_out)
{
    char parent[17];
    uint8_t flags;

    if (incoming != NULL) {
        memcpy(trace_id_out, incoming->trace_id, 33);
        flags = incoming->flags;
    } else {
        /* A fresh random 128-bit id is all-zero with negligible probability; regenerate anyway. */
        do {
            rl_rand_hex(trace_id_out, 32);
        } while (!lower_hex(trace_id_out, 32, 1));
        flags = 0x01;
    }
    do {
        rl_rand_hex(parent, 16);
    } while (!lower_hex(parent, 16, 1));
    /* "00-<trace id>-<parent>-<flags>", written in place: snprintf showed in the profile. */
    memcpy(out, "00-", 3);
    memcpy(out + 3, trace_id_out, 32);
    out[35] = '-';
    memcpy(out + 36, parent, 16);
    out[52] = '-';
    out[53] = "0123456789abcdef"[flags >> 4];
    out[54] = "0123456789abcdef"[flags & 0x0F];
    out[55] = '\0';
}
