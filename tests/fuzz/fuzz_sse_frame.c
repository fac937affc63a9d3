/*
 * Fuzz target: the event record encoder (src/common/event.c, rl_event_frame)
 * with arbitrary subjects, names and payloads.
 *
 * Input: one flag byte, then a name candidate, a subject and a payload
 * separated by 0xff bytes. Each record built must be exactly
 * "id: N\n"? "event: NAME\n" "data: JSON\n\n" with nothing cut, one data line,
 * and JSON that parses back to the value given; a name outside the rule must
 * be refused rather than encoded.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/event.h"

static int name_allowed(const char *name)
{
    size_t i, len = strlen(name);

    if (len == 0 || len > RL_EVENT_NAME_MAX)
        return 0;
    for (i = 0; i < len; ++i) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-'))
            return 0;
    }
    return 1;
}

/* Checks one record against its inputs; traps on any difference. */
static void check(const rl_blob_t *frame, int64_t id, const char *name, const json_t *data)
{
    char head[160];
    const char *json, *end;
    json_t *back;
    int head_len;

    if (id != RL_EVENT_NO_ID)
        head_len = snprintf(head, sizeof(head), "id: %lld\nevent: %s\ndata: ", (long long)id, name);
    else
        head_len = snprintf(head, sizeof(head), "event: %s\ndata: ", name);
    if (frame->len < (size_t)head_len + 2 || memcmp(frame->bytes, head, (size_t)head_len) != 0)
        __builtin_trap();
    if (frame->bytes[frame->len] != '\0' || memcmp(frame->bytes + frame->len - 2, "\n\n", 2) != 0)
        __builtin_trap();
    json = frame->bytes + head_len;
    end = frame->bytes + frame->len - 2;
    /* One line: no CR or LF (nor a NUL) may appear inside the JSON. */
    if (memchr(json, '\n', (size_t)(end - json)) != NULL || memchr(json, '\r', (size_t)(end - json)) != NULL ||
        memchr(json, '\0', (size_t)(end - json)) != NULL)
        __builtin_trap();
    back = json_loadb(json, (size_t)(end - json), JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (back == NULL || !json_equal(back, data != NULL ? data : back))
        __builtin_trap();
    if (data == NULL && !(json_is_object(back) && json_object_size(back) == 0))
        __builtin_trap();
    json_decref(back);
}

static void encode(int64_t id, const char *name, const json_t *data)
{
    rl_blob_t *frame = rl_event_frame(id, name, data);

    if (!name_allowed(name)) {
        if (frame != NULL)
            __builtin_trap();
        return;
    }
    /* With a valid name and encodable data, only memory can fail; these inputs are small. */
    if (frame == NULL)
        __builtin_trap();
    check(frame, id, name, data);
    rl_blob_release(frame);
}

/* The next 0xff-separated part of the input. */
static const uint8_t *part(const uint8_t **at, const uint8_t *end, size_t *len)
{
    const uint8_t *start = *at, *sep = memchr(start, 0xff, (size_t)(end - start));

    *len = (size_t)((sep != NULL ? sep : end) - start);
    *at = sep != NULL ? sep + 1 : end;
    return start;
}

int LLVMFuzzerTestOneInput(const uint8_t *input, size_t size)
{
    const uint8_t *at = input, *end = input + size, *bytes;
    char name[RL_EVENT_NAME_MAX + 8];
    int64_t id;
    json_t *subject, *data, *payload;
    size_t len;

    if (size == 0)
        return 0;
    rl_log_set_level(RL_LOG_ERROR + 1);
    id = (input[0] & 1) ? RL_EVENT_NO_ID : (int64_t)input[0] * 1000003;
    ++at;
    bytes = part(&at, end, &len);
    if (len >= sizeof(name))
        len = sizeof(name) - 1;
    memcpy(name, bytes, len);
    name[len] = '\0';

    /* The subject, as the stream's hello carries it (when the bytes are a valid string at all). */
    bytes = part(&at, end, &len);
    subject = json_stringn((const char *)bytes, len);
    if (subject != NULL) {
        data =
            json_pack("{s:O, s:I, s:I}", "user_id", subject, "ts", (json_int_t)len, "heartbeat_ms", (json_int_t)25000);
        encode(id, name, data);
        encode(id, "hello", data);
        json_decref(data);
        json_decref(subject);
    }

    /* The payload: as JSON when it parses, and as a string a client or bridge sent. */
    bytes = part(&at, end, &len);
    payload = json_loadb((const char *)bytes, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (payload != NULL) {
        encode(id, "message_delta", payload);
        json_decref(payload);
    }
    payload = json_stringn((const char *)bytes, len);
    if (payload != NULL) {
        data = json_pack("{s:O}", "delta", payload);
        encode(id, name, data);
        json_decref(data);
        json_decref(payload);
    }
    encode(id, name, NULL);
    return 0;
}
