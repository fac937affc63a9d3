#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "http/route.h"

static int noop(struct rl_call *call)
{
    return 0;
}

static const rl_route_t routes[] = {
    {"GET", "/v1/me", noop, 0, NULL, NULL, 0},
    {"POST", "/v1/me/sessions", noop, 0, NULL, NULL, 0},
    {"PATCH", "/v1/me/sessions/:id", noop, 0, NULL, NULL, 0},
    {"DELETE", "/v1/me/sessions/:id", noop, 0, NULL, NULL, 0},
    {"POST", "/v1/me/sessions/:id/archive", noop, 0, NULL, NULL, 0},
    {"GET", "/api/v1/:type/:slug", noop, 0, NULL, NULL, 0},
    {"GET", "/api/v1/papers/:slug", noop, 0, NULL, NULL, 0},
};
#define NROUTES (sizeof(routes) / sizeof(routes[0]))

static rl_route_result_t find(const char *method, const char *path, const rl_route_t **route, rl_route_param_t *params,
                              char *allow)
{
    return rl_route_find(routes, NROUTES, method, strlen(method), path, strlen(path), route, params, allow, 64);
}

static void test_exact_and_params(void **state)
{
    const rl_route_t *route = NULL;
    rl_route_param_t params[RL_ROUTE_MAX_PARAMS];
    char allow[64];

    assert_int_equal(find("GET", "/v1/me", &route, params, allow), RL_ROUTE_MATCHED);
    assert_ptr_equal(route, &routes[0]);
    assert_int_equal(find("GET", "/v1/me/", &route, params, allow), RL_ROUTE_MATCHED);
    assert_int_equal(find("PATCH", "/v1/me/sessions/ses_abc", &route, params, allow), RL_ROUTE_MATCHED);
    assert_ptr_equal(route, &routes[2]);
    assert_int_equal(params[0].len, 7);
    assert_memory_equal(params[0].base, "ses_abc", 7);
    assert_int_equal(find("POST", "/v1/me/sessions/ses_1/archive", &route, params, allow), RL_ROUTE_MATCHED);
    assert_ptr_equal(route, &routes[4]);
    assert_int_equal(find("GET", "/api/v1/models/gpt-4", &route, params, allow), RL_ROUTE_MATCHED);
    assert_memory_equal(params[0].base, "models", 6);
    assert_memory_equal(params[1].base, "gpt-4", 5);
}

static void test_not_found(void **state)
{
    const rl_route_t *route = NULL;
    rl_route_param_t params[RL_ROUTE_MAX_PARAMS];
    char allow[64];

    assert_int_equal(find("GET", "/v1/mex", &route, params, allow), RL_ROUTE_NO_PATH);
    assert_int_equal(find("GET", "/v1", &route, params, allow), RL_ROUTE_NO_PATH);
    /* A parameter never matches an empty segment. */
    assert_int_equal(find("POST", "/v1/me/sessions//archive", &route, params, allow), RL_ROUTE_NO_PATH);
    assert_int_equal(find("POST", "/v1/me/sessions/a/b/archive", &route, params, allow), RL_ROUTE_NO_PATH);
    assert_int_equal(find("GET", "", &route, params, allow), RL_ROUTE_NO_PATH);
}

static void test_method_not_allowed(void **state)
{
    const rl_route_t *route = NULL;
    rl_route_param_t params[RL_ROUTE_MAX_PARAMS];
    char allow[64];

    assert_int_equal(find("GET", "/v1/me/sessions/ses_1", &route, params, allow), RL_ROUTE_NO_METHOD);
    assert_string_equal(allow, "PATCH, DELETE");
    assert_int_equal(find("POST", "/v1/me", &route, params, allow), RL_ROUTE_NO_METHOD);
    assert_string_equal(allow, "GET");
    /* Two patterns matching with the same method list it once. */
    assert_int_equal(find("POST", "/api/v1/papers/x", &route, params, allow), RL_ROUTE_NO_METHOD);
    assert_string_equal(allow, "GET");
    /* Method names compare exactly. */
    assert_int_equal(find("get", "/v1/me", &route, params, allow), RL_ROUTE_NO_METHOD);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_and_params),
        cmocka_unit_test(test_not_found),
        cmocka_unit_test(test_method_not_allowed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
