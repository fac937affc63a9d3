/*
 * Unit tests of src/catalog/dataset.c, the import validator: a valid dataset
 * loads, every kind of problem is reported with its file and field, and the
 * bundled dataset in catalog is valid and large enough.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "catalog/dataset.h"
#include "fixture.h"

#ifndef RL_SOURCE_DIR
#define RL_SOURCE_DIR "."
#endif

/* Loads dir and returns the problems as one text, a line each ("" when valid). */
static char *problems_of(const char *dir, int *result)
{
    rl_catalog_dataset_t dataset;
    json_t *problems = json_array(), *item;
    char *text = NULL, line[1024];
    size_t len = 0, i;
    FILE *out = open_memstream(&text, &len);

    *result = rl_catalog_dataset_load(dir, &dataset, problems);
    json_array_foreach(problems, i, item)
    {
        rl_catalog_problem_format(item, line, sizeof(line));
        fprintf(out, "%s\n", line);
        assert_non_null(json_object_get(item, "file"));
        assert_non_null(json_object_get(item, "field"));
        assert_non_null(json_object_get(item, "message"));
    }
    fclose(out);
    if (*result == 0)
        rl_catalog_dataset_free(&dataset);
    json_decref(problems);
    return text;
}

/* Writes content as the only extra file of a valid dataset and expects a problem containing want. */
static void expect_problem(const char *rel, const char *content, const char *want)
{
    char *dir = fixture_dataset(), *text;
    int result;

    fixture_write(dir, rel, content);
    text = problems_of(dir, &result);
    if (strstr(text, want) == NULL)
        fail_msg("expected a problem containing \"%s\", got:\n%s", want, text);
    assert_int_equal(result, 1);
    free(text);
    fixture_remove(dir);
}

static void test_valid_fixture(void **state)
{
    char *dir = fixture_dataset();
    rl_catalog_dataset_t dataset;
    json_t *problems = json_array();

    assert_int_equal(rl_catalog_dataset_load(dir, &dataset, problems), 0);
    assert_int_equal(json_array_size(problems), 0);
    assert_int_equal(json_object_size(dataset.entities[RL_CATALOG_TYPE_MODEL]), 3);
    assert_int_equal(json_array_size(dataset.scores), 4);
    assert_true(
        rl_catalog_dataset_is_hidden(&dataset, json_object_get(dataset.entities[RL_CATALOG_TYPE_MODEL], "ghost")));
    assert_false(
        rl_catalog_dataset_is_hidden(&dataset, json_object_get(dataset.entities[RL_CATALOG_TYPE_MODEL], "adder-1")));
    assert_true(rl_catalog_dataset_is_hidden(
        &dataset, json_array_get(dataset.scores, 1))); /* files load in path order: hidden/ first */
    rl_catalog_dataset_free(&dataset);
    json_decref(problems);
    fixture_remove(dir);
}

