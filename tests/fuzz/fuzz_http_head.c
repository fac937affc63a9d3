/*
 * Fuzz target: the HTTP/1 head hook (src/http/bodylimit.c, head.c) over
 * h2o's own request parser, called as h2o calls it. Whatever the bytes, the
 * head h2o goes on with is either one whose body framing is unambiguous, or a
 * refusal: bodiless, "connection: close", and one marker. A marker never
 * comes from the input, and anything h2o would not have parsed is a refusal
 * too, except the HTTP/2 preface, bare line ends and incomplete heads.
 */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "http/head.h"

int phr_parse_request(const char *buf, size_t len, const char **method, size_t *method_len, const char **path,
                      size_t *path_len, int *minor_version, struct phr_header *headers, size_t *num_headers,
                      size_t last_len);

static int named(const struct phr_header *h, const char *name)
{
    return h->name_len == strlen(name) && strncasecmp(h->name, name, h->name_len) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct phr_header headers[H2O_MAX_HEADERS];
    size_t num_headers = H2O_MAX_HEADERS, len = size < H2O_MAX_REQLEN ? size : H2O_MAX_REQLEN, i;
    size_t markers = 0, lengths = 0, encodings = 0, hosts = 0, closes = 0;
    const char *method = NULL, *path = NULL;
    size_t method_len = 0, path_len = 0;
    int minor_version = -1, result;

    if (size == 0)
        return 0;
    result = phr_parse_request((const char *)data, len, &method, &method_len, &path, &path_len, &minor_version, headers,
                               &num_headers, 0);
    if (result == -2)
        return 0;
    if (result == -1) {
        if (!(len >= 12 && memcmp(data, "PRI * HTTP/2", 12) == 0) && len > 4)
            __builtin_trap();
        return 0;
    }
    if (result <= 0 || (size_t)result > len || num_headers > H2O_MAX_HEADERS)
        __builtin_trap();
    for (i = 0; i < num_headers; ++i) {
        markers += named(&headers[i], "x-rl-refused");
        lengths += named(&headers[i], "content-length");
        encodings += named(&headers[i], "transfer-encoding");
        hosts += named(&headers[i], "host");
        closes +=
            named(&headers[i], "connection") && headers[i].value_len == 5 && memcmp(headers[i].value, "close", 5) == 0;
    }
    if (markers > 1)
        __builtin_trap();
    if (markers == 1) {
        /* A refusal: nothing that frames a body is left, and the connection ends after the answer. */
        if (lengths != 0 || encodings != 0 || hosts != 0 || closes != 1 || minor_version < 0)
            __builtin_trap();
        return 0;
    }
    /* Served as parsed: one way to frame the body, and a Host on HTTP/1.1. */
    if (lengths + encodings > 1 || (encodings == 1 && minor_version == 0) || hosts > 1 ||
        (minor_version >= 1 && hosts == 0))
        __builtin_trap();
    return 0;
}
