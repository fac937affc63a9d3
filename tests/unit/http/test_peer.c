/* Client addresses: parsing, /64 groups, CIDR sets, forwarding headers (src/http/peer.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "http/peer.h"

static rl_addr_t addr(const char *text)
{
    rl_addr_t out;

    assert_int_equal(rl_addr_parse(text, strlen(text), &out), 0);
    return out;
}

static void assert_text(const char *text, const char *expected)
{
    rl_addr_t a = addr(text);
    char out[RL_ADDR_TEXT_MAX];

    rl_addr_format(&a, out, sizeof(out));
    assert_string_equal(out, expected);
}

static void assert_group(const char *text, const char *expected)
{
    rl_addr_t a = addr(text);
    char out[RL_ADDR_TEXT_MAX];

    rl_addr_group(&a, out, sizeof(out));
    assert_string_equal(out, expected);
}

static void test_parse(void **state)
{
    static const char *const bad[] = {
        "",     "unknown", "_hidden", "1.2.3",           "1.2.3.4:",  "1.2.3.4:123456", "[1.2.3.4]",
        "[::1", "::1]",    "[::1]x",  "2001:db8::1:80x", "1.2.3.4 5", "\"1.2.3.4",      "host.example",
    };
    rl_addr_t out;
    size_t i;

    assert_text("192.0.2.1", "192.0.2.1");
    assert_text(" 192.0.2.1 ", "192.0.2.1");
    assert_text("192.0.2.1:4711", "192.0.2.1");
    assert_text("\"192.0.2.1:4711\"", "192.0.2.1");
    assert_text("2001:db8::1", "2001:db8::1");
    assert_text("[2001:db8::1]", "2001:db8::1");
    assert_text("\"[2001:DB8::1]:4711\"", "2001:db8::1");
    assert_text("::ffff:192.0.2.9", "192.0.2.9");
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i)
        assert_int_equal(rl_addr_parse(bad[i], strlen(bad[i]), &out), -1);
}

static void test_groups(void **state)
{
    assert_group("192.0.2.1", "192.0.2.1");
    assert_group("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64");
    assert_group("2001:db8:1:2::", "2001:db8:1:2::/64");
    assert_group("2001:db8:1:3::1", "2001:db8:1:3::/64");
    assert_group("::1", "::/64");
    assert_group("::ffff:10.1.2.3", "10.1.2.3");
}

static void test_cidr_sets(void **state)
{
    static const char *const bad[] = {"10.0.0.0/33", "10.0.0.1/8",     "proxy",          "10.0.0.0/",
                                      "10.0.0.0/8x", "2001:db8::/129", "2001:db8::1/32", "::ffff:10.0.0.0/95"};
    rl_cidr_set_t set;
    rl_addr_t a;
    char err[256];
    size_t i;

    assert_int_equal(rl_cidr_set_parse("", &set, err, sizeof(err)), 0);
    assert_int_equal(set.count, 0);
    a = addr("10.0.0.1");
    assert_false(rl_cidr_set_contains(&set, &a));
    rl_cidr_set_free(&set);

    assert_int_equal(rl_cidr_set_parse("10.0.0.0/8, 192.0.2.7 ,2001:db8::/32,172.16.0.0/12,::ffff:198.51.100.0/120",
                                       &set, err, sizeof(err)),
                     0);
    assert_int_equal(set.count, 5);
    a = addr("10.255.1.2");
    assert_true(rl_cidr_set_contains(&set, &a));
    a = addr("11.0.0.1");
    assert_false(rl_cidr_set_contains(&set, &a));
    a = addr("192.0.2.7");
    assert_true(rl_cidr_set_contains(&set, &a));
    a = addr("192.0.2.8");
    assert_false(rl_cidr_set_contains(&set, &a));
    a = addr("2001:db8:ffff::1");
    assert_true(rl_cidr_set_contains(&set, &a));
    a = addr("2001:db9::1");
    assert_false(rl_cidr_set_contains(&set, &a));
    a = addr("172.31.255.255");
    assert_true(rl_cidr_set_contains(&set, &a));
    a = addr("172.32.0.0");
    assert_false(rl_cidr_set_contains(&set, &a));
    a = addr("198.51.100.200");
    assert_true(rl_cidr_set_contains(&set, &a));
    rl_cidr_set_free(&set);

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
        assert_int_equal(rl_cidr_set_parse(bad[i], &set, err, sizeof(err)), -1);
        assert_non_null(strstr(err, "not an address"));
        assert_null(set.blocks);
    }
}

static int client_of(rl_forwarded_kind_t kind, const char *trusted, const char *line1, const char *line2, char *out)
{
    const char *values[2] = {line1, line2};
    size_t lens[2] = {strlen(line1), line2 != NULL ? strlen(line2) : 0};
    rl_cidr_set_t set;
    rl_addr_t client;
    char err[128];
    int result;

    assert_int_equal(rl_cidr_set_parse(trusted, &set, err, sizeof(err)), 0);
    result = rl_forwarded_client(kind, values, lens, line2 != NULL ? 2 : 1, &set, &client);
    if (result == 0)
        rl_addr_format(&client, out, RL_ADDR_TEXT_MAX);
    rl_cidr_set_free(&set);
    return result;
}

static void test_forwarded_for(void **state)
{
    char out[RL_ADDR_TEXT_MAX];

    assert_int_equal(client_of(RL_FORWARDED_XFF, "10.0.0.0/8", "198.51.100.7", NULL, out), 0);
    assert_string_equal(out, "198.51.100.7");
    /* What the client wrote on the left is never believed. */
    assert_int_equal(client_of(RL_FORWARDED_XFF, "10.0.0.0/8", "6.6.6.6, 198.51.100.7, 10.0.0.2", NULL, out), 0);
    assert_string_equal(out, "198.51.100.7");
    /* Several header lines are one list, in order. */
    assert_int_equal(client_of(RL_FORWARDED_XFF, "10.0.0.0/8", "6.6.6.6, 198.51.100.7", "10.0.0.2,10.0.0.3", out), 0);
    assert_string_equal(out, "198.51.100.7");
    /* Empty entries are no hop; every hop trusted: the first one. */
    assert_int_equal(client_of(RL_FORWARDED_XFF, "10.0.0.0/8", "10.0.0.9,, 10.0.0.2", NULL, out), 0);
    assert_string_equal(out, "10.0.0.9");
    assert_int_equal(client_of(RL_FORWARDED_XFF, "10.0.0.0/8", "[2001:db8::5]:80", NULL, out), 0);
    assert_string_equal(out, "2001:db8::5");
    /* Something that is not an address, where the walk needs one: not believed at all. */
    assert_int_equal(client_of(RL_FORWARDED_XFF, "10.0.0.0/8", "198.51.100.7, unknown", NULL, out), -1);
    assert_int_equal(client_of(RL_FORWARDED_XFF, "10.0.0.0/8", "", NULL, out), -1);
    assert_int_equal(client_of(RL_FORWARDED_XFF, "10.0.0.0/8", " , ", NULL, out), -1);
    /* An entry left of the client is not looked at, even when it is garbage. */
    assert_int_equal(client_of(RL_FORWARDED_XFF, "10.0.0.0/8", "garbage, 198.51.100.7", NULL, out), 0);
    assert_string_equal(out, "198.51.100.7");
}

