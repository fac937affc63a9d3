/*
 * The live part of the terminal client as a state machine: the events of
 * the account's stream go in, and out come the screen (or one JSON object
 * per line), the turn in flight, the approvals waiting for an answer and the
 * calls the spec's client rules ask for.
 *
 * It follows the spec's client-side resume: pending approvals of the
 * snapshot are handled like live approval_requested events, de-duplicated by
 * approval_id; on resync the snapshot is read again and a turn in flight is
 * looked for by polling the session's messages every 3 s for up to 24 s.
 *
 * The machine makes no request itself: the program hands it the calls it
 * may make (rl_chat_ops_t) and drives it from its own loop (the stream, the
 * keyboard, signals, a clock). One thread.
 */
#ifndef RL_CLIENT_CHAT_H
#define RL_CLIENT_CHAT_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "client/api.h"
#include "client/term.h"

/* spec: client-side resume, rule 2. */
#define RL_CHAT_POLL_EVERY_MS  3000
#define RL_CHAT_POLL_WINDOW_MS 24000
/* How long chat follows a reply cancelled from it until the reply is final (rl_chat_cancelled). */
#define RL_CHAT_CANCEL_FOLLOW_MS 5000
/* How long a turn whose message ended as a tool call waits for its next message (the text after the call). */
#define RL_CHAT_NEXT_MESSAGE_MS 3000

typedef enum rl_chat_mode {
    RL_CHAT_WATCH, /* every event of the account, one per line */
    RL_CHAT_SEND,  /* one turn of one session */
    RL_CHAT_CHAT,  /* turns of one session, typed at a prompt */
} rl_chat_mode_t;

/* How a turn ended, for the program's exit status. */
typedef enum rl_chat_outcome {
    RL_CHAT_PENDING,    /* no turn ended yet */
    RL_CHAT_COMPLETE,   /* a final reply that finished (finish_reason stop or tool_call) */
    RL_CHAT_INCOMPLETE, /* a final reply that did not: no finish_reason (the agent failed, was cancelled,
                           or its bridge gave up), length or content_filter */
    RL_CHAT_CANCELLED,  /* cancelled from here */
    RL_CHAT_GONE,       /* the session was deleted or its installation revoked */
} rl_chat_outcome_t;

/* The calls the machine may make, each one REST call of the relay's client API. */
typedef struct rl_chat_ops {
    /* POST /v1/me/approvals/:id; 0 with *result (a new reference), or -1 with error. scope may be NULL. */
    int (*decide)(void *user, const char *approval_id, const char *decision, const char *scope, json_t **result,
                  rl_api_error_t *error);
    /* GET /v1/me/snapshot; 0 with *snapshot (a new reference), or -1 with error. */
    int (*snapshot)(void *user, json_t **snapshot, rl_api_error_t *error);
    /* GET /v1/me/sessions/:id/messages?limit=N; 0 with *history (a new reference), or -1 with error. */
    int (*history)(void *user, const char *session_id, int limit, json_t **history, rl_api_error_t *error);
    /* A call the program must report as its error (a snapshot that failed). */
    void (*failed)(void *user, const rl_api_error_t *error);
    /* The stream said hello, announcing its heartbeat interval (0 when it gave none). May be NULL. */
    void (*hello)(void *user, long heartbeat_ms);
    void *user;
} rl_chat_ops_t;

typedef struct rl_chat_options {
    rl_chat_mode_t mode;
    const char *session_id; /* send and chat; copied */
    int json;               /* one JSON object per line instead of the screen */
    int interactive;        /* approvals are asked on the terminal */
    int max_count;          /* watch: stop counting after this many events (0: no limit) */
    int single_key;         /* an approval is answered with one key, no Enter (the program reads keys) */
    FILE *out, *err;        /* the screen or JSON lines, and notes for people */
    rl_term_t out_term, err_term;
    rl_chat_ops_t ops;
} rl_chat_options_t;

typedef struct rl_chat rl_chat_t;

