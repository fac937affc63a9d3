#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "http/query.h"

static h2o_req_t request(const char *path)
{
    h2o_req_t req;
    const char *question = strchr(path, '?');

    memset(&req, 0, sizeof(req));
    req.path = h2o_iovec_init(path, strlen(path));
    req.query_at = question != NULL ? (size_t)(question - path) : SIZE_MAX;
    return req;
}

static void test_params(void **state)
{
    h2o_req_t req = request("/v1/x?limit=20&before=msg_1&name=my%20file&flag");
    char out[32];

    assert_int_equal(rl_query_param(&req, "limit", out, sizeof(out)), 0);
    assert_string_equal(out, "20");
    assert_int_equal(rl_query_param(&req, "before", out, sizeof(out)), 0);
    assert_string_equal(out, "msg_1");
    assert_int_equal(rl_query_param(&req, "name", out, sizeof(out)), 0);
    assert_string_equal(out, "my file");
    assert_int_equal(rl_query_param(&req, "flag", out, sizeof(out)), 0);
    assert_string_equal(out, "");
    assert_int_equal(rl_query_param(&req, "lim", out, sizeof(out)), 1);
    assert_int_equal(rl_query_param(&req, "missing", out, sizeof(out)), 1);

    req = request("/v1/x");
    assert_int_equal(rl_query_param(&req, "limit", out, sizeof(out)), 1);
    req = request("/v1/x?name=%ZZ");
    assert_int_equal(rl_query_param(&req, "name", out, sizeof(out)), -1);
}

/* Issue 27: a key given twice is refused, whichever the values; other keys are unaffected. */
static void test_repeated_keys(void **state)
{
    h2o_req_t req = request("/v1/me/sessions?state=deleted&state=live&limit=5");
    char out[32];

    assert_int_equal(rl_query_param(&req, "state", out, sizeof(out)), -1);
    assert_int_equal(rl_query_param(&req, "limit", out, sizeof(out)), 0);
    assert_string_equal(out, "5");
    req = request("/v1/x?flag&flag=1");
    assert_int_equal(rl_query_param(&req, "flag", out, sizeof(out)), -1);
    req = request("/v1/x?a=1&a=1");
    assert_int_equal(rl_query_param(&req, "a", out, sizeof(out)), -1);
    /* Names match as sent: an encoded name is another key. */
    req = request("/v1/x?st%61te=live&state=deleted&states=x");
    assert_int_equal(rl_query_param(&req, "state", out, sizeof(out)), 0);
    assert_string_equal(out, "deleted");
}

/* issue 34: a whole number of any length is read, saturated; anything else is not a number. */
static void test_integers(void **state)
{
    static const struct {
        const char *path;
        int result;
        long long value;
    } cases[] = {
        {"/v1/x?t=20", 0, 20},
        {"/v1/x?t=-3", 0, -3},
        {"/v1/x?t=%2B7", 0, 7},
        {"/v1/x?t=%32%35", 0, 25},
        {"/v1/x?t=00000000000000000000000000000012", 0, 12},
        {"/v1/x?t=99999999999999999999999", 0, LLONG_MAX},
        {"/v1/x?t=9223372036854775807", 0, LLONG_MAX},
        {"/v1/x?t=9223372036854775808", 0, LLONG_MAX},
        {"/v1/x?t=-9223372036854775808", 0, LLONG_MIN},
        {"/v1/x?t=-99999999999999999999999999999999999999999999999999999999999999999999999999", 0, LLONG_MIN},
        {"/v1/x?t=99999999999999999999999999999999999999999999999999999999999999999999999999", 0, LLONG_MAX},
        {"/v1/x?t=", RL_QUERY_NOT_INTEGER, 0},
        {"/v1/x?t", RL_QUERY_NOT_INTEGER, 0},
        {"/v1/x?t=-", RL_QUERY_NOT_INTEGER, 0},
        {"/v1/x?t=1.5", RL_QUERY_NOT_INTEGER, 0},
        {"/v1/x?t=1e3", RL_QUERY_NOT_INTEGER, 0},
        {"/v1/x?t=+4", RL_QUERY_NOT_INTEGER, 0}, /* a form's + is a space */
        {"/v1/x?t=4%00", RL_QUERY_NOT_INTEGER, 0},
        {"/v1/x?t=%ZZ", RL_QUERY_NOT_INTEGER, 0},
        {"/v1/x?t=999999999999999999999999999999999999999999999999999999999999999999x", RL_QUERY_NOT_INTEGER, 0},
        {"/v1/x?t=1&t=2", RL_QUERY_TWICE, 0},
        {"/v1/x?u=1", 1, 0},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        h2o_req_t req = request(cases[i].path);
        long long value = 0;
        int result = rl_query_integer(&req, "t", &value);
        if (result != cases[i].result || (result == 0 && value != cases[i].value))
            fail_msg("%s: %d %lld", cases[i].path, result, value);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_params), cmocka_unit_test(test_repeated_keys),
                                       cmocka_unit_test(test_integers)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