static void test_shape_problems(void **state)
{
    expect_problem("x.json",
                   "{\"models\": [{\"slug\": \"m\", \"title\": \"M\", \"summary\": \"s\", \"released\": \"2024\","
                   " \"open_weights\": true}]}",
                   "x.json: models[0].organization (m): Required");
    expect_problem("x.json",
                   "{\"models\": [{\"slug\": \"Bad Slug\", \"title\": \"M\", \"summary\": \"s\","
                   " \"organization\": \"acme\", \"released\": \"2024\", \"open_weights\": true}]}",
                   "x.json: models[0].slug (Bad Slug): must be lowercase");
    expect_problem("x.json",
                   "{\"models\": [{\"slug\": \"m\", \"title\": \"M\", \"summary\": \"s\", \"organization\": \"acme\","
                   " \"released\": \"2024-13\", \"open_weights\": true}]}",
                   "models[0].released (m): must be a date");
    expect_problem("x.json",
                   "{\"evals\": [{\"slug\": \"e\", \"title\": \"E\", \"summary\": \"s\", \"homepage\": \"ftp://x\"}]}",
                   "evals[0].homepage (e): must be an http");
    expect_problem("x.json", "{\"evals\": [{\"slug\": \"e\", \"title\": \"E\", \"summary\": \"two\\nlines\"}]}",
                   "evals[0].summary (e): must be one line");
    expect_problem("x.json",
                   "{\"evals\": [{\"slug\": \"e\", \"title\": \"E\", \"summary\": \"s\", \"metrc\": \"typo\"}]}",
                   "evals[0].metrc (e): unknown field");
    expect_problem("x.json",
                   "{\"tools\": [{\"slug\": \"t\", \"title\": \"T\", \"summary\": \"s\", \"kind\": \"toaster\"}]}",
                   "tools[0].kind (t):");
    expect_problem("x.json",
                   "{\"papers\": [{\"slug\": \"p\", \"title\": \"P\", \"summary\": \"s\", \"year\": 2020,"
                   " \"authors\": [\"A\"], \"licence\": \"cc-by-4.0\", \"arxiv\": \"1234\"}]}",
                   "papers[0].arxiv (p): must be an arXiv identifier");
    expect_problem("x.json",
                   "{\"scores\": [{\"model\": \"adder-1\", \"eval\": \"sums\", \"value\": \"high\","
                   " \"source_url\": \"https://a.example\"}]}",
                   "x.json: scores[0].value: Expected number");
    expect_problem("x.json", "{\"widgets\": []}", "x.json: widgets: unknown section");
    expect_problem("x.json", "{\"models\": {}}", "x.json: models: must be an array");
    expect_problem("x.json", "[1, 2]", "x.json: must hold one JSON object");
    expect_problem("x.json", "{\"models\": [", "x.json: not valid JSON at line 1");
    expect_problem("x.json", "{\"models\": [], \"models\": []}", "x.json: not valid JSON");
}

static void test_reference_problems(void **state)
{
    expect_problem("x.json",
                   "{\"models\": [{\"slug\": \"m\", \"title\": \"M\", \"summary\": \"s\", \"organization\": \"acne\","
                   " \"released\": \"2024\", \"open_weights\": true}]}",
                   "x.json: models[0].organization (m): no organization has the slug 'acne'");
    expect_problem("x.json",
                   "{\"evals\": [{\"slug\": \"e\", \"title\": \"E\", \"summary\": \"s\","
                   " \"capabilities\": [\"maths\", \"chess\"]}]}",
                   "evals[0].capabilities.1 (e): no capability has the slug 'chess'");
    expect_problem("x.json",
                   "{\"evals\": [{\"slug\": \"e\", \"title\": \"E\", \"summary\": \"s\","
                   " \"capabilities\": [\"maths\", \"maths\"]}]}",
                   "evals[0].capabilities.1 (e): 'maths' is listed twice");
    expect_problem("x.json",
                   "{\"scores\": [{\"model\": \"adder-9\", \"eval\": \"sums\", \"value\": 1,"
                   " \"source_url\": \"https://a.example\"}]}",
                   "x.json: scores[0].model: no model has the slug 'adder-9'");
    expect_problem("x.json",
                   "{\"evals\": [{\"slug\": \"e\", \"title\": \"E\", \"summary\": \"s\", \"source\": \"nowhere\"}]}",
                   "evals[0].source (e): no source has the id 'nowhere'");
    expect_problem("x.json", "{\"evals\": [{\"slug\": \"sums\", \"title\": \"E\", \"summary\": \"s\"}]}",
                   "x.json: evals[0] (sums): 'sums' is used twice: also by main.json evals[0]");
    expect_problem("x.json", "{\"licences\": [{\"id\": \"closed\", \"title\": \"Again\", \"redistributable\": true}]}",
                   "'closed' is used twice");
}

