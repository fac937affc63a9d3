/*
 * relay: the terminal client of relayd, behaving as the spec's mobile client.
 *
 * Account and objects: login, whoami, pair, installations, sessions, history
 * and the rest are one REST call each. send, chat and watch attach the event
 * stream and follow the spec's client-side resume: /v1/me, the history, the
 * snapshot, then the stream; pending approvals of the snapshot are handled
 * like live approval_requested events, de-duplicated by approval_id; the
 * stream reconnects with Last-Event-ID; on resync the snapshot is fetched
 * again, and a turn in flight is looked for by polling the session's messages
 * every 3 s for up to 24 s.
 *
 * Human output on a terminal (colour unless NO_COLOR), JSON with --json or
 * when stdout is not a terminal; in JSON mode an error is {"error": ...} on
 * stdout. Exit status 0 on success, 1 on a runtime or remote error, 2 on a
 * usage error, 3 when a turn ended without a final reply (cancelled, or no
 * reply in time).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/client.h"
#include "client/credentials.h"
#include "client/retry.h"
#include "client/sse.h"
#include "client/term.h"

#define RELAY_VERSION "0.1.0"
#define CREDENTIALS   "client"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2, EXIT_UNFINISHED = 3 };

/* spec: client-side resume, rule 2. */
#define POLL_EVERY_MS  3000
#define POLL_WINDOW_MS 24000

typedef struct context {
    int json;      /* JSON output */
    rl_term_t out; /* stdout */
    rl_term_t err; /* stderr */
    const char *server;
    const char *token;
    json_t *credentials;
    rl_client_t *client;
} context_t;

static context_t ctx;

/* ---- output ---- */

static void print_json(json_t *value)
{
    json_dumpf(value, stdout, JSON_COMPACT | JSON_REAL_PRECISION(12));
    fputc('\n', stdout);
    fflush(stdout);
}

static const char *style(rl_term_style_t s)
{
    return rl_term_style(&ctx.out, s);
}

static const char *estyle(rl_term_style_t s)
{
    return rl_term_style(&ctx.err, s);
}

static const char *str(const json_t *object, const char *key)
{
    const char *value = json_string_value(json_object_get(object, key));

    return value != NULL ? value : "";
}

/* Reports an error in the current output mode and returns status. Steals extra (more JSON fields, or NULL).
 */
static int report(int status, const char *message, json_t *extra)
{
    if (ctx.json) {
        json_t *error = json_pack("{s:s}", "error", message);
        if (extra != NULL)
            json_object_update(error, extra);
        print_json(error);
        json_decref(error);
    } else {
        fprintf(stderr, "%srelay:%s %s\n", estyle(RL_TERM_RED), estyle(RL_TERM_RESET), message);
    }
    json_decref(extra);
    return status;
}

/* A note for people on stderr (never in the JSON of stdout). */
static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
    va_list ap;

    fputs(estyle(RL_TERM_DIM), stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", estyle(RL_TERM_RESET));
}

static void clock_text(json_int_t ms, char *out, size_t outsz)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;

    if (ms <= 0 || localtime_r(&t, &tm) == NULL) {
        snprintf(out, outsz, "--:--");
        return;
    }
    strftime(out, outsz, "%H:%M:%S", &tm);
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---- requests ---- */

typedef struct api_error {
    int transport; /* no answer at all */
    long status;
    char code[64];
    char message[300];
    char request_id[72];
} api_error_t;

/* A command gives up after this many tries of one call, 429 and 503 included. */
#define MAX_ATTEMPTS 6

static int64_t bucket_ready_at; /* monotonic ms before which the next call waits */

static int connect_client(void)
{
    rl_client_options_t options = {5000, 30000, 16u * 1024u * 1024u, "relay/" RELAY_VERSION};

    if (ctx.client != NULL)
        return 0;
    return rl_client_new(ctx.server, &options, &ctx.client);
}

/*
 * One call of the relay's REST API with the spec's client handling rules
 * (rl_retry_decide): 429 and 503 wait with jitter, other 5xx are retried with
 * backoff, 4xx are final. body (may be NULL) is not stolen. On success *result
 * gets the envelope's result (a new reference) and 0 is returned; otherwise
 * error says what happened and -1 is returned.
 */
static int api(const char *method, const char *path, json_t *body, json_t **result, api_error_t *error)
{
    rl_retry_policy_t policy = {0, 0, 0};
    char authorization[4096], *text = NULL;
    const char *headers[3] = {authorization, "Content-Type: application/json", NULL};
    rl_client_response_t response;
    json_t *answer = NULL;
    int attempt, rc, ret = -1;
    long delay = 0;

    memset(error, 0, sizeof(*error));
    if (result != NULL)
        *result = NULL;
    if (connect_client() != 0) {
        error->transport = 1;
        snprintf(error->message, sizeof(error->message), "the server must be an http:// or https:// URL, not '%.200s'",
                 ctx.server);
        return -1;
    }
    snprintf(authorization, sizeof(authorization), "Authorization: Bearer %s", ctx.token);
    if (body != NULL)
        text = json_dumps(body, JSON_COMPACT);
    for (attempt = 1;; ++attempt) {
        char err[128];
        /* spec: rate limits: wait for X-RateLimit-Reset-After when the last answer left the bucket empty. */
        if (bucket_ready_at > now_ms())
            sleep_ms((long)(bucket_ready_at - now_ms()));
        rc = rl_client_request(ctx.client, method, path, headers, text, text != NULL ? strlen(text) : 0, &response);
        answer = rc == 0 ? rl_client_json(&response, err, sizeof(err)) : NULL;
        if (rc == 0 && response.status == 200 && rl_retry_bucket_wait_ms(&response) > 0)
            bucket_ready_at = now_ms() + rl_retry_bucket_wait_ms(&response);
        if (rl_retry_decide(&policy, attempt, rc, &response, answer, (double)rand() / ((double)RAND_MAX + 1.0),
                            &delay) == RL_RETRY_DONE ||
            attempt >= MAX_ATTEMPTS)
            break;
        if (response.request_id[0] != '\0')
            note("relay: HTTP %ld (request %s); retrying in %ld ms", response.status, response.request_id, delay);
        else
            note("relay: %s; retrying in %ld ms", response.error[0] != '\0' ? response.error : "no answer", delay);
        json_decref(answer);
        answer = NULL;
        rl_client_response_free(&response);
        sleep_ms(delay);
    }
    if (rc != 0) {
        error->transport = 1;
        snprintf(error->message, sizeof(error->message), "%s (server %s)", response.error, ctx.server);
        goto out;
    }
    error->status = response.status;
    snprintf(error->request_id, sizeof(error->request_id), "%s", response.request_id);
    if (response.status != 200 || answer == NULL || !json_is_true(json_object_get(answer, "ok"))) {
        const char *code = rl_client_error_code(answer), *said = rl_client_error_message(answer);
        snprintf(error->code, sizeof(error->code), "%s", code != NULL ? code : "");
        snprintf(error->message, sizeof(error->message), "%s", said != NULL ? said : "the relay refused the request");
        goto out;
    }
    if (result != NULL) {
        *result = json_object_get(answer, "result");
        json_incref(*result);
    }
    ret = 0;
out:
    json_decref(answer);
    rl_client_response_free(&response);
    free(text);
    return ret;
}

/* Reports an API failure (spec client rule 6: with its X-Request-ID) and returns EXIT_RUNTIME. */
static int report_api(const api_error_t *error)
{
    char message[600];
    json_t *extra;

    if (error->transport)
        return report(EXIT_RUNTIME, error->message, NULL);
    snprintf(message, sizeof(message), "%s (HTTP %ld %s, request %s)", error->message, error->status,
             error->code[0] != '\0' ? error->code : "error", error->request_id[0] != '\0' ? error->request_id : "-");
    extra = json_pack("{s:i, s:s, s:s}", "status", (int)error->status, "code", error->code, "request_id",
                      error->request_id);
    return report(EXIT_RUNTIME, message, extra);
}

/* Builds a path with one escaped id: fmt holds one %s. */
static int id_path(char *out, size_t outsz, const char *fmt, const char *id)
{
    char *escaped = rl_client_escape(id);

    if (escaped == NULL)
        return -1;
    snprintf(out, outsz, fmt, escaped);
    free(escaped);
    return 0;
}

/* ---- credentials ---- */

/* Settles the server and token: RELAY_SERVER and RELAY_TOKEN override the stored login. */
static int need_login(void)
{
    const char *server = getenv("RELAY_SERVER"), *token = getenv("RELAY_TOKEN");

    if (ctx.credentials == NULL)
        ctx.credentials = rl_credentials_load(CREDENTIALS);
    if (ctx.credentials == NULL && errno == EPERM)
        return report(EXIT_RUNTIME, "the credentials file may be read by others; fix its mode (chmod 600)", NULL);
    ctx.server = server != NULL && server[0] != '\0' ? server : str(ctx.credentials, "server");
    ctx.token = token != NULL && token[0] != '\0' ? token : str(ctx.credentials, "token");
    if (ctx.server[0] == '\0' || ctx.token[0] == '\0')
        return report(EXIT_RUNTIME, "not logged in: run relay login --server URL --token TOKEN", NULL);
    return EXIT_OK;
}

/* ---- account ---- */

