/* The HTTP/1 head checks (src/http/head.c), called as the parser hook calls them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "http/head.h"

#define CAPACITY 100

struct head {
    const char *method, *path;
    size_t method_len, path_len, num_headers;
    int minor_version;
    struct phr_header headers[CAPACITY];
};

static void header(struct head *head, const char *name, const char *value)
{
    struct phr_header *entry = &head->headers[head->num_headers++];

    entry->name = name;
    entry->name_len = strlen(name);
    entry->value = value;
    entry->value_len = strlen(value);
}

static struct head parsed(int minor_version)
{
    struct head head;

    memset(&head, 0, sizeof(head));
    head.method = "POST";
    head.method_len = 4;
    head.path = "/v1/pairing/start";
    head.path_len = strlen(head.path);
    head.minor_version = minor_version;
    return head;
}

static int check(struct head *head, const char *buf, int result)
{
    return rl__http_head_check(buf, strlen(buf), &head->method, &head->method_len, &head->path, &head->path_len,
                               &head->minor_version, head->headers, &head->num_headers, CAPACITY, result);
}

/* The marker's value when the head was refused, or 0. */
static char marker(const struct head *head)
{
    size_t i;

    for (i = 0; i < head->num_headers; ++i) {
        if (head->headers[i].name_len == 12 && memcmp(head->headers[i].name, "x-rl-refused", 12) == 0)
            return head->headers[i].value[0];
    }
    return 0;
}

static int has(const struct head *head, const char *name, const char *value)
{
    size_t i;

    for (i = 0; i < head->num_headers; ++i) {
        if (head->headers[i].name_len == strlen(name) && memcmp(head->headers[i].name, name, strlen(name)) == 0 &&
            head->headers[i].value_len == strlen(value) && memcmp(head->headers[i].value, value, strlen(value)) == 0)
            return 1;
    }
    return 0;
}

static void test_good_heads_pass_unchanged(void **state)
{
    struct head head = parsed(1);

    header(&head, "Host", "x");
    header(&head, "Content-Length", "5");
    header(&head, "Authorization", "Bearer t");
    assert_int_equal(check(&head, "head", 42), 42);
    assert_int_equal(head.num_headers, 3);
    assert_int_equal(marker(&head), 0);

    head = parsed(1);
    header(&head, "host", "x");
    header(&head, "transfer-encoding", "chunked");
    assert_int_equal(check(&head, "head", 42), 42);
    assert_int_equal(marker(&head), 0);

    head = parsed(0); /* HTTP/1.0 needs no Host */
    assert_int_equal(check(&head, "head", 42), 42);
    assert_int_equal(marker(&head), 0);
}

/* Issue 27: a length of digits too long for h2o is a body too large (413 from h2o), not a malformed head. */
static void test_huge_content_lengths_become_too_large(void **state)
{
    static const struct {
        const char *sent, *seen;
    } cases[] = {
        {"100000000000000000000", "999999999999999999"},
        {"99999999999999999999999999999999", "999999999999999999"},
        {"999999999999999999", "999999999999999999"},
        {"0000000000000000000000012", "12"},
        {"0", "0"},
        {"000", "0"},
        {"12abc", "12abc"},
        {"", ""},
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        struct head head = parsed(1);
        header(&head, "Host", "x");
        header(&head, "Content-Length", cases[i].sent);
        assert_int_equal(check(&head, "head", 42), 42);
        assert_int_equal(marker(&head), 0);
        assert_true(has(&head, "Content-Length", cases[i].seen));
    }
}

static void test_framing_and_host_are_refused(void **state)
{
    static const struct {
        int minor;
        const char *names[4];
    } cases[] = {
        {1, {"Host", "Content-Length", "Transfer-Encoding", NULL}},
        {1, {"Host", "TRANSFER-ENCODING", "content-length", NULL}},
        {1, {"Host", "Content-Length", "Content-Length", NULL}},
        {1, {"Host", "Transfer-Encoding", "Transfer-Encoding", NULL}},
        {0, {"Transfer-Encoding", NULL}},
        {1, {"Content-Length", NULL}},
        {1, {"Host", "host", NULL}},
    };
    size_t i, k;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        struct head head = parsed(cases[i].minor);
        for (k = 0; cases[i].names[k] != NULL; ++k)
            header(&head, cases[i].names[k], "5");
        header(&head, "X-Request-ID", "abc");
        header(&head, "Expect", "100-continue");
        assert_int_equal(check(&head, "head", 42), 42);
        assert_true(marker(&head) > '0');
        /* The rewritten head keeps the correlation id, loses every framing header, and closes. */
        assert_true(has(&head, "X-Request-ID", "abc"));
        assert_true(has(&head, "connection", "close"));
        assert_int_equal(head.num_headers, 3);
        assert_int_equal(head.method_len, 4);
    }
}

static void test_forged_markers_are_dropped(void **state)
{
    struct head head = parsed(1);

    header(&head, "X-RL-Refused", "1");
    header(&head, "Host", "x");
    header(&head, "x-rl-refused", "7");
    assert_int_equal(check(&head, "head", 42), 42);
    assert_int_equal(head.num_headers, 1);
    assert_true(has(&head, "Host", "x"));
}

static void test_parser_rejections_become_requests(void **state)
{
    struct head head = parsed(1);
    const char *buf = "GET /v1/me\r\n\r\n";

    head.num_headers = CAPACITY;
    assert_int_equal(check(&head, buf, -1), (int)strlen(buf));
    assert_int_equal(head.method_len, 3);
    assert_memory_equal(head.method, "GET", 3);
    assert_int_equal(head.path_len, 6);
    assert_memory_equal(head.path, "/v1/me", 6);
    assert_true(marker(&head) > '0');
    assert_true(has(&head, "connection", "close"));

    head = parsed(1);
    buf = "\x16\x03\x01 binary";
    assert_int_equal(check(&head, buf, -1), (int)strlen(buf));
    assert_int_equal(head.path_len, 1);
    assert_memory_equal(head.path, "/", 1);
    assert_memory_equal(head.method, "GET", 3);
}

static void test_what_stays_with_h2o(void **state)
{
    struct head head = parsed(1);

    assert_int_equal(check(&head, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", -1), -1);
    assert_int_equal(check(&head, "\r\n", -1), -1);
    /* Incomplete heads wait for more bytes. */
    assert_int_equal(check(&head, "GET /v1/me HTTP/1.1\r\nHo", -2), -2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_heads_pass_unchanged),
        cmocka_unit_test(test_huge_content_lengths_become_too_large),
        cmocka_unit_test(test_framing_and_host_are_refused),
        cmocka_unit_test(test_forged_markers_are_dropped),
        cmocka_unit_test(test_parser_rejections_become_requests),
        cmocka_unit_test(test_what_stays_with_h2o),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
