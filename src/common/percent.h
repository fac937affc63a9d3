/*
 * Percent-encoding (RFC 3986 %XX escapes): decoding for query strings, Redis
 * locations and the scan for tokens hidden in URLs; encoding for URL path
 * segments and RFC 8187 header parameters. Pure functions, any thread.
 */
#ifndef RL_COMMON_PERCENT_H
#define RL_COMMON_PERCENT_H

#include <stddef.h>

enum rl_percent_flag {
    /* '+' decodes to a space (application/x-www-form-urlencoded). */
    RL_PERCENT_FORM = 1,
    /*
     * For a scan rather than a value: a malformed escape is kept as it is and
     * a decoded NUL is kept, where a strict decode refuses both.
     */
    RL_PERCENT_LENIENT = 2,
};

enum rl_percent_error {
    RL_PERCENT_E_ESCAPE = -1, /* a '%' not followed by two hex digits */
    RL_PERCENT_E_LENGTH = -2, /* the result and its NUL do not fit in dst */
    RL_PERCENT_E_NUL = -3,    /* the result would hold a NUL byte */
};

/*
 * Decodes len bytes of src into dst (dstsz bytes, NUL-terminated) as flags
 * (rl_percent_flag) say. dst may be src itself: the result is never longer.
 * Returns the decoded length, or a negative rl_percent_error.
 */
int rl_percent_decode(const char *src, size_t len, char *dst, size_t dstsz, unsigned flags);
/*
 * Encodes len bytes of src into dst: ASCII letters, digits and the bytes of
 * keep stay as they are, every other byte becomes %XX (uppercase hex). dst
 * needs 3 * len + 1 bytes; it is NUL-terminated. Returns the encoded length.
 */
size_t rl_percent_encode(const char *src, size_t len, char *dst, const char *keep);

#endif
