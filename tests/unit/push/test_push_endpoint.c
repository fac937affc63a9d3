/*
 * Where a push may go (src/push/push_endpoint.c): the public-address table,
 * the connect-time check on socket addresses with their ports, and the
 * endpoint rule under each policy.
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "push/push_endpoint.h"

static rl_addr_t address(const char *text)
{
    rl_addr_t addr;

    assert_int_equal(rl_addr_parse(text, strlen(text), &addr), 0);
    return addr;
}

static void test_public_addresses(void **state)
{
    static const char *const public[] = {"8.8.8.8",
                                         "1.1.1.1",
                                         "9.255.255.255",
                                         "11.0.0.0",
                                         "100.63.255.255",
                                         "100.128.0.0",
                                         "172.15.255.255",
                                         "172.32.0.0",
                                         "192.0.1.1",
                                         "192.167.1.1",
                                         "223.255.255.255",
                                         "2606:4700:4700::1111",
                                         "2001:4860:4860::8888",
                                         "2a00:1450:4001::200e",
                                         "64:ff9b::808:808",
                                         "2001:200::1"};
    static const char *const internal[] = {
        "0.0.0.0",     "0.1.2.3",          "10.0.0.1",        "10.255.255.255", "100.64.0.1",      "100.127.255.255",
        "127.0.0.1",   "127.1.2.3",        "169.254.169.254", "172.16.0.1",     "172.31.255.255",  "192.0.0.8",
        "192.0.2.1",   "192.88.99.1",      "192.168.1.1",     "198.18.0.1",     "198.19.255.255",  "198.51.100.7",
        "203.0.113.9", "224.0.0.1",        "239.1.1.1",       "240.0.0.1",      "255.255.255.255", "::",
        "::1",         "::ffff:127.0.0.1", "::ffff:10.1.1.1", "fd00::1",        "fc00::1",         "fe80::1",
        "fec0::1",     "ff02::1",          "2001:db8::1",     "2002:7f00:1::1", "2001::1",         "2001:1ff::1",
        "3fff::1",     "64:ff9b::7f00:1",  "64:ff9b::a00:1",  "64:ff9b:1::1",   "100::1",          "::127.0.0.1"};
    size_t i;

    for (i = 0; i < sizeof(public) / sizeof(public[0]); ++i) {
        rl_addr_t addr = address(public[i]);
        if (!rl_push_address_is_public(&addr))
            fail_msg("%s should be public", public[i]);
    }
    for (i = 0; i < sizeof(internal) / sizeof(internal[0]); ++i) {
        rl_addr_t addr = address(internal[i]);
        if (rl_push_address_is_public(&addr))
            fail_msg("%s should not be public", internal[i]);
    }
}

static int allowed(const rl_push_policy_t *policy, const char *ip, int port)
{
    struct sockaddr_in v4;
    struct sockaddr_in6 v6;

    memset(&v4, 0, sizeof(v4));
    memset(&v6, 0, sizeof(v6));
    if (inet_pton(AF_INET, ip, &v4.sin_addr) == 1) {
        v4.sin_family = AF_INET;
        v4.sin_port = htons((unsigned short)port);
        return rl_push_address_allowed(policy, (struct sockaddr *)&v4);
    }
    assert_int_equal(inet_pton(AF_INET6, ip, &v6.sin6_addr), 1);
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons((unsigned short)port);
    return rl_push_address_allowed(policy, (struct sockaddr *)&v6);
}

static void test_connect_time_addresses(void **state)
{
    rl_push_policy_t strict, networks, any;
    char err[128];

    assert_int_equal(rl_push_policy_init(&strict, "https", "", err, sizeof(err)), 0);
    assert_int_equal(rl_push_policy_init(&networks, "https", "10.0.0.0/8,fd00::/8", err, sizeof(err)), 0);
    assert_int_equal(rl_push_policy_init(&any, "any", "", err, sizeof(err)), 0);
    assert_true(allowed(&strict, "8.8.8.8", 443));
    assert_false(allowed(&strict, "8.8.8.8", 8443));
    assert_false(allowed(&strict, "127.0.0.1", 443));
    assert_false(allowed(&strict, "::ffff:127.0.0.1", 443)); /* a mapped address is the IPv4 one */
    assert_false(allowed(&strict, "10.1.2.3", 443));
    assert_true(allowed(&strict, "2606:4700::1", 443));
    assert_true(allowed(&networks, "10.1.2.3", 6379));
    assert_true(allowed(&networks, "fd00::7", 8443));
    assert_false(allowed(&networks, "192.168.1.1", 443));
    assert_false(allowed(&networks, "8.8.8.8", 80));
    assert_true(allowed(&any, "127.0.0.1", 80));
    assert_int_equal(rl_push_policy_init(&any, "sometimes", "", err, sizeof(err)), -1);
    assert_int_equal(rl_push_policy_init(&any, "https", "10.0.0.0/33", err, sizeof(err)), -1);
    rl_push_policy_free(&strict);
    rl_push_policy_free(&networks);
}

