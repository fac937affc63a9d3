/*
 * Fuzz target: the push subscription's endpoint rule (src/push/push_endpoint.c).
 * Input: an endpoint URL. Whatever the bytes, the check never reads out of
 * bounds, and what the default policy accepts, libcurl (which sends the push)
 * reads the same way: https, no user name or password, port 443, and a host
 * that is a DNS name or a public address, never an internal one.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "push/push_endpoint.h"

#define URL_MAX 4096

/* The host as libcurl resolves it, when it is an address: 1 public, 0 internal, -1 a name. */
static int curl_host_is_public(const char *host)
{
    char bare[256];
    unsigned char bytes[16];
    size_t len = strlen(host);
    rl_addr_t addr;

    if (len >= sizeof(bare))
        __builtin_trap();
    memcpy(bare, host, len + 1);
    if (bare[0] == '[' && len > 2 && bare[len - 1] == ']') {
        memmove(bare, bare + 1, len - 2);
        bare[len - 2] = '\0';
    }
    memset(&addr, 0, sizeof(addr));
    if (inet_pton(AF_INET, bare, bytes) == 1) {
        addr.family = AF_INET;
        memcpy(addr.bytes, bytes, 4);
    } else if (inet_pton(AF_INET6, bare, bytes) == 1) {
        if (rl_addr_parse(bare, strlen(bare), &addr) != 0)
            __builtin_trap();
    } else {
        return strcasecmp(bare, "localhost") == 0 ? 0 : -1;
    }
    return rl_push_address_is_public(&addr);
}

static void agree_with_curl(const char *url)
{
    CURLU *parsed = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL, *user = NULL, *password = NULL;

    if (parsed == NULL)
        return;
    /* libcurl may refuse what the rule took (it is stricter about some hosts): then nothing is sent at all. */
    if (curl_url_set(parsed, CURLUPART_URL, url, 0) == CURLUE_OK) {
        if (curl_url_get(parsed, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK || strcasecmp(scheme, "https") != 0)
            __builtin_trap();
        if (curl_url_get(parsed, CURLUPART_USER, &user, 0) == CURLUE_OK ||
            curl_url_get(parsed, CURLUPART_PASSWORD, &password, 0) == CURLUE_OK)
            __builtin_trap();
        if (curl_url_get(parsed, CURLUPART_PORT, &port, 0) == CURLUE_OK && strcmp(port, "443") != 0)
            __builtin_trap();
        if (curl_url_get(parsed, CURLUPART_HOST, &host, 0) == CURLUE_OK && curl_host_is_public(host) == 0)
            __builtin_trap();
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(user);
    curl_free(password);
    curl_url_cleanup(parsed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static rl_push_policy_t strict, networks, any;
    static int ready;
    char url[URL_MAX + 1], err[128];
    const char *why;

    if (!ready) {
        if (rl_push_policy_init(&strict, "https", "", err, sizeof(err)) != 0 ||
            rl_push_policy_init(&networks, "https", "10.0.0.0/8,fd00::/8", err, sizeof(err)) != 0 ||
            rl_push_policy_init(&any, "any", "", err, sizeof(err)) != 0)
            __builtin_trap();
        ready = 1;
    }
    if (size > URL_MAX)
        return 0;
    memcpy(url, data, size);
    url[size] = '\0';
    why = rl_push_endpoint_check(&strict, (const char *)data, size);
    /* Each policy allows at least what a stricter one does. */
    if (why == NULL && (rl_push_endpoint_check(&networks, (const char *)data, size) != NULL ||
                        rl_push_endpoint_check(&any, (const char *)data, size) != NULL))
        __builtin_trap();
    if (why == NULL && memchr(data, '\0', size) == NULL)
        agree_with_curl(url);
    return 0;
}
