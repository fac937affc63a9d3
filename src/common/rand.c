#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/rand.h"

static void fill(void *out, size_t len)
{
    unsigned char *p = out;

    while (len > 0) {
        ssize_t got = getrandom(p, len, 0);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            perror("getrandom");
            abort();
        }
        p += got;
        len -= (size_t)got;
    }
}

/*
 * The kernel's CSPRNG, read 4 KiB at a time into a per-thread pool: every
 * request needs a few random ids, and a system call for each showed in the
 * profile. Bytes handed out are wiped from the pool.
 */
void rl_rand_bytes(void *out, size_t len)
{
    static __thread unsigned char pool[4096];
    static __thread size_t left;
    unsigned char *p = out;

    if (len >= sizeof(pool)) {
        fill(out, len);
        return;
    }
    while (len > 0) {
        size_t take;
        if (left == 0) {
            fill(pool, sizeof(pool));
            left = sizeof(pool);
        }
        take = len < left ? len : left;
        memcpy(p, pool + sizeof(pool) - left, take);
        memset(pool + sizeof(pool) - left, 0, take);
        left -= take;
        p += take;
        len -= take;
    }
}

/* Rejection sampling keeps every alphabet character equally likely. */
static void rand_alphabet(char *out, size_t len, const char *alphabet, unsigned size)
{
    unsigned char pool[64];
    size_t used = 0, have = 0, i = 0;
    unsigned limit = 256 - 256 % size;

    while (i < len) {
        if (used == have) {
            /* What is still needed plus a quarter for rejected bytes: most ids take one draw. */
            have = len - i + (len - i) / 4 + 2;
            if (have > sizeof(pool))
                have = sizeof(pool);
            rl_rand_bytes(pool, have);
            used = 0;
        }
        unsigned char byte = pool[used++];
        if (byte >= limit)
            continue;
        out[i++] = alphabet[byte % size];
    }
    out[len] = '\0';
}

void rl_rand_base62(char *out, size_t len)
{
    rand_alphabet(out, len, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", 62);
}

void rl_rand_hex(char *out, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    unsigned char bytes[64];
    size_t i = 0;

    /* Two digits a byte, no rejection: every request draws a request id and a trace id. */
    while (i < len) {
        size_t n = (len - i + 1) / 2, j;
        if (n > sizeof(bytes))
            n = sizeof(bytes);
        rl_rand_bytes(bytes, n);
        for (j = 0; j < n && i < len; ++j) {
            out[i++] = digits[bytes[j] >> 4];
            if (i < len)
                out[i++] = digits[bytes[j] & 0x0F];
        }
    }
    out[len] = '\0';
}

void rl_rand_upper(char *out, size_t len)
{
    rand_alphabet(out, len, "ABCDEFGHIJKLMNOPQRSTUVWXYZ", 26);
}

int rl_rand_id(char *out, size_t outsz, const char *prefix, size_t n)
{
    size_t plen = strlen(prefix);

    if (plen + n + 1 > outsz)
        return -1;
    memcpy(out, prefix, plen);
    rl_rand_base62(out + plen, n);
    return 0;
}