static int run_login(const rl_cli_args_t *args)
{
    const char *server = rl_cli_value(args, "server"), *token = rl_cli_value(args, "token");
    char path[1100];
    api_error_t error;
    json_t *me, *doc;

    if (server == NULL || token == NULL || server[0] == '\0' || token[0] == '\0')
        return report(EXIT_USAGE, "login needs --server URL and --token TOKEN", NULL);
    if (strncmp(server, "http://", 7) != 0 && strncmp(server, "https://", 8) != 0)
        return report(EXIT_USAGE, "--server must be an http:// or https:// URL", NULL);
    ctx.server = server;
    ctx.token = token;
    if (api("GET", "/v1/me", NULL, &me, &error) != 0)
        return report_api(&error);
    doc = json_pack("{s:s, s:s, s:O}", "server", rl_client_base(ctx.client), "token", token, "user_id",
                    json_object_get(json_object_get(me, "user"), "id"));
    if (rl_credentials_save(CREDENTIALS, doc) != 0 || rl_credentials_path(CREDENTIALS, path, sizeof(path)) != 0) {
        json_decref(doc);
        json_decref(me);
        return report(EXIT_RUNTIME, "cannot write the credentials file", NULL);
    }
    if (ctx.json) {
        json_t *out = json_pack("{s:s, s:s, s:s}", "server", rl_client_base(ctx.client), "user_id", str(doc, "user_id"),
                                "credentials", path);
        print_json(out);
        json_decref(out);
    } else {
        printf("logged in to %s as %s%s%s\ncredentials saved in %s\n", rl_client_base(ctx.client), style(RL_TERM_BOLD),
               str(doc, "user_id"), style(RL_TERM_RESET), path);
    }
    json_decref(doc);
    json_decref(me);
    return EXIT_OK;
}

static int run_logout(const rl_cli_args_t *args)
{
    if (rl_credentials_remove(CREDENTIALS) != 0)
        return report(EXIT_RUNTIME, "cannot remove the credentials file", NULL);
    if (ctx.json) {
        json_t *out = json_pack("{s:b}", "logged_out", 1);
        print_json(out);
        json_decref(out);
    } else {
        printf("logged out\n");
    }
    return EXIT_OK;
}

static int fetch_me(json_t **me)
{
    api_error_t error;
    int status = need_login();

    if (status != EXIT_OK)
        return status;
    if (api("GET", "/v1/me", NULL, me, &error) != 0)
        return report_api(&error);
    return EXIT_OK;
}

static int run_whoami(const rl_cli_args_t *args)
{
    json_t *me;
    int status = fetch_me(&me);

    if (status != EXIT_OK)
        return status;
    if (ctx.json) {
        json_t *out = json_pack("{s:s, s:O, s:i, s:i}", "server", ctx.server, "user", json_object_get(me, "user"),
                                "installations", (int)json_array_size(json_object_get(me, "installations")), "sessions",
                                (int)json_array_size(json_object_get(me, "sessions")));
        print_json(out);
        json_decref(out);
    } else {
        printf("%s%s%s on %s: %zu installation(s), %zu session(s)\n", style(RL_TERM_BOLD),
               str(json_object_get(me, "user"), "id"), style(RL_TERM_RESET), ctx.server,
               json_array_size(json_object_get(me, "installations")), json_array_size(json_object_get(me, "sessions")));
    }
    json_decref(me);
    return EXIT_OK;
}

/* ---- installations ---- */

static rl_term_style_t health_style(const char *health)
{
    if (strcmp(health, "healthy") == 0)
        return RL_TERM_GREEN;
    if (strcmp(health, "degraded") == 0)
        return RL_TERM_YELLOW;
    return RL_TERM_RED;
}

static void show_installation(const json_t *inst)
{
    const char *name = str(inst, "custom_display_name"), *emoji = str(inst, "custom_emoji");

    printf("%s%s%s  %s%s%s%s  %s%s%s  %s(%s, %s)%s\n", style(RL_TERM_BOLD), str(inst, "id"), style(RL_TERM_RESET),
           emoji, emoji[0] != '\0' ? " " : "", name[0] != '\0' ? name : str(inst, "host_label"),
           strcmp(str(inst, "state"), "revoked") == 0 ? " [revoked]" : "", style(health_style(str(inst, "health"))),
           str(inst, "health"), style(RL_TERM_RESET), style(RL_TERM_DIM), str(inst, "connector_type"),
           str(inst, "host_label"), style(RL_TERM_RESET));
}

static int run_installations(const rl_cli_args_t *args)
{
    const json_t *inst;
    json_t *me;
    size_t i;
    int status = fetch_me(&me);

    if (status != EXIT_OK)
        return status;
    if (ctx.json) {
        json_t *out = json_pack("{s:O}", "installations", json_object_get(me, "installations"));
        print_json(out);
        json_decref(out);
    } else {
        if (json_array_size(json_object_get(me, "installations")) == 0)
            printf("no installations yet: start relay-bridge pair on a machine, then relay pair CODE\n");
        json_array_foreach(json_object_get(me, "installations"), i, inst) show_installation(inst);
    }
    json_decref(me);
    return EXIT_OK;
}

static int print_result(json_t *result, const char *human_fmt, const char *id)
{
    if (ctx.json)
        print_json(result);
    else
        printf(human_fmt, id);
    json_decref(result);
    return EXIT_OK;
}

/*
 * One call whose answer carries one object to show: JSON as it came, or the
 * label and the object's line on a terminal. body is stolen.
 */
static int call_and_show(const char *method, const char *path, json_t *body, const char *label, const char *key,
                         void (*show)(const json_t *object))
{
    api_error_t error;
    json_t *result;
    int status = api(method, path, body, &result, &error);

    json_decref(body);
    if (status != 0)
        return report_api(&error);
    if (ctx.json) {
        print_json(result);
    } else {
        printf("%s", label);
        show(json_object_get(result, key));
    }
    json_decref(result);
    return EXIT_OK;
}

static int run_pair(const rl_cli_args_t *args)
{
    json_t *body;
    int status = need_login();

    if (status != EXIT_OK)
        return status;
    body = json_pack("{s:s}", "code", args->positional[0]);
    return call_and_show("POST", "/v1/me/pairing/claim", body, "paired: ", "installation", show_installation);
}

/* The subcommands of `installation`, one row each. */
typedef struct installation_action {
    const char *name;
    int needs_value;
    const char *method;
    const char *field; /* PATCH field, or NULL */
    const char *done;  /* human message, %s is the id */
} installation_action_t;

static const installation_action_t installation_actions[] = {
    {"rename", 1, "PATCH", "custom_display_name", "renamed %s\n"},
    {"emoji", 1, "PATCH", "custom_emoji", "set the emoji of %s\n"},
    {"revoke", 0, "DELETE", NULL, "revoked %s: its bridge is disconnected and cannot come back\n"},
};

static int run_installation(const rl_cli_args_t *args)
{
    const installation_action_t *action = NULL;
    const char *id = args->positional[1];
    char path[512], message[200];
    api_error_t error;
    json_t *body = NULL, *result;
    size_t i;
    int status;

    for (i = 0; i < sizeof(installation_actions) / sizeof(installation_actions[0]); ++i) {
        if (strcmp(installation_actions[i].name, args->positional[0]) == 0)
            action = &installation_actions[i];
    }
    if (action == NULL) {
        snprintf(message, sizeof(message), "installation needs rename, emoji or revoke, not '%.40s'",
                 args->positional[0]);
        return report(EXIT_USAGE, message, NULL);
    }
    if ((args->npositional == 3) != action->needs_value) {
        snprintf(message, sizeof(message), "installation %s takes %s", action->name,
                 action->needs_value ? "<id> <value> (\"\" clears it)" : "<id> only");
        return report(EXIT_USAGE, message, NULL);
    }
    status = need_login();
    if (status != EXIT_OK)
        return status;
    if (action->field != NULL) {
        const char *value = args->positional[2];
        body = json_object();
        json_object_set_new(body, action->field, value[0] != '\0' ? json_string(value) : json_null());
    }
    id_path(path, sizeof(path), "/v1/me/installations/%s", id);
    status = api(action->method, path, body, &result, &error);
    json_decref(body);
    if (status != 0)
        return report_api(&error);
    return print_result(result, action->done, id);
}

/* ---- sessions ---- */

static void show_session(const json_t *session)
{
    const char *title = str(session, "title");

    printf("%s%s%s  %s%s  %son %s%s\n", style(RL_TERM_BOLD), str(session, "id"), style(RL_TERM_RESET),
           title[0] != '\0' ? title : "(untitled)", strcmp(str(session, "state"), "archived") == 0 ? " [archived]" : "",
           style(RL_TERM_DIM), str(session, "installation_id"), style(RL_TERM_RESET));
}

static int run_sessions(const rl_cli_args_t *args)
{
    const char *want = rl_cli_value(args, "archived") != NULL ? "archived" : "active";
    const json_t *session;
    json_t *me, *list;
    size_t i;
    int status = fetch_me(&me);

    if (status != EXIT_OK)
        return status;
    list = json_array();
    json_array_foreach(json_object_get(me, "sessions"), i, session)
    {
        if (strcmp(str(session, "state"), want) == 0)
            json_array_append(list, (json_t *)session);
    }
    if (ctx.json) {
        json_t *out = json_pack("{s:O}", "sessions", list);
        print_json(out);
        json_decref(out);
    } else {
        if (json_array_size(list) == 0)
            printf("no %s sessions\n", want);
        json_array_foreach(list, i, session) show_session(session);
    }
    json_decref(list);
    json_decref(me);
    return EXIT_OK;
}