static void test_endpoints(void **state)
{
    static const struct {
        const char *url;
        int strict, networks, any; /* 1: accepted */
    } cases[] = {
        {"https://fcm.googleapis.com/fcm/send/x", 1, 1, 1},
        {"https://push.example.net:443/x", 1, 1, 1},
        {"https://push.example.net./x", 1, 1, 1},
        {"https://8.8.8.8/x", 1, 1, 1},
        {"https://[2606:4700::1]/x", 1, 1, 1},
        {"https://push.example.net:8443/x", 0, 1, 1},
        {"https://10.0.0.1:6379/x", 0, 1, 1},
        {"https://[fd00::1]/x", 0, 1, 1},
        {"https://127.0.0.1/x", 0, 0, 1},
        {"https://localhost/x", 0, 0, 1},
        {"https://a.LocalHost/x", 0, 0, 1},
        {"https://2130706433/x", 0, 0, 1},
        {"https://0x7f.1/x", 0, 0, 1},
        {"https://0x7F.0.0.1/x", 0, 0, 1},
        {"https://127.1/x", 0, 0, 1},
        {"https://0177.0.0.1/x", 0, 0, 1},
        {"https://167772161/x", 0, 1, 1}, /* 10.0.0.1 */
        {"https://[::1]/x", 0, 0, 1},
        {"https://[::ffff:127.0.0.1]/x", 0, 0, 1},
        {"http://push.example.net/x", 0, 0, 1},
        {"ftp://push.example.net/x", 0, 0, 0},
        {"https://user@push.example.net/x", 0, 0, 0},
        {"https://u:p@push.example.net/x", 0, 0, 0},
        {"https://push.example.net\\@10.0.0.1/x", 0, 0, 0},
        {"https://", 0, 0, 0},
        {"https:///x", 0, 0, 0},
        {"https://:443/x", 0, 0, 0},
        {"https://[::1/x", 0, 0, 0},
        {"https://[1.2.3.4]/x", 0, 0, 0},
        {"https://[fe80::1%25eth0]/x", 0, 0, 0},
        {"https://1.2.3.4.5/x", 0, 0, 0},
        {"https://256.0.0.1/x", 0, 0, 0},
        {"https://a..b/x", 0, 0, 0},
        {"https://.a/x", 0, 0, 0},
        {"https://pu%73h.example.net/x", 0, 0, 0},
        {"https://push.example.net:/x", 0, 0, 0},
        {"https://push.example.net:0/x", 0, 0, 0},
        {"https://push.example.net:65536/x", 0, 0, 0},
        {"https://push.example.net:4430000/x", 0, 0, 0},
        {"https://push.example.net /x", 0, 0, 0},
        {"https://push.example.net/\x7f", 0, 0, 0},
    };
    rl_push_policy_t strict, networks, any;
    char err[128];
    size_t i;

    assert_int_equal(rl_push_policy_init(&strict, "https", "", err, sizeof(err)), 0);
    assert_int_equal(rl_push_policy_init(&networks, "https", "10.0.0.0/8,fd00::/8", err, sizeof(err)), 0);
    assert_int_equal(rl_push_policy_init(&any, "any", "", err, sizeof(err)), 0);
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        const char *url = cases[i].url;
        if ((rl_push_endpoint_check(&strict, url, strlen(url)) == NULL) != cases[i].strict ||
            (rl_push_endpoint_check(&networks, url, strlen(url)) == NULL) != cases[i].networks ||
            (rl_push_endpoint_check(&any, url, strlen(url)) == NULL) != cases[i].any)
            fail_msg("%s: expected %d %d %d", url, cases[i].strict, cases[i].networks, cases[i].any);
    }
    /* The length given is the whole URL: nothing past it is read (a port's digits included). */
    assert_non_null(rl_push_endpoint_check(&strict, "https://push.example.net:443", 27));
    assert_null(rl_push_endpoint_check(&strict, "https://push.example.net:4439", 28));
    rl_push_policy_free(&strict);
    rl_push_policy_free(&networks);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_public_addresses),
        cmocka_unit_test(test_connect_time_addresses),
        cmocka_unit_test(test_endpoints),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