static void test_forwarded(void **state)
{
    char out[RL_ADDR_TEXT_MAX];

    assert_int_equal(client_of(RL_FORWARDED_RFC7239, "10.0.0.0/8",
                               "for=\"[2001:db8::1]:4711\";proto=https, for=198.51.100.7;by=10.0.0.1", NULL, out),
                     0);
    assert_string_equal(out, "198.51.100.7");
    assert_int_equal(client_of(RL_FORWARDED_RFC7239, "10.0.0.0/8", "proto=https;FOR=\"[2001:db8::1]:4711\"", NULL, out),
                     0);
    assert_string_equal(out, "2001:db8::1");
    assert_int_equal(client_of(RL_FORWARDED_RFC7239, "10.0.0.0/8", "for=198.51.100.7, for=10.1.1.1", NULL, out), 0);
    assert_string_equal(out, "198.51.100.7");
    assert_int_equal(client_of(RL_FORWARDED_RFC7239, "10.0.0.0/8", "for=unknown", NULL, out), -1);
    assert_int_equal(client_of(RL_FORWARDED_RFC7239, "10.0.0.0/8", "for=_hidden", NULL, out), -1);
    assert_int_equal(client_of(RL_FORWARDED_RFC7239, "10.0.0.0/8", "proto=https", NULL, out), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),         cmocka_unit_test(test_groups),    cmocka_unit_test(test_cidr_sets),
        cmocka_unit_test(test_forwarded_for), cmocka_unit_test(test_forwarded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
