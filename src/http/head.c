/*
 * Checks of an HTTP/1 request head (see head.h). h2o 2.2.5 frames a request
 * that has both Content-Length and Transfer-Encoding by the latter, takes the
 * first of two Content-Lengths, serves HTTP/1.1 without Host, and answers
 * heads its parser rejects with a fixed plain-text 400 written straight to
 * the socket. Behind a front proxy that frames differently, the first three
 * are request smuggling (RFC 9112 section 6.3: answer 400 and close); the
 * last is an answer without the API's envelope and correlation headers.
 *
 * There is no hook between h2o's parser and its framing decision other than
 * the parser itself, so the checks run there, on the parser's output. A head
 * to refuse is handed on to h2o as a bodiless request that keeps its method,
 * path and correlation headers, with "connection: close" and a marker that
 * names the reason; the request then goes through h2o like any other, reaches
 * on_req, and gets a 400 envelope, after which h2o closes the connection
 * without reading what followed the head. A client cannot forge the marker:
 * any header of that name in a head is dropped before h2o sees it.
 */
#include <string.h>
#include <strings.h>

#include "http/head.h"

#define MARKER "x-rl-refused"

enum refusal {
    REFUSE_NONE,
    REFUSE_FRAMING,
    REFUSE_CONTENT_LENGTH,
    REFUSE_TRANSFER_ENCODING,
    REFUSE_TE_IN_HTTP_1_0,
    REFUSE_NO_HOST,
    REFUSE_HOSTS,
    REFUSE_MALFORMED,
    REFUSE_TOO_LARGE,
    REFUSE_COUNT,
};

static const char *const reasons[REFUSE_COUNT] = {
    [REFUSE_FRAMING] = "Content-Length and Transfer-Encoding together frame the body two ways (RFC 9112 6.3)",
    [REFUSE_CONTENT_LENGTH] = "more than one Content-Length header",
    [REFUSE_TRANSFER_ENCODING] = "more than one Transfer-Encoding header",
    [REFUSE_TE_IN_HTTP_1_0] = "Transfer-Encoding in an HTTP/1.0 request",
    [REFUSE_NO_HOST] = "an HTTP/1.1 request needs a Host header",
    [REFUSE_HOSTS] = "more than one Host header",
    [REFUSE_MALFORMED] = "the request head is malformed",
    [REFUSE_TOO_LARGE] = "the request head is too large",
};

/*
 * h2o lower-cases header names in place and keeps pointers to values, so the
 * entries written here point at writable storage that lives as long as the
 * process. Each marker value is the reason's index as one digit.
 */
static char marker_name[] = MARKER;
static char marker_values[REFUSE_COUNT][2] = {"0", "1", "2", "3", "4", "5", "6", "7", "8"};
static char connection_name[] = "connection";
static char close_value[] = "close";
static char default_method[] = "GET";
static char default_path[] = "/";

static int name_is(const struct phr_header *header, const char *name, size_t len)
{
    return header->name_len == len && strncasecmp(header->name, name, len) == 0;
}

/* Drops any header that looks like the marker, so that only this file ever sets it. */
static void drop_markers(struct phr_header *headers, size_t *num_headers)
{
    size_t i = 0;

    while (i < *num_headers) {
        if (name_is(&headers[i], MARKER, sizeof(MARKER) - 1)) {
            memmove(&headers[i], &headers[i + 1], (*num_headers - i - 1) * sizeof(*headers));
            --*num_headers;
        } else {
            ++i;
        }
    }
}

static enum refusal judge(const struct phr_header *headers, size_t num_headers, int minor_version)
{
    size_t i, lengths = 0, encodings = 0, hosts = 0;

    for (i = 0; i < num_headers; ++i) {
        if (name_is(&headers[i], "content-length", 14))
            ++lengths;
        else if (name_is(&headers[i], "transfer-encoding", 17))
            ++encodings;
        else if (name_is(&headers[i], "host", 4))
            ++hosts;
    }
    if (lengths > 0 && encodings > 0)
        return REFUSE_FRAMING;
    if (lengths > 1)
        return REFUSE_CONTENT_LENGTH;
    if (encodings > 1)
        return REFUSE_TRANSFER_ENCODING;
    if (encodings > 0 && minor_version == 0)
        return REFUSE_TE_IN_HTTP_1_0;
    if (hosts == 0 && minor_version >= 1)
        return REFUSE_NO_HOST;
    if (hosts > 1)
        return REFUSE_HOSTS;
    return REFUSE_NONE;
}

/*
 * A Content-Length of digits that h2o cannot hold (it reads at most 19, with
 * the zeros in front) is a body too large, not a malformed head: it is
 * rewritten to a length past every route's limit, so that h2o answers 413
 * like for any other oversize body. Leading zeros are skipped first, as they
 * say nothing. A value that is not all digits stays for h2o to refuse (400).
 */
static char huge_length[] = "999999999999999999";

