/*
 * Unit tests of src/catalog/import.c and src/catalog/catalog.c: importing a
 * dataset into SQLite, deciding when to import again, and serving it from
 * memory (lookups, paper files, search, the prebuilt bodies).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <utime.h>
#include <cmocka.h>

#include "catalog/catalog.h"
#include "catalog/import.h"
#include "common/log.h"
#include "fixture.h"

static const rl_catalog_endpoint_t endpoints[] = {{"/api/v1", "the index"}};

typedef struct world {
    char *source;
    char *data;
    char db[4200];
    rl_catalog_t *catalog;
} world_t;

static int setup(void **state)
{
    world_t *world = calloc(1, sizeof(*world));
    json_t *problems = json_array(), *summary = NULL;

    rl_log_set_level(RL_LOG_ERROR);
    world->source = fixture_dataset();
    world->data = fixture_dir();
    snprintf(world->db, sizeof(world->db), "%s/catalog.db", world->data);
    assert_true(rl_catalog_import_is_stale(world->source, world->db));
    assert_int_equal(rl_catalog_import(world->source, world->db, problems, &summary), 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(summary, "entities"), "models")), 2);
    assert_int_equal(json_integer_value(json_object_get(summary, "hidden")), 1);
    assert_int_equal(json_integer_value(json_object_get(summary, "scores")), 2);
    assert_int_equal(json_integer_value(json_object_get(summary, "files")), 2);
    json_decref(summary);
    json_decref(problems);
    assert_int_equal(rl_catalog_open(world->db, "http://catalog.test", endpoints, 1, &world->catalog), 0);
    *state = world;
    return 0;
}

static int teardown(void **state)
{
    world_t *world = *state;

    rl_catalog_close(world->catalog);
    fixture_remove(world->source);
    fixture_remove(world->data);
    free(world);
    return 0;
}

static void test_staleness(void **state)
{
    world_t *world = *state;
    char path[4200];
    struct utimbuf later = {4102444800, 4102444800}; /* 2100 */
    json_t *problems = json_array();

    assert_false(rl_catalog_import_is_stale(world->source, world->db));
    /* Another folder with the same files is another catalog. */
    assert_true(rl_catalog_import_is_stale(world->data, world->db));
    snprintf(path, sizeof(path), "%s/main.json", world->source);
    assert_int_equal(utime(path, &later), 0);
    assert_true(rl_catalog_import_is_stale(world->source, world->db));
    /* A broken source leaves the previous file in place. */
    fixture_write(world->source, "broken.json", "{");
    assert_int_equal(rl_catalog_import(world->source, world->db, problems, NULL), 1);
    assert_int_equal(json_array_size(problems), 1);
    assert_int_equal(access(world->db, R_OK), 0);
    snprintf(path, sizeof(path), "%s/broken.json", world->source);
    unlink(path);
    json_array_clear(problems);
    assert_int_equal(rl_catalog_import(world->source, world->db, problems, NULL), 0);
    assert_false(rl_catalog_import_is_stale(world->source, world->db));
    json_decref(problems);
}

static void test_lookups_and_files(void **state)
{
    world_t *world = *state;
    const rl_catalog_entity_t *entity = rl_catalog_find(world->catalog, RL_CATALOG_TYPE_PAPER, "open-paper");

    assert_non_null(entity);
    assert_non_null(entity->paper);
    assert_true(entity->paper->redistributable);
    assert_non_null(entity->paper->text);
    assert_int_equal(entity->paper->text->len, strlen("The open paper.\n"));
    assert_string_equal(entity->paper->pdf->content_type, "application/pdf");
    assert_string_equal(entity->paper->read_at, "https://arxiv.org/abs/2401.00001");
    entity = rl_catalog_find(world->catalog, RL_CATALOG_TYPE_PAPER, "closed-paper");
    assert_false(entity->paper->redistributable);
    assert_null(entity->paper->text);
    assert_null(rl_catalog_find(world->catalog, RL_CATALOG_TYPE_MODEL, "ghost"));
    assert_null(rl_catalog_find(world->catalog, RL_CATALOG_TYPE_EVAL, "adder-1"));
    assert_non_null(rl_catalog_find(world->catalog, RL_CATALOG_TYPE_MODEL, "adder-1"));
    assert_int_equal(rl_catalog_count(world->catalog, RL_CATALOG_TYPE_MODEL), 2);
    assert_memory_equal(rl_catalog_find(world->catalog, RL_CATALOG_TYPE_MODEL, "adder-1")->document.etag, "W/\"", 3);
}

