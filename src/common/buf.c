#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"

/* The first allocation: small enough for a short line, large enough that most never grow. */
#define FIRST_ALLOC 256

void rl_buf_init(rl_buf_t *buf, size_t cap)
{
    buf->bytes = NULL;
    buf->len = buf->alloc = 0;
    buf->cap = cap;
}

void rl_buf_free(rl_buf_t *buf)
{
    free(buf->bytes);
    rl_buf_init(buf, buf->cap);
}

void rl_buf_reset(rl_buf_t *buf)
{
    buf->len = 0;
    if (buf->bytes != NULL)
        buf->bytes[0] = '\0';
}

/* Makes room for extra more bytes and a NUL; the caller has checked the cap. */
static int reserve(rl_buf_t *buf, size_t extra)
{
    size_t need = buf->len + extra + 1, alloc = buf->alloc > 0 ? buf->alloc : FIRST_ALLOC;
    char *grown;

    if (need <= buf->alloc)
        return 0;
    while (alloc < need)
        alloc = alloc > (size_t)-1 / 2 ? need : alloc * 2;
    /* Doubling may pass what the cap can ever use; no more than that is allocated. */
    if (buf->cap < (size_t)-1 && alloc > buf->cap + 1)
        alloc = buf->cap + 1;
    grown = realloc(buf->bytes, alloc);
    if (grown == NULL)
        return RL_BUF_E_NOMEM;
    buf->bytes = grown;
    buf->alloc = alloc;
    return 0;
}

int rl_buf_append(rl_buf_t *buf, const void *bytes, size_t len)
{
    int result;

    if (len > buf->cap - buf->len)
        return RL_BUF_E_TOO_LARGE;
    result = reserve(buf, len);
    if (result != 0)
        return result;
    if (len > 0)
        memcpy(buf->bytes + buf->len, bytes, len);
    buf->len += len;
    buf->bytes[buf->len] = '\0';
    return 0;
}

int rl_buf_append_str(rl_buf_t *buf, const char *text)
{
    return rl_buf_append(buf, text, strlen(text));
}

int rl_buf_printf(rl_buf_t *buf, const char *format, ...)
{
    va_list args;
    int need, result;

    va_start(args, format);
    need = vsnprintf(NULL, 0, format, args);
    va_end(args);
    if (need < 0)
        return RL_BUF_E_NOMEM;
    if ((size_t)need > buf->cap - buf->len)
        return RL_BUF_E_TOO_LARGE;
    result = reserve(buf, (size_t)need);
    if (result != 0)
        return result;
    va_start(args, format);
    vsnprintf(buf->bytes + buf->len, (size_t)need + 1, format, args);
    va_end(args);
    buf->len += (size_t)need;
    return 0;
}

void rl_buf_consume(rl_buf_t *buf, size_t n)
{
    if (n >= buf->len) {
        rl_buf_reset(buf);
        return;
    }
    memmove(buf->bytes, buf->bytes + n, buf->len - n);
    buf->len -= n;
    buf->bytes[buf->len] = '\0';
}

char *rl_buf_take(rl_buf_t *buf, size_t *len)
{
    char *out = buf->bytes;

    if (out == NULL && (out = calloc(1, 1)) == NULL)
        return NULL;
    if (len != NULL)
        *len = buf->len;
    rl_buf_init(buf, buf->cap);
    return out;
}

int rl_buf_write(rl_buf_t *buf, int fd)
{
    while (buf->len > 0) {
        ssize_t n = write(fd, buf->bytes, buf->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? RL_BUF_AGAIN : -1;
        rl_buf_consume(buf, (size_t)n);
    }
    return 0;
}
