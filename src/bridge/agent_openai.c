/*
 * The openai adapter: each user message is one streaming request to an
 * OpenAI-compatible POST {URL}/v1/chat/completions ("stream": true), made by
 * a job of the bridge's queue (jobs.h) so that the loop never blocks. The job
 * turns the server-sent events into lines of the jsonl protocol (delta,
 * task_start, task_finish, end) posted to the loop, which handles them
 * exactly like a jsonl agent's. Each session keeps its history (user
 * and assistant turns) in memory; usage is reported in sendMessageEnd; tool
 * calls the model makes become tasks (kind "tool", named after the
 * function, args parsed from its arguments) that finish as "completed" with
 * the call recorded, since this adapter has no tools to run.
 * OPENAI_API_KEY, when set, is sent as the bearer token; OPENAI_MODEL names
 * the model (default "default").
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bridge/agent.h"
#include "common/jobs.h"
#include "bridge/jsonl_reader.h"
#include "bridge/reply.h"
#include "client/client.h"
#include "common/buf.h"
#include "common/log.h"

#define MAX_TOOL_CALLS 16
#define MAX_HISTORY    200
/*
 * The reply kept for the history: relayd refuses a message text longer than
 * RL_REPLY_TEXT_MAX characters, so the model server's stream is kept to that
 * many bytes a character at most; past it the history holds the reply's start.
 */
#define MAX_REPLY (4 * (size_t)RL_REPLY_TEXT_MAX)

typedef struct history {
    struct history *next;
    char session_id[64];
    json_t *messages; /* array of {role, content} */
} history_t;

typedef struct call {
    rl_job_t job; /* first: the job is the call */
    struct call *next;
    struct rl_agent *agent;
    char session_id[64], interaction_id[64];
    json_t *request; /* the body, built on the loop thread */
    int cancelled;   /* atomic */
    /* The job's thread only. */
    rl_jsonl_reader_t sse;
    rl_buf_t reply; /* the streamed text, capped at MAX_REPLY */
    json_t *usage;
    char finish_reason[32];
    json_t *tools[MAX_TOOL_CALLS]; /* {id, name, arguments} accumulated by index */
} call_t;

struct rl_agent {
    rl_bridge_t *bridge;
    char url[1024];
    char model[128];
    char auth[512];
    pthread_mutex_t lock; /* histories */
    history_t *histories;
    call_t *calls;
    rl_jsonl_reader_t reader;
};

static history_t *history_for(struct rl_agent *agent, const char *session_id)
{
    history_t *h;

    for (h = agent->histories; h != NULL; h = h->next)
        if (strcmp(h->session_id, session_id) == 0)
            return h;
    h = calloc(1, sizeof(*h));
    if (h == NULL)
        return NULL;
    snprintf(h->session_id, sizeof(h->session_id), "%s", session_id);
    h->messages = json_array();
    h->next = agent->histories;
    agent->histories = h;
    return h;
}

static void history_add(struct rl_agent *agent, const char *session_id, const char *role, const char *text, size_t len)
{
    history_t *h;

    pthread_mutex_lock(&agent->lock);
    h = history_for(agent, session_id);
    if (h != NULL) {
        json_array_append_new(h->messages, json_pack("{s:s, s:s%}", "role", role, "content", text, len));
        while (json_array_size(h->messages) > MAX_HISTORY)
            json_array_remove(h->messages, 0);
    }
    pthread_mutex_unlock(&agent->lock);
}

/* Posts one protocol line to the loop (call_progress). The job's thread. */
static void emit(call_t *call, json_t *line)
{
    char *text;
    size_t len;

    json_object_set_new(line, "session_id", json_string(call->session_id));
    json_object_set_new(line, "interaction_id", json_string(call->interaction_id));
    text = json_dumps(line, JSON_COMPACT);
    json_decref(line);
    if (text == NULL)
        return;
    len = strlen(text);
    text[len] = '\n';
    rl_job_post(&call->job, text, len + 1);
    free(text);
}

/* Cancelled by the user, or the bridge stops. */
static int call_over(call_t *call)
{
    return __atomic_load_n(&call->cancelled, __ATOMIC_ACQUIRE) || rl_job_stopping(&call->job);
}