static int run_new(const rl_cli_args_t *args)
{
    const char *installation = rl_cli_value(args, "installation"), *title = rl_cli_value(args, "title");
    json_t *body;
    int status;

    if (installation == NULL)
        return report(EXIT_USAGE, "new needs --installation ID (see relay installations)", NULL);
    status = need_login();
    if (status != EXIT_OK)
        return status;
    body = json_pack("{s:s}", "installation_id", installation);
    if (title != NULL)
        json_object_set_new(body, "title", json_string(title));
    return call_and_show("POST", "/v1/me/sessions", body, "new session: ", "session", show_session);
}

/* The one-call session commands, one row each. */
typedef struct session_action {
    const char *name;
    const char *method;
    const char *path; /* %s is the session id */
    const char *done;
} session_action_t;

static const session_action_t session_actions[] = {
    {"rename", "PATCH", "/v1/me/sessions/%s", "renamed %s\n"},
    {"archive", "POST", "/v1/me/sessions/%s/archive", "archived %s\n"},
    {"unarchive", "POST", "/v1/me/sessions/%s/unarchive", "unarchived %s\n"},
    {"delete", "DELETE", "/v1/me/sessions/%s", "deleted %s (relay restore brings it back within 24 h)\n"},
    {"restore", "POST", "/v1/me/sessions/%s/restore", "restored %s\n"},
};

static int run_session_action(const rl_cli_args_t *args)
{
    const session_action_t *action = NULL;
    char path[512];
    api_error_t error;
    json_t *body = NULL, *result;
    size_t i;
    int status = need_login();

    if (status != EXIT_OK)
        return status;
    for (i = 0; i < sizeof(session_actions) / sizeof(session_actions[0]); ++i) {
        if (strcmp(session_actions[i].name, args->command->name) == 0)
            action = &session_actions[i];
    }
    if (strcmp(action->name, "rename") == 0)
        body = json_pack("{s:o}", "title",
                         args->positional[1][0] != '\0' ? json_string(args->positional[1]) : json_null());
    id_path(path, sizeof(path), action->path, args->positional[0]);
    status = api(action->method, path, body, &result, &error);
    json_decref(body);
    if (status != 0)
        return report_api(&error);
    return print_result(result, action->done, args->positional[0]);
}

static void show_message(const json_t *message)
{
    char when[32];
    int agent = strcmp(str(message, "role"), "agent") == 0;

    clock_text(json_integer_value(json_object_get(message, "created_at")), when, sizeof(when));
    printf("%s%s%s %s%s%s%s\n", style(RL_TERM_DIM), when, style(RL_TERM_RESET),
           style(agent ? RL_TERM_CYAN : RL_TERM_GREEN), agent ? "agent>" : "you>", style(RL_TERM_RESET),
           strcmp(str(message, "state"), "streaming") == 0 ? " (streaming)" : "");
    rl_term_wrap(stdout, &ctx.out, str(message, "text"), 2);
}

static int fetch_history(const char *session_id, int limit, json_t **result)
{
    char path[600], escaped_path[512];
    api_error_t error;

    id_path(escaped_path, sizeof(escaped_path), "/v1/me/sessions/%s/messages", session_id);
    snprintf(path, sizeof(path), "%s?limit=%d", escaped_path, limit);
    if (api("GET", path, NULL, result, &error) != 0)
        return report_api(&error);
    return EXIT_OK;
}

static int parse_int(const char *text, int min, int max, int *out)
{
    char *end;
    long n;

    if (text == NULL)
        return 0;
    n = strtol(text, &end, 10);
    if (text[0] == '\0' || *end != '\0' || n < min || n > max)
        return -1;
    *out = (int)n;
    return 0;
}

static int run_history(const rl_cli_args_t *args)
{
    int limit = 50, status;
    json_t *result;
    size_t i, n;

    if (parse_int(rl_cli_value(args, "limit"), 1, 100, &limit) != 0)
        return report(EXIT_USAGE, "--limit must be an integer from 1 to 100", NULL);
    status = need_login();
    if (status != EXIT_OK)
        return status;
    status = fetch_history(args->positional[0], limit, &result);
    if (status != EXIT_OK)
        return status;
    if (ctx.json) {
        print_json(result);
    } else {
        const json_t *messages = json_object_get(result, "messages");
        n = json_array_size(messages);
        if (n == 0)
            printf("no messages yet\n");
        for (i = n; i > 0; --i)
            show_message(json_array_get(messages, i - 1));
    }
    json_decref(result);
    return EXIT_OK;
}

/* ---- approvals ---- */

static void show_approval(const json_t *approval)
{
    printf("%s%s%s  %s%s%s  %s\n", style(RL_TERM_BOLD), str(approval, "approval_id"), style(RL_TERM_RESET),
           style(RL_TERM_YELLOW), str(approval, "severity"), style(RL_TERM_RESET), str(approval, "title"));
    if (str(approval, "message")[0] != '\0')
        rl_term_wrap(stdout, &ctx.out, str(approval, "message"), 2);
    if (str(approval, "command")[0] != '\0')
        printf("  %scommand:%s %s\n", style(RL_TERM_DIM), style(RL_TERM_RESET), str(approval, "command"));
    if (str(approval, "host")[0] != '\0')
        printf("  %shost:%s %s\n", style(RL_TERM_DIM), style(RL_TERM_RESET), str(approval, "host"));
    printf("  %ssession %s, action %s%s\n", style(RL_TERM_DIM), str(approval, "session_id"), str(approval, "action"),
           style(RL_TERM_RESET));
}

static int run_approvals(const rl_cli_args_t *args)
{
    api_error_t error;
    const json_t *approval;
    json_t *snapshot;
    size_t i;
    int status = need_login();

    if (status != EXIT_OK)
        return status;
    if (api("GET", "/v1/me/snapshot", NULL, &snapshot, &error) != 0)
        return report_api(&error);
    if (ctx.json) {
        json_t *out = json_pack("{s:O}", "pending_approvals", json_object_get(snapshot, "pending_approvals"));
        print_json(out);
        json_decref(out);
    } else {
        if (json_array_size(json_object_get(snapshot, "pending_approvals")) == 0)
            printf("no pending approvals\n");
        json_array_foreach(json_object_get(snapshot, "pending_approvals"), i, approval) show_approval(approval);
    }
    json_decref(snapshot);
    return EXIT_OK;
}

/* The permanent grants approve_always made (GET /v1/me/grants), and their revocation (docs/web.md). */
static void show_grant(const json_t *grant)
{
    printf("%s  %s  %s %s  %s\n", str(grant, "id"), str(grant, "action"), str(grant, "scope"),
           str(grant, "scope_value"), str(grant, "installation_id"));
}

static int run_grants(const rl_cli_args_t *args)
{
    api_error_t error;
    const json_t *grant;
    json_t *result;
    size_t i;
    int status = need_login();

    if (status != EXIT_OK)
        return status;
    if (api("GET", "/v1/me/grants", NULL, &result, &error) != 0)
        return report_api(&error);
    if (ctx.json) {
        print_json(result);
    } else {
        if (json_array_size(json_object_get(result, "grants")) == 0)
            printf("no grants\n");
        json_array_foreach(json_object_get(result, "grants"), i, grant) show_grant(grant);
    }
    json_decref(result);
    return EXIT_OK;
}

static int run_grant(const rl_cli_args_t *args)
{
    char path[512];
    int status = need_login();

    if (status != EXIT_OK)
        return status;
    if (strcmp(args->positional[0], "revoke") != 0)
        return report(EXIT_USAGE, "grant takes revoke <grant id>", NULL);
    id_path(path, sizeof(path), "/v1/me/grants/%s", args->positional[1]);
    return call_and_show("DELETE", path, NULL, "revoked: ", "grant", show_grant);
}

/* POSTs a decision; 0 or -1 with error filled. */
static int decide(const char *approval_id, const char *decision, const char *scope, const char *value, json_t **result,
                  api_error_t *error)
{
    char path[512];
    json_t *body = json_pack("{s:s}", "decision", decision);
    int ret;

    if (scope != NULL)
        json_object_set_new(body, "scope", json_string(scope));
    if (value != NULL)
        json_object_set_new(body, "scope_value", json_string(value));
    id_path(path, sizeof(path), "/v1/me/approvals/%s", approval_id);
    ret = api("POST", path, body, result, error);
    json_decref(body);
    return ret;
}

static const char *const scopes[] = {"session", "tool", "domain", "all", NULL};

static int run_decide(const rl_cli_args_t *args)
{
    int deny = strcmp(args->command->name, "deny") == 0, always = rl_cli_value(args, "always") != NULL;
    const char *scope = rl_cli_value(args, "scope"), *value = rl_cli_value(args, "value");
    api_error_t error;
    json_t *result;
    int status, i, known = scope == NULL;

    if ((scope != NULL || value != NULL) && !always)
        return report(EXIT_USAGE, "--scope and --value go with --always", NULL);
    for (i = 0; scopes[i] != NULL && scope != NULL; ++i)
        known |= strcmp(scopes[i], scope) == 0;
    if (!known)
        return report(EXIT_USAGE, "--scope must be session, tool, domain or all", NULL);
    status = need_login();
    if (status != EXIT_OK)
        return status;
    if (decide(args->positional[0],
               deny     ? "deny"
               : always ? "approve_always"
                        : "approve",
               scope, value, &result, &error) != 0)
        return report_api(&error);
    if (ctx.json) {
        print_json(result);
    } else {
        printf("%s: %s%s%s%s%s%s%s%s\n", args->positional[0], style(deny ? RL_TERM_RED : RL_TERM_GREEN),
               str(result, "decision"), style(RL_TERM_RESET), str(result, "scope")[0] != '\0' ? ", scope " : "",
               str(result, "scope"), str(result, "scope_value")[0] != '\0' ? " " : "", str(result, "scope_value"),
               json_is_true(json_object_get(result, "idempotent")) ? " (already decided)" : "");
    }
    json_decref(result);
    return EXIT_OK;
}

