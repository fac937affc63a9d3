#include "common/base64.h"

static const char url_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
static const char std_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Both alphabets, three bytes to four characters; pad adds the '=' of a short last group. */
static size_t encode(const char *alphabet, int pad, const void *in, size_t len, char *out)
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
    if (len - i > 0) {
        unsigned v = (unsigned)src[i] << 16 | (len - i == 2 ? (unsigned)src[i + 1] << 8 : 0u);
        out[o++] = alphabet[v >> 18 & 63];
        out[o++] = alphabet[v >> 12 & 63];
        if (len - i == 2)
            out[o++] = alphabet[v >> 6 & 63];
        else if (pad)
            out[o++] = '=';
        if (pad)
            out[o++] = '=';
    }
    out[o] = '\0';
    return o;
}

/* The value of c in the URL-safe (url != 0) or the standard alphabet, or -1. */
static int value(char c, int url)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == (url ? '-' : '+'))
        return 62;
    if (c == (url ? '_' : '/'))
        return 63;
    return -1;
}

/* Decodes len characters that are all in the alphabet (padding already cut); out may be NULL to only count. */
static long decode(const char *in, size_t len, int url, unsigned char *out)
{
    unsigned acc = 0;
    int bits = 0;
    long o = 0;
    size_t i;

    for (i = 0; i < len; ++i) {
        int v = value(in[i], url);
        if (v < 0)
            return -1;
        acc = acc << 6 | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (out != NULL)
                out[o] = (unsigned char)(acc >> bits & 0xff);
            ++o;
        }
    }
    return o;
}

size_t rl_base64url_encode(const void *in, size_t len, char *out)
{
    return encode(url_alphabet, 0, in, len, out);
}

long rl_base64url_decode(const char *in, size_t len, unsigned char *out)
{
    while (len > 0 && in[len - 1] == '=')
        --len;
    if (len % 4 == 1)
        return -1;
    return decode(in, len, 1, out);
}

size_t rl_base64_encode(const void *in, size_t len, char *out)
{
    return encode(std_alphabet, 1, in, len, out);
}

/* Standard base64's padded length and padding: the characters before the padding, or -1. */
static long std_body(const char *in, size_t len)
{
    size_t pad = 0;

    if (len % 4 != 0)
        return -1;
    while (pad < 2 && len > pad && in[len - 1 - pad] == '=')
        pad++;
    return (long)(len - pad);
}

long rl_base64_decode(const char *in, size_t len, unsigned char *out)
{
    long body = std_body(in, len);

    return body < 0 ? -1 : decode(in, (size_t)body, 0, out);
}

long rl_base64_check(const char *in, size_t len, int *first)
{
    long body = std_body(in, len), n;
    unsigned char head[3];

    if (body < 0 || (n = decode(in, (size_t)body, 0, NULL)) < 0)
        return -1;
    if (n > 0 && first != NULL) {
        decode(in, (size_t)body < 4 ? (size_t)body : 4, 0, head);
        *first = head[0];
    }
    return n;
}