static void on_event(void *user, const char *line, size_t len)
{
    call_t *call = user;
    json_t *chunk, *choice, *delta, *content, *calls, *usage;
    const char *reason;
    size_t i;

    if (len < 5 || strncmp(line, "data:", 5) != 0)
        return;
    line += 5;
    len -= 5;
    while (len > 0 && *line == ' ') {
        line++;
        len--;
    }
    if (len == 6 && strncmp(line, "[DONE]", 6) == 0)
        return;
    chunk = json_loadb(line, len, 0, NULL);
    if (chunk == NULL)
        return;
    choice = json_array_get(json_object_get(chunk, "choices"), 0);
    delta = json_object_get(choice, "delta");
    content = json_object_get(delta, "content");
    if (json_is_string(content) && json_string_length(content) > 0) {
        rl_buf_append(&call->reply, json_string_value(content), json_string_length(content));
        emit(call, json_pack("{s:s, s:O}", "type", "delta", "text", content));
    }
    calls = json_object_get(delta, "tool_calls");
    for (i = 0; i < json_array_size(calls); i++) {
        json_t *tc = json_array_get(calls, i), *fn = json_object_get(tc, "function");
        json_int_t index = json_integer_value(json_object_get(tc, "index"));
        json_t *acc;
        const char *args;
        if (index < 0 || index >= MAX_TOOL_CALLS)
            continue;
        if (call->tools[index] == NULL)
            call->tools[index] = json_pack("{s:s, s:s, s:s}", "id", "", "name", "", "arguments", "");
        acc = call->tools[index];
        if (json_is_string(json_object_get(tc, "id")))
            json_object_set(acc, "id", json_object_get(tc, "id"));
        if (json_is_string(json_object_get(fn, "name")))
            json_object_set(acc, "name", json_object_get(fn, "name"));
        args = json_string_value(json_object_get(fn, "arguments"));
        if (args != NULL) {
            char *joined = NULL;
            if (asprintf(&joined, "%s%s", json_string_value(json_object_get(acc, "arguments")), args) >= 0) {
                json_object_set_new(acc, "arguments", json_string(joined));
                free(joined);
            }
        }
    }
    reason = json_string_value(json_object_get(choice, "finish_reason"));
    if (reason != NULL)
        snprintf(call->finish_reason, sizeof(call->finish_reason), "%s", reason);
    usage = json_object_get(chunk, "usage");
    if (json_is_object(usage)) {
        json_decref(call->usage);
        call->usage = json_object();
        if (json_is_integer(json_object_get(usage, "prompt_tokens")))
            json_object_set(call->usage, "input_tokens", json_object_get(usage, "prompt_tokens"));
        if (json_is_integer(json_object_get(usage, "completion_tokens")))
            json_object_set(call->usage, "output_tokens", json_object_get(usage, "completion_tokens"));
        if (json_is_string(json_object_get(chunk, "model")))
            json_object_set(call->usage, "model", json_object_get(chunk, "model"));
        json_object_set_new(call->usage, "provider", json_string("openai-compatible"));
    }
    json_decref(chunk);
}

static size_t on_body(char *data, size_t size, size_t n, void *user)
{
    call_t *call = user;

    if (call_over(call))
        return 0;
    rl_jsonl_reader_feed(&call->sse, data, size * n, on_event, call);
    return size * n;
}

static int on_progress(void *user, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    call_t *call = user;

    (void)a, (void)b, (void)c, (void)d;
    return call_over(call) ? 1 : 0;
}

