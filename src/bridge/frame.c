#include <stdio.h>
#include <string.h>

#include "bridge/frame.h"

static const char *opt_str(json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s != NULL ? s : "";
}

int rl_frame_parse(const char *text, size_t len, rl_frame_t *frame, char *err, size_t errsz)
{
    json_error_t jerr;
    const char *type;
    json_t *update;

    memset(frame, 0, sizeof(*frame));
    frame->root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(frame->root)) {
        snprintf(err, errsz, "frame is not a JSON object");
        goto fail;
    }
    type = json_string_value(json_object_get(frame->root, "type"));
    if (type == NULL) {
        snprintf(err, errsz, "frame has no type");
        goto fail;
    }
    if (strcmp(type, "ready") == 0) {
        frame->type = RL_FRAME_READY;
        frame->installation_id = opt_str(frame->root, "installation_id");
        return 0;
    }
    if (strcmp(type, "ping") == 0) {
        frame->type = RL_FRAME_PING;
        return 0;
    }
    if (strcmp(type, "update") != 0) {
        frame->type = RL_FRAME_OTHER;
        return 0;
    }
    frame->type = RL_FRAME_UPDATE;
    update = json_object_get(frame->root, "update");
    frame->update_id = json_string_value(json_object_get(update, "update_id"));
    frame->update_type = json_string_value(json_object_get(update, "type"));
    frame->payload = json_object_get(update, "payload");
    if (frame->update_id == NULL || frame->update_id[0] == '\0' || strlen(frame->update_id) > 63 ||
        frame->update_type == NULL || !json_is_object(frame->payload)) {
        snprintf(err, errsz, "update frame lacks update_id, type or payload");
        goto fail;
    }
    frame->session_id = opt_str(update, "session_id");
    frame->interaction_id = opt_str(update, "interaction_id");
    return 0;
fail:
    json_decref(frame->root);
    memset(frame, 0, sizeof(*frame));
    return -1;
}

void rl_frame_free(rl_frame_t *frame)
{
    json_decref(frame->root);
    memset(frame, 0, sizeof(*frame));
}

/* One row per agent line type: its name and the string fields it must carry. */
static const struct line_rule {
    const char *name;
    rl_agent_line_type_t type;
    int turn; /* needs session_id and interaction_id */
    const char *required[4];
} line_rules[] = {
    {"manifest", RL_LINE_MANIFEST, 0, {NULL}},
    {"delta", RL_LINE_DELTA, 1, {"text", NULL}},
    {"end", RL_LINE_END, 1, {NULL}},
    {"task_start", RL_LINE_TASK_START, 1, {"task_id", "kind", NULL}},
    {"task_progress", RL_LINE_TASK_PROGRESS, 1, {"task_id", NULL}},
    {"task_finish", RL_LINE_TASK_FINISH, 1, {"task_id", "status", NULL}},
    {"approval_request", RL_LINE_APPROVAL_REQUEST, 1, {"action", "title", NULL}},
    /* ours (issue 28): the agent asks the user's phone for its location or a photo. */
    {"capability_request", RL_LINE_CAPABILITY_REQUEST, 1, {"capability", "reason", NULL}},
    {"log", RL_LINE_LOG, 0, {"text", NULL}},
};

int rl_agent_line_parse(const char *line, size_t len, rl_agent_line_t *out, char *err, size_t errsz)
{
    json_error_t jerr;
    const char *type;
    size_t i, k;

    memset(out, 0, sizeof(*out));
    out->root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(out->root)) {
        snprintf(err, errsz, "not a JSON object (%s)", out->root == NULL ? jerr.text : "wrong type");
        goto fail;
    }
    type = json_string_value(json_object_get(out->root, "type"));
    if (type == NULL) {
        snprintf(err, errsz, "no \"type\"");
        goto fail;
    }
    for (i = 0; i < sizeof(line_rules) / sizeof(line_rules[0]); i++) {
        const struct line_rule *rule = &line_rules[i];
        if (strcmp(rule->name, type) != 0)
            continue;
        out->type = rule->type;
        out->session_id = opt_str(out->root, "session_id");
        out->interaction_id = opt_str(out->root, "interaction_id");
        if (rule->turn && (out->session_id[0] == '\0' || out->interaction_id[0] == '\0')) {
            snprintf(err, errsz, "\"%s\" needs session_id and interaction_id", type);
            goto fail;
        }
        for (k = 0; rule->required[k] != NULL; k++) {
            if (!json_is_string(json_object_get(out->root, rule->required[k]))) {
                snprintf(err, errsz, "\"%s\" needs the string \"%s\"", type, rule->required[k]);
                goto fail;
            }
        }
        if (out->type == RL_LINE_MANIFEST && !json_is_array(json_object_get(out->root, "tools"))) {
            snprintf(err, errsz, "\"manifest\" needs the array \"tools\"");
            goto fail;
        }
        return 0;
    }
    snprintf(err, errsz, "unknown type \"%.40s\"", type);
fail:
    json_decref(out->root);
    memset(out, 0, sizeof(*out));
    return -1;
}

void rl_agent_line_free(rl_agent_line_t *line)
{
    json_decref(line->root);
    memset(line, 0, sizeof(*line));
}
