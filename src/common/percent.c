#include <string.h>

#include "common/hex.h"
#include "common/percent.h"

int rl_percent_decode(const char *src, size_t len, char *dst, size_t dstsz, unsigned flags)
{
    int lenient = (flags & RL_PERCENT_LENIENT) != 0;
    size_t i, o = 0;

    for (i = 0; i < len; ++i) {
        char c = src[i];
        if (c == '%') {
            int hi = i + 2 < len ? rl_hex_value((unsigned char)src[i + 1]) : -1;
            int lo = hi >= 0 ? rl_hex_value((unsigned char)src[i + 2]) : -1;
            if (lo >= 0) {
                c = (char)(hi << 4 | lo);
                i += 2;
            } else if (!lenient) {
                return RL_PERCENT_E_ESCAPE;
            }
        } else if (c == '+' && (flags & RL_PERCENT_FORM) != 0) {
            c = ' ';
        }
        if (c == '\0' && !lenient)
            return RL_PERCENT_E_NUL;
        if (o + 1 >= dstsz)
            return RL_PERCENT_E_LENGTH;
        dst[o++] = c;
    }
    if (dstsz == 0)
        return RL_PERCENT_E_LENGTH;
    dst[o] = '\0';
    return (int)o;
}

size_t rl_percent_encode(const char *src, size_t len, char *dst, const char *keep)
{
    static const char digits[] = "0123456789ABCDEF";
    size_t i, o = 0;

    for (i = 0; i < len; ++i) {
        unsigned char c = (unsigned char)src[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            (c != '\0' && strchr(keep, c) != NULL)) {
            dst[o++] = (char)c;
        } else {
            dst[o++] = '%';
            dst[o++] = digits[c >> 4];
            dst[o++] = digits[c & 15];
        }
    }
    dst[o] = '\0';
    return o;
}