static void call_run(rl_job_t *job)
{
    call_t *call = (call_t *)job;
    struct rl_agent *agent = call->agent;
    CURL *curl = curl_easy_init();
    struct curl_slist *headers = NULL;
    char *body = json_dumps(call->request, JSON_COMPACT);
    long status = 0;
    CURLcode rc = CURLE_FAILED_INIT;
    json_t *end;
    int i;

    rl_jsonl_reader_init(&call->sse, 1024 * 1024);
    headers = curl_slist_append(headers, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Accept: text/event-stream");
    if (agent->auth[0] != '\0')
        headers = curl_slist_append(headers, agent->auth);
    if (curl != NULL && body != NULL) {
        curl_easy_setopt(curl, CURLOPT_URL, agent->url);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, call);
        curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(curl, CURLOPT_XFERINFODATA, call);
        rc = curl_easy_perform(curl);
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    }
    /* A last event without its newline still counts. */
    rl_jsonl_reader_feed(&call->sse, "\n", 1, on_event, call);
    for (i = 0; i < MAX_TOOL_CALLS; i++) {
        json_t *tc = call->tools[i], *args;
        const char *id;
        if (tc == NULL)
            continue;
        id = json_string_value(json_object_get(tc, "id"));
        args = json_loads(json_string_value(json_object_get(tc, "arguments")), 0, NULL);
        if (!json_is_object(args)) {
            json_decref(args);
            args = json_pack("{s:O}", "arguments", json_object_get(tc, "arguments"));
        }
        emit(call, json_pack("{s:s, s:s, s:s, s:O, s:o, s:s}", "type", "task_start", "task_id",
                             id != NULL && id[0] != '\0' ? id : "tool_call", "kind", "tool", "name",
                             json_object_get(tc, "name"), "args", args, "status_label", "tool call"));
        emit(call, json_pack("{s:s, s:s, s:s, s:O, s:s}", "type", "task_finish", "task_id",
                             id != NULL && id[0] != '\0' ? id : "tool_call", "status", "completed", "name",
                             json_object_get(tc, "name"), "status_label", "requested by the model"));
    }
    if (__atomic_load_n(&call->cancelled, __ATOMIC_ACQUIRE)) {
        end = json_pack("{s:s, s:s}", "type", "end", "finish_reason", "cancelled");
    } else if (rc != CURLE_OK || status < 200 || status >= 300) {
        char text[CURL_ERROR_SIZE + 96];
        if (rc != CURLE_OK)
            snprintf(text, sizeof(text), "[the model server failed: %s]", rl_client_failure_text(rc));
        else
            snprintf(text, sizeof(text), "[the model server answered HTTP %ld]", status);
        rl_log(RL_LOG_WARN, "interaction %s: %s", call->interaction_id, text);
        end = json_pack("{s:s, s:s, s:s}", "type", "end", "finish_reason", "error", "error", text);
    } else {
        history_add(agent, call->session_id, "assistant", rl_buf_str(&call->reply), call->reply.len);
        end = json_pack("{s:s, s:s}", "type", "end", "finish_reason",
                        call->finish_reason[0] != '\0' ? call->finish_reason : "stop");
        if (call->usage != NULL)
            json_object_set(end, "usage", call->usage);
    }
    emit(call, end);
    curl_slist_free_all(headers);
    if (curl != NULL)
        curl_easy_cleanup(curl);
    free(body);
}

static const rl_job_kind_t call_kind = {"model call", 0, 0};

static void on_line(void *user, const char *line, size_t len)
{
    struct rl_agent *agent = user;
    rl_agent_line_t parsed;
    char err[160];

    if (rl_agent_line_parse(line, len, &parsed, err, sizeof(err)) != 0) {
        rl_log(RL_LOG_WARN, "openai adapter line ignored: %s", err);
        return;
    }
    parsed.from = agent;
    rl_bridge_agent_line(agent->bridge, &parsed);
}

/* A line the call posted, on the loop. */
static void call_progress(rl_job_t *job, const char *bytes, size_t len)
{
    call_t *call = (call_t *)job;

    rl_jsonl_reader_feed(&call->agent->reader, bytes, len, on_line, call->agent);
}

static void call_done(rl_job_t *job)
{
    call_t *call = (call_t *)job, **p;
    int i;

    for (p = &call->agent->calls; *p != NULL; p = &(*p)->next) {
        if (*p == call) {
            *p = call->next;
            break;
        }
    }
    json_decref(call->request);
    json_decref(call->usage);
    for (i = 0; i < MAX_TOOL_CALLS; i++)
        json_decref(call->tools[i]);
    rl_jsonl_reader_free(&call->sse);
    rl_buf_free(&call->reply);
    free(call);
}

