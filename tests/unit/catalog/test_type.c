/* Unit tests of src/catalog/type.c: type names in both forms, and the slug rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "catalog/type.h"

static int parse(const char *name)
{
    return rl_catalog_type_parse(name, strlen(name));
}

static void test_type_names(void **state)
{
    int type;

    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type) {
        assert_int_equal(parse(rl_catalog_types[type].plural), type);
        assert_int_equal(parse(rl_catalog_types[type].singular), type);
    }
    assert_int_equal(parse("people"), RL_CATALOG_TYPE_PERSON);
    assert_int_equal(parse("person"), RL_CATALOG_TYPE_PERSON);
    assert_int_equal(parse("Capabilities"), RL_CATALOG_TYPE_CAPABILITY);
    assert_int_equal(parse("EVAL"), RL_CATALOG_TYPE_EVAL);
    assert_int_equal(parse("persons"), -1);
    assert_int_equal(parse("model "), -1);
    assert_int_equal(parse(""), -1);
    assert_int_equal(rl_catalog_type_parse("modelsX", 6), RL_CATALOG_TYPE_MODEL); /* length-bounded */
    assert_string_equal(rl_catalog_types[RL_CATALOG_TYPE_EVAL].plural, "evals");
    assert_string_equal(rl_catalog_types[RL_CATALOG_TYPE_PAPER].heading, "Papers");
}

static int slug(const char *s)
{
    return rl_catalog_slug_is_valid(s, strlen(s));
}

static void test_slugs(void **state)
{
    char longest[RL_CATALOG_SLUG_MAX + 2];

    assert_true(slug("mmlu"));
    assert_true(slug("llama-3.1-405b-instruct"));
    assert_true(slug("gpt-4o"));
    assert_true(slug("a"));
    assert_true(slug("0"));
    assert_false(slug(""));
    assert_false(slug("-mmlu"));
    assert_false(slug("mmlu-"));
    assert_false(slug("mm--lu"));
    assert_false(slug("mm.-lu"));
    assert_false(slug("MMLU"));
    assert_false(slug("mm lu"));
    assert_false(slug("mm_lu"));
    assert_false(slug("../x"));
    assert_false(slug("caf\xc3\xa9"));
    memset(longest, 'a', sizeof(longest));
    longest[RL_CATALOG_SLUG_MAX] = '\0';
    assert_true(slug(longest));
    longest[RL_CATALOG_SLUG_MAX] = 'a';
    longest[RL_CATALOG_SLUG_MAX + 1] = '\0';
    assert_false(slug(longest));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_names),
        cmocka_unit_test(test_slugs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