/* ---- the live part: stream, turns, approvals ---- */

/* How an approval is answered from a terminal: the spec's decision mapping. */
typedef struct answer {
    const char *key;
    const char *label;
    const char *decision;
    const char *scope;
    int remember_session; /* answer later approvals of this session the same way */
} answer_t;

static const answer_t answers[] = {
    {"o", "approve once", "approve", NULL, 0},
    /* spec: client-only approveForSession is stored as approve (allow-once). */
    {"s", "approve for this session", "approve", NULL, 1},
    /* spec: client-only approveCommandAlways is approve_always with scope tool. */
    {"a", "always approve this command", "approve_always", "tool", 0},
    {"d", "deny", "deny", NULL, 0},
};
#define NANSWERS (sizeof(answers) / sizeof(answers[0]))

#define MAX_SEEN 256

typedef enum live_mode { LIVE_WATCH, LIVE_SEND, LIVE_CHAT } live_mode_t;

typedef struct turn {
    int active;
    char session_id[128];
    char interaction_id[128];
    char message_id[128]; /* the agent's reply, once seen */
    size_t printed;       /* bytes of its text shown so far */
    int finished;         /* a final reply was seen */
    const char *source;   /* "stream" or "poll" */
    int64_t poll_until;   /* spec: poll every 3 s for up to 24 s */
    int64_t next_poll;
} turn_t;

typedef struct live {
    live_mode_t mode;
    const char *session_id; /* the session of send and chat */
    rl_sse_stream_t *stream;
    int interactive;      /* approvals are prompted for on the terminal */
    int midline;          /* the cursor is after streamed text */
    int hello;            /* the stream said hello at least once */
    int count, max_count; /* watch --count */
    turn_t turn;
    char seen[MAX_SEEN][64]; /* approval ids handled, spec: de-duplicated by approval_id */
    int nseen;
    json_t *queue;            /* approvals waiting for an answer on the terminal */
    int prompting;            /* the first of queue is on screen */
    int session_approved;     /* "approve for this session" was chosen */
    int defer_approvals;      /* chat's cold start: the snapshot is read again once the history is shown */
    char installation_id[64]; /* of the session */
    const char *gone;         /* why the session can no longer answer (deleted, revoked), or NULL */
    int refused;
} live_t;

static void end_line(live_t *live)
{
    if (live->midline) {
        fputc('\n', stdout);
        live->midline = 0;
    }
}

static void emit(live_t *live, const char *event, const char *id, json_t *data)
{
    json_t *line = json_pack("{s:s, s:O}", "event", event, "data", data != NULL ? data : json_null());

    if (id != NULL && id[0] != '\0')
        json_object_set_new(line, "id", json_string(id));
    print_json(line);
    json_decref(line);
}

static void show_prompt(live_t *live)
{
    const json_t *approval = json_array_get(live->queue, 0);
    size_t i;

    if (approval == NULL || live->prompting)
        return;
    end_line(live);
    printf("%s? approval needed%s ", style(RL_TERM_YELLOW), style(RL_TERM_RESET));
    show_approval(approval);
    for (i = 0; i < NANSWERS; ++i)
        printf("  %s[%s]%s %s", style(RL_TERM_BOLD), answers[i].key, style(RL_TERM_RESET), answers[i].label);
    printf("\nanswer> ");
    fflush(stdout);
    live->prompting = 1;
}

static void chat_prompt(live_t *live)
{
    if (live->mode == LIVE_CHAT && !ctx.json && !live->turn.active && json_array_size(live->queue) == 0) {
        end_line(live);
        printf("%syou>%s ", style(RL_TERM_GREEN), style(RL_TERM_RESET));
        fflush(stdout);
    }
}

static int seen_approval(live_t *live, const char *id)
{
    int i;

    for (i = 0; i < live->nseen; ++i) {
        if (strcmp(live->seen[i], id) == 0)
            return 1;
    }
    snprintf(live->seen[live->nseen % MAX_SEEN], sizeof(live->seen[0]), "%s", id);
    if (live->nseen < MAX_SEEN)
        live->nseen++;
    return 0;
}

static void answer_approval(live_t *live, const json_t *approval, const answer_t *answer)
{
    api_error_t error;
    json_t *result;

    if (decide(str(approval, "approval_id"), answer->decision, answer->scope, NULL, &result, &error) != 0) {
        end_line(live);
        if (error.status == 410)
            note("relay: approval %s expired before the answer", str(approval, "approval_id"));
        else
            note("relay: could not answer approval %s: %s (HTTP %ld, request %s)", str(approval, "approval_id"),
                 error.message, error.status, error.request_id);
        return;
    }
    if (answer->remember_session)
        live->session_approved = 1;
    printf("%s✓ %s%s (%s)\n", style(answer->decision[0] == 'd' ? RL_TERM_RED : RL_TERM_GREEN), answer->label,
           style(RL_TERM_RESET), str(result, "decision"));
    fflush(stdout);
    json_decref(result);
}

/* A pending approval, from the stream or the snapshot (spec: handled alike, de-duplicated by approval_id). */
static void on_approval(live_t *live, const char *event_id, json_t *approval)
{
    if (live->defer_approvals)
        return;
    if (seen_approval(live, str(approval, "approval_id")))
        return;
    if (live->mode == LIVE_WATCH)
        return;
    if (live->session_id != NULL && strcmp(str(approval, "session_id"), live->session_id) != 0)
        return;
    if (ctx.json) {
        emit(live, "approval_requested", event_id, approval);
        return;
    }
    if (live->interactive && live->session_approved) {
        end_line(live);
        printf("%sapproved for this session:%s %s\n", style(RL_TERM_DIM), style(RL_TERM_RESET), str(approval, "title"));
        answer_approval(live, approval, &answers[0]);
        return;
    }
    if (!live->interactive) {
        end_line(live);
        printf("%s? approval needed%s ", style(RL_TERM_YELLOW), style(RL_TERM_RESET));
        show_approval(approval);
        printf("  answer with: relay approve %s   or   relay deny %s\n", str(approval, "approval_id"),
               str(approval, "approval_id"));
        fflush(stdout);
        return;
    }
    json_array_append(live->queue, approval);
    show_prompt(live);
}

static void approval_gone(live_t *live, const char *approval_id, const char *how)
{
    size_t i;

    for (i = 0; i < json_array_size(live->queue); ++i) {
        if (strcmp(str(json_array_get(live->queue, i), "approval_id"), approval_id) == 0) {
            json_array_remove(live->queue, i);
            if (i == 0 && live->prompting) {
                live->prompting = 0;
                printf("\n%sapproval %s %s elsewhere%s\n", style(RL_TERM_DIM), approval_id, how, style(RL_TERM_RESET));
                show_prompt(live);
                chat_prompt(live);
            }
            return;
        }
    }
}

static int fetch_snapshot(live_t *live)
{
    api_error_t error;
    json_t *snapshot, *approval;
    size_t i;

    if (api("GET", "/v1/me/snapshot", NULL, &snapshot, &error) != 0)
        return report_api(&error);
    if (live->mode == LIVE_WATCH) {
        live->count++;
        if (ctx.json)
            emit(live, "snapshot", NULL, snapshot);
        else
            printf("%ssnapshot%s  %zu pending approval(s)\n", style(RL_TERM_CYAN), style(RL_TERM_RESET),
                   json_array_size(json_object_get(snapshot, "pending_approvals")));
    }
    json_array_foreach(json_object_get(snapshot, "pending_approvals"), i, approval) on_approval(live, NULL, approval);
    json_decref(snapshot);
    return EXIT_OK;
}

static void start_polling(live_t *live)
{
    if (!live->turn.active)
        return;
    live->turn.poll_until = now_ms() + POLL_WINDOW_MS;
    live->turn.next_poll = now_ms();
}

/* Shows what of the reply's text was not shown yet. */
static void show_reply_text(live_t *live, const char *text)
{
    size_t len = strlen(text);

    if (strcmp(text, " ") == 0)
        return; /* spec: a placeholder's text is a single space */
    if (len > live->turn.printed) {
        if (!ctx.json) {
            if (!live->midline)
                printf("%sagent>%s ", style(RL_TERM_CYAN), style(RL_TERM_RESET));
            fputs(text + live->turn.printed, stdout);
            live->midline = text[len - 1] != '\n';
            fflush(stdout);
        }
        live->turn.printed = len;
    }
}

static void finish_turn(live_t *live, const json_t *message, const char *source)
{
    live->turn.finished = 1;
    live->turn.active = 0;
    live->turn.source = source;
    if (ctx.json) {
        json_t *done = json_pack(
            "{s:s, s:s, s:s, s:s, s:O, s:s}", "status", "final", "interaction_id", live->turn.interaction_id,
            "message_id", str(message, "message_id"), "text", str(message, "text"), "finish_reason",
            json_object_get(message, "finish_reason") != NULL ? json_object_get(message, "finish_reason") : json_null(),
            "source", source);
        emit(live, "done", NULL, done);
        json_decref(done);
    } else {
        show_reply_text(live, str(message, "text"));
        end_line(live);
        if (str(message, "finish_reason")[0] != '\0' && strcmp(str(message, "finish_reason"), "stop") != 0)
            note("(finished: %s)", str(message, "finish_reason"));
    }
    chat_prompt(live);
}

