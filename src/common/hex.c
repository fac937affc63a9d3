#include "common/hex.h"

int rl_hex_value(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

void rl_hex_encode(const void *bytes, size_t len, char *out)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *in = bytes;
    size_t i;

    for (i = 0; i < len; ++i) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * len] = '\0';
}

int rl_hex_decode(const char *in, size_t inlen, unsigned char *out, size_t outlen)
{
    size_t i;

    if (inlen != 2 * outlen)
        return -1;
    for (i = 0; i < outlen; ++i) {
        int hi = rl_hex_value((unsigned char)in[2 * i]), lo = rl_hex_value((unsigned char)in[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}
