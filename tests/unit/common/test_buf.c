/* Unit tests for src/common/buf.c: growth, the cap, printf, consume, take and writing to a pipe. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/buf.h"

static void test_append_grows_and_stays_a_string(void **state)
{
    rl_buf_t buf;
    size_t i;

    (void)state;
    rl_buf_init(&buf, 100000);
    assert_null(buf.bytes);
    assert_string_equal(rl_buf_str(&buf), "");
    for (i = 0; i < 1000; ++i)
        assert_int_equal(rl_buf_append(&buf, "0123456789", 10), 0);
    assert_int_equal(buf.len, 10000);
    assert_true(buf.alloc > buf.len);
    assert_int_equal(strlen(buf.bytes), 10000);
    assert_memory_equal(buf.bytes + 9990, "0123456789", 10);
    assert_int_equal(rl_buf_append(&buf, NULL, 0), 0);
    assert_int_equal(buf.len, 10000);
    rl_buf_free(&buf);
    assert_null(buf.bytes);
    assert_int_equal(buf.len, 0);
    assert_int_equal(buf.cap, 100000);
}

static void test_cap_refuses_and_leaves_the_buffer(void **state)
{
    rl_buf_t buf;

    (void)state;
    rl_buf_init(&buf, 8);
    assert_int_equal(rl_buf_append_str(&buf, "abcde"), 0);
    assert_int_equal(rl_buf_append_str(&buf, "fghi"), RL_BUF_E_TOO_LARGE);
    assert_string_equal(buf.bytes, "abcde");
    assert_int_equal(rl_buf_printf(&buf, "%d", 1234), RL_BUF_E_TOO_LARGE);
    assert_string_equal(buf.bytes, "abcde");
    assert_int_equal(rl_buf_append_str(&buf, "fgh"), 0);
    assert_string_equal(buf.bytes, "abcdefgh");
    /* Never more memory than the cap can use. */
    assert_true(buf.alloc <= 9);
    assert_int_equal(rl_buf_append(&buf, "x", 1), RL_BUF_E_TOO_LARGE);
    rl_buf_free(&buf);

    rl_buf_init(&buf, 0);
    assert_int_equal(rl_buf_append(&buf, "x", 1), RL_BUF_E_TOO_LARGE);
    assert_int_equal(rl_buf_append(&buf, "", 0), 0);
    assert_string_equal(rl_buf_str(&buf), "");
    rl_buf_free(&buf);

    rl_buf_init(&buf, SIZE_MAX);
    assert_int_equal(rl_buf_append_str(&buf, "no cap"), 0);
    assert_string_equal(buf.bytes, "no cap");
    rl_buf_free(&buf);
}

static void test_printf(void **state)
{
    rl_buf_t buf;
    char longer[600];

    (void)state;
    rl_buf_init(&buf, 4096);
    assert_int_equal(rl_buf_printf(&buf, "%s=%d;", "a", 1), 0);
    assert_int_equal(rl_buf_printf(&buf, "%s=%d", "bb", -22), 0);
    assert_string_equal(buf.bytes, "a=1;bb=-22");
    assert_int_equal(buf.len, 10);
    /* Past the first allocation, so that printf has to grow the buffer. */
    memset(longer, 'z', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    assert_int_equal(rl_buf_printf(&buf, "[%s]", longer), 0);
    assert_int_equal(buf.len, 10 + 2 + 599);
    assert_int_equal(buf.bytes[buf.len - 1], ']');
    assert_int_equal(buf.bytes[buf.len], '\0');
    rl_buf_free(&buf);
}

static void test_reset_consume_take(void **state)
{
    rl_buf_t buf;
    size_t len = 99;
    char *taken;

    (void)state;
    rl_buf_init(&buf, 64);
    assert_int_equal(rl_buf_append_str(&buf, "line one\nline two\n"), 0);
    rl_buf_consume(&buf, 9);
    assert_string_equal(buf.bytes, "line two\n");
    assert_int_equal(buf.len, 9);
    rl_buf_consume(&buf, 100);
    assert_int_equal(buf.len, 0);
    assert_string_equal(rl_buf_str(&buf), "");
    assert_int_equal(rl_buf_append_str(&buf, "kept"), 0);
    rl_buf_reset(&buf);
    assert_int_equal(buf.len, 0);
    assert_non_null(buf.bytes);
    assert_string_equal(rl_buf_str(&buf), "");
    assert_int_equal(rl_buf_append_str(&buf, "mine"), 0);
    taken = rl_buf_take(&buf, &len);
    assert_string_equal(taken, "mine");
    assert_int_equal(len, 4);
    assert_null(buf.bytes);
    assert_int_equal(buf.len, 0);
    assert_int_equal(buf.cap, 64);
    free(taken);
    /* Taking from an empty buffer gives an empty string, never NULL. */
    taken = rl_buf_take(&buf, &len);
    assert_string_equal(taken, "");
    assert_int_equal(len, 0);
    free(taken);
    rl_buf_free(&buf);
}

static void test_write_until_the_pipe_is_full(void **state)
{
    rl_buf_t buf;
    char chunk[4096], drain[65536];
    int fds[2], result;
    size_t queued = 0, read_back = 0;

    (void)state;
    assert_int_equal(pipe2(fds, O_NONBLOCK), 0);
    rl_buf_init(&buf, 4 * 1024 * 1024);
    memset(chunk, 'w', sizeof(chunk));
    /* More than a pipe holds: the write stops at the full pipe and keeps the rest. */
    while (queued < 1024 * 1024) {
        assert_int_equal(rl_buf_append(&buf, chunk, sizeof(chunk)), 0);
        queued += sizeof(chunk);
    }
    assert_int_equal(rl_buf_write(&buf, fds[1]), RL_BUF_AGAIN);
    assert_true(buf.len > 0 && buf.len < queued);
    /* Reading makes room; each write takes more until the buffer is empty. */
    for (result = RL_BUF_AGAIN; result == RL_BUF_AGAIN;) {
        ssize_t n = read(fds[0], drain, sizeof(drain));
        assert_true(n > 0);
        read_back += (size_t)n;
        result = rl_buf_write(&buf, fds[1]);
    }
    assert_int_equal(result, 0);
    assert_int_equal(buf.len, 0);
    for (;;) {
        ssize_t n = read(fds[0], drain, sizeof(drain));
        if (n <= 0)
            break;
        read_back += (size_t)n;
    }
    assert_int_equal(read_back, queued);
    /* A descriptor that cannot be written: -1 with errno, the bytes kept. */
    assert_int_equal(rl_buf_append_str(&buf, "kept"), 0);
    assert_int_equal(rl_buf_write(&buf, fds[0]), -1);
    assert_int_equal(errno, EBADF);
    assert_string_equal(buf.bytes, "kept");
    close(fds[0]);
    close(fds[1]);
    rl_buf_free(&buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_grows_and_stays_a_string),
        cmocka_unit_test(test_cap_refuses_and_leaves_the_buffer),
        cmocka_unit_test(test_printf),
        cmocka_unit_test(test_reset_consume_take),
        cmocka_unit_test(test_write_until_the_pipe_is_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
