/*
 * A user event's Server-Sent Events record, the one encoder of it. The bus
 * carries an event as (id, name, payload) and every node builds the record
 * once, when the event arrives, with these functions; the record is then one
 * immutable blob shared by every stream and the replay ring of that node.
 * The heartbeat, hello and resync records of a stream are built here too.
 * Any thread (logging is thread-safe).
 */
#ifndef RL_COMMON_EVENT_H
#define RL_COMMON_EVENT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/blob.h"

/* The id of a record that carries no "id:" line (hello, heartbeat). */
#define RL_EVENT_NO_ID (-1)
/* Longest event name accepted. */
#define RL_EVENT_NAME_MAX 64

/* Whether name is 1 to RL_EVENT_NAME_MAX bytes of letters, digits, '_', '.' and '-'. */
int rl_event_name_valid(const char *name, size_t len);
/* Whether len bytes can be an event's data line: not empty, no line break (which would end it early). */
int rl_event_payload_valid(const char *payload, size_t len);

/*
 * Encodes one event record:
 *   "id: <id>\n" (left out when id is RL_EVENT_NO_ID), "event: <name>\n",
 *   "data: <data as compact JSON>\n\n".
 * The JSON encoder escapes every control character, so whatever strings data
 * holds (quotes, newlines, a client's text) the record has exactly one data
 * line and the client parses back the same value. name must pass
 * rl_event_name_valid; data NULL encodes {}. data is only read.
 *
 * Returns a new blob with one reference, or NULL with the reason logged when
 * the name is refused, data cannot be encoded, or memory runs out: a record
 * is never truncated.
 */
rl_blob_t *rl_event_frame(int64_t id, const char *name, const json_t *data);

/*
 * The same record from a payload already encoded as compact JSON (as the
 * bus carries it between nodes): payload is copied as it is, and refused
 * (NULL, logged) when it is empty or holds a line break, which would end the
 * data line early; name as above, of name_len bytes.
 */
rl_blob_t *rl_event_frame_text(int64_t id, const char *name, size_t name_len, const char *payload, size_t payload_len);

#endif
