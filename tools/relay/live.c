/*
 * relay: send, chat and watch. Each attaches the account's event stream and
 * feeds the chat state machine (src/client/chat.h) from one loop that also
 * watches the keyboard and a signal pipe, so that Ctrl-C cancels a turn.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "client/chat.h"
#include "client/client.h"
#include "client/sse.h"
#include "common/clock.h"
#include "common/duration.h"
#include "relay.h"

/* What one run of send, chat or watch holds. */
typedef struct live {
    rl_chat_t *chat;
    rl_sse_stream_t *stream;
} live_t;

/* ---- the calls the chat state machine may make ---- */

static int op_decide(void *user, const char *approval_id, const char *decision, const char *scope, json_t **result,
                     rl_api_error_t *error)
{
    char path[512];
    json_t *body = json_pack("{s:s}", "decision", decision);
    int ret;

    if (scope != NULL)
        json_object_set_new(body, "scope", json_string(scope));
    if (relay_e2e_sign(body, approval_id, NULL) != EXIT_OK) {
        json_decref(body);
        memset(error, 0, sizeof(*error));
        error->transport = 1;
        snprintf(error->message, sizeof(error->message), "the decision could not be signed");
        return -1;
    }
    rl_api_path(path, sizeof(path), "/v1/me/approvals/%s", approval_id);
    ret = relay_call("POST", path, body, result, error);
    json_decref(body);
    return ret;
}

static int op_snapshot(void *user, json_t **snapshot, rl_api_error_t *error)
{
    return relay_call("GET", "/v1/me/snapshot", NULL, snapshot, error);
}

static int op_history(void *user, const char *session_id, int limit, json_t **history, rl_api_error_t *error)
{
    char path[600], escaped_path[512];

    rl_api_path(escaped_path, sizeof(escaped_path), "/v1/me/sessions/%s/messages", session_id);
    snprintf(path, sizeof(path), "%s?limit=%d", escaped_path, limit);
    return relay_call("GET", path, NULL, history, error);
}

static void op_failed(void *user, const rl_api_error_t *error)
{
    relay_report_api(error);
}

static void op_hello(void *user, long heartbeat_ms)
{
    live_t *live = user;

    /* Twice the announced heartbeat without a byte means the connection is dead. */
    if (heartbeat_ms > 0)
        rl_sse_stream_set_idle_timeout(live->stream, heartbeat_ms * 2 + 5000);
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

/*
 * One key answers an approval on a terminal: while an approval is asked,
 * the terminal leaves canonical mode so that a key arrives without Enter,
 * and goes back to it (line editing for the chat's messages) once it is
 * answered. Signals stay on: Ctrl-C still cancels.
 */
static struct termios saved_termios;
static int keys_on; /* the terminal is in one-key mode */

static void keys_mode(int on)
{
    struct termios raw;

    if (on == keys_on)
        return;
    if (on) {
        if (tcgetattr(STDIN_FILENO, &saved_termios) != 0)
            return;
        raw = saved_termios;
        raw.c_lflag &= ~(tcflag_t)ICANON;
        raw.c_cc[VMIN] = 1;
        raw.c_cc[VTIME] = 0;
        if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) != 0)
            return;
    } else {
        tcsetattr(STDIN_FILENO, TCSANOW, &saved_termios);
    }
    keys_on = on;
}

static void keys_restore(void)
{
    keys_mode(0);
}

/*
 * Reads what stdin has in one-key mode and answers the approval on screen
 * with each key. Stops at the first key that is not an answer's business
 * once no approval is asked any more: it stays in the buffer, the start of
 * the next line.
 */
static void read_keys(line_reader_t *reader, rl_chat_t *chat, int readable)
{
    size_t used = 0;

    if (readable && !reader->eof && reader->len < sizeof(reader->buf)) {
        ssize_t got = read(STDIN_FILENO, reader->buf + reader->len, sizeof(reader->buf) - reader->len);
        if (got <= 0 && !(got < 0 && (errno == EINTR || errno == EAGAIN)))
            reader->eof = 1;
        else if (got > 0)
            reader->len += (size_t)got;
    }
    while (used < reader->len && rl_chat_prompting(chat)) {
        char key[2] = {reader->buf[used++], '\0'};
        if (key[0] == '\n' || key[0] == '\r' || key[0] == ' ')
            continue;
        rl_chat_answer(chat, key);
    }
    /* What came with the answer (the Enter of someone used to typing one) is not a message. */
    while (used < reader->len && (reader->buf[used] == '\n' || reader->buf[used] == '\r'))
        used++;
    memmove(reader->buf, reader->buf + used, reader->len - used);
    reader->len -= used;
}

