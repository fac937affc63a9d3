/*
 * Unit tests of src/catalog/document.c: relationships resolved both ways,
 * scores attached and ordered, papers' licence and files, and everything of
 * a hidden source left out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "catalog/document.h"
#include "fixture.h"

static json_t *documents[RL_CATALOG_TYPE_COUNT];
static rl_catalog_dataset_t dataset;

static int setup(void **state)
{
    char *dir = fixture_dataset();
    json_t *problems = json_array();

    assert_int_equal(rl_catalog_dataset_load(dir, &dataset, problems), 0);
    assert_int_equal(rl_catalog_documents_build(&dataset, documents), 0);
    json_decref(problems);
    fixture_remove(dir);
    return 0;
}

static int teardown(void **state)
{
    int type;

    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type)
        json_decref(documents[type]);
    rl_catalog_dataset_free(&dataset);
    return 0;
}

static json_t *doc(rl_catalog_type_t type, const char *slug)
{
    json_t *found = json_object_get(documents[type], slug);

    assert_non_null(found);
    return found;
}

/* The slugs of a relationship, comma-joined. */
static const char *related(json_t *d, const char *relation)
{
    static char buf[512];
    json_t *ref;
    size_t i;

    buf[0] = '\0';
    json_array_foreach(json_object_get(json_object_get(d, "relationships"), relation), i, ref)
    {
        if (i > 0)
            strcat(buf, ",");
        strcat(buf, json_string_value(json_object_get(ref, "slug")));
    }
    return buf;
}

static void test_shape(void **state)
{
    json_t *model = doc(RL_CATALOG_TYPE_MODEL, "adder-1"), *ref;

    assert_string_equal(json_string_value(json_object_get(model, "type")), "models");
    assert_string_equal(json_string_value(json_object_get(model, "url")), "/api/v1/models/adder-1");
    assert_true(json_is_true(json_object_get(json_object_get(model, "attributes"), "open_weights")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(model, "links"), "homepage")),
                        "https://acme.example/adder");
    assert_null(json_object_get(json_object_get(model, "attributes"), "organization"));
    ref = json_array_get(json_object_get(json_object_get(model, "relationships"), "organization"), 0);
    assert_string_equal(json_string_value(json_object_get(ref, "title")), "Acme Labs");
    assert_string_equal(json_string_value(json_object_get(ref, "url")), "/api/v1/organizations/acme");
    assert_non_null(json_object_get(doc(RL_CATALOG_TYPE_CAPABILITY, "maths"), "relationships"));
    assert_null(json_object_get(doc(RL_CATALOG_TYPE_CAPABILITY, "maths"), "scores"));
}

static void test_relationships_both_ways(void **state)
{
    assert_string_equal(related(doc(RL_CATALOG_TYPE_ORGANIZATION, "acme"), "models"), "adder-1,adder-2");
    assert_string_equal(related(doc(RL_CATALOG_TYPE_ORGANIZATION, "acme"), "people"), "ann");
    assert_string_equal(related(doc(RL_CATALOG_TYPE_ORGANIZATION, "acme"), "evals"), "sums");
    assert_string_equal(related(doc(RL_CATALOG_TYPE_MODEL, "adder-2"), "base_model"), "adder-1");
    assert_string_equal(related(doc(RL_CATALOG_TYPE_MODEL, "adder-1"), "derived_models"), "adder-2");
    assert_string_equal(related(doc(RL_CATALOG_TYPE_EVAL, "sums"), "papers"), "open-paper");
    assert_string_equal(related(doc(RL_CATALOG_TYPE_EVAL, "sums"), "capabilities"), "maths");
    assert_string_equal(related(doc(RL_CATALOG_TYPE_EVAL, "sums"), "tools"), "runner");
    assert_string_equal(related(doc(RL_CATALOG_TYPE_EVAL, "sums"), "leaderboards"), "board");
    assert_string_equal(related(doc(RL_CATALOG_TYPE_CAPABILITY, "maths"), "evals"), "sums");
    assert_string_equal(related(doc(RL_CATALOG_TYPE_PAPER, "open-paper"), "authors"), "ann");
    assert_string_equal(related(doc(RL_CATALOG_TYPE_PERSON, "ann"), "papers"), "open-paper");
}

static void test_scores(void **state)
{
    json_t *eval_scores = json_object_get(doc(RL_CATALOG_TYPE_EVAL, "sums"), "scores");
    json_t *model_scores = json_object_get(doc(RL_CATALOG_TYPE_MODEL, "adder-1"), "scores");
    json_t *board_scores = json_object_get(doc(RL_CATALOG_TYPE_LEADERBOARD, "board"), "scores"), *row;

    /* Best first; the hidden model's score and the hidden-source score are gone. */
    assert_int_equal(json_array_size(eval_scores), 2);
    row = json_array_get(eval_scores, 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(row, "model"), "slug")), "adder-2");
    assert_true(json_number_value(json_object_get(row, "value")) == 75);
    assert_string_equal(json_string_value(json_object_get(row, "setting")), "0-shot");
    assert_string_equal(json_string_value(json_object_get(row, "unit")), "%");
    assert_int_equal(json_array_size(model_scores), 1);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(json_array_get(model_scores, 0), "eval"), "slug")), "sums");
    assert_true(json_number_value(json_object_get(json_array_get(model_scores, 0), "value")) == 50.5);
    assert_int_equal(json_array_size(board_scores), 2);
    assert_non_null(json_object_get(json_array_get(board_scores, 0), "eval"));
    assert_non_null(json_object_get(json_array_get(board_scores, 0), "model"));
}

static void test_papers(void **state)
{
    json_t *open = doc(RL_CATALOG_TYPE_PAPER, "open-paper"), *closed = doc(RL_CATALOG_TYPE_PAPER, "closed-paper");

    assert_true(json_is_true(json_object_get(json_object_get(open, "licence"), "redistributable")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(open, "files"), "text")),
                        "/api/v1/papers/open-paper/text");
    assert_string_equal(json_string_value(json_object_get(json_object_get(open, "files"), "pdf")),
                        "/api/v1/papers/open-paper/pdf");
    assert_string_equal(json_string_value(json_object_get(json_object_get(open, "links"), "arxiv")),
                        "https://arxiv.org/abs/2401.00001");
    assert_null(json_object_get(json_object_get(open, "attributes"), "text"));
    assert_false(json_is_true(json_object_get(json_object_get(closed, "licence"), "redistributable")));
    assert_int_equal(json_object_size(json_object_get(closed, "files")), 0);
}

static void test_hidden_never_appears(void **state)
{
    int type;

    assert_null(json_object_get(documents[RL_CATALOG_TYPE_MODEL], "ghost"));
    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type) {
        const char *slug;
        json_t *d;
        json_object_foreach(documents[type], slug, d)
        {
            char *text = json_dumps(d, 0);
            assert_null(strstr(text, "ghost"));
            assert_null(strstr(text, "Ghost"));
            assert_null(strstr(text, "x.example"));
            free(text);
        }
    }
}

static void test_search_facts(void **state)
{
    char *facts = rl_catalog_document_search_facts(doc(RL_CATALOG_TYPE_EVAL, "sums"));

    assert_non_null(strstr(facts, "Acme Labs\n"));
    assert_non_null(strstr(facts, "Open Paper\n"));
    assert_null(strstr(facts, "Adding numbers")); /* the summary has its own column */
    free(facts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape),
        cmocka_unit_test(test_relationships_both_ways),
        cmocka_unit_test(test_scores),
        cmocka_unit_test(test_papers),
        cmocka_unit_test(test_hidden_never_appears),
        cmocka_unit_test(test_search_facts),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
