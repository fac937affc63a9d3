/*
 * relay, the terminal client of relayd: what its files share. main.c holds
 * the command table; account.c, sessions.c and approvals.c the one-call
 * commands; live.c send, chat and watch, which drive the chat state machine
 * of the client core (src/client/chat.h) from the event stream, the keyboard
 * and signals.
 */
#ifndef RELAY_TOOL_RELAY_H
#define RELAY_TOOL_RELAY_H

#include <jansson.h>

#include "client/api.h"
#include "client/cli.h"
#include "rl_version.h"

#define RELAY_VERSION     RL_VERSION
#define RELAY_CREDENTIALS "client"
#define RELAY_USER_AGENT  "relay/" RELAY_VERSION

enum {
    EXIT_OK = RL_CLI_EXIT_OK,
    EXIT_RUNTIME = RL_CLI_EXIT_RUNTIME,
    EXIT_USAGE = RL_CLI_EXIT_USAGE,
    EXIT_UNFINISHED = 3, /* send: no final reply (cancelled, or none in time) */
    EXIT_INCOMPLETE = 4  /* send: a final reply that did not finish (the agent failed, or length, ...) */
};

/* The running program: its output, its login and its connection to the relay. */
typedef struct relay {
    rl_cli_t cli;
    const char *server; /* base URL: RELAY_SERVER, else the stored login */
    const char *token;  /* user token: RELAY_TOKEN, else the stored login; never printed */
    json_t *credentials;
    rl_api_t *api;
} relay_t;

extern relay_t relay;

/* Output. */
int relay_report(int status, const char *message, json_t *extra);
/* Reports an API failure (spec client rule 6: with its X-Request-ID) and returns EXIT_RUNTIME. */
int relay_report_api(const rl_api_error_t *error);
const char *relay_style(rl_term_style_t style);
void relay_print_json(const json_t *value);
/* Prints result as JSON, or human_fmt with id on a terminal; steals result; EXIT_OK. */
int relay_print_result(json_t *result, const char *human_fmt, const char *id);
void relay_show_installation(const json_t *installation);
void relay_show_session(const json_t *session);

/* Requests. */
/* Settles the server and token (RELAY_SERVER and RELAY_TOKEN override the stored login); EXIT_OK or reported. */
int relay_need_login(void);
/* Makes relay.api for relay.server and relay.token; EXIT_OK or reported. */
int relay_connect(void);
/* One call of the client API (rl_api_call) over relay.api; connects first. body is not stolen. */
int relay_call(const char *method, const char *path, const json_t *body, json_t **result, rl_api_error_t *error);
/*
 * One call whose answer carries one object to show: JSON as it came, or the
 * label and the object's line on a terminal. body is stolen.
 */
int relay_call_and_show(const char *method, const char *path, json_t *body, const char *label, const char *key,
                        void (*show)(const json_t *object));
/* GET /v1/me after relay_need_login; EXIT_OK with *me, or reported. */
int relay_fetch_me(json_t **me);
int relay_fetch_history(const char *session_id, int limit, json_t **result);
/* GET /v1/me/sessions/:id/timeline?limit=N (newest first); EXIT_OK with *result, or reported. */
int relay_fetch_timeline(const char *session_id, int limit, json_t **result);
/*
 * The newest active session not on a revoked installation, for command (chat, history: named in the
 * note it prints on stderr): EXIT_OK with its id in out, or reported.
 */
int relay_newest_session(const char *command, char *out, size_t outsz);
/* An installation the relay revoked: left out of the default lists and choices. */
int relay_revoked(const json_t *installation);
/* Whether the session's installation (looked up in me) is revoked. */
int relay_on_revoked(const json_t *me, const json_t *session);
/* An integer flag from min to max; 0 (also when text is NULL, *out untouched) or -1. */
int relay_parse_int(const char *text, int min, int max, int *out);

/* Encryption (e2e.c). */
/* Opens the *_ct fields of an answer or event in place, for the sessions this device holds keys of. */
void relay_e2e_open_result(json_t *result);
/* An SSE event's data with its *_ct fields opened: malloc'd, or NULL when it stays as it is. */
char *relay_e2e_open_event(const char *data, size_t len);
/* A send's body: text sealed into text_ct for an encrypted session. EXIT_OK, or reported (nothing to send). */
int relay_e2e_seal_send(const char *session_id, json_t *body);
/*
 * A capability answer's body: its location sealed into answer_ct
 * (capabilities/<sid>) when this device holds the session's key. Without
 * one: EXIT_OK unchanged (a plain session), or reported when require says
 * the session is encrypted (nothing to send).
 */
int relay_e2e_seal_answer(const char *session_id, json_t *body, int require);
/* A decision's body: decision_sig and device_id added in an encrypted session (session_id may be NULL). */
int relay_e2e_sign(json_t *body, const char *approval_id, const char *session_id);
/*
 * Creates an encrypted session on installation_id when its bridge has a
 * device this terminal confirmed: the key made here, wrapped for this device
 * and the bridge, the title sealed. extra's members (agent, resume) go in
 * the start as they are, project sealed as project_ct (issue 36). EXIT_OK
 * (shown) or reported; -1 when the session cannot be encrypted and require
 * is 0 (the caller makes a plain one).
 */
int relay_e2e_new_session(const char *installation_id, const char *title, int require, const json_t *extra,
                          const json_t *project);
/*
 * issue 36: this terminal's device id in out when it confirmed the
 * installation's bridge (a list is then asked sealed to it), else "";
 * *devices the user's devices (or NULL). EXIT_OK, or reported.
 */
int relay_e2e_list_device(const char *installation_id, char *out, size_t outsz, json_t **devices);
/* A list the installation's bridge sealed to this terminal, opened (a new reference), or NULL. */
json_t *relay_e2e_open_list(const json_t *answer, const json_t *devices, const char *installation_id);

/* The commands. */
int relay_run_login(const rl_cli_args_t *args);
int relay_run_logout(const rl_cli_args_t *args);
int relay_run_whoami(const rl_cli_args_t *args);
int relay_run_pair(const rl_cli_args_t *args);
int relay_run_installations(const rl_cli_args_t *args);
int relay_run_installation(const rl_cli_args_t *args);
int relay_run_sessions(const rl_cli_args_t *args);
int relay_run_projects(const rl_cli_args_t *args);
int relay_run_agent_sessions(const rl_cli_args_t *args);
int relay_run_new(const rl_cli_args_t *args);
int relay_run_session_action(const rl_cli_args_t *args);
int relay_run_history(const rl_cli_args_t *args);
int relay_run_cancel(const rl_cli_args_t *args);
int relay_run_approvals(const rl_cli_args_t *args);
int relay_run_decide(const rl_cli_args_t *args);
int relay_run_capabilities(const rl_cli_args_t *args);
int relay_run_capability(const rl_cli_args_t *args);
int relay_run_grants(const rl_cli_args_t *args);
int relay_run_grant(const rl_cli_args_t *args);
int relay_run_send(const rl_cli_args_t *args);
int relay_run_chat(const rl_cli_args_t *args);
int relay_run_watch(const rl_cli_args_t *args);
int relay_run_devices(const rl_cli_args_t *args);

#endif