/* Switches the terminal to one-key mode while an approval is asked, and back. */
static void follow_prompt(rl_chat_t *chat, int tty)
{
    if (tty)
        keys_mode(rl_chat_prompting(chat));
}

/* ---- the stream ---- */

static void on_event(void *user, const rl_sse_event_t *event)
{
    live_t *live = user;
    char *opened = relay_e2e_open_event(event->data, event->data_len);

    if (opened != NULL)
        rl_chat_event(live->chat, event->event, event->has_id ? event->id : NULL, opened, strlen(opened));
    else
        rl_chat_event(live->chat, event->event, event->has_id ? event->id : NULL, event->data, event->data_len);
    free(opened);
}

static void on_state(void *user, rl_sse_state_t state, long status, const char *why, long reconnect_in_ms)
{
    live_t *live = user;

    if (state != RL_SSE_CONNECTED)
        rl_chat_stream_lost(live->chat, why, reconnect_in_ms);
}

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
    snprintf(url, sizeof(url), "%s/v1/me/stream", rl_api_base(relay.api));
    snprintf(authorization, sizeof(authorization), "Authorization: Bearer %s", relay.token);
    options.url = url;
    options.headers = headers;
    options.last_event_id = last_event_id;
    options.user_agent = RELAY_USER_AGENT;
    /* Tests shorten or lengthen the first reconnect delay; the spec's 1 s otherwise. */
    options.backoff_initial_ms = env_ms("RELAY_RECONNECT_MS", 1000);
    options.on_event = on_event;
    options.on_state = on_state;
    options.user = live;
    return rl_sse_stream_new(&options, &live->stream) == RL_SSE_OK ? 0 : -1;
}

/* Drives the stream until it said hello or timeout_ms passed. */
static int wait_hello(live_t *live, long timeout_ms)
{
    int64_t deadline = rl_clock_mono_ms() + timeout_ms;

    while (!rl_chat_hello_seen(live->chat) && rl_clock_mono_ms() < deadline) {
        int result = rl_sse_stream_wait(live->stream, NULL, 0, 200, NULL);
        if (result != 0)
            return result;
    }
    return rl_chat_hello_seen(live->chat) ? 0 : RL_SSE_E_GAVE_UP;
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
        snprintf(message, sizeof(message), "cannot attach the event stream of %s", relay.server);
    json_decref(answer);
    return relay_report(EXIT_RUNTIME, message, NULL);
}

static int live_init(live_t *live, rl_chat_mode_t mode, const char *session_id, int interactive, int max_count)
{
    rl_chat_options_t options;

    memset(live, 0, sizeof(*live));
    memset(&options, 0, sizeof(options));
    options.mode = mode;
    options.session_id = session_id;
    options.json = relay.cli.json;
    options.interactive = interactive;
    options.max_count = max_count;
    options.out = stdout;
    options.err = stderr;
    options.out_term = relay.cli.out;
    options.err_term = relay.cli.err;
    options.single_key = interactive && isatty(STDIN_FILENO);
    options.ops = (rl_chat_ops_t){op_decide, op_snapshot, op_history, op_failed, op_hello, live};
    live->chat = rl_chat_new(&options);
    if (live->chat == NULL)
        return relay_report(EXIT_RUNTIME, "out of memory", NULL);
    if (install_sigint() != 0)
        return relay_report(EXIT_RUNTIME, "cannot install the signal handler", NULL);
    atexit(keys_restore);
    return EXIT_OK;
}

static void live_free(live_t *live)
{
    keys_mode(0);
    rl_sse_stream_free(live->stream);
    rl_chat_free(live->chat);
}

/*
 * spec: client-side resume, rule 1: /v1/me, the session's history, the
 * snapshot, then the stream. The history is returned (a new reference) for
 * chat to show.
 */