/* NULL on allocation failure. */
rl_chat_t *rl_chat_new(const rl_chat_options_t *options);
void rl_chat_free(rl_chat_t *chat);

/* The installation of the session (from /v1/me), so that its revocation ends the session's turns. */
void rl_chat_set_installation(rl_chat_t *chat, const char *installation_id);
/* While set, approvals are not handled (chat reads the snapshot again once the history is on screen). */
void rl_chat_defer_approvals(rl_chat_t *chat, int defer);
/* Whether approvals are answered with one key (the terminal gives keys) or a line. */
void rl_chat_set_single_key(rl_chat_t *chat, int single_key);
/* Whether approvals are asked here; a prompt nobody can answer any more is given up with 0. */
void rl_chat_set_interactive(rl_chat_t *chat, int interactive);

/*
 * One event of the stream: its type, its own id (NULL when the event
 * carried none) and its data (JSON text, len bytes).
 */
void rl_chat_event(rl_chat_t *chat, const char *event, const char *id, const char *data, size_t len);
/* The stream dropped and reconnects in reconnect_in_ms (-1: it will not). */
void rl_chat_stream_lost(rl_chat_t *chat, const char *why, long reconnect_in_ms);

/* Reads the snapshot and handles its pending approvals. 0, or -1 after ops.failed was told. */
int rl_chat_snapshot(rl_chat_t *chat);
/* Shows the chat's header and the newest messages of history, and follows a reply still streaming. */
void rl_chat_intro(rl_chat_t *chat, const json_t *history);
/* A message was sent: result is the send call's (interaction_id, message_id); its turn begins. */
void rl_chat_sent(rl_chat_t *chat, const json_t *result);
/*
 * The turn in flight was cancelled from here (the cancel call was made). send
 * and watch end the turn at once; chat follows its reply until it is final,
 * for RL_CHAT_CANCEL_FOLLOW_MS at most, or until a second call.
 */
void rl_chat_cancelled(rl_chat_t *chat);
/* Polls for the turn's reply when the resume rule says it is time. now_ms is rl_clock_mono_ms(). */
void rl_chat_tick(rl_chat_t *chat, int64_t now_ms);
/* Shows "you>" when chat waits for a message. */
void rl_chat_prompt(rl_chat_t *chat);
/* Ends a line of streamed text, if one is open. */
void rl_chat_end_line(rl_chat_t *chat);
/*
 * A line typed while an approval is asked, or one key ("s") in single_key
 * mode: 1 when it was taken as the answer (or refused as one), 0 when no
 * approval is asked.
 */
int rl_chat_answer(rl_chat_t *chat, const char *line);

int rl_chat_turn_active(const rl_chat_t *chat);
rl_chat_outcome_t rl_chat_outcome(const rl_chat_t *chat);
/* Why the session can no longer answer (deleted, revoked), or NULL. */
const char *rl_chat_gone(const rl_chat_t *chat);
/* An approval is on screen waiting for its answer. */
int rl_chat_prompting(const rl_chat_t *chat);
/* Approvals waiting for an answer here (the one on screen included). */
size_t rl_chat_waiting(const rl_chat_t *chat);
/* The stream said hello at least once. */
int rl_chat_hello_seen(const rl_chat_t *chat);
/* watch: events shown so far. */
int rl_chat_count(const rl_chat_t *chat);
/* The interaction of the turn in flight or last ended ("" before the first). */
const char *rl_chat_interaction(const rl_chat_t *chat);

/*
 * Whether a message is not shown: an agent message that ended as a tool call
 * with no text, the placeholder of a turn that began with a tool call (the
 * text after it is the next message). Pure.
 */
int rl_chat_message_is_hidden(const json_t *message);
/* Renderers shared with the one-call commands; a hidden message prints nothing. */
void rl_chat_print_message(FILE *out, const rl_term_t *term, const json_t *message);
void rl_chat_print_approval(FILE *out, const rl_term_t *term, const json_t *approval);

#endif