/* spec: client-side resume, rule 2: look for the reply of the turn in flight in the history. */
static void poll_turn(live_t *live)
{
    char path[600];
    api_error_t error;
    json_t *history;
    const json_t *message;
    size_t i;

    id_path(path, sizeof(path), "/v1/me/sessions/%s/messages?limit=20", live->turn.session_id);
    if (api("GET", path, NULL, &history, &error) != 0) {
        /* A failed poll is not the end of the turn: the next one, or the stream, may still bring it. */
        note("relay: polling for the reply failed: %s (HTTP %ld, request %s)", error.message, error.status,
             error.request_id[0] != '\0' ? error.request_id : "-");
        live->turn.next_poll = now_ms() + POLL_EVERY_MS;
        return;
    }
    live->turn.next_poll = now_ms() + POLL_EVERY_MS;
    json_array_foreach(json_object_get(history, "messages"), i, message)
    {
        if (strcmp(str(message, "role"), "agent") != 0 ||
            strcmp(str(message, "interaction_id"), live->turn.interaction_id) != 0)
            continue;
        snprintf(live->turn.message_id, sizeof(live->turn.message_id), "%s", str(message, "message_id"));
        if (ctx.json)
            emit(live, "polled", NULL, (json_t *)message);
        if (strcmp(str(message, "state"), "final") == 0)
            finish_turn(live, message, "poll");
        else
            show_reply_text(live, str(message, "text"));
        break;
    }
    json_decref(history);
}

static int ours(live_t *live, const json_t *data)
{
    return live->turn.active && strcmp(str(data, "interaction_id"), live->turn.interaction_id) == 0;
}

/* ---- event handlers, one row per event ---- */

typedef void (*event_handler_t)(live_t *live, const char *id, json_t *data);

static void on_hello(live_t *live, const char *id, json_t *data)
{
    json_int_t heartbeat = json_integer_value(json_object_get(data, "heartbeat_ms"));

    live->hello = 1;
    /* Twice the announced heartbeat without a byte means the connection is dead. */
    if (heartbeat > 0)
        rl_sse_stream_set_idle_timeout(live->stream, (long)heartbeat * 2 + 5000);
}

static void on_resync(live_t *live, const char *id, json_t *data)
{
    if (!ctx.json && live->mode != LIVE_WATCH)
        note("relay: events were missed (%s); reloading the snapshot", str(data, "reason"));
    if (ctx.json && live->mode != LIVE_WATCH)
        emit(live, "resync", id, data);
    /* spec: on resync the client reloads the snapshot; a turn in flight is looked for by polling. */
    fetch_snapshot(live);
    start_polling(live);
}

static void on_message_added(live_t *live, const char *id, json_t *data)
{
    if (!ours(live, data) || strcmp(str(data, "role"), "agent") != 0)
        return;
    snprintf(live->turn.message_id, sizeof(live->turn.message_id), "%s", str(data, "message_id"));
    if (ctx.json)
        emit(live, "message_added", id, data);
    show_reply_text(live, str(data, "text"));
}

static void on_message_delta(live_t *live, const char *id, json_t *data)
{
    const char *delta = str(data, "delta");

    if (!ours(live, data))
        return;
    if (ctx.json) {
        emit(live, "message_delta", id, data);
        live->turn.printed += strlen(delta);
        return;
    }
    if (delta[0] == '\0')
        return;
    if (!live->midline)
        printf("%sagent>%s ", style(RL_TERM_CYAN), style(RL_TERM_RESET));
    fputs(delta, stdout);
    live->midline = delta[strlen(delta) - 1] != '\n';
    live->turn.printed += strlen(delta);
    fflush(stdout);
}

static void on_message_finalized(live_t *live, const char *id, json_t *data)
{
    if (!ours(live, data) || strcmp(str(data, "role"), "agent") != 0)
        return;
    finish_turn(live, data, "stream");
}

static void on_task(live_t *live, const char *id, json_t *data, const char *mark, rl_term_style_t colour,
                    const char *what)
{
    const char *name = str(data, "name");

    if (!ours(live, data))
        return;
    end_line(live);
    printf("  %s%s task %s%s %s%s%s\n", style(colour), mark, name[0] != '\0' ? name : str(data, "kind"),
           style(RL_TERM_RESET), what, str(data, "status_label")[0] != '\0' ? ": " : "", str(data, "status_label"));
    fflush(stdout);
}

static void on_task_created(live_t *live, const char *id, json_t *data)
{
    if (ctx.json)
        ours(live, data) ? emit(live, "task_created", id, data) : (void)0;
    else
        on_task(live, id, data, "▶", RL_TERM_CYAN, "started");
}

static void on_task_completed(live_t *live, const char *id, json_t *data)
{
    if (ctx.json)
        ours(live, data) ? emit(live, "task_completed", id, data) : (void)0;
    else
        on_task(live, id, data, "✓", RL_TERM_GREEN, "completed");
}

static void on_task_failed(live_t *live, const char *id, json_t *data)
{
    if (ctx.json)
        ours(live, data) ? emit(live, "task_failed", id, data) : (void)0;
    else
        on_task(live, id, data, "✗", RL_TERM_RED, "failed");
}

static void on_task_cancelled(live_t *live, const char *id, json_t *data)
{
    if (ctx.json)
        ours(live, data) ? emit(live, "task_cancelled", id, data) : (void)0;
    else
        on_task(live, id, data, "■", RL_TERM_YELLOW, "cancelled");
}

static void on_approval_requested(live_t *live, const char *id, json_t *data)
{
    on_approval(live, id, data);
}

static void on_approval_resolved(live_t *live, const char *id, json_t *data)
{
    if (live->session_id == NULL || strcmp(str(data, "session_id"), live->session_id) != 0)
        return;
    if (ctx.json)
        emit(live, "approval_resolved", id, data);
    approval_gone(live, str(data, "approval_id"), "answered");
}

static void on_approval_expired(live_t *live, const char *id, json_t *data)
{
    if (live->session_id == NULL || strcmp(str(data, "session_id"), live->session_id) != 0)
        return;
    if (ctx.json)
        emit(live, "approval_expired", id, data);
    else
        note("approval %s expired", str(data, "approval_id"));
    approval_gone(live, str(data, "approval_id"), "expired");
}

/* spec: client handling rule 4: the target is gone, so the turn in flight is dropped. */
static void target_gone(live_t *live, const char *why)
{
    end_line(live);
    live->gone = why;
    live->turn.active = 0;
    if (ctx.json) {
        json_t *done =
            json_pack("{s:s, s:s, s:s}", "status", "gone", "reason", why, "interaction_id", live->turn.interaction_id);
        emit(live, "done", NULL, done);
        json_decref(done);
    }
}

static void on_session_deleted(live_t *live, const char *id, json_t *data)
{
    if (live->session_id != NULL && strcmp(str(data, "session_id"), live->session_id) == 0)
        target_gone(live, "the session was deleted");
}

static void on_installation_revoked(live_t *live, const char *id, json_t *data)
{
    if (live->installation_id[0] != '\0' && strcmp(str(data, "installation_id"), live->installation_id) == 0)
        target_gone(live, "the installation was revoked");
}

static const struct {
    const char *event;
    event_handler_t handler;
} event_handlers[] = {
    {"session_deleted", on_session_deleted},
    {"installation_revoked", on_installation_revoked},
    {"hello", on_hello},
    {"resync", on_resync},
    {"message_added", on_message_added},
    {"message_delta", on_message_delta},
    {"message_finalized", on_message_finalized},
    {"task_created", on_task_created},
    {"task_completed", on_task_completed},
    {"task_failed", on_task_failed},
    {"task_cancelled", on_task_cancelled},
    {"approval_requested", on_approval_requested},
    {"approval_resolved", on_approval_resolved},
    {"approval_expired", on_approval_expired},
};

/* watch: every event, one per line. */
static void show_watched(live_t *live, const rl_sse_event_t *event, json_t *data)
{
    char when[32];
    char *compact;

    live->count++;
    if (ctx.json) {
        json_t *line = json_pack("{s:s, s:O}", "event", event->event, "data", data != NULL ? data : json_null());
        if (event->has_id)
            json_object_set_new(line, "id", json_string(event->id));
        print_json(line);
        json_decref(line);
        return;
    }
    clock_text((json_int_t)time(NULL) * 1000, when, sizeof(when));
    compact = data != NULL ? json_dumps(data, JSON_COMPACT) : NULL;
    printf("%s%s%s %s%-20s%s %s\n", style(RL_TERM_DIM), when, style(RL_TERM_RESET), style(RL_TERM_CYAN), event->event,
           style(RL_TERM_RESET), compact != NULL ? compact : event->data);
    free(compact);
    fflush(stdout);
}

static void on_event(void *user, const rl_sse_event_t *event)
{
    live_t *live = user;
    json_t *data = json_loadb(event->data, event->data_len, 0, NULL);
    size_t i;

    if (live->mode == LIVE_WATCH && (live->max_count == 0 || live->count < live->max_count))
        show_watched(live, event, data);
    for (i = 0; i < sizeof(event_handlers) / sizeof(event_handlers[0]); ++i) {
        if (strcmp(event_handlers[i].event, event->event) == 0 && data != NULL &&
            (live->mode != LIVE_WATCH || event_handlers[i].handler == on_hello ||
             event_handlers[i].handler == on_resync))
            event_handlers[i].handler(live, event->has_id ? event->id : NULL, data);
    }
    json_decref(data);
}

