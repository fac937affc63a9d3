/*
 * A session's timeline: its messages, tasks and approvals merged in the
 * order they happened, newest first (docs/api.md "Timeline").
 *
 * Order. Items are ordered by (at, kind, key), where at is the item's
 * created_at, kind ranks message < task < approval (docs/api.md "Timeline": the stable
 * order of ties), and key breaks the remaining ties within a kind: a
 * message's insertion (the order its session's history shows), a task's
 * task_id and an approval's id, bytewise. Newest first is the exact reverse.
 *
 * Reads. One operation reads the three kinds with three bounded reads
 * (limit + 1 rows each, store.h *_by_time) and merges them here. One query
 * over a UNION of three tables would return rows of three shapes, which
 * neither backend's row readers nor the store's typed rows know; three
 * reads keep each backend to plain indexed range reads on
 * (session_id, created_at, key), and cost one round trip each on
 * PostgreSQL for a page, like the history's two.
 *
 * Cursor. An item's cursor is base64url of "<k>:<at>:<key>" (k is m, t or
 * a; key the message, task or approval id). Opaque to clients, checked on
 * use: it must name an item of this very session with that created_at, so
 * another session's cursor, or a forged one, is 400 like a malformed one.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base64.h"
#include "common/error.h"
#include "relay/media/attachments.h"
#include "relay/turn/deltas.h"
#include "relay/turn/messages.h"
#include "relay/core/ops.h"
#include "relay/core/feature.h"
#include "relay/sessions/context.h"
#include "relay/sessions/sessions.h"
#include "relay/core/text.h"
#include "relay/sessions/timeline.h"
#include "relay/core/views.h"

/*
 * A page stops taking items once their texts and JSON pass this, as the
 * history does, so that a page is bounded whatever limit asks: at most
 * this plus one item (a message of --max-message-bytes, or a task whose
 * four JSON values each came in a body of at most 1 MB).
 */
#define PAGE_BYTES (4 * 1024 * 1024)
/* A task id is at most 256 characters, so 1 KiB of UTF-8; the rest is the kind and a timestamp. */
#define KEY_MAX    1024
#define RAW_MAX    (KEY_MAX + 32)
#define CURSOR_MAX RL_BASE64URL_ENCODED_SIZE(RAW_MAX)

typedef enum kind { KIND_MESSAGE, KIND_TASK, KIND_APPROVAL, KINDS } kind_t;

/* By rank: the order of ties in at, oldest first. */
static const struct {
    char letter;      /* in cursors */
    const char *name; /* the item's type, and the key of its object */
} kinds[KINDS] = {
    [KIND_MESSAGE] = {'m', "message"},
    [KIND_TASK] = {'t', "task"},
    [KIND_APPROVAL] = {'a', "approval"},
};

typedef struct cursor {
    kind_t kind;
    int64_t at;
    const char *key;
} cursor_t;

struct timeline {
    rl_op_t op;
    const char *user_id, *session_id;
    int limit;
    int has_cursor;
    cursor_t cursor;
};

/* ---- cursors ---- */

/* The cursor of an item, into out (CURSOR_MAX bytes). */
static void cursor_encode(kind_t kind, int64_t at, const char *key, char *out)
{
    char raw[RAW_MAX];
    int len = snprintf(raw, sizeof(raw), "%c:%" PRId64 ":%s", kinds[kind].letter, at, key);

    if (len < 0 || (size_t)len >= sizeof(raw))
        len = (int)strlen(raw);
    rl_base64url_encode(raw, (size_t)len, out);
}

/* Parses a cursor; its key is copied into the arena of op. 0, or -1 when it is malformed. */
static int cursor_decode(struct timeline *op, const char *text, cursor_t *out)
{
    unsigned char raw[CURSOR_MAX * 3 / 4 + 3];
    long len = strlen(text) < CURSOR_MAX ? rl_base64url_decode(text, strlen(text), raw) : -1;
    char *at_end;
    size_t k;

    if (len < 5 || memchr(raw, '\0', (size_t)len) != NULL)
        return -1;
    raw[len] = '\0';
    for (k = 0; k < KINDS && kinds[k].letter != (char)raw[0]; ++k)
        ;
    if (k == KINDS || raw[1] != ':' || raw[2] < '0' || raw[2] > '9')
        return -1;
    out->kind = (kind_t)k;
    out->at = strtoll((const char *)raw + 2, &at_end, 10);
    if (*at_end != ':' || at_end[1] == '\0' || strlen(at_end + 1) > KEY_MAX)
        return -1;
    out->key = rl_op_str(op, at_end + 1);
    return 0;
}