static void clamp_content_length(struct phr_header *headers, size_t num_headers)
{
    size_t i, k;

    for (i = 0; i < num_headers; ++i) {
        struct phr_header *header = &headers[i];
        if (!name_is(header, "content-length", 14) || header->value_len == 0)
            continue;
        for (k = 0; k < header->value_len; ++k) {
            if (header->value[k] < '0' || header->value[k] > '9')
                return;
        }
        for (k = 0; k + 1 < header->value_len && header->value[k] == '0'; ++k) {
        }
        header->value += k;
        header->value_len -= k;
        if (header->value_len >= sizeof(huge_length)) {
            header->value = huge_length;
            header->value_len = sizeof(huge_length) - 1;
        }
        return;
    }
}

static int is_tchar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/*
 * For a head the parser rejected: the method and path of its first line when
 * they can be read (so the answer is logged against them and gets the
 * envelope under the API prefix), else GET /.
 */
static void first_line(const char *buf, size_t len, const char **method, size_t *method_len, const char **path,
                       size_t *path_len)
{
    size_t m = 0, p;

    while (m < len && m < 16 && is_tchar(buf[m]))
        ++m;
    *method = default_method;
    *method_len = sizeof(default_method) - 1;
    *path = default_path;
    *path_len = sizeof(default_path) - 1;
    if (m == 0 || m >= len || buf[m] != ' ')
        return;
    *method = buf;
    *method_len = m;
    p = m + 1;
    if (p >= len || buf[p] != '/')
        return;
    while (p < len && p - m - 1 < 8192 && buf[p] > 0x20 && buf[p] < 0x7f)
        ++p;
    *path = buf + m + 1;
    *path_len = p - m - 1;
}

/* Keeps the correlation headers and adds connection: close and the marker. */
static void rewrite(struct phr_header *headers, size_t *num_headers, int parsed, enum refusal why)
{
    static const char *const kept[] = {"x-request-id", "traceparent", "tracestate"};
    struct phr_header keep[3];
    size_t nkeep = 0, i, k;

    for (k = 0; parsed && k < 3; ++k) {
        for (i = 0; i < *num_headers; ++i) {
            if (name_is(&headers[i], kept[k], strlen(kept[k]))) {
                keep[nkeep++] = headers[i];
                break;
            }
        }
    }
    memcpy(headers, keep, nkeep * sizeof(*headers));
    headers[nkeep].name = connection_name;
    headers[nkeep].name_len = sizeof(connection_name) - 1;
    headers[nkeep].value = close_value;
    headers[nkeep].value_len = sizeof(close_value) - 1;
    headers[nkeep + 1].name = marker_name;
    headers[nkeep + 1].name_len = sizeof(marker_name) - 1;
    headers[nkeep + 1].value = marker_values[why];
    headers[nkeep + 1].value_len = 1;
    *num_headers = nkeep + 2;
}

static int only_line_ends(const char *buf, size_t len)
{
    size_t i;

    for (i = 0; i < len; ++i) {
        if (buf[i] != '\r' && buf[i] != '\n')
            return 0;
    }
    return 1;
}

int rl__http_head_check(const char *buf, size_t len, const char **method, size_t *method_len, const char **path,
                        size_t *path_len, int *minor_version, struct phr_header *headers, size_t *num_headers,
                        size_t capacity, int result)
{
    static const char preface[] = "PRI * HTTP/2";
    enum refusal why;

    if (result > 0) {
        drop_markers(headers, num_headers);
        why = judge(headers, *num_headers, *minor_version);
        if (why == REFUSE_NONE) {
            clamp_content_length(headers, *num_headers);
            return result;
        }
        rewrite(headers, num_headers, 1, why);
        return result;
    }
    if (result == -2) {
        /* Incomplete, unless h2o has offered all it ever will: then the head is too large. */
        if (len < H2O_MAX_REQLEN)
            return result;
        why = REFUSE_TOO_LARGE;
    } else {
        /* h2o itself takes over an HTTP/2 preface, and silently closes on stray line ends. */
        if ((len >= sizeof(preface) - 1 && memcmp(buf, preface, sizeof(preface) - 1) == 0) ||
            (len <= 4 && only_line_ends(buf, len)))
            return result;
        why = REFUSE_MALFORMED;
    }
    if (capacity < 5 || len == 0 || len > (size_t)H2O_MAX_REQLEN)
        return result;
    first_line(buf, len, method, method_len, path, path_len);
    *minor_version = 1;
    rewrite(headers, num_headers, 0, why);
    /* The whole of what was read counts as the head; nothing after it is ever read. */
    return (int)len;
}

const char *rl__http_head_refusal(h2o_req_t *req)
{
    ssize_t index;
    h2o_iovec_t value;

    /* Only the HTTP/1 parser sets the marker; over HTTP/2 such a header is just a header. */
    if (req->version >= 0x200)
        return NULL;
    index = h2o_find_header_by_str(&req->headers, H2O_STRLIT(MARKER), -1);
    if (index < 0)
        return NULL;
    value = req->headers.entries[index].value;
    if (value.len != 1 || value.base[0] <= '0' || value.base[0] >= '0' + REFUSE_COUNT)
        return NULL;
    return reasons[value.base[0] - '0'];
}
