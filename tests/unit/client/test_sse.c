/*
 * Unit tests of src/client/sse.c: the EventSource parser on whole and split
 * input, every line ending, comments, ids, multi-line data and its caps; and
 * the stream's refusal of bad options and of an unreachable server.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client/sse.h"

#define MAX_SEEN 16

typedef struct seen {
    int n;
    char id[MAX_SEEN][RL_SSE_ID_MAX];
    int has_id[MAX_SEEN];
    char event[MAX_SEEN][RL_SSE_EVENT_MAX];
    char data[MAX_SEEN][256];
} seen_t;

static void record(void *user, const rl_sse_event_t *event)
{
    seen_t *seen = user;

    assert_true(seen->n < MAX_SEEN);
    assert_int_equal(strlen(event->data), event->data_len);
    snprintf(seen->id[seen->n], RL_SSE_ID_MAX, "%s", event->id);
    seen->has_id[seen->n] = event->has_id;
    snprintf(seen->event[seen->n], RL_SSE_EVENT_MAX, "%s", event->event);
    snprintf(seen->data[seen->n], 256, "%s", event->data);
    seen->n++;
}

/* Feeds text in chunks of `step` bytes (0: all at once). */
static int feed(rl_sse_parser_t *parser, const char *text, size_t step)
{
    size_t len = strlen(text), at = 0;
    int result = 0;

    if (step == 0)
        return rl_sse_parser_feed(parser, text, len);
    while (at < len && result == 0) {
        size_t n = len - at < step ? len - at : step;
        result = rl_sse_parser_feed(parser, text + at, n);
        at += n;
    }
    return result;
}

static const char relay_stream[] = "event: hello\n"
                                   "data: {\"user_id\":\"alice\",\"heartbeat_ms\":25000}\n"
                                   "\n"
                                   ": a comment\n"
                                   "id: 1001\n"
                                   "event: message_delta\n"
                                   "data: {\"delta\":\"Hel\"}\n"
                                   "\n"
                                   "id: 1002\r\n"
                                   "event: message_delta\r\n"
                                   "data: {\"delta\":\"lo\"}\r\n"
                                   "\r\n"
                                   "event: heartbeat\r"
                                   "data: {}\r"
                                   "\r";

static void test_relay_stream_any_split(void **state)
{
    size_t step;

    for (step = 0; step <= 7; ++step) {
        rl_sse_parser_t parser;
        seen_t seen = {0};
        assert_int_equal(rl_sse_parser_init(&parser, 0, 0, record, &seen), 0);
        assert_int_equal(feed(&parser, relay_stream, step), 0);
        assert_int_equal(seen.n, 4);
        assert_string_equal(seen.event[0], "hello");
        assert_string_equal(seen.id[0], "");
        assert_false(seen.has_id[0]);
        assert_string_equal(seen.data[0], "{\"user_id\":\"alice\",\"heartbeat_ms\":25000}");
        assert_string_equal(seen.event[1], "message_delta");
        assert_string_equal(seen.id[1], "1001");
        assert_true(seen.has_id[1]);
        assert_string_equal(seen.data[2], "{\"delta\":\"lo\"}");
        assert_string_equal(seen.id[2], "1002");
        /* An event without an id keeps the last one (EventSource), but says it carried none. */
        assert_string_equal(seen.event[3], "heartbeat");
        assert_string_equal(seen.id[3], "1002");
        assert_false(seen.has_id[3]);
        rl_sse_parser_free(&parser);
    }
}