/* In a transaction: whether the cursor names an item of the session (the one it was made from). */
static int cursor_check(rl_txn_t *txn, const rl_session_row_t *session, const cursor_t *cursor)
{
    rl_message_row_t message;
    rl_task_row_t task;
    rl_approval_row_t approval;
    const char *of = NULL;
    int64_t at = 0;
    int result;

    if (cursor->kind == KIND_MESSAGE) {
        if ((result = RL_TXN(txn, message_get, cursor->key, &message)) == 0)
            of = message.session_id, at = message.created_at;
    } else if (cursor->kind == KIND_TASK) {
        if ((result = RL_TXN(txn, task_get, session->installation_id, cursor->key, &task)) == 0)
            of = task.session_id, at = task.created_at;
    } else {
        if ((result = RL_TXN(txn, approval_get, session->installation_id, cursor->key, &approval)) == 0)
            of = approval.session_id, at = approval.created_at;
    }
    if (result == RL_E_NOT_FOUND || (result == 0 && (strcmp(of, session->id) != 0 || at != cursor->at)))
        return RL_E_INVALID_REQUEST;
    return result;
}

/*
 * The bound of kind's read for items older than the cursor: those created
 * before *at, and those created at *at whose key sorts before *key (NULL:
 * none). An older kind's items at the cursor's instant all come before it,
 * a newer kind's none.
 */
static void bound_of(const struct timeline *op, kind_t kind, int64_t *at, const char **key)
{
    *at = INT64_MAX;
    *key = NULL;
    if (!op->has_cursor)
        return;
    *at = op->cursor.at;
    if (kind == op->cursor.kind)
        *key = op->cursor.key;
    else if (kind < op->cursor.kind)
        ++*at;
}

/* ---- the read ---- */

static size_t text_size(const char *text)
{
    return text != NULL ? strlen(text) : 0;
}

/* One row of kind as a timeline item; *bytes grows by what it holds. NULL with *result set on an error. */
static json_t *item_of(rl_txn_t *txn, kind_t kind, const void *row, int encrypted, size_t *bytes, int *result)
{
    char cursor[CURSOR_MAX];
    json_t *view, *item;
    const char *key;
    int64_t at;

    if (kind == KIND_MESSAGE) {
        const rl_message_row_t *message = row;
        const char *text;
        size_t len;
        if ((*result = rl_text_of(txn, message, &text, &len)) != 0)
            return NULL;
        view = rl_view_message(message, text, len);
        if (encrypted)
            rl_view_seal_message(view);
        *bytes += len;
        key = message->id, at = message->created_at;
    } else if (kind == KIND_TASK) {
        const rl_task_row_t *task = row;
        view = rl_view_task(task);
        if (encrypted)
            rl_view_seal_task(view);
        *bytes +=
            text_size(task->args) + text_size(task->partial_result) + text_size(task->result) + text_size(task->error);
        key = task->task_id, at = task->created_at;
    } else {
        const rl_approval_row_t *approval = row;
        view = rl_view_approval(approval);
        /* The view is the user's own; the user id says nothing to them. */
        json_object_del(view, "user_id");
        *bytes += text_size(approval->request);
        key = approval->id, at = approval->created_at;
    }
    cursor_encode(kind, at, key, cursor);
    item = json_pack("{s:s, s:I, s:s, s:o}", "type", kinds[kind].name, "at", (json_int_t)at, "cursor", cursor,
                     kinds[kind].name, view);
    *result = item != NULL ? 0 : RL_E_INTERNAL;
    return item;
}

