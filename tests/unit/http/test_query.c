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

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_params), cmocka_unit_test(test_repeated_keys)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
