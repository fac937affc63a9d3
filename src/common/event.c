#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/event.h"
#include "common/log.h"

/* First allocation of a record: a typical event fits, larger ones grow by doubling. */
#define FRAME_INITIAL 512

struct frame_writer {
    rl_blob_t *blob;
    size_t capacity; /* bytes available in blob->bytes */
};

/* Appends to the record, keeping room for the closing "\n\n" and a NUL. */
static int frame_append(const char *bytes, size_t len, void *arg)
{
    struct frame_writer *writer = arg;
    size_t needed = writer->blob->len + len + 3;

    if (needed < len)
        return -1;
    if (needed > writer->capacity) {
        size_t capacity = writer->capacity;
        rl_blob_t *grown;
        while (capacity < needed) {
            if (capacity > SIZE_MAX / 2)
                return -1;
            capacity *= 2;
        }
        grown = realloc(writer->blob, sizeof(*grown) + capacity);
        if (grown == NULL)
            return -1;
        writer->blob = grown;
        writer->capacity = capacity;
    }
    memcpy(writer->blob->bytes + writer->blob->len, bytes, len);
    writer->blob->len += len;
    return 0;
}

/* Event names are ours, but a name that could end its line early must never reach a client. */
int rl_event_name_valid(const char *name, size_t len)
{
    size_t i;

    if (name == NULL || len == 0 || len > RL_EVENT_NAME_MAX)
        return 0;
    for (i = 0; i < len; ++i) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-'))
            return 0;
    }
    return 1;
}

/* Starts the record up to "data: " in a new blob with room for capacity bytes; 0, or -1 when out of memory. */
static int frame_open(struct frame_writer *writer, size_t capacity, int64_t id, const char *name, size_t name_len)
{
    char id_line[32];
    int id_len = 0, result;

    /* "id: <id>\n" by hand: every event of every stream passes here, and snprintf showed in the profile. */
    if (id != RL_EVENT_NO_ID) {
        char digits[24];
        size_t n = 0;
        unsigned long long magnitude = id < 0 ? 0ULL - (unsigned long long)id : (unsigned long long)id;
        do {
            digits[n++] = (char)('0' + magnitude % 10);
            magnitude /= 10;
        } while (magnitude != 0);
        memcpy(id_line, "id: ", 4);
        id_len = 4;
        if (id < 0)
            id_line[id_len++] = '-';
        while (n > 0)
            id_line[id_len++] = digits[--n];
        id_line[id_len++] = '\n';
    }
    writer->capacity = capacity;
    writer->blob = malloc(sizeof(*writer->blob) + writer->capacity);
    if (writer->blob == NULL)
        return -1;
    writer->blob->refs = 1;
    writer->blob->len = 0;
    result = frame_append(id_line, (size_t)id_len, writer);
    if (result == 0)
        result = frame_append("event: ", 7, writer);
    if (result == 0)
        result = frame_append(name, name_len, writer);
    if (result == 0)
        result = frame_append("\ndata: ", 7, writer);
    return result;
}

static rl_blob_t *frame_close(struct frame_writer *writer, int result, const char *name)
{
    if (writer->blob == NULL || result != 0) {
        rl_log_fields(RL_LOG_ERROR,
                      json_pack("{s:s, s:s}", "msg", "an event could not be encoded; it is not sent", "event", name));
        free(writer->blob);
        return NULL;
    }
    /* frame_append always leaves room for these three bytes. */
    memcpy(writer->blob->bytes + writer->blob->len, "\n\n", 3);
    writer->blob->len += 2;
    return writer->blob;
}

rl_blob_t *rl_event_frame(int64_t id, const char *name, const json_t *data)
{
    struct frame_writer writer;
    int result;

    if (name == NULL || !rl_event_name_valid(name, strlen(name))) {
        rl_log_error("refusing to encode an event whose name is not a plain token");
        return NULL;
    }
    result = frame_open(&writer, FRAME_INITIAL, id, name, strlen(name));
    if (result == 0)
        result = data != NULL ? json_dump_callback(data, frame_append, &writer, JSON_COMPACT | JSON_ENCODE_ANY)
                              : frame_append("{}", 2, &writer);
    return frame_close(&writer, result, name);
}

rl_blob_t *rl_event_frame_text(int64_t id, const char *name, size_t name_len, const char *payload, size_t payload_len)
{
    struct frame_writer writer;
    int result;

    if (!rl_event_name_valid(name, name_len) || !rl_event_payload_valid(payload, payload_len)) {
        rl_log_error("refusing to encode an event whose name or payload could break its record");
        return NULL;
    }
    /* Exactly what the record needs: the id line, two labels, name, payload, "\n\n" and a NUL. */
    result = frame_open(&writer, 32 + 14 + name_len + payload_len + 3, id, name, name_len);
    if (result == 0)
        result = frame_append(payload, payload_len, &writer);
    return frame_close(&writer, result, "(carried by the bus)");
}

int rl_event_payload_valid(const char *payload, size_t len)
{
    return len > 0 && memchr(payload, '\n', len) == NULL && memchr(payload, '\r', len) == NULL;
}
