#include "common/base64.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t rl_base64url_encode(const void *in, size_t len, char *out)
{
    const unsigned char *src = in;
    size_t i, o = 0;

    for (i = 0; i + 2 < len; i += 3) {
        unsigned v = (unsigned)src[i] << 16 | (unsigned)src[i + 1] << 8 | src[i + 2];
        out[o++] = alphabet[v >> 18 & 63];
        out[o++] = alphabet[v >> 12 & 63];
        out[o++] = alphabet[v >> 6 & 63];
        out[o++] = alphabet[v & 63];
    }
    if (len - i == 1) {
        unsigned v = (unsigned)src[i] << 16;
        out[o++] = alphabet[v >> 18 & 63];
        out[o++] = alphabet[v >> 12 & 63];
    } else if (len - i == 2) {
        unsigned v = (unsigned)src[i] << 16 | (unsigned)src[i + 1] << 8;
        out[o++] = alphabet[v >> 18 & 63];
        out[o++] = alphabet[v >> 12 & 63];
        out[o++] = alphabet[v >> 6 & 63];
    }
    out[o] = '\0';
    return o;
}

static int decode_char(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '-')
        return 62;
    if (c == '_')
        return 63;
    return -1;
}

long rl_base64url_decode(const char *in, size_t len, unsigned char *out)
{
    unsigned acc = 0;
    int bits = 0;
    long o = 0;
    size_t i;

    while (len > 0 && in[len - 1] == '=')
        --len;
    if (len % 4 == 1)
        return -1;
    for (i = 0; i < len; ++i) {
        int v = decode_char(in[i]);
        if (v < 0)
            return -1;
        acc = acc << 6 | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits & 0xff);
        }
    }
    return o;
}

static const char std_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t rl_base64_encode(const void *in, size_t len, char *out)
{
    const unsigned char *src = in;
    size_t i, o = 0;

    for (i = 0; i + 2 < len; i += 3) {
        unsigned v = (unsigned)src[i] << 16 | (unsigned)src[i + 1] << 8 | src[i + 2];
        out[o++] = std_alphabet[v >> 18 & 63];
        out[o++] = std_alphabet[v >> 12 & 63];
        out[o++] = std_alphabet[v >> 6 & 63];
        out[o++] = std_alphabet[v & 63];
    }
    if (len - i == 1) {
        unsigned v = (unsigned)src[i] << 16;
        out[o++] = std_alphabet[v >> 18 & 63];
        out[o++] = std_alphabet[v >> 12 & 63];
        out[o++] = '=';
        out[o++] = '=';
    } else if (len - i == 2) {
        unsigned v = (unsigned)src[i] << 16 | (unsigned)src[i + 1] << 8;
        out[o++] = std_alphabet[v >> 18 & 63];
        out[o++] = std_alphabet[v >> 12 & 63];
        out[o++] = std_alphabet[v >> 6 & 63];
        out[o++] = '=';
    }
    out[o] = '\0';
    return o;
}

static int decode_std_char(char c)
{
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    if (c == '-' || c == '_')
        return -1;
    return decode_char(c);
}

long rl_base64_decode(const char *in, size_t len, unsigned char *out)
{
    unsigned acc = 0;
    int bits = 0;
    long o = 0;
    size_t i, pad = 0;

    if (len % 4 != 0)
        return -1;
    while (pad < 2 && len > pad && in[len - 1 - pad] == '=')
        pad++;
    for (i = 0; i < len - pad; ++i) {
        int v = decode_std_char(in[i]);
        if (v < 0)
            return -1;
        acc = acc << 6 | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits & 0xff);
        }
    }
    return o;
}