static int cold_start(live_t *live, const char *session_id, json_t **history)
{
    const json_t *session;
    json_t *me;
    size_t i;
    int status = relay_fetch_me(&me), result;

    if (status != EXIT_OK)
        return status;
    json_array_foreach(json_object_get(me, "sessions"), i, session)
    {
        if (strcmp(rl_cli_str(session, "id"), session_id) == 0)
            rl_chat_set_installation(live->chat, rl_cli_str(session, "installation_id"));
    }
    json_decref(me);
    status = relay_fetch_history(session_id, 20, history);
    if (status != EXIT_OK)
        return status;
    if (rl_chat_snapshot(live->chat) != 0)
        return EXIT_RUNTIME;
    if (attach(live, NULL) != 0)
        return relay_report(EXIT_RUNTIME, "out of memory", NULL);
    result = wait_hello(live, 15000);
    return result == 0 ? EXIT_OK : stream_failed(live, result);
}

static int send_text(live_t *live, const char *session_id, const char *text)
{
    char path[512];
    rl_api_error_t error;
    json_t *body = json_pack("{s:s}", "text", text), *result;
    int status = relay_e2e_seal_send(session_id, body);

    if (status != EXIT_OK) {
        json_decref(body);
        return status;
    }
    rl_api_path(path, sizeof(path), "/v1/me/sessions/%s/send", session_id);
    status = relay_call("POST", path, body, &result, &error);
    json_decref(body);
    if (status != 0)
        return relay_report_api(&error);
    rl_chat_sent(live->chat, result);
    json_decref(result);
    return EXIT_OK;
}

static void cancel_turn(live_t *live, const char *session_id)
{
    char path[512];
    rl_api_error_t error;
    json_t *body = json_pack("{s:s}", "interaction_id", rl_chat_interaction(live->chat)), *result;

    rl_api_path(path, sizeof(path), "/v1/me/sessions/%s/cancel", session_id);
    /* The line stays open: a chat shows the rest of the cancelled reply on it (rl_chat_cancelled). */
    if (relay_call("POST", path, body, &result, &error) != 0) {
        rl_chat_end_line(live->chat);
        rl_cli_note(&relay.cli, "relay: could not cancel: %s (HTTP %ld, request %s)", error.message, error.status,
                    error.request_id);
    } else {
        json_decref(result);
    }
    json_decref(body);
    rl_chat_cancelled(live->chat);
}

/* One round of the live loop: the stream, stdin (when watched), signals and the turn's polling. */
static int live_step(live_t *live, int watch_stdin, unsigned *ready)
{
    int fds[2] = {signal_pipe[0], STDIN_FILENO};
    int result = rl_sse_stream_wait(live->stream, fds, watch_stdin ? 2 : 1, 250, ready);

    if (result != 0)
        return stream_failed(live, result);
    rl_chat_tick(live->chat, rl_clock_mono_ms());
    return EXIT_OK;
}

/* The exit status of send once its turn is over. */
static int send_status(live_t *live)
{
    switch (rl_chat_outcome(live->chat)) {
    case RL_CHAT_COMPLETE:
        return EXIT_OK;
    case RL_CHAT_INCOMPLETE:
        /* A reply that says "[the agent failed ...]" is no success, whatever the transport did. */
        return EXIT_INCOMPLETE;
    case RL_CHAT_GONE:
        return relay_report(EXIT_RUNTIME, rl_chat_gone(live->chat), NULL);
    case RL_CHAT_CANCELLED:
    case RL_CHAT_PENDING:
        break;
    }
    return EXIT_UNFINISHED;
}