static int timeline_run(rl_txn_t *txn, rl_store_op_t *base)
{
    static const size_t row_size[KINDS] = {sizeof(rl_message_row_t), sizeof(rl_task_row_t), sizeof(rl_approval_row_t)};
    struct timeline *op = (void *)base;
    rl_session_row_t session;
    void *rows[KINDS];
    size_t count[KINDS], next[KINDS] = {0}, bytes = 0, taken = 0;
    json_t *items;
    char last_cursor[CURSOR_MAX] = "";
    int k, more = 0, result = rl_session_of_user(txn, op->user_id, op->session_id, &session);

    if (result != 0)
        return result;
    if (session.deleted_at != RL_NO_TIME)
        return RL_E_SESSION_NOT_FOUND;
    if (op->has_cursor && (result = cursor_check(txn, &session, &op->cursor)) != 0)
        return result;
    /* One row more than asked of each kind tells whether there is another page. */
    for (k = 0; k < KINDS; ++k) {
        int64_t at;
        const char *key;
        bound_of(op, (kind_t)k, &at, &key);
        if (k == KIND_MESSAGE)
            result = RL_TXN(txn, messages_by_time, op->session_id, at, key, op->limit + 1,
                            (rl_message_row_t **)&rows[k], &count[k]);
        else if (k == KIND_TASK)
            result = RL_TXN(txn, tasks_by_time, op->session_id, at, key, op->limit + 1, (rl_task_row_t **)&rows[k],
                            &count[k]);
        else
            result = RL_TXN(txn, approvals_by_time, op->session_id, at, key, op->limit + 1,
                            (rl_approval_row_t **)&rows[k], &count[k]);
        if (result != 0)
            return result;
    }
    items = json_array();
    while (taken < (size_t)op->limit && (taken == 0 || bytes < PAGE_BYTES)) {
        int pick = -1;
        int64_t pick_at = 0;
        json_t *item;
        /* Each kind's rows are newest first: the newest head wins; a tie in at goes to the later kind. */
        for (k = 0; k < KINDS; ++k) {
            const char *row = (const char *)rows[k] + next[k] * row_size[k];
            int64_t at;
            if (next[k] >= count[k])
                continue;
            at = k == KIND_MESSAGE ? ((const rl_message_row_t *)row)->created_at
                 : k == KIND_TASK  ? ((const rl_task_row_t *)row)->created_at
                                   : ((const rl_approval_row_t *)row)->created_at;
            if (pick < 0 || at >= pick_at)
                pick = k, pick_at = at;
        }
        if (pick < 0)
            break;
        item = item_of(txn, (kind_t)pick, (const char *)rows[pick] + next[pick] * row_size[pick], session.encrypted,
                       &bytes, &result);
        if (item == NULL) {
            json_decref(items);
            return result;
        }
        snprintf(last_cursor, sizeof(last_cursor), "%s", json_string_value(json_object_get(item, "cursor")));
        json_array_append_new(items, item);
        ++next[pick];
        ++taken;
    }
    for (k = 0; k < KINDS; ++k)
        if (next[k] < count[k])
            more = 1;
    op->op.value = json_pack("{s:o, s:b, s:o}", "items", items, "has_more", more, "next_cursor",
                             more && taken > 0 ? json_string(last_cursor) : json_null());
    return op->op.value != NULL ? 0 : RL_E_INTERNAL;
}

static const rl_store_op_type_t timeline_type = RL_OP_TYPE(timeline_list, 0, timeline_run);

static void on_timeline(rl_store_op_t *base)
{
    struct timeline *op = (void *)base;
    rl_call_t *call = base->arg;

    if (base->result == RL_E_INVALID_REQUEST) {
        rl_call_fail_full(
            call, RL_E_INVALID_REQUEST, "the cursor is not an item of this session",
            json_pack("[{s:s, s:s, s:s}]", "path", "before", "code", "invalid_string", "message", "Unknown cursor"),
            NULL);
    } else if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
    } else {
        const rl_sessions_ctx_t *ctx = rl_feature_of(call, RL_FEATURE_SESSIONS);
        json_t *item;
        size_t i;
        json_array_foreach(json_object_get(op->op.value, "items"), i, item)
        {
            json_t *message = json_object_get(item, "message");
            if (message != NULL)
                rl_attachments_sign(ctx->media, json_object_get(message, "attachments"));
        }
        rl_call_reply(call, json_incref(op->op.value));
    }
    rl_call_release(call);
}

int rl_timeline_list(rl_call_t *call)
{
    const rl_sessions_ctx_t *ctx = rl_feature_of(call, RL_FEATURE_SESSIONS);
    char session_id[72], before[CURSOR_MAX];
    struct timeline *op;
    int limit, result = rl_path_id(call, 0, session_id, sizeof(session_id), RL_E_SESSION_NOT_FOUND);

    if (result != 0)
        return result;
    if (rl_page_query(call, &limit, before, sizeof(before)) != 0)
        return 0;
    op = rl_op_new(&timeline_type, sizeof(*op));
    op->user_id = rl_op_str(op, call->principal);
    op->session_id = rl_op_str(op, session_id);
    op->limit = limit;
    if (before[0] != '\0') {
        if (cursor_decode(op, before, &op->cursor) != 0) {
            rl_store_op_free(&op->op.base);
            rl_call_fail_full(
                call, RL_E_INVALID_REQUEST, "the cursor is malformed",
                json_pack("[{s:s, s:s, s:s}]", "path", "before", "code", "invalid_string", "message", "Invalid cursor"),
                NULL);
            return 0;
        }
        op->has_cursor = 1;
    }
    /* Deltas answered but not yet persisted are part of the timeline: they land before this read. */
    rl_deltas_flush(ctx->deltas);
    rl_op_submit_for(call, op, on_timeline);
    return 0;
}