static void on_state(void *user, rl_sse_state_t state, long status, const char *why, long reconnect_in_ms)
{
    live_t *live = user;

    if (state == RL_SSE_CONNECTED)
        return;
    end_line(live);
    if (reconnect_in_ms >= 0)
        note("relay: stream lost (%s); reconnecting in %.1f s", why, (double)reconnect_in_ms / 1000.0);
}

/* ---- signals and terminal input ---- */

static int signal_pipe[2] = {-1, -1};

static void on_sigint(int sig)
{
    int saved = errno;
    char c = 'i';

    if (write(signal_pipe[1], &c, 1) < 0) {
    }
    errno = saved;
}

static int install_sigint(void)
{
    struct sigaction sa;

    if (pipe(signal_pipe) != 0)
        return -1;
    fcntl(signal_pipe[0], F_SETFL, O_NONBLOCK);
    fcntl(signal_pipe[1], F_SETFL, O_NONBLOCK);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGINT, &sa, NULL);
}

static int drain_signals(void)
{
    char buf[16];
    int n = 0;
    ssize_t got;

    while ((got = read(signal_pipe[0], buf, sizeof(buf))) > 0)
        n += (int)got;
    return n;
}

typedef struct line_reader {
    char buf[8192];
    size_t len;
    int eof;
} line_reader_t;

/* Reads what stdin has; returns 1 with a line (without its newline) in out, 0 when none is complete. */
static int read_line(line_reader_t *reader, char *out, size_t outsz, int readable)
{
    char *nl;
    size_t n, consumed;

    if (readable && !reader->eof && reader->len < sizeof(reader->buf)) {
        ssize_t got = read(STDIN_FILENO, reader->buf + reader->len, sizeof(reader->buf) - reader->len);
        if (got <= 0 && !(got < 0 && (errno == EINTR || errno == EAGAIN)))
            reader->eof = 1;
        else if (got > 0)
            reader->len += (size_t)got;
    }
    nl = memchr(reader->buf, '\n', reader->len);
    if (nl != NULL) {
        n = (size_t)(nl - reader->buf);
        consumed = n + 1;
    } else if (reader->len > 0 && (reader->len == sizeof(reader->buf) || reader->eof)) {
        /* A full buffer, or the end of input, ends a line without a newline. */
        n = reader->len;
        consumed = n;
    } else {
        return 0;
    }
    snprintf(out, outsz, "%.*s", (int)(n < outsz ? n : outsz - 1), reader->buf);
    memmove(reader->buf, reader->buf + consumed, reader->len - consumed);
    reader->len -= consumed;
    return 1;
}

/* An answer typed at the approval prompt. Returns 1 when the line was taken as one. */
static int take_answer(live_t *live, const char *line)
{
    json_t *approval;
    size_t i;

    if (!live->prompting)
        return 0;
    for (i = 0; i < NANSWERS; ++i) {
        if (strcmp(line, answers[i].key) == 0 || strcmp(line, answers[i].label) == 0)
            break;
    }
    if (i == NANSWERS) {
        printf("answer o, s, a or d> ");
        fflush(stdout);
        return 1;
    }
    approval = json_incref(json_array_get(live->queue, 0));
    json_array_remove(live->queue, 0);
    live->prompting = 0;
    answer_approval(live, approval, &answers[i]);
    json_decref(approval);
    show_prompt(live);
    chat_prompt(live);
    return 1;
}

/* ---- attaching ---- */

static long env_ms(const char *name, long fallback)
{
    const char *value = getenv(name);
    long n = value != NULL ? strtol(value, NULL, 10) : 0;

    return n > 0 ? n : fallback;
}

static int attach(live_t *live, const char *last_event_id)
{
    char url[1024], authorization[4096];
    const char *headers[] = {authorization, NULL};
    rl_sse_options_t options;

    memset(&options, 0, sizeof(options));
    snprintf(url, sizeof(url), "%s/v1/me/stream", rl_client_base(ctx.client));
    snprintf(authorization, sizeof(authorization), "Authorization: Bearer %s", ctx.token);
    options.url = url;
    options.headers = headers;
    options.last_event_id = last_event_id;
    options.user_agent = "relay/" RELAY_VERSION;
    /* Tests shorten or lengthen the first reconnect delay; the spec's 1 s otherwise. */
    options.backoff_initial_ms = env_ms("RELAY_RECONNECT_MS", 1000);
    options.on_event = on_event;
    options.on_state = on_state;
    options.user = live;
    return rl_sse_stream_new(&options, &live->stream) == RL_SSE_OK ? 0 : -1;
}

/* Drives the stream until it said hello or deadline_ms passed. */
static int wait_hello(live_t *live, long timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;

    while (!live->hello && now_ms() < deadline) {
        int result = rl_sse_stream_wait(live->stream, NULL, 0, 200, NULL);
        if (result != 0)
            return result;
    }
    return live->hello ? 0 : RL_SSE_E_GAVE_UP;
}

static int stream_failed(live_t *live, int result)
{
    const char *body = "";
    long status = rl_sse_stream_status(live->stream, &body);
    char message[600];
    json_t *answer = json_loads(body, 0, NULL);
    const char *said = rl_client_error_message(answer);

    if (result == RL_SSE_E_REFUSED)
        snprintf(message, sizeof(message), "the relay refused the event stream: %s (HTTP %ld, request %s)",
                 said != NULL ? said : "no reason given", status,
                 rl_sse_stream_request_id(live->stream)[0] != '\0' ? rl_sse_stream_request_id(live->stream) : "-");
    else
        snprintf(message, sizeof(message), "cannot attach the event stream of %s", ctx.server);
    json_decref(answer);
    return report(EXIT_RUNTIME, message, NULL);
}

static void live_init(live_t *live, live_mode_t mode, const char *session_id)
{
    memset(live, 0, sizeof(*live));
    live->mode = mode;
    live->session_id = session_id;
    live->queue = json_array();
}

static void live_free(live_t *live)
{
    rl_sse_stream_free(live->stream);
    json_decref(live->queue);
}

/*
 * spec: client-side resume, rule 1: /v1/me, the session's history, the
 * snapshot, then the stream. The history is returned (a new reference) for
 * chat to show.
 */
static int cold_start(live_t *live, json_t **history)
{
    const json_t *session;
    json_t *me;
    size_t i;
    int status = fetch_me(&me), result;

    if (status != EXIT_OK)
        return status;
    json_array_foreach(json_object_get(me, "sessions"), i, session)
    {
        if (strcmp(str(session, "id"), live->session_id) == 0)
            snprintf(live->installation_id, sizeof(live->installation_id), "%s", str(session, "installation_id"));
    }
    json_decref(me);
    status = fetch_history(live->session_id, 20, history);
    if (status != EXIT_OK)
        return status;
    status = fetch_snapshot(live);
    if (status != EXIT_OK)
        return status;
    if (attach(live, NULL) != 0)
        return report(EXIT_RUNTIME, "out of memory", NULL);
    result = wait_hello(live, 15000);
    return result == 0 ? EXIT_OK : stream_failed(live, result);
}

static int send_text(live_t *live, const char *text)
{
    char path[512];
    api_error_t error;
    json_t *body = json_pack("{s:s}", "text", text), *result;
    int status;

    id_path(path, sizeof(path), "/v1/me/sessions/%s/send", live->session_id);
    status = api("POST", path, body, &result, &error);
    json_decref(body);
    if (status != 0)
        return report_api(&error);
    memset(&live->turn, 0, sizeof(live->turn));
    live->turn.active = 1;
    snprintf(live->turn.session_id, sizeof(live->turn.session_id), "%s", live->session_id);
    snprintf(live->turn.interaction_id, sizeof(live->turn.interaction_id), "%s", str(result, "interaction_id"));
    if (ctx.json)
        emit(live, "sent", NULL, result);
    json_decref(result);
    return EXIT_OK;
}

static void cancel_turn(live_t *live)
{
    char path[512];
    api_error_t error;
    json_t *body = json_pack("{s:s}", "interaction_id", live->turn.interaction_id), *result;

    id_path(path, sizeof(path), "/v1/me/sessions/%s/cancel", live->session_id);
    end_line(live);
    if (api("POST", path, body, &result, &error) != 0)
        note("relay: could not cancel: %s (HTTP %ld, request %s)", error.message, error.status, error.request_id);
    else
        json_decref(result);
    json_decref(body);
    live->turn.active = 0;
    if (ctx.json) {
        json_t *done = json_pack("{s:s, s:s}", "status", "cancelled", "interaction_id", live->turn.interaction_id);
        emit(live, "done", NULL, done);
        json_decref(done);
    } else {
        printf("%s■ turn cancelled%s\n", style(RL_TERM_YELLOW), style(RL_TERM_RESET));
    }
}

static long parse_duration_ms(const char *text)
{
    char *end;
    double n;

    if (text == NULL)
        return 0;
    n = strtod(text, &end);
    if (end == text || n <= 0)
        return -1;
    if (strcmp(end, "ms") == 0)
        return (long)n;
    if (strcmp(end, "s") == 0 || *end == '\0')
        return (long)(n * 1000);
    if (strcmp(end, "m") == 0)
        return (long)(n * 60000);
    return -1;
}

