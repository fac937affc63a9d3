#include <stdio.h>
#include <stdlib.h>

#include "common/error.h"
#include "relay/core/updates.h"
#include "relay/core/views.h"

int rl_update_append(rl_txn_t *txn, const char *installation_id, rl_update_t type, const char *session_id,
                     const char *interaction_id, json_t *payload, int64_t now, int64_t *update_id)
{
    rl_update_row_t row = {installation_id, 0, rl_update_name(type), session_id, interaction_id, NULL, now};
    char *text = payload != NULL ? json_dumps(payload, JSON_COMPACT) : NULL;
    int result;

    json_decref(payload);
    if (text == NULL)
        return RL_E_INTERNAL;
    row.payload = text;
    result = RL_TXN(txn, update_append, &row);
    free(text);
    if (result == 0)
        *update_id = row.update_id;
    return result == RL_E_NOT_FOUND ? RL_E_INSTALLATION_NOT_FOUND : result;
}

/*
 * The session as updates show it. issue 26: an encrypted session's title is
 * its envelope (title_ct); model is only said when set. encrypted is always
 * said, false too: relay-bridge reports files in clear only for a session
 * the relay said is plain, never merely because it holds no key for it.
 */
static json_t *session_part(const rl_session_row_t *session)
{
    json_t *part = json_pack("{s:s, s:s?, s:b}", "id", session->id, "title", session->encrypted ? NULL : session->title,
                             "encrypted", session->encrypted);

    if (session->encrypted) {
        if (session->title != NULL)
            json_object_set_new(part, "title_ct", json_string(session->title));
    }
    if (session->model != NULL)
        json_object_set_new(part, "model", json_string(session->model));
    /* issue 36: agent, project (project_ct and no project in an encrypted session), resume: null when absent. */
    rl_view_session_agent(part, session);
    if (session->encrypted)
        json_object_del(part, "project");
    return part;
}

json_t *rl_update_session_started(const rl_session_row_t *session)
{
    return json_pack("{s:o}", "session", session_part(session));
}

json_t *rl_update_session_message(const rl_session_row_t *session, json_t *message, const char *thought_level)
{
    json_t *update = json_pack("{s:o, s:{s:O, s:O, s:O, s:O, s:s}}", "session", session_part(session), "message",
                               "message_id", json_object_get(message, "message_id"), "text",
                               json_object_get(message, "text"), "attachments", json_object_get(message, "attachments"),
                               "reply_to", json_object_get(message, "reply_to"), "thought_level", thought_level);

    /* authors' wire: the bridge reads message.id and message.text_ct. */
    if (json_object_get(message, "text_ct") != NULL) {
        json_t *part = json_object_get(update, "message");
        json_object_set(part, "text_ct", json_object_get(message, "text_ct"));
        json_object_set(part, "id", json_object_get(message, "message_id"));
    }
    return update;
}

json_t *rl_update_session_cancelled(const char *interaction_id)
{
    return interaction_id != NULL ? json_pack("{s:s}", "interaction_id", interaction_id) : json_object();
}

json_t *rl_update_approval_resolved(const char *approval_id, const char *decision, const char *scope,
                                    const char *scope_value)
{
    return json_pack("{s:s, s:s, s:s*, s:s*}", "approval_id", approval_id, "decision", decision, "scope", scope,
                     "scope_value", scope_value);
}

json_t *rl_update_approval_expired(const char *approval_id)
{
    return json_pack("{s:s}", "approval_id", approval_id);
}

void rl_update_topic(const char *installation_id, char *out, size_t outsz)
{
    snprintf(out, outsz, "installation:%s", installation_id);
}

void rl_updates_notify(rl_bus_t *bus, const char *installation_id, int64_t update_id)
{
    char topic[96];

    rl_update_topic(installation_id, topic, sizeof(topic));
    rl_bus_signal(bus, topic, json_pack("{s:s, s:I}", "type", "updates", "update_id", (json_int_t)update_id));
}
