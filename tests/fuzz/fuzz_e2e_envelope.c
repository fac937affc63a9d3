/*
 * Fuzz target: the syntax checks of what relayd carries for end-to-end
 * encryption (envelopes, wraps, public keys, blind indexes). Besides the
 * sanitizers, it checks the contract against an independent decoder: an
 * accepted envelope decodes as standard padded base64 to 0x00 alone or to
 * 0x01 and at least 28 more bytes; an accepted wrap to 0x02 and at least 61.
 */
#include <stdint.h>
#include <string.h>

#include "relay/e2e/e2e.h"

static int value_of(unsigned char c)
{
    const char *alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *at = c != '\0' ? strchr(alphabet, c) : NULL;

    return at != NULL ? (int)(at - alphabet) : -1;
}

/* The decoded length of padded base64, or -1; *first: its first byte. */
static long decoded(const uint8_t *s, size_t len, int *first)
{
    size_t i, pad = 0;

    if (len == 0 || len % 4 != 0)
        return -1;
    pad = s[len - 1] == '=' ? (s[len - 2] == '=' ? 2 : 1) : 0;
    for (i = 0; i < len - pad; ++i)
        if (value_of(s[i]) < 0)
            return -1;
    *first = (value_of(s[0]) << 2) | (value_of(s[1]) >> 4);
    return (long)(len / 4 * 3 - pad);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    int first = -1;
    long n;

    if (rl_e2e_envelope_check(text, size) == 0) {
        n = decoded(data, size, &first);
        if (!((n == 1 && first == 0) || (n >= 29 && first == 1)))
            __builtin_trap();
    }
    if (rl_e2e_wrap_check(text, size) == 0) {
        n = decoded(data, size, &first);
        if (size > 256 || n < 62 || first != 2)
            __builtin_trap();
    }
    if (rl_e2e_pubkey_check(text, size) == 0 && size != 64)
        __builtin_trap();
    rl_e2e_blind_index_check(text, size);
    return 0;
}