/* One round of the live loop: the stream, stdin (when watched), signals and the turn's polling. */
static int live_step(live_t *live, int watch_stdin, unsigned *ready)
{
    int fds[2] = {signal_pipe[0], STDIN_FILENO};
    int result = rl_sse_stream_wait(live->stream, fds, watch_stdin ? 2 : 1, 250, ready);

    if (result != 0)
        return stream_failed(live, result);
    if (live->turn.active && live->turn.poll_until > 0 && now_ms() >= live->turn.next_poll) {
        if (now_ms() > live->turn.poll_until)
            live->turn.poll_until = 0;
        else
            poll_turn(live);
    }
    return EXIT_OK;
}

static int run_send(const rl_cli_args_t *args)
{
    long timeout = parse_duration_ms(rl_cli_value(args, "timeout"));
    line_reader_t reader = {.len = 0};
    live_t live;
    json_t *history = NULL;
    int64_t deadline;
    int status;

    if (timeout < 0)
        return report(EXIT_USAGE, "--timeout must be a duration such as 90s or 5m", NULL);
    live_init(&live, LIVE_SEND, args->positional[0]);
    live.interactive = !ctx.json && isatty(STDIN_FILENO) && ctx.out.tty;
    if (install_sigint() != 0) {
        status = report(EXIT_RUNTIME, "cannot install the signal handler", NULL);
        goto out;
    }
    status = cold_start(&live, &history);
    if (status != EXIT_OK)
        goto out;
    status = send_text(&live, args->positional[1]);
    if (status != EXIT_OK)
        goto out;
    deadline = now_ms() + (timeout > 0 ? timeout : 600000);
    while (live.turn.active || json_array_size(live.queue) > 0) {
        unsigned ready = 0;
        char line[1024];
        if (now_ms() > deadline) {
            end_line(&live);
            status = report(EXIT_UNFINISHED, "no final reply in time", NULL);
            goto out;
        }
        status = live_step(&live, live.interactive && !reader.eof, &ready);
        if (status != EXIT_OK)
            goto out;
        if ((ready & 1u) && drain_signals() > 0) {
            if (live.turn.active)
                cancel_turn(&live);
            status = EXIT_UNFINISHED;
            goto out;
        }
        while (live.interactive && read_line(&reader, line, sizeof(line), (ready & 2u) != 0)) {
            ready = 0;
            take_answer(&live, line);
        }
        if (live.interactive && reader.eof && live.prompting)
            live.interactive = 0; /* nobody will answer here; someone may elsewhere */
        if (!live.turn.active && live.turn.finished)
            break;
        if (live.gone != NULL) {
            status = report(EXIT_RUNTIME, live.gone, NULL);
            goto out;
        }
    }
    if (live.gone != NULL)
        status = report(EXIT_RUNTIME, live.gone, NULL);
    else
        status = live.turn.finished ? EXIT_OK : EXIT_UNFINISHED;
out:
    json_decref(history);
    live_free(&live);
    return status;
}

static void show_chat_intro(live_t *live, json_t *history)
{
    const json_t *messages = json_object_get(history, "messages"), *newest = json_array_get(messages, 0);
    size_t i, n = json_array_size(messages);

    if (!ctx.json) {
        printf("%schat in %s — type a message; Ctrl-C cancels a reply, Ctrl-C when idle or Ctrl-D quits%s\n",
               style(RL_TERM_DIM), live->session_id, style(RL_TERM_RESET));
        for (i = n > 10 ? 10 : n; i > 0; --i)
            show_message(json_array_get(messages, i - 1));
    }
    /* A reply still streaming at start is a turn in flight: follow it (spec: client-side resume). */
    if (newest != NULL && strcmp(str(newest, "role"), "agent") == 0 && strcmp(str(newest, "state"), "streaming") == 0) {
        live->turn.active = 1;
        snprintf(live->turn.session_id, sizeof(live->turn.session_id), "%s", live->session_id);
        snprintf(live->turn.interaction_id, sizeof(live->turn.interaction_id), "%s", str(newest, "interaction_id"));
        live->turn.printed = strlen(str(newest, "text"));
        start_polling(live);
    }
}

static int run_chat(const rl_cli_args_t *args)
{
    line_reader_t reader = {.len = 0};
    live_t live;
    json_t *history = NULL;
    char line[4096];
    int status;

    live_init(&live, LIVE_CHAT, args->positional[0]);
    live.interactive = 1;
    if (install_sigint() != 0) {
        status = report(EXIT_RUNTIME, "cannot install the signal handler", NULL);
        goto out;
    }
    /* The snapshot's approvals are asked once the history is on screen, so it is read again then. */
    live.defer_approvals = 1;
    status = cold_start(&live, &history);
    if (status != EXIT_OK)
        goto out;
    live.defer_approvals = 0;
    show_chat_intro(&live, history);
    fetch_snapshot(&live);
    chat_prompt(&live);
    for (;;) {
        unsigned ready = 0;
        status = live_step(&live, !reader.eof, &ready);
        if (status != EXIT_OK)
            goto out;
        if ((ready & 1u) && drain_signals() > 0) {
            if (!live.turn.active) {
                end_line(&live);
                printf("\n");
                break;
            }
            cancel_turn(&live);
            note("(Ctrl-C again to quit)");
            chat_prompt(&live);
        }
        while (read_line(&reader, line, sizeof(line), (ready & 2u) != 0)) {
            ready = 0;
            if (take_answer(&live, line))
                continue;
            if (strcmp(line, "/quit") == 0 || strcmp(line, "/exit") == 0)
                goto done;
            if (line[0] == '\0') {
                chat_prompt(&live);
                continue;
            }
            if (live.turn.active) {
                note("(the agent is still answering: wait, or Ctrl-C to cancel)");
                continue;
            }
            if (send_text(&live, line) != EXIT_OK)
                chat_prompt(&live);
        }
        /* At the end of input (a script piped in), the reply in progress is still awaited. */
        if (reader.eof && reader.len == 0 && !live.turn.active)
            break;
        if (live.gone != NULL) {
            status = report(EXIT_RUNTIME, live.gone, NULL);
            goto out;
        }
    }
done:
    end_line(&live);
    status = EXIT_OK;
out:
    json_decref(history);
    live_free(&live);
    return status;
}

static int run_watch(const rl_cli_args_t *args)
{
    const char *since = rl_cli_value(args, "since");
    int count = 0, status;
    live_t live;

    if (parse_int(rl_cli_value(args, "count"), 1, 1000000, &count) != 0)
        return report(EXIT_USAGE, "--count must be a positive integer", NULL);
    if (since != NULL && (since[0] == '\0' || strlen(since) >= RL_SSE_ID_MAX))
        return report(EXIT_USAGE, "--since must be an event id", NULL);
    status = need_login();
    if (status != EXIT_OK)
        return status;
    if (connect_client() != 0)
        return report(EXIT_RUNTIME, "bad server URL", NULL);
    live_init(&live, LIVE_WATCH, NULL);
    live.max_count = count;
    if (install_sigint() != 0 || attach(&live, since) != 0) {
        status = report(EXIT_RUNTIME, "cannot start the stream", NULL);
        goto out;
    }
    while (count == 0 || live.count < count) {
        unsigned ready = 0;
        status = live_step(&live, 0, &ready);
        if (status != EXIT_OK)
            goto out;
        if ((ready & 1u) && drain_signals() > 0)
            break;
    }
    status = EXIT_OK;
out:
    live_free(&live);
    return status;
}

static int run_cancel(const rl_cli_args_t *args)
{
    const char *interaction = rl_cli_value(args, "interaction");
    char path[512];
    api_error_t error;
    json_t *body = json_object(), *result;
    int status = need_login();

    if (status != EXIT_OK) {
        json_decref(body);
        return status;
    }
    if (interaction != NULL)
        json_object_set_new(body, "interaction_id", json_string(interaction));
    id_path(path, sizeof(path), "/v1/me/sessions/%s/cancel", args->positional[0]);
    status = api("POST", path, body, &result, &error);
    json_decref(body);
    if (status != 0)
        return report_api(&error);
    return print_result(result, "asked the agent to stop the turn in %s\n", args->positional[0]);
}

/* ---- help and version ---- */

static int run_help(const rl_cli_args_t *args);

static int run_version(const rl_cli_args_t *args)
{
    if (ctx.json) {
        json_t *version = json_pack("{s:s, s:s, s:s}", "name", "relay", "version", RELAY_VERSION, "api", "v1");
        print_json(version);
        json_decref(version);
    } else {
        printf("relay %s (relay API v1)\n", RELAY_VERSION);
    }
    return EXIT_OK;
}

/* ---- the command table ---- */

static const rl_cli_flag_t global_flags[] = {
    {"json", 0, NULL, "print JSON (the default when stdout is not a terminal)"},
    {"help", 'h', NULL, "show help for the command"},
    {NULL, 0, NULL, NULL},
};
static const rl_cli_flag_t login_flags[] = {
    {"server", 's', "URL", "the relay's base URL, such as http://127.0.0.1:8080"},
    {"token", 't', "TOKEN", "your user token (relayd token USER prints one for the embedded issuer)"},
    {NULL, 0, NULL, NULL},
};
static const rl_cli_flag_t sessions_flags[] = {
    {"archived", 'a', NULL, "list archived sessions instead of active ones"},
    {NULL, 0, NULL, NULL},
};
static const rl_cli_flag_t new_flags[] = {
    {"installation", 'i', "ID", "the installation (bridge) the session runs on"},
    {"title", 't', "TITLE", "a title"},
    {NULL, 0, NULL, NULL},
};
static const rl_cli_flag_t history_flags[] = {
    {"limit", 'n', "N", "how many of the newest messages, 1 to 100 (default 50)"},
    {NULL, 0, NULL, NULL},
};
static const rl_cli_flag_t send_flags[] = {
    {"timeout", 0, "DURATION", "give up waiting for the reply after this long (default 10m), exit status 3"},
    {NULL, 0, NULL, NULL},
};
static const rl_cli_flag_t approve_flags[] = {
    {"always", 0, NULL, "approve_always: a permanent grant for this action"},
    {"scope", 0, "SCOPE", "with --always: session, tool, domain or all (default all)"},
    {"value", 0, "VALUE", "with --always: the scope's value (default: taken from the request)"},
    {NULL, 0, NULL, NULL},
};
static const rl_cli_flag_t watch_flags[] = {
    {"since", 0, "ID", "resume after this event id (Last-Event-ID)"},
    {"count", 'n', "N", "exit after N events"},
    {NULL, 0, NULL, NULL},
};
static const rl_cli_flag_t cancel_flags[] = {
    {"interaction", 0, "ID", "the interaction to cancel (default: the session's current one)"},
    {NULL, 0, NULL, NULL},
};