static void test_fields(void **state)
{
    rl_sse_parser_t parser;
    seen_t seen = {0};

    assert_int_equal(rl_sse_parser_init(&parser, 0, 0, record, &seen), 0);
    /* Two data lines join with a newline; no space after the colon is fine; a field without colon is empty.
     */
    assert_int_equal(feed(&parser, "data:one\ndata:  two\ndata\n\n", 0), 0);
    assert_int_equal(seen.n, 1);
    assert_string_equal(seen.data[0], "one\n two\n");
    assert_string_equal(seen.event[0], "message");
    /* No data: nothing is dispatched, but the id is kept. */
    assert_int_equal(feed(&parser, "id: 7\nevent: x\n\n", 0), 0);
    assert_int_equal(seen.n, 1);
    assert_string_equal(parser.last_id, "7");
    /* The event name does not leak into the next event; unknown fields are ignored. */
    assert_int_equal(feed(&parser, "foo: bar\nretry: 1500\ndata: y\n\n", 0), 0);
    assert_int_equal(seen.n, 2);
    assert_string_equal(seen.event[1], "message");
    assert_string_equal(seen.id[1], "7");
    assert_int_equal(parser.retry_ms, 1500);
    /* An unfinished event is dropped by a reset (a connection ended); the id stays. */
    assert_int_equal(feed(&parser, "id: 8\ndata: half", 0), 0);
    rl_sse_parser_reset(&parser);
    assert_int_equal(feed(&parser, "\n\n", 0), 0);
    assert_int_equal(seen.n, 2);
    assert_string_equal(parser.last_id, "8");
    rl_sse_parser_free(&parser);
}

static void test_id_with_nul_is_ignored(void **state)
{
    static const char input[] = "id: 5\n\nid: a\0b\ndata: x\n\n";
    rl_sse_parser_t parser;
    seen_t seen = {0};

    assert_int_equal(rl_sse_parser_init(&parser, 0, 0, record, &seen), 0);
    assert_int_equal(rl_sse_parser_feed(&parser, input, sizeof(input) - 1), 0);
    assert_int_equal(seen.n, 1);
    assert_string_equal(seen.id[0], "5");
    rl_sse_parser_free(&parser);
}

static void test_caps(void **state)
{
    rl_sse_parser_t parser;
    seen_t seen = {0};
    char line[64];

    assert_int_equal(rl_sse_parser_init(&parser, 16, 24, record, &seen), 0);
    memset(line, 'x', sizeof(line));
    /* A line longer than 16 bytes is refused, and the parser starts over. */
    assert_int_equal(rl_sse_parser_feed(&parser, line, 17), RL_SSE_E_TOO_LARGE);
    assert_int_equal(feed(&parser, "data: ok\n\n", 0), 0);
    assert_int_equal(seen.n, 1);
    /* Data lines that are each short but add up past 24 bytes are refused too. */
    assert_int_equal(feed(&parser, "data: 0123456789\ndata: 0123456789\ndata: 0123\n", 0), RL_SSE_E_TOO_LARGE);
    assert_int_equal(feed(&parser, "\n", 0), 0);
    assert_int_equal(seen.n, 1);
    /* Up to the caps is fine: a 16-byte line, 24 bytes of data with their newlines. */
    assert_int_equal(feed(&parser, "data: 0123456789\ndata: 0123456789\ndata: \n\n", 0), 0);
    assert_int_equal(seen.n, 2);
    rl_sse_parser_free(&parser);
}

static void ignore(void *user, const rl_sse_event_t *event)
{
}

static void test_stream_options_and_unreachable(void **state)
{
    rl_sse_options_t options = {0};
    rl_sse_stream_t *stream = NULL;
    int result = 0, i;

    assert_int_equal(rl_sse_stream_new(&options, &stream), RL_SSE_E_USAGE);
    options.url = "http://127.0.0.1:1/v1/me/stream";
    options.on_event = ignore;
    options.backoff_initial_ms = 10;
    options.max_attempts = 2;
    options.last_event_id = "42";
    assert_int_equal(rl_sse_stream_new(&options, &stream), 0);
    assert_string_equal(rl_sse_stream_last_id(stream), "42");
    /* Port 1 refuses at once: two failed connections and it gives up. */
    for (i = 0; i < 200 && result == 0; ++i)
        result = rl_sse_stream_wait(stream, NULL, 0, 50, NULL);
    assert_int_equal(result, RL_SSE_E_GAVE_UP);
    assert_false(rl_sse_stream_connected(stream));
    rl_sse_stream_free(stream);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relay_stream_any_split),         cmocka_unit_test(test_fields),
        cmocka_unit_test(test_id_with_nul_is_ignored),         cmocka_unit_test(test_caps),
        cmocka_unit_test(test_stream_options_and_unreachable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