static json_t *search(world_t *world, const char *q, int type, int per)
{
    rl_catalog_search_t request;
    char *body = NULL;
    size_t len = 0;
    json_t *answer;

    snprintf(request.q, sizeof(request.q), "%s", q);
    request.type = type;
    request.per = per;
    assert_int_equal(rl_catalog_search(world->catalog, &request, &body, &len), 0);
    answer = json_loadb(body, len, 0, NULL);
    assert_non_null(answer);
    free(body);
    return answer;
}

static void test_search(void **state)
{
    world_t *world = *state;
    json_t *answer = search(world, "add", -1, 5), *models;

    /* Prefix match of the last word. */
    models = json_object_get(json_object_get(answer, "results"), "models");
    assert_int_equal(json_integer_value(json_object_get(models, "total")), 2);
    assert_string_equal(json_string_value(json_object_get(answer, "match")), "all");
    json_decref(answer);

    /* per caps each group, the total still counts everything. */
    answer = search(world, "adder", RL_CATALOG_TYPE_MODEL, 1);
    models = json_object_get(json_object_get(answer, "results"), "models");
    assert_int_equal(json_array_size(json_object_get(models, "hits")), 1);
    assert_int_equal(json_integer_value(json_object_get(models, "total")), 2);
    assert_int_equal(json_object_size(json_object_get(answer, "results")), 1);
    json_decref(answer);

    /* A query that is a slug puts that entity first. */
    answer = search(world, "Adder 2", RL_CATALOG_TYPE_MODEL, 1);
    models = json_object_get(json_object_get(answer, "results"), "models");
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(models, "hits"), 0), "slug")),
                        "adder-2");
    json_decref(answer);

    /* No entity has both words: any word may match then. */
    answer = search(world, "acme zzzz ", -1, 5);
    assert_string_equal(json_string_value(json_object_get(answer, "match")), "any");
    assert_true(json_integer_value(json_object_get(answer, "total")) > 0);
    json_decref(answer);

    answer = search(world, "ghost", -1, 5);
    assert_int_equal(json_integer_value(json_object_get(answer, "total")), 0);
    assert_int_equal(json_object_size(json_object_get(answer, "results")), 0);
    json_decref(answer);

    /* Snippets mark the match. */
    answer = search(world, "numbers", -1, 5);
    assert_non_null(strstr(
        json_string_value(json_object_get(
            json_array_get(json_object_get(json_object_get(json_object_get(answer, "results"), "evals"), "hits"), 0),
            "snippet")),
        "**numbers**"));
    json_decref(answer);
}

static void test_prebuilt_bodies(void **state)
{
    world_t *world = *state;
    const rl_catalog_body_t *llms = rl_catalog_llms(world->catalog, 0), *full = rl_catalog_llms(world->catalog, 1);
    const rl_catalog_body_t *index = rl_catalog_index(world->catalog);
    const rl_catalog_body_t *listing = rl_catalog_listing(world->catalog, RL_CATALOG_TYPE_MODEL);

    assert_non_null(strstr(llms->bytes, "- [Adder 1](http://catalog.test/api/v1/models/adder-1): Adds."));
    assert_null(strstr(llms->bytes, "ghost"));
    assert_null(strstr(full->bytes, "Ghost"));
    assert_non_null(strstr(full->bytes, "### Sums"));
    assert_string_equal(llms->content_type, "text/plain; charset=utf-8");
    assert_non_null(strstr(index->bytes, "\"entities\":10"));
    assert_non_null(strstr(listing->bytes, "\"count\":2"));
    assert_string_equal(listing->content_type, "application/json; charset=utf-8");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookups_and_files),
        cmocka_unit_test(test_search),
        cmocka_unit_test(test_prebuilt_bodies),
        cmocka_unit_test(test_staleness),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
