/* Unit tests of src/catalog/cache.c: weak ETags and If-None-Match. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "catalog/cache.h"

static int matches(const char *header, const char *etag)
{
    return rl_catalog_etag_matches(header, strlen(header), etag);
}

static void test_etag(void **state)
{
    char a[RL_CATALOG_ETAG_LEN], b[RL_CATALOG_ETAG_LEN], c[RL_CATALOG_ETAG_LEN];

    rl_catalog_etag("hello", 5, a);
    rl_catalog_etag("hello", 5, b);
    rl_catalog_etag("hellp", 5, c);
    assert_string_equal(a, b);
    assert_string_not_equal(a, c);
    assert_int_equal(strlen(a), RL_CATALOG_ETAG_LEN - 1);
    assert_memory_equal(a, "W/\"", 3);
    assert_int_equal(a[RL_CATALOG_ETAG_LEN - 2], '"');
}

static void test_if_none_match(void **state)
{
    char etag[RL_CATALOG_ETAG_LEN], strong[RL_CATALOG_ETAG_LEN + 4], list[128];

    rl_catalog_etag("body", 4, etag);
    snprintf(strong, sizeof(strong), "%s", etag + 2); /* the same tag without W/ */
    snprintf(list, sizeof(list), "\"nope\", W/\"other\" ,%s", etag);

    assert_true(matches(etag, etag));
    assert_true(matches(strong, etag));
    assert_true(matches(list, etag));
    assert_true(matches("*", etag));
    assert_true(matches("  *", etag));
    assert_false(matches("", etag));
    assert_false(matches("\"nope\"", etag));
    assert_false(matches("W/\"nope\", \"also-no\"", etag));
    /* Malformed lists match nothing. */
    assert_false(matches("nope", etag));
    assert_false(matches("\"unterminated", etag));
    assert_false(matches("W/", etag));
    assert_false(matches(etag + 3, etag));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_etag),
        cmocka_unit_test(test_if_none_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