static const char *const login_examples[] = {
    "relay login --server http://127.0.0.1:8080 --token \"$(relayd token alice)\"", NULL};
static const char *const pair_examples[] = {"relay pair ABCDEFG", NULL};
static const char *const installation_examples[] = {"relay installation rename inst_0123456789abcdef \"work laptop\"",
                                                    "relay installation emoji inst_0123456789abcdef 🐢",
                                                    "relay installation revoke inst_0123456789abcdef", NULL};
static const char *const new_examples[] = {"relay new --installation inst_0123456789abcdef --title \"release notes\"",
                                           NULL};
static const char *const send_examples[] = {"relay send ses_abc \"summarise the open issues\"",
                                            "relay send ses_abc \"run the tests\" --json", NULL};
static const char *const chat_examples[] = {"relay chat ses_abc", NULL};
static const char *const approve_examples[] = {"relay approve apr_abc", "relay approve apr_abc --always --scope tool",
                                               "relay deny apr_abc", NULL};
static const char *const grant_examples[] = {"relay grants", "relay grant revoke grt_0123456789abcdef", NULL};
static const char *const watch_examples[] = {"relay watch", "relay watch --json --count 5", NULL};
static const char *const help_examples[] = {"relay help send", "relay help --json", NULL};

static const rl_cli_command_t commands[] = {
    {"login", "", 0, 0, "check a server and token and store them (mode 0600)",
     "The credentials go to $RELAY_CONFIG_DIR/client.json, else the user's config folder (~/.config/relay).",
     login_flags, login_examples, run_login},
    {"logout", "", 0, 0, "forget the stored server and token", NULL, NULL, NULL, run_logout},
    {"whoami", "", 0, 0, "show the user, the server and counts of installations and sessions", NULL, NULL, NULL,
     run_whoami},
    {"pair", "<code>", 1, 1, "claim the 7-letter pairing code a bridge shows", NULL, NULL, pair_examples, run_pair},
    {"installations", "", 0, 0, "list your installations (paired bridges) with their health", NULL, NULL, NULL,
     run_installations},
    {"installation", "rename|emoji|revoke <id> [value]", 2, 3, "rename an installation, set its emoji, or revoke it",
     "An empty value clears the name or emoji. Revoking disconnects the bridge for good.", NULL, installation_examples,
     run_installation},
    {"sessions", "", 0, 0, "list sessions", NULL, sessions_flags, NULL, run_sessions},
    {"new", "", 0, 0, "start a session on an installation", NULL, new_flags, new_examples, run_new},
    {"rename", "<session> <title>", 2, 2, "rename a session (\"\" clears the title)", NULL, NULL, NULL,
     run_session_action},
    {"archive", "<session>", 1, 1, "archive a session", NULL, NULL, NULL, run_session_action},
    {"unarchive", "<session>", 1, 1, "bring an archived session back", NULL, NULL, NULL, run_session_action},
    {"delete", "<session>", 1, 1, "delete a session (restorable for 24 h)", NULL, NULL, NULL, run_session_action},
    {"restore", "<session>", 1, 1, "restore a deleted session", NULL, NULL, NULL, run_session_action},
    {"history", "<session>", 1, 1, "show a session's messages, oldest first", NULL, history_flags, NULL, run_history},
    {"send", "<session> <text>", 2, 2, "send a message and stream the reply",
     "Prints the reply as it streams and task lines as they start and end; on a terminal it asks about "
     "approvals. Exit status: 0 when the reply was finalised, 3 when the turn ended without one (Ctrl-C "
     "cancels it; --timeout), 1 on errors. With --json, one JSON object per line: sent, message_added, "
     "message_delta, task_*, approval_*, resync, polled, and done {status, text, finish_reason, source}.",
     send_flags, send_examples, run_send},
    {"chat", "<session>", 1, 1, "chat interactively in a session",
     "Type a message and watch the answer stream. Approvals are asked in place: o approve once, s approve "
     "for this session, a always approve this command (approve_always, scope tool), d deny. Ctrl-C cancels "
     "the reply in progress; Ctrl-C when no reply is in progress, Ctrl-D or /quit leaves.",
     NULL, chat_examples, run_chat},
    {"cancel", "<session>", 1, 1, "ask the agent to stop the current turn", NULL, cancel_flags, NULL, run_cancel},
    {"approvals", "", 0, 0, "list pending approvals", NULL, NULL, NULL, run_approvals},
    {"approve", "<approval>", 1, 1, "approve a pending approval", NULL, approve_flags, approve_examples, run_decide},
    {"deny", "<approval>", 1, 1, "deny a pending approval", NULL, NULL, approve_examples, run_decide},
    {"grants", "", 0, 0, "list the permanent grants approve_always made", NULL, NULL, NULL, run_grants},
    {"grant", "revoke <grant>", 2, 2, "revoke a grant: the agent asks again for what it covered", NULL, NULL,
     grant_examples, run_grant},
    {"watch", "", 0, 0, "print the raw event stream, one event per line",
     "Reconnects with Last-Event-ID after a drop; on resync it fetches and prints the snapshot.", watch_flags,
     watch_examples, run_watch},
    {"help", "[command]", 0, 1, "show help; with --json, a manifest of every command, flag and example", NULL, NULL,
     help_examples, run_help},
    {"version", "", 0, 0, "show the client's version", NULL, NULL, NULL, run_version},
};

static const rl_cli_env_t environment[] = {
    {"RELAY_CONFIG_DIR", "folder of the credentials file (default: the user's config folder)"},
    {"RELAY_SERVER", "base URL of the relay, overriding the stored login"},
    {"RELAY_TOKEN", "user token, overriding the stored login"},
    {"RELAY_RECONNECT_MS", "first reconnect delay of the event stream (default 1000)"},
    {"NO_COLOR", "when set to anything but the empty string, no colour"},
    {NULL, NULL},
};

static const rl_cli_exit_t exit_codes[] = {
    {EXIT_OK, "success"},
    {EXIT_RUNTIME, "runtime or remote error (unreachable relay, HTTP error, stream refused)"},
    {EXIT_USAGE, "usage error (unknown command or flag, wrong arguments)"},
    {EXIT_UNFINISHED, "send: the turn ended without a final reply (cancelled or timed out)"},
    {0, NULL},
};

static const rl_cli_program_t program = {
    "relay",
    RELAY_VERSION,
    "the terminal client of the relay: chat with your agents, approve what they do",
    commands,
    sizeof(commands) / sizeof(commands[0]),
    global_flags,
    environment,
    exit_codes,
};

static int run_help(const rl_cli_args_t *args)
{
    const rl_cli_command_t *command = NULL;
    char message[200];

    if (args->npositional > 0) {
        command = rl_cli_find(&program, args->positional[0]);
        if (command == NULL) {
            snprintf(message, sizeof(message), "no command '%.60s' (see relay help)", args->positional[0]);
            return report(EXIT_USAGE, message, NULL);
        }
    }
    if (ctx.json) {
        json_t *manifest = rl_cli_manifest(&program, command);
        print_json(manifest);
        json_decref(manifest);
        return EXIT_OK;
    }
    rl_cli_help(stdout, &ctx.out, &program, command);
    return EXIT_OK;
}

/* JSON mode is settled before parsing, so that even a usage error comes out in the right form. */
static int wants_json(int argc, char **argv)
{
    int i;

    for (i = 1; i < argc && strcmp(argv[i], "--") != 0; ++i) {
        if (strcmp(argv[i], "--json") == 0)
            return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    rl_cli_args_t args;
    char err[300];
    int status;

    srand((unsigned)(time(NULL) ^ getpid()));
    rl_term_detect(STDOUT_FILENO, &ctx.out);
    rl_term_detect(STDERR_FILENO, &ctx.err);
    ctx.json = wants_json(argc, argv) || !ctx.out.tty;
    if (rl_cli_parse(&program, argc, argv, &args, err, sizeof(err)) != 0)
        return report(EXIT_USAGE, err, NULL);
    if (rl_cli_value(&args, "help") != NULL) {
        rl_cli_args_t help = args;
        help.command = rl_cli_find(&program, "help");
        help.npositional = 0;
        if (args.command != NULL && strcmp(args.command->name, "help") != 0) {
            help.positional[0] = args.command->name;
            help.npositional = 1;
        }
        return run_help(&help);
    }
    if (args.command == NULL)
        return report(EXIT_USAGE, "no command given (see relay help)", NULL);
    status = args.command->run(&args);
    rl_client_free(ctx.client);
    json_decref(ctx.credentials);
    return status;
}