int relay_run_send(const rl_cli_args_t *args)
{
    const char *timeout_text = rl_cli_value(args, "timeout");
    line_reader_t reader = {.len = 0};
    int interactive = !relay.cli.json && isatty(STDIN_FILENO) && relay.cli.out.tty, tty = interactive;
    int64_t timeout = 0, deadline;
    json_t *history = NULL;
    live_t live;
    int status;

    if (timeout_text != NULL && (rl_duration_parse_default(timeout_text, 1000, &timeout) != 0 || timeout <= 0))
        return relay_report(EXIT_USAGE, "--timeout must be a duration such as 90s or 5m", NULL);
    status = live_init(&live, RL_CHAT_SEND, args->positional[0], interactive, 0);
    if (status != EXIT_OK)
        goto out;
    status = cold_start(&live, args->positional[0], &history);
    if (status != EXIT_OK)
        goto out;
    status = send_text(&live, args->positional[0], args->positional[1]);
    if (status != EXIT_OK)
        goto out;
    deadline = rl_clock_mono_ms() + (timeout > 0 ? timeout : 600000);
    while (rl_chat_turn_active(live.chat) || rl_chat_waiting(live.chat) > 0) {
        unsigned ready = 0;
        char line[1024];
        if (rl_clock_mono_ms() > deadline) {
            rl_chat_end_line(live.chat);
            status = relay_report(EXIT_UNFINISHED, "no final reply in time", NULL);
            goto out;
        }
        status = live_step(&live, interactive && !reader.eof, &ready);
        if (status != EXIT_OK)
            goto out;
        if ((ready & 1u) && drain_signals() > 0) {
            if (rl_chat_turn_active(live.chat))
                cancel_turn(&live, args->positional[0]);
            status = EXIT_UNFINISHED;
            goto out;
        }
        if (interactive && keys_on) {
            read_keys(&reader, live.chat, (ready & 2u) != 0);
            ready = 0;
        }
        while (interactive && read_line(&reader, line, sizeof(line), (ready & 2u) != 0)) {
            ready = 0;
            rl_chat_answer(live.chat, line);
        }
        follow_prompt(live.chat, tty);
        if (interactive && reader.eof && rl_chat_prompting(live.chat)) {
            interactive = 0; /* nobody will answer here; someone may elsewhere */
            rl_chat_set_interactive(live.chat, 0);
        }
        if (rl_chat_outcome(live.chat) == RL_CHAT_COMPLETE || rl_chat_outcome(live.chat) == RL_CHAT_INCOMPLETE)
            break;
        if (rl_chat_gone(live.chat) != NULL)
            break;
    }
    status = send_status(&live);
out:
    json_decref(history);
    live_free(&live);
    return status;
}

/*
 * Lines typed while the agent answers: each waits its turn and is sent when the turn before it has ended,
 * one at a time, in the order typed. Bounded: a line past QUEUE_MAX is refused and said so.
 */
#define QUEUE_MAX 16
typedef struct line_queue {
    char lines[QUEUE_MAX][4096];
    int head, count;
} line_queue_t;

static void queue_push(line_queue_t *queue, const char *line)
{
    if (queue->count == QUEUE_MAX) {
        rl_cli_note(&relay.cli, "(not sent: %d lines already wait for the agent's answer to end)", QUEUE_MAX);
        return;
    }
    snprintf(queue->lines[(queue->head + queue->count) % QUEUE_MAX], sizeof(queue->lines[0]), "%s", line);
    queue->count++;
    if (queue->count == 1)
        rl_cli_note(&relay.cli, "(queued: sent when the agent's answer ends)");
    else
        rl_cli_note(&relay.cli, "(queued: sent when the agent's answer ends, after the %d line%s before it)",
                    queue->count - 1, queue->count == 2 ? "" : "s");
}

/* Drops what waits, saying so (Ctrl-C, /quit, a send that failed): the person typed it, they must know. */
static void queue_drop(line_queue_t *queue, const char *why)
{
    if (queue->count > 0)
        rl_cli_note(&relay.cli, "(%s: the %d queued line%s %s not sent)", why, queue->count,
                    queue->count == 1 ? "" : "s", queue->count == 1 ? "was" : "were");
    queue->head = queue->count = 0;
}

/*
 * Once the turn has ended and no approval waits for an answer, the next queued line goes, shown after the
 * prompt as if typed there. A line that cannot be sent drops the rest: they followed it.
 */
static void queue_send_next(line_queue_t *queue, live_t *live, const char *session_id)
{
    const char *line;

    if (queue->count == 0 || rl_chat_turn_active(live->chat) || rl_chat_prompting(live->chat) ||
        rl_chat_waiting(live->chat) > 0)
        return;
    line = queue->lines[queue->head];
    queue->head = (queue->head + 1) % QUEUE_MAX;
    queue->count--;
    if (!relay.cli.json) {
        printf("%s\n", line);
        fflush(stdout);
    }
    if (send_text(live, session_id, line) != EXIT_OK) {
        queue_drop(queue, "the queued line could not be sent");
        rl_chat_prompt(live->chat);
    }
}

