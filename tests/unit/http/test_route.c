#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "http/route.h"
#include "relay/core/relay.h"

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

/* One lookup both ways: the index must answer what the scan answers, row, params and Allow alike. */
static void same_answer(const rl_route_t *table, size_t count, const rl_route_index_t *index, const char *method,
                        const char *path)
{
    const rl_route_t *a = NULL, *b = NULL;
    rl_route_param_t pa[RL_ROUTE_MAX_PARAMS], pb[RL_ROUTE_MAX_PARAMS];
    char allow_a[64], allow_b[64];
    rl_route_result_t ra, rb;
    size_t i, nparams = 0;

    ra = rl_route_find(table, count, method, strlen(method), path, strlen(path), &a, pa, allow_a, sizeof(allow_a));
    rb = rl_route_index_find(index, method, strlen(method), path, strlen(path), &b, pb, allow_b, sizeof(allow_b));
    if (ra != rb || (ra == RL_ROUTE_MATCHED && a != b))
        fail_msg("%s %s: scan %d (%s), index %d (%s)", method, path, ra, a != NULL ? a->pattern : "-", rb,
                 b != NULL ? b->pattern : "-");
    if (ra == RL_ROUTE_NO_METHOD)
        assert_string_equal(allow_a, allow_b);
    for (i = 0; ra == RL_ROUTE_MATCHED && a->pattern[i] != '\0'; ++i)
        nparams += a->pattern[i] == ':';
    for (i = 0; i < nparams; ++i) {
        assert_ptr_equal(pa[i].base, pb[i].base);
        assert_int_equal(pa[i].len, pb[i].len);
    }
}

static void index_agrees(const rl_route_t *table, size_t count)
{
    static const char *const methods[] = {"GET", "POST", "PATCH", "DELETE", "PUT", "HEAD"};
    static const char *const extra[] = {"/", "", "/v1", "/v1/", "/nothing", "/v1/me/x/y/z/w", "/app/1/2/3/4"};
    rl_route_index_t *index = rl_route_index_new(table, count);
    char path[512];
    size_t i, m, k;

    assert_non_null(index);
    for (i = 0; i < count; ++i) {
        /* Each pattern with its :params filled in, with and without a trailing slash. */
        const char *p = table[i].pattern;
        size_t n = 0;
        while (*p != '\0' && n < sizeof(path) - 8) {
            if (*p == ':') {
                memcpy(path + n, "p1", 2);
                n += 2;
                while (*p != '\0' && *p != '/')
                    ++p;
                continue;
            }
            path[n++] = *p++;
        }
        path[n] = '\0';
        for (m = 0; m < sizeof(methods) / sizeof(methods[0]); ++m) {
            same_answer(table, count, index, methods[m], path);
            same_answer(table, count, index, methods[m], table[i].pattern);
            path[n] = '/';
            path[n + 1] = '\0';
            same_answer(table, count, index, methods[m], path);
            path[n] = '\0';
        }
    }
    for (k = 0; k < sizeof(extra) / sizeof(extra[0]); ++k)
        for (m = 0; m < sizeof(methods) / sizeof(methods[0]); ++m)
            same_answer(table, count, index, methods[m], extra[k]);
    rl_route_index_free(index);
}

static void test_index_answers_as_the_scan(void **state)
{
    const rl_route_t *relay_routes;
    size_t relay_nroutes;

    (void)state;
    index_agrees(routes, NROUTES);
    relay_routes = rl_relay_routes(&relay_nroutes);
    index_agrees(relay_routes, relay_nroutes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_and_params),
        cmocka_unit_test(test_index_answers_as_the_scan),
        cmocka_unit_test(test_not_found),
        cmocka_unit_test(test_method_not_allowed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