static int openai_create(rl_bridge_t *bridge, const char *name, const char *arg, rl_agent_t **out)
{
    struct rl_agent *agent = calloc(1, sizeof(*agent));
    const char *key = getenv("OPENAI_API_KEY"), *model = getenv("OPENAI_MODEL");
    size_t n;

    if (agent == NULL)
        return -1;
    agent->bridge = bridge;
    n = strlen(arg);
    while (n > 0 && arg[n - 1] == '/')
        n--;
    if (n >= 17 && strncmp(arg + n - 17, "/chat/completions", 17) == 0)
        snprintf(agent->url, sizeof(agent->url), "%.*s", (int)n, arg);
    else if (n >= 3 && strncmp(arg + n - 3, "/v1", 3) == 0)
        snprintf(agent->url, sizeof(agent->url), "%.*s/chat/completions", (int)n, arg);
    else
        snprintf(agent->url, sizeof(agent->url), "%.*s/v1/chat/completions", (int)n, arg);
    snprintf(agent->model, sizeof(agent->model), "%s", model != NULL && model[0] != '\0' ? model : "default");
    if (key != NULL && key[0] != '\0')
        snprintf(agent->auth, sizeof(agent->auth), "Authorization: Bearer %s", key);
    pthread_mutex_init(&agent->lock, NULL);
    rl_jsonl_reader_init(&agent->reader, 1024 * 1024);
    rl_log(RL_LOG_INFO, "model server %s, model %s", agent->url, agent->model);
    *out = agent;
    return 0;
}

static void openai_message(rl_agent_t *agent, rl_turn_t *turn, json_t *payload)
{
    json_t *text = json_object_get(json_object_get(payload, "message"), "text");
    call_t *call = calloc(1, sizeof(*call));
    history_t *h;

    if (call == NULL)
        return;
    call->agent = agent;
    rl_buf_init(&call->reply, MAX_REPLY);
    snprintf(call->session_id, sizeof(call->session_id), "%s", turn->session_id);
    snprintf(call->interaction_id, sizeof(call->interaction_id), "%s", turn->interaction_id);
    history_add(agent, turn->session_id, "user", json_string_value(text) != NULL ? json_string_value(text) : "",
                json_string_length(text));
    pthread_mutex_lock(&agent->lock);
    h = history_for(agent, turn->session_id);
    call->request = json_pack("{s:s, s:b, s:{s:b}, s:O}", "model", agent->model, "stream", 1, "stream_options",
                              "include_usage", 1, "messages", h != NULL ? h->messages : json_array());
    pthread_mutex_unlock(&agent->lock);
    /* The history keeps growing on this thread: the request needs its own copy. */
    json_object_set_new(call->request, "messages", json_deep_copy(json_object_get(call->request, "messages")));
    call->job.kind = &call_kind;
    call->job.run = call_run;
    call->job.progress = call_progress;
    call->job.done = call_done;
    if (rl_bridge_jobs(agent->bridge) == NULL || rl_jobs_submit(rl_bridge_jobs(agent->bridge), &call->job) != 0) {
        json_decref(call->request);
        rl_buf_free(&call->reply);
        free(call);
        rl_bridge_end(agent->bridge, turn, "error", NULL, "[the bridge could not start the request]");
        return;
    }
    call->next = agent->calls;
    agent->calls = call;
}

static void openai_cancel(rl_agent_t *agent, const char *session_id, const char *interaction_id)
{
    call_t *call;

    for (call = agent->calls; call != NULL; call = call->next)
        if (strcmp(call->session_id, session_id) == 0 &&
            (interaction_id[0] == '\0' || strcmp(call->interaction_id, interaction_id) == 0))
            __atomic_store_n(&call->cancelled, 1, __ATOMIC_RELEASE);
}

static void openai_notify(rl_agent_t *agent, json_t *line)
{
    (void)agent;
    (void)line;
}

static void openai_destroy(rl_agent_t *agent)
{
    history_t *h;

    /* No call is left: the bridge stops its jobs (each call is done then) before it destroys the agent. */
    while (agent->histories != NULL) {
        h = agent->histories;
        agent->histories = h->next;
        json_decref(h->messages);
        free(h);
    }
    rl_jsonl_reader_free(&agent->reader);
    pthread_mutex_destroy(&agent->lock);
    memset(agent->auth, 0, sizeof(agent->auth));
    free(agent);
}

const rl_agent_adapter_t rl_agent_openai = {
    .scheme = "openai",
    .create = openai_create,
    .message = openai_message,
    .cancel = openai_cancel,
    .notify = openai_notify,
    .destroy = openai_destroy,
};
