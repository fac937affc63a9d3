/* Unit tests of src/catalog/llms.c: the llms.txt convention and the full variant. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "catalog/llms.h"

static json_t *docs[RL_CATALOG_TYPE_COUNT];

static int setup(void **state)
{
    int type;

    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type)
        docs[type] = json_array();
    json_array_append_new(
        docs[RL_CATALOG_TYPE_EVAL],
        json_loads("{\"type\": \"evals\", \"slug\": \"e\", \"title\": \"E [v2]\", \"summary\": \"An eval.\","
                   " \"description\": \"Longer words.\", \"url\": \"/api/v1/evals/e\","
                   " \"attributes\": {\"items\": 10, \"metric\": \"accuracy\"}, \"links\": {\"homepage\": "
                   "\"https://e.example\"},"
                   " \"relationships\": {\"papers\": [{\"type\": \"papers\", \"slug\": \"p\", \"title\": \"P\", "
                   "\"url\": \"/api/v1/papers/p\"}]},"
                   " \"scores\": [{\"model\": {\"slug\": \"m\", \"title\": \"M\"}, \"value\": 88.7, \"unit\": \"%\","
                   "              \"setting\": \"5-shot\", \"source_url\": \"https://m.example\"}]}",
                   0, NULL));
    json_array_append_new(
        docs[RL_CATALOG_TYPE_MODEL],
        json_loads("{\"type\": \"models\", \"slug\": \"m\", \"title\": \"M\", \"summary\": \"A model.\","
                   " \"url\": \"/api/v1/models/m\", \"attributes\": {\"open_weights\": false}}",
                   0, NULL));
    return 0;
}

static int teardown(void **state)
{
    int type;

    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type)
        json_decref(docs[type]);
    return 0;
}

static void test_short(void **state)
{
    size_t len = 0;
    char *text = rl_catalog_llms_render(docs, "http://h", 0, &len);

    assert_int_equal(strlen(text), len);
    assert_memory_equal(text, "# Relay catalog\n\n> ", 19);
    assert_non_null(strstr(text, ": 2 entities,"));
    assert_non_null(strstr(text, "\n## Evals\n\n- [E \\[v2\\]](http://h/api/v1/evals/e): An eval.\n"));
    assert_non_null(strstr(text, "\n## Models\n\n- [M](http://h/api/v1/models/m): A model.\n"));
    /* Types without entities get no section; sections follow the type order. */
    assert_null(strstr(text, "## Tools"));
    assert_true(strstr(text, "## Evals") < strstr(text, "## Models"));
    free(text);
}

static void test_full(void **state)
{
    size_t len = 0;
    char *text = rl_catalog_llms_render(docs, "http://h", 1, &len);

    assert_non_null(strstr(text, "# Relay catalog (full text)\n"));
    assert_non_null(strstr(text, "### E [v2]\n\nhttp://h/api/v1/evals/e (evals/e)\n\nAn eval.\n\nLonger words.\n"));
    assert_non_null(strstr(text, "- Items: 10\n"));
    assert_non_null(strstr(text, "- Homepage: https://e.example\n"));
    assert_non_null(strstr(text, "- Papers: P (papers/p)\n"));
    assert_non_null(
        strstr(text, "- Top scores (1 in the catalog):\n  - M: 88.7% (5-shot), reported at https://m.example\n"));
    assert_non_null(strstr(text, "- Open weights: no\n"));
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_short),
        cmocka_unit_test(test_full),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