static void test_paper_rules(void **state)
{
    expect_problem("x.json",
                   "{\"papers\": [{\"slug\": \"p\", \"title\": \"P\", \"summary\": \"s\", \"year\": 2020,"
                   " \"authors\": [\"A\"], \"licence\": \"mit\"}]}",
                   "papers[0].licence (p): no licence has the id 'mit'");
    expect_problem("x.json",
                   "{\"papers\": [{\"slug\": \"p\", \"title\": \"P\", \"summary\": \"s\", \"year\": 2020,"
                   " \"authors\": [\"A\"], \"licence\": \"closed\", \"text\": \"papers/open.txt\"}]}",
                   "papers[0].text (p): licence 'closed' does not permit redistribution");
    expect_problem("x.json",
                   "{\"papers\": [{\"slug\": \"p\", \"title\": \"P\", \"summary\": \"s\", \"year\": 2020,"
                   " \"authors\": [\"A\"], \"licence\": \"cc-by-4.0\", \"pdf\": \"papers/missing.pdf\"}]}",
                   "papers[0].pdf (p): cannot read papers/missing.pdf");
    expect_problem("x.json",
                   "{\"papers\": [{\"slug\": \"p\", \"title\": \"P\", \"summary\": \"s\", \"year\": 2020,"
                   " \"authors\": [\"A\"], \"licence\": \"cc-by-4.0\", \"pdf\": \"papers/open.txt\"}]}",
                   "papers[0].pdf (p): papers/open.txt does not start like a PDF");
    expect_problem("x.json",
                   "{\"papers\": [{\"slug\": \"p\", \"title\": \"P\", \"summary\": \"s\", \"year\": 2020,"
                   " \"authors\": [\"A\"], \"licence\": \"cc-by-4.0\", \"text\": \"../etc/passwd\"}]}",
                   "papers[0].text (p): must be a path inside the catalog folder");
}

static void test_empty_and_missing_folders(void **state)
{
    char *dir = fixture_dir(), *text;
    int result;

    text = problems_of(dir, &result);
    assert_int_equal(result, 1);
    assert_non_null(strstr(text, "no .json source file"));
    free(text);
    text = problems_of("/nonexistent/catalog", &result);
    assert_int_equal(result, -1);
    assert_non_null(strstr(text, "cannot read the folder"));
    free(text);
    fixture_remove(dir);
}

/* The dataset shipped in catalog must load cleanly and hold what the issue asks for. */
static void test_bundled_dataset(void **state)
{
    rl_catalog_dataset_t dataset;
    json_t *problems = json_array(), *entity, *source;
    size_t visible = 0, hidden = 0;
    const char *key;
    int type, result;

    result = rl_catalog_dataset_load(RL_SOURCE_DIR "/catalog", &dataset, problems);
    if (result != 0) {
        char line[1024];
        rl_catalog_problem_format(json_array_get(problems, 0), line, sizeof(line));
        fail_msg("catalog has %zu problems, the first: %s", json_array_size(problems), line);
    }
    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type) {
        size_t shown = 0;
        json_object_foreach(dataset.entities[type], key, entity)
        {
            if (rl_catalog_dataset_is_hidden(&dataset, entity))
                ++hidden;
            else
                ++shown;
        }
        assert_true(shown >= 5);
        visible += shown;
    }
    assert_true(visible >= 150);
    assert_true(hidden >= 1);
    json_object_foreach(dataset.sources, key, source)
    {
        if (json_is_true(json_object_get(source, "hidden")))
            goto found;
    }
    fail_msg("no hidden source in catalog");
found:
    assert_true(json_array_size(dataset.scores) >= 100);
    rl_catalog_dataset_free(&dataset);
    json_decref(problems);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_fixture),
        cmocka_unit_test(test_shape_problems),
        cmocka_unit_test(test_reference_problems),
        cmocka_unit_test(test_paper_rules),
        cmocka_unit_test(test_empty_and_missing_folders),
        cmocka_unit_test(test_bundled_dataset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
