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
 * reply in time), 4 when the final reply did not finish (the agent failed).
 *
 * This file is the command table; relay.h says where the rest is.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "client/api.h"
#include "relay.h"

/* ---- help and version ---- */

static int run_version(const rl_cli_args_t *args)
{
    if (relay.cli.json) {
        json_t *version = json_pack("{s:s, s:s, s:s}", "name", "relay", "version", RELAY_VERSION, "api", "v1");
        relay_print_json(version);
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
static const rl_cli_flag_t installations_flags[] = {
    {"all", 0, NULL, "revoked installations too"},
    {NULL, 0, NULL, NULL},
};
static const rl_cli_flag_t sessions_flags[] = {
    {"archived", 'a', NULL, "list archived sessions instead of active ones"},
    {"all", 0, NULL, "sessions of revoked installations too"},
    {NULL, 0, NULL, NULL},
};
static const rl_cli_flag_t new_flags[] = {
    {"installation", 'i', "ID",
     "the installation (bridge) the session runs on (default: the only one not revoked, or else the only "
     "healthy one)"},
    {"title", 't', "TITLE", "a title"},
    {"encrypted", 0, NULL, "fail rather than start a plain session when the session cannot be encrypted"},
    {"plain", 0, NULL, "a plain session even when the bridge encrypts"},
    {"agent", 0, "NAME", "which of the bridge's agents runs the session (default: its default agent)"},
    {"project", 0, "ID", "the project folder the agent runs in: an id relay projects lists"},
    {"worktree", 0, "BRANCH", "with --project: run in a new git worktree on this branch"},
    {"resume", 0, "AGENT_SESSION_ID", "continue one of the agent's own sessions (relay agent-sessions lists them)"},
    {NULL, 0, NULL, NULL},
};
static const rl_cli_flag_t agent_sessions_flags[] = {
    {"agent", 0, "NAME", "the agent whose sessions to list"},
    {"project", 0, "ID", "the project (an id relay projects lists)"},
    {NULL, 0, NULL, NULL},
};
static const rl_cli_flag_t devices_flags[] = {
    {"yes", 'y', NULL, "confirm without asking (after comparing the emoji yourself; needed off a terminal)"},
    {"code", 'c', "CODE",
     "confirm: the one-time code the bridge's machine showed (relay-bridge devices add): with it the bridge "
     "accepts this terminal at once; without it, its owner confirms this terminal there"},
    {NULL, 0, NULL, NULL},
};
static const char *const devices_examples[] = {"relay devices", "relay devices confirm dev_4f2a...",
                                               "relay devices confirm dev_4f2a... --code ABCD-EFGH-JKLM-NPQR-ST23",
                                               "relay devices revoke dev_91c0...", NULL};
static const rl_cli_flag_t history_flags[] = {
    {"limit", 'n', "N", "how many of the newest items, 1 to 100 (default 50)"},
    {NULL, 0, NULL, NULL},
};
static const rl_cli_flag_t send_flags[] = {
    {"timeout", 0, "DURATION", "give up waiting for the reply after this long (default 10m), exit status 3"},
    {NULL, 0, NULL, NULL},
};
static const rl_cli_flag_t approve_flags[] = {
    {"always", 0, NULL, "approve_always: a permanent grant for this action"},
    {"scope", 0, "SCOPE", "with --always: session, tool, domain or all (default tool: this command, as the chat's a)"},
    {"value", 0, "VALUE", "with --always: the scope's value (default: taken from the request)"},
    {"session", 0, "SESSION",
     "the approval's session, for one no longer pending (in an encrypted session another device's decision, "
     "which the bridge may have refused, does not stop yours: docs/api.md)"},
    {NULL, 0, NULL, NULL},
};
static const rl_cli_flag_t deny_flags[] = {
    {"session", 0, "SESSION", "the approval's session, for one no longer pending (see approve)"},
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
static const char *const new_examples[] = {"relay new --title \"release notes\"",
                                           "relay new --installation inst_0123456789abcdef --title \"release notes\"",
                                           "relay new --agent codex --project p_3xQ2v... --worktree fix/login",
                                           "relay new --agent claude --resume 0199c5e2-...", NULL};
static const char *const projects_examples[] = {
    "relay projects inst_0123456789abcdef",
    "relay agent-sessions inst_0123456789abcdef --agent claude --project p_3xQ2v...", NULL};
static const char *const send_examples[] = {"relay send ses_abc \"summarise the open issues\"",
                                            "relay send ses_abc \"run the tests\" --json", NULL};
static const char *const chat_examples[] = {"relay chat", "relay chat ses_abc", NULL};
static const char *const grant_examples[] = {"relay grants", "relay grant revoke grt_0123456789abcdef", NULL};
static const char *const approve_examples[] = {"relay approve apr_abc", "relay approve apr_abc --always --scope tool",
                                               "relay approve apr_abc --session ses_abc", "relay deny apr_abc", NULL};
static const char *const capability_examples[] = {"relay capability refuse dcr_abc",
                                                  "relay capability location dcr_abc 52.5200,13.4050,25", NULL};
static const char *const watch_examples[] = {"relay watch", "relay watch --json --count 5", NULL};
static const char *const help_examples[] = {"relay help send", "relay help --json", NULL};

static const rl_cli_command_t commands[] = {
    {"login", "", 0, 0, "check a server and token and store them (mode 0600)",
     "The credentials go to $RELAY_CONFIG_DIR/client.json, else the user's config folder (~/.config/relay).",
     login_flags, login_examples, relay_run_login},
    {"logout", "", 0, 0, "forget the stored server and token", NULL, NULL, NULL, relay_run_logout},
    {"whoami", "", 0, 0, "show the user, the server and counts of installations and sessions", NULL, NULL, NULL,
     relay_run_whoami},
    {"pair", "<code>", 1, 1, "claim the 7-letter pairing code a bridge shows", NULL, NULL, pair_examples,
     relay_run_pair},
    {"installations", "", 0, 0, "list your installations (paired bridges) with their health",
     "Revoked installations are left out unless --all is given.", installations_flags, NULL, relay_run_installations},
    {"installation", "rename|emoji|revoke <id> [value]", 2, 3, "rename an installation, set its emoji, or revoke it",
     "An empty value clears the name or emoji. Revoking disconnects the bridge for good.", NULL, installation_examples,
     relay_run_installation},
    {"sessions", "", 0, 0, "list sessions",
     "Active sessions, or archived ones with --archived; sessions of revoked installations only with --all.",
     sessions_flags, NULL, relay_run_sessions},
    {"new", "", 0, 0, "start a session on an installation",
     "Without --installation the session runs on your only installation that is not revoked, or else on the "
     "only healthy one; when several could, it asks you to choose. The session is end-to-end encrypted when "
     "its bridge has a device key this terminal confirmed (relay devices confirm): the key is made here and "
     "shared with the bridge only.",
     new_flags, new_examples, relay_run_new},
    {"projects", "<installation>", 1, 1, "list the project folders a bridge offers to start a session in",
     "Asked of the bridge, live. When this terminal confirmed the bridge (relay devices confirm), the bridge seals "
     "the list to it and it is opened here; a list sealed to another device is shown as such. With --json: the "
     "bridge's answer, {projects: [{id, name, path, branch, agents_used}]} (or {sealed, to_device_id, "
     "from_device_id} when this terminal cannot open it).",
     NULL, projects_examples, relay_run_projects},
    {"agent-sessions", "<installation>", 1, 1, "list an agent's own sessions in a project, to resume one",
     "As projects: asked of the bridge, opened here when sealed to this terminal. With --json: {sessions: "
     "[{agent_session_id, title, cwd, updated_at, bound_session_id}]} (or the sealed form).",
     agent_sessions_flags, projects_examples, relay_run_agent_sessions},
    {"rename", "<session> <title>", 2, 2, "rename a session (\"\" clears the title)", NULL, NULL, NULL,
     relay_run_session_action},
    {"archive", "<session>", 1, 1, "archive a session", NULL, NULL, NULL, relay_run_session_action},
    {"unarchive", "<session>", 1, 1, "bring an archived session back", NULL, NULL, NULL, relay_run_session_action},
    {"delete", "<session>", 1, 1, "delete a session (restorable for 24 h)", NULL, NULL, NULL, relay_run_session_action},
    {"restore", "<session>", 1, 1, "restore a deleted session", NULL, NULL, NULL, relay_run_session_action},
    {"history", "[session]", 0, 1, "show a session's messages, tool calls and approvals (default: your newest)",
     "The session's timeline, oldest first (without a session, your newest one, as relay chat takes it): messages; tool calls with their status, arguments and results, a unified diff "
     "for each edit (coloured on a terminal) and plans as checklists; approvals with what the agent showed "
     "and the decision. With --json: {items, messages, has_more, next_cursor}, items and messages oldest first.",
     history_flags, NULL, relay_run_history},
    {"send", "<session> <text>", 2, 2, "send a message and stream the reply",
     "Prints the reply as it streams and task lines as they start and end; on a terminal it asks about "
     "approvals. Exit status: 0 when the reply finished (finish_reason stop or tool_call), 4 when it is final "
     "but did not finish (error: the agent failed or its bridge gave up; cancelled; incomplete: the relay "
     "ended it; length, content_filter; an end without a reason is stop), 3 when the turn ended without a final reply (Ctrl-C cancels it; "
     "--timeout), 1 on errors. With --json, one JSON object per line: sent, message_added, "
     "message_delta, message_finalized (a message that ended as a tool call: the turn goes on in the next), "
     "task_*, approval_*, device_capability_*, resync, polled, and done {status, text, finish_reason, source} "
     "(the turn's last message).",
     send_flags, send_examples, relay_run_send},
    {"chat", "[session]", 0, 1, "chat interactively in a session (default: your newest)",
     "Type a message and watch the answer stream. A line typed while the agent answers is queued (up to 16) "
     "and sent when the turn ends, one at a time, in order; Ctrl-C on the turn drops what is queued, and says "
     "so. Approvals are asked in place and answered with one key, "
     "no Enter (a line when input is not a terminal): o approve once; s approve this request and, while "
     "this chat is open, the session's later ones (each stored as approve: the relay keeps no grant for "
     "it); a always approve this command (approve_always, scope tool); d deny. Ctrl-C cancels the reply in "
     "progress; Ctrl-C when no reply is in progress, Ctrl-D or /quit leaves.",
     NULL, chat_examples, relay_run_chat},
    {"cancel", "<session>", 1, 1, "ask the agent to stop the current turn", NULL, cancel_flags, NULL, relay_run_cancel},
    {"approvals", "", 0, 0, "list pending approvals", NULL, NULL, NULL, relay_run_approvals},
    {"approve", "<approval>", 1, 1, "approve a pending approval", NULL, approve_flags, approve_examples,
     relay_run_decide},
    {"deny", "<approval>", 1, 1, "deny a pending approval", NULL, deny_flags, approve_examples, relay_run_decide},
    {"capabilities", "", 0, 0, "list pending device capability requests (an agent asking for your location or a photo)",
     NULL, NULL, NULL, relay_run_capabilities},
    {"capability", "refuse|location <request> [LAT,LON[,ACCURACY]]", 2, 3,
     "refuse a device capability request, or answer a location request with a location you type",
     "A terminal has no camera: a photo is taken in the web client. ACCURACY is in metres (default 0).", NULL,
     capability_examples, relay_run_capability},
    {"devices", "[list|confirm ID|revoke ID]", 0, 2, "list your devices, confirm a bridge's emoji, revoke a device",
     "Encryption keys live on devices: this terminal is one (registered on first use, its key in the config "
     "folder), each relay-bridge is one, each browser is one. confirm shows the four emoji the bridge must show "
     "too and asks before telling the relay. The bridge shares its session keys with this terminal, and takes "
     "its signed decisions, only on evidence the relay cannot make: the one-time code its machine showed "
     "(--code), or its owner's relay-bridge devices confirm there. revoke removes a device (a lost phone) and gives the encrypted "
     "sessions this terminal holds new keys, so the revoked device cannot read what comes next.",
     devices_flags, devices_examples, relay_run_devices},
    {"grants", "", 0, 0, "list the permanent grants approve_always made", NULL, NULL, NULL, relay_run_grants},
    {"grant", "revoke <grant>", 2, 2, "revoke a grant: the agent asks again for what it covered", NULL, NULL,
     grant_examples, relay_run_grant},
    {"watch", "", 0, 0, "print the raw event stream, one event per line",
     "Reconnects with Last-Event-ID after a drop; on resync it fetches and prints the snapshot.", watch_flags,
     watch_examples, relay_run_watch},
    {"help", "[command]", 0, 1, "show help; with --json, a manifest of every command, flag and example", NULL, NULL,
     help_examples, rl_cli_run_help},
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
    {EXIT_INCOMPLETE, "send: the reply is final but did not finish (the agent failed, or length, content_filter)"},
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
    RL_CLI_JSON_WHEN_PIPED,
    NULL,
};

int main(int argc, char **argv)
{
    int status = rl_cli_main(&relay.cli, &program, argc, argv);

    rl_api_free(relay.api);
    json_decref(relay.credentials);
    return status;
}
