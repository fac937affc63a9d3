/* The acp adapter: JSON-RPC with the agent (acp.h). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "bridge/acp.h"
#include "common/log.h"

/* ---- writing to the agent --------------------------------------------------------------------- */

/* Queues one message (stolen) for the agent; dropped when no agent runs. */
void rl_acp__send_msg(struct rl_agent *a, json_t *msg)
{
    char *text = msg != NULL ? json_dumps(msg, JSON_COMPACT) : NULL;
    size_t len;

    json_decref(msg);
    if (text == NULL)
        return;
    /* The message goes out with its newline in place of the NUL, in one append that fits whole or not at all. */
    len = strlen(text);
    text[len] = '\n';
    if (rl_child_send(a->child, text, len + 1) == RL_CHILD_E_FULL) {
        rl_log(RL_LOG_ERROR, "the acp agent does not read its input: stopping it");
        rl_child_signal(a->child, SIGKILL);
    }
    free(text);
}

json_int_t rl_acp__request(struct rl_agent *a, request_kind_t kind, const char *method, json_t *params, session_t *s,
                           prompt_t *p)
{
    request_t *r = calloc(1, sizeof(*r));

    if (r == NULL) {
        json_decref(params);
        return 0;
    }
    r->id = ++a->next_id;
    r->kind = kind;
    r->session = s;
    r->prompt = p;
    r->next = a->requests;
    a->requests = r;
    rl_acp__send_msg(a, rl_jsonrpc_request(r->id, method, params));
    return r->id;
}

void rl_acp__request_free(request_t *r)
{
    json_decref(r->arg);
    free(r);
}

request_t *rl_acp__request_by_id(struct rl_agent *a, json_int_t id)
{
    request_t *r;

    for (r = a->requests; r != NULL; r = r->next)
        if (r->id == id)
            return r;
    return NULL;
}

void rl_acp__answer_error(struct rl_agent *a, json_t *id, int code, const char *message)
{
    rl_acp__send_msg(a, rl_jsonrpc_error(id, code, message));
}

/* ---- the agent's messages --------------------------------------------------------------------- */

/* Requests from the agent this client serves; any other is answered -32601 (JSON-RPC: method not found). */
static const struct {
    const char *method;
    void (*serve)(struct rl_agent *a, json_t *id, json_t *params);
} served[] = {
    {"session/request_permission", rl_acp__on_permission},
    {"fs/read_text_file", rl_acp__on_read},
    {"fs/write_text_file", rl_acp__on_write},
};

static void on_response(struct rl_agent *a, rl_jsonrpc_msg_t *msg)
{
    request_t **rp, *r = NULL;

    for (rp = &a->requests; json_is_integer(msg->id) && *rp != NULL; rp = &(*rp)->next) {
        if ((*rp)->id == json_integer_value(msg->id)) {
            r = *rp;
            *rp = r->next;
            break;
        }
    }
    if (r == NULL) {
        rl_log(RL_LOG_DEBUG, "acp agent answered a request we did not send");
        return;
    }
    switch (r->kind) {
    case REQ_INITIALIZE:
        rl_acp__on_initialized(a, msg);
        break;
    case REQ_AUTHENTICATE:
        rl_acp__on_authenticated(a, msg);
        break;
    case REQ_NEW:
    case REQ_LOAD:
    case REQ_RESUME:
        rl_acp__on_session_opened(a, r, msg);
        break;
    case REQ_PROMPT:
        rl_acp__on_prompted(a, r, msg);
        break;
    case REQ_SET:
        rl_acp__on_config_set(a, r, msg);
        break;
    case REQ_LIST:
        rl_acp__on_listed(a, r, msg);
        break;
    case REQ_CLOSE:
        if (msg->error != NULL)
            rl_log(RL_LOG_INFO, "acp agent did not close a session: %s", rl_jsonrpc_error_message(msg));
        break;
    }
    rl_acp__request_free(r);
}

void rl_acp__on_line(void *user, const char *line, size_t len)
{
    struct rl_agent *a = user;
    rl_jsonrpc_msg_t msg;
    json_t *bad_id = NULL;
    char err[160];
    size_t i;
    int code;

    if (len == 0)
        return;
    code = rl_jsonrpc_parse(line, len, &msg, &bad_id, err, sizeof(err));
    if (code != 0) {
        rl_log(RL_LOG_WARN, "acp agent: a message ignored: %s", err);
        /* spec (JSON-RPC 2.0 §5.1): a parse error or an invalid request is answered, with the id when known. */
        rl_acp__answer_error(a, bad_id, code, code == RL_JSONRPC_PARSE_ERROR ? "Parse error" : "Invalid Request");
        json_decref(bad_id);
        return;
    }
    switch (msg.kind) {
    case RL_JSONRPC_RESPONSE:
        on_response(a, &msg);
        break;
    case RL_JSONRPC_NOTIFICATION:
        if (strcmp(msg.method, "session/update") == 0 && json_is_object(msg.params))
            rl_acp__on_update(a, msg.params);
        else
            rl_log(RL_LOG_DEBUG, "acp agent: notification %s ignored", msg.method);
        break;
    case RL_JSONRPC_REQUEST:
        for (i = 0; i < sizeof(served) / sizeof(served[0]); i++) {
            if (strcmp(served[i].method, msg.method) == 0) {
                if (json_is_object(msg.params))
                    served[i].serve(a, msg.id, msg.params);
                else
                    rl_acp__answer_error(a, msg.id, RL_JSONRPC_INVALID_PARAMS, "params must be an object");
                break;
            }
        }
        if (i == sizeof(served) / sizeof(served[0])) {
            rl_log(RL_LOG_INFO, "acp agent asked for %.80s, which relay-bridge does not serve", msg.method);
            rl_acp__answer_error(a, msg.id, RL_JSONRPC_METHOD_NOT_FOUND, "Method not found");
        }
        break;
    }
    rl_jsonrpc_msg_free(&msg);
}