int relay_run_chat(const rl_cli_args_t *args)
{
    static line_queue_t queue;
    const char *session_id = args->npositional > 0 ? args->positional[0] : NULL;
    line_reader_t reader = {.len = 0};
    json_t *history = NULL;
    char line[4096], newest[128];
    int tty = isatty(STDIN_FILENO);
    live_t live;
    int status;

    /* Without a session, the newest one: what a person coming back to the chat most likely wants. */
    if (session_id == NULL) {
        status = relay_newest_session("chat", newest, sizeof(newest));
        if (status != EXIT_OK)
            return status;
        session_id = newest;
    }
    status = live_init(&live, RL_CHAT_CHAT, session_id, 1, 0);
    if (status != EXIT_OK)
        goto out;
    /* The snapshot's approvals are asked once the history is on screen, so it is read again then. */
    rl_chat_defer_approvals(live.chat, 1);
    status = cold_start(&live, session_id, &history);
    if (status != EXIT_OK)
        goto out;
    rl_chat_defer_approvals(live.chat, 0);
    rl_chat_intro(live.chat, history);
    rl_chat_snapshot(live.chat);
    rl_chat_prompt(live.chat);
    for (;;) {
        unsigned ready = 0;
        status = live_step(&live, !reader.eof, &ready);
        if (status != EXIT_OK)
            goto out;
        if ((ready & 1u) && drain_signals() > 0) {
            if (!rl_chat_turn_active(live.chat)) {
                rl_chat_end_line(live.chat);
                printf("\n");
                queue_drop(&queue, "left the chat");
                break;
            }
            cancel_turn(&live, session_id);
            queue_drop(&queue, "turn cancelled");
            /* The chat follows the cancelled reply to its stored end first (rl_chat_cancelled), then prompts. */
            if (!rl_chat_turn_active(live.chat)) {
                rl_cli_note(&relay.cli, "(Ctrl-C again to quit)");
                rl_chat_prompt(live.chat);
            }
        }
        if (keys_on) {
            read_keys(&reader, live.chat, (ready & 2u) != 0);
            ready = 0;
        }
        while (!keys_on && read_line(&reader, line, sizeof(line), (ready & 2u) != 0)) {
            ready = 0;
            if (rl_chat_answer(live.chat, line)) {
                follow_prompt(live.chat, tty);
                continue;
            }
            if (strcmp(line, "/quit") == 0 || strcmp(line, "/exit") == 0) {
                queue_drop(&queue, "left the chat");
                goto done;
            }
            if (line[0] == '\0') {
                rl_chat_prompt(live.chat);
                continue;
            }
            if (rl_chat_turn_active(live.chat) || queue.count > 0) {
                queue_push(&queue, line);
                continue;
            }
            if (send_text(&live, session_id, line) != EXIT_OK)
                rl_chat_prompt(live.chat);
        }
        queue_send_next(&queue, &live, session_id);
        follow_prompt(live.chat, tty);
        /* At the end of input (a script piped in), the reply in progress and the lines queued are still awaited. */
        if (reader.eof && reader.len == 0 && !rl_chat_turn_active(live.chat) && queue.count == 0)
            break;
        if (rl_chat_gone(live.chat) != NULL) {
            status = relay_report(EXIT_RUNTIME, rl_chat_gone(live.chat), NULL);
            goto out;
        }
    }
done:
    rl_chat_end_line(live.chat);
    status = EXIT_OK;
out:
    json_decref(history);
    live_free(&live);
    return status;
}

int relay_run_watch(const rl_cli_args_t *args)
{
    const char *since = rl_cli_value(args, "since");
    int count = 0, status;
    live_t live;

    if (relay_parse_int(rl_cli_value(args, "count"), 1, 1000000, &count) != 0)
        return relay_report(EXIT_USAGE, "--count must be a positive integer", NULL);
    if (since != NULL && (since[0] == '\0' || strlen(since) >= RL_SSE_ID_MAX))
        return relay_report(EXIT_USAGE, "--since must be an event id", NULL);
    status = relay_need_login();
    if (status != EXIT_OK)
        return status;
    status = relay_connect();
    if (status != EXIT_OK)
        return status;
    status = live_init(&live, RL_CHAT_WATCH, NULL, 0, count);
    if (status != EXIT_OK)
        goto out;
    if (attach(&live, since) != 0) {
        status = relay_report(EXIT_RUNTIME, "cannot start the stream", NULL);
        goto out;
    }
    while (count == 0 || rl_chat_count(live.chat) < count) {
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
