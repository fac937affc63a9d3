/* The event record encoder (common/event.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/event.h"

static void assert_frame(rl_blob_t *frame, const char *expected)
{
    assert_non_null(frame);
    assert_int_equal(frame->len, strlen(expected));
    assert_memory_equal(frame->bytes, expected, frame->len);
    assert_int_equal(frame->bytes[frame->len], '\0');
    assert_int_equal(frame->refs, 1);
    rl_blob_release(frame);
}

/* The JSON of the record's one data line, parsed back. */
static json_t *data_of(const rl_blob_t *frame)
{
    const char *data = strstr(frame->bytes, "\ndata: ");
    const char *end;

    assert_non_null(data);
    data += 7;
    end = strchr(data, '\n');
    assert_non_null(end);
    /* One data line, then the blank line, then nothing. */
    assert_int_equal((size_t)(end - frame->bytes) + 2, frame->len);
    assert_int_equal(end[1], '\n');
    return json_loadb(data, (size_t)(end - data), 0, NULL);
}

static void test_record_shapes(void **state)
{
    json_t *data = json_pack("{s:s, s:I}", "user_id", "alice", "ts", (json_int_t)17);

    assert_frame(rl_event_frame(42, "message_added", data), "id: 42\nevent: message_added\ndata: "
                                                            "{\"user_id\":\"alice\",\"ts\":17}\n\n");
    assert_frame(rl_event_frame(RL_EVENT_NO_ID, "hello", data),
                 "event: hello\ndata: {\"user_id\":\"alice\",\"ts\":17}\n\n");
    assert_frame(rl_event_frame(0, "resync", NULL), "id: 0\nevent: resync\ndata: {}\n\n");
    json_decref(data);
}

static void test_strings_are_encoded_not_cut(void **state)
{
    static const char *const hostile[] = {
        "say \"hi\"",
        "back\\slash",
        "line\nbreak\r\nand more",
        "\"},\"user_id\":\"mallory",
        "nul\\u0000",
        "event: fake\n\ndata: {}",
        "\xe2\x80\xa8 line separator",
    };
    size_t i;

    for (i = 0; i < sizeof(hostile) / sizeof(hostile[0]); ++i) {
        json_t *data = json_pack("{s:s}", "text", hostile[i]);
        rl_blob_t *frame = rl_event_frame(7, "message_delta", data);
        json_t *back;
        assert_non_null(frame);
        back = data_of(frame);
        assert_non_null(back);
        assert_true(json_equal(back, data));
        json_decref(back);
        json_decref(data);
        rl_blob_release(frame);
    }
}

static void test_large_payload_grows(void **state)
{
    size_t size = 3 * 1024 * 1024 + 7;
    char *text = malloc(size + 1);
    json_t *data, *back;
    rl_blob_t *frame;

    memset(text, 'y', size);
    text[size] = '\0';
    text[100] = '"';
    text[size / 2] = '\n';
    data = json_pack("{s:s}", "text", text);
    frame = rl_event_frame(1, "message_finalized", data);
    assert_non_null(frame);
    back = data_of(frame);
    assert_non_null(back);
    assert_true(json_equal(back, data));
    json_decref(back);
    json_decref(data);
    rl_blob_release(frame);
    free(text);
}

static void test_bad_names_are_refused(void **state)
{
    static const char *const bad[] = {"", "two words", "line\nbreak", "cr\r", "colon:", "quote\""};
    char long_name[RL_EVENT_NAME_MAX + 2];
    rl_blob_t *frame;
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i)
        assert_null(rl_event_frame(1, bad[i], NULL));
    assert_null(rl_event_frame(1, NULL, NULL));
    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[RL_EVENT_NAME_MAX + 1] = '\0';
    assert_null(rl_event_frame(1, long_name, NULL));
    long_name[RL_EVENT_NAME_MAX] = '\0';
    frame = rl_event_frame(1, long_name, NULL);
    assert_non_null(frame);
    rl_blob_release(frame);
    frame = rl_event_frame(1, "task.progress-2_b", NULL);
    assert_non_null(frame);
    rl_blob_release(frame);
}

static void test_non_object_data(void **state)
{
    json_t *data = json_string("x");

    assert_frame(rl_event_frame(3, "e", data), "id: 3\nevent: e\ndata: \"x\"\n\n");
    json_decref(data);
}

/* A payload carried between nodes as compact JSON gives the record that its JSON would. */
static void test_record_from_text(void **state)
{
    json_t *data = json_pack("{s:s, s:i}", "text", "a\nb \"c\"", "n", 3);
    char *text = json_dumps(data, JSON_COMPACT);
    rl_blob_t *direct = rl_event_frame(9, "message_delta", data);
    rl_blob_t *carried = rl_event_frame_text(9, "message_delta", 13, text, strlen(text));

    assert_non_null(direct);
    assert_non_null(carried);
    assert_int_equal(carried->len, direct->len);
    assert_memory_equal(carried->bytes, direct->bytes, direct->len);
    assert_int_equal(carried->bytes[carried->len], '\0');
    rl_blob_release(carried);
    /* The name is bounded by its length, not by a NUL: a name inside a longer wire record. */
    carried = rl_event_frame_text(RL_EVENT_NO_ID, "message_delta trailing", 13, "{}", 2);
    assert_frame(carried, "event: message_delta\ndata: {}\n\n");
    /* Whatever could end the data line early is refused, as are a bad name and an empty payload. */
    assert_null(rl_event_frame_text(1, "e", 1, "{\"a\":1}\n\nevent: x", 20));
    assert_null(rl_event_frame_text(1, "e", 1, "{}\r", 3));
    assert_null(rl_event_frame_text(1, "e", 1, "", 0));
    assert_null(rl_event_frame_text(1, "a b", 3, "{}", 2));
    rl_blob_release(direct);
    free(text);
    json_decref(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_shapes),       cmocka_unit_test(test_strings_are_encoded_not_cut),
        cmocka_unit_test(test_large_payload_grows), cmocka_unit_test(test_bad_names_are_refused),
        cmocka_unit_test(test_non_object_data),     cmocka_unit_test(test_record_from_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
