/*
 * relay-bridge: pairs with a relay once, then runs the user's agent behind
 * it (src/bridge/). Commands: pair, status, run, devices, help, version.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bridge/agent.h"
#include "bridge/bridge.h"
#include "bridge/enrol.h"
#include "bridge/keyring.h"
#include "client/cli.h"
#include "client/client.h"
#include "client/credentials.h"
#include "client/retry.h"
#include "client/term.h"
#include "common/buf.h"
#include "common/duration.h"
#include "common/qr.h"
#include "common/log.h"
#include "rl_version.h"

#define BRIDGE_VERSION RL_VERSION
#define CREDENTIALS    "bridge"

static rl_cli_t cli;
/* argv[0]: how to name this program in a command to run next (see self_name). */
static const char *invoked_as = "relay-bridge";

static int report(int status, const char *message)
{
    return rl_cli_report(&cli, status, message, NULL);
}

/* pair and status print JSON with --json and whenever stdout is not a terminal. */
static int machine_output(void)
{
    return cli.json || !cli.out.tty;
}

/*
 * A duration flag: "30ms", "2s", "5m" as relayd's settings take them, or a
 * bare number of milliseconds (what these flags took first). NULL leaves *out.
 */
static int parse_duration(const char *text, long max_ms, long *out)
{
    int64_t ms;

    if (text == NULL)
        return 0;
    if (rl_duration_parse_default(text, 1, &ms) != 0 || ms > max_ms)
        return -1;
    *out = (long)ms;
    return 0;
}

/* ---- pair ------------------------------------------------------------------------------------------ */

/* POSTs body to path, retrying as the client rules say. The decoded answer, or NULL with a message printed. */
static json_t *post(rl_client_t *client, const char *path, json_t *body, long *status)
{
    const char *headers[] = {"Content-Type: application/json", NULL};
    char *text = json_dumps(body, JSON_COMPACT);
    rl_client_response_t response;
    json_t *answer = NULL;
    int result;

    *status = 0;
    if (text == NULL)
        return NULL;
    result = rl_retry_request(client, NULL, NULL, NULL, "POST", path, headers, text, strlen(text), &response, &answer);
    free(text);
    *status = result == 0 ? response.status : 0;
    if (result != 0)
        fprintf(stderr, "relay-bridge: %s: %s\n", path, response.error);
    else if (response.status >= 300 && response.status != 410)
        fprintf(stderr, "relay-bridge: %s: HTTP %ld %s (request id %s)\n", path, response.status,
                rl_client_error_code(answer) != NULL ? rl_client_error_code(answer) : "", response.request_id);
    rl_client_response_free(&response);
    return answer;
}

/*
 * Whether the relay serves the page that claims a code (GET /pair, the web
 * client's): one probe when the pairing screen opens, so that the screen
 * never shows a link (or a QR code of one) that answers 404.
 */
static int claim_page_served(const char *base)
{
    /* A short wait: the screen is not held up for long by a relay that does not answer. */
    rl_client_options_t options = {2000, 3000, 1024 * 1024, "relay-bridge/" BRIDGE_VERSION};
    rl_client_response_t response;
    rl_client_t *probe = NULL;
    int served;

    if (rl_client_new(base, &options, &probe) != 0)
        return 0;
    served = rl_client_get(probe, "/pair", NULL, &response) == 0 && response.status == 200;
    rl_client_response_free(&response);
    rl_client_free(probe);
    return served;
}

/*
 * The pairing screen. enrol, when there is one, is a code for the first
 * device's verification of this machine (docs/bridge.md, "Devices"): the QR
 * and the link carry it in their fragment, which the browser keeps from
 * the relay, so that the phone that pairs can also prove it saw this screen.
 */
static void show_code(const char *code, const char *claim_url, const char *enrol, int claim_page, long expires_in)
{
    char link[1300];

    if (enrol != NULL)
        snprintf(link, sizeof(link), "%s#enrol=%s", claim_url, enrol);
    else
        snprintf(link, sizeof(link), "%s", claim_url);
    if (machine_output()) {
        json_t *doc = json_pack("{s:s, s:s, s:b, s:i}", "code", code, "claim_url", claim_url, "claim_page", claim_page,
                                "expires_in_s", (int)expires_in);
        if (doc != NULL && enrol != NULL) {
            json_object_set_new(doc, "enrol_code", json_string(enrol));
            json_object_set_new(doc, "enrol_link", json_string(link));
        }
        rl_cli_print_json(&cli, doc);
        json_decref(doc);
        return;
    }
    printf("\nEnter this code in your Relay app to pair this bridge:\n\n    %s", rl_term_style(&cli.out, RL_TERM_BOLD));
    for (const char *c = code; *c != '\0'; c++)
        printf("%c ", *c);
    printf("%s\n\n", rl_term_style(&cli.out, RL_TERM_RESET));
    if (claim_page) {
        rl_qr_print(stdout, link);
        printf("Or open %s\n", link);
    } else {
        printf("(with the terminal client: relay pair %s)\n", code);
    }
    if (enrol != NULL)
        printf("For encrypted chats, the device that verifies this machine types this code (once, within a day):\n"
               "    %s\n",
               enrol);
    printf("The pairing code is valid for %ld seconds. Waiting...\n", expires_in);
    fflush(stdout);
}

/*
 * This program as a command to type: "relay-bridge" when that is what PATH
 * finds, else the path it was run as (build/relay-bridge in the README's tour).
 */
static const char *self_name(void)
{
    const char *path = getenv("PATH");
    char self[PATH_MAX], found[PATH_MAX], candidate[PATH_MAX];
    size_t len;

    if (strchr(invoked_as, '/') == NULL || realpath(invoked_as, self) == NULL)
        return invoked_as;
    while (path != NULL && *path != '\0') {
        len = strcspn(path, ":");
        if (len > 0 &&
            (size_t)snprintf(candidate, sizeof(candidate), "%.*s/relay-bridge", (int)len, path) < sizeof(candidate) &&
            realpath(candidate, found) != NULL && strcmp(found, self) == 0)
            return "relay-bridge";
        path = path[len] == ':' ? path + len + 1 : path + len;
    }
    return invoked_as;
}

/* After pairing: the command that comes next, with the tour's example agent when it is here to run. */
static void print_next_step(void)
{
    if (access("examples/echo_agent.py", R_OK) == 0)
        printf("Start the bridge with: %s run --agent 'jsonl:python3 examples/echo_agent.py --delay 0.3'\n"
               "(the README's example agent; your own: --agent exec:COMMAND, jsonl:, acp: or openai:, "
               "%s help run)\n",
               self_name(), self_name());
    else
        printf("Start the bridge with: %s run --agent exec:COMMAND (or jsonl:, acp:, openai:; %s help run)\n",
               self_name(), self_name());
}

static int run_pair(const rl_cli_args_t *args)
{
    const char *server = rl_cli_value(args, "server"), *name = rl_cli_value(args, "name");
    char host[256] = "relay-bridge", claim_url[1200], message[300], enrol[RL_E2E_ENROL_TEXT];
    int have_enrol;
    rl_client_t *client = NULL;
    json_t *answer, *body, *saved;
    const char *code, *poll_token;
    long status;
    int result = 1;
    time_t expires;

    if (server == NULL)
        return report(2, "pair needs --server URL");
    if (name == NULL) {
        gethostname(host, sizeof(host) - 1);
        name = host;
    }
    if (rl_client_new(server, NULL, &client) != 0)
        return report(2, "--server must be an http:// or https:// URL");
    body = json_pack("{s:s, s:s}", "connector_type", "relay-bridge", "host_label", name);
    answer = post(client, "/v1/pairing/start", body, &status);
    json_decref(body);
    code = json_string_value(json_object_get(json_object_get(answer, "result"), "code"));
    poll_token = json_string_value(json_object_get(json_object_get(answer, "result"), "poll_token"));
    if (code == NULL || poll_token == NULL) {
        report(1, "the relay did not start pairing");
        goto out;
    }
    expires = (time_t)json_integer_value(json_object_get(json_object_get(answer, "result"), "expires_at"));
    snprintf(claim_url, sizeof(claim_url), "%s/pair?code=%s", rl_client_base(client), code);
    have_enrol = rl_enrol_code_new(RL_ENROL_TTL_MS, enrol) == 0;
    if (!have_enrol)
        fprintf(stderr,
                "relay-bridge: could not keep a code for encrypted chats (relay-bridge devices add makes one)\n");
    show_code(code, claim_url, have_enrol ? enrol : NULL, claim_page_served(rl_client_base(client)),
              (long)(expires - time(NULL)));
    body = json_pack("{s:s}", "poll_token", poll_token);
    for (;;) {
        json_t *poll, *r;
        const char *state;
        sleep(1);
        poll = post(client, "/v1/pairing/poll", body, &status);
        r = json_object_get(poll, "result");
        state = json_string_value(json_object_get(r, "status"));
        if (status == 410) {
            report(1, "the code expired before it was claimed: run relay-bridge pair again");
            json_decref(poll);
            break;
        }
        if (state != NULL && strcmp(state, "paired") == 0) {
            const char *inst = json_string_value(json_object_get(r, "installation_id"));
            saved = json_pack("{s:s, s:s, s:O, s:s, s:I}", "server", rl_client_base(client), "installation_id",
                              inst != NULL ? inst : "", "token", json_object_get(r, "token"), "host_label", name,
                              "paired_at", (json_int_t)time(NULL));
            if (saved == NULL || rl_credentials_save(CREDENTIALS, saved) != 0) {
                report(1, "could not save the credentials");
            } else {
                char path[512] = "";
                rl_credentials_path(CREDENTIALS, path, sizeof(path));
                if (machine_output()) {
                    json_t *doc = json_pack("{s:s, s:s, s:s}", "status", "paired", "installation_id",
                                            inst != NULL ? inst : "", "credentials", path);
                    rl_cli_print_json(&cli, doc);
                    json_decref(doc);
                } else {
                    printf("Paired: installation %s. Credentials saved in %s.\n", inst != NULL ? inst : "", path);
                    print_next_step();
                }
                result = 0;
            }
            json_decref(saved);
            json_decref(poll);
            break;
        }
        if (state == NULL && status != 0 && status != 429 && status < 500) {
            snprintf(message, sizeof(message), "pairing failed (HTTP %ld)", status);
            report(1, message);
            json_decref(poll);
            break;
        }
        json_decref(poll);
    }
    json_decref(body);
out:
    json_decref(answer);
    rl_client_free(client);
    return result;
}

/* ---- status ---------------------------------------------------------------------------------------- */

static int run_status(const rl_cli_args_t *args)
{
    json_t *cred = rl_credentials_load(CREDENTIALS), *st = rl_credentials_load("bridge-status");
    const char *state = json_string_value(json_object_get(st, "state"));
    int pid = (int)json_integer_value(json_object_get(st, "pid"));
    int alive = pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
    const char *connection = state == NULL || !alive ? "not running" : state;
    const char *inst = json_string_value(json_object_get(cred, "installation_id"));

    (void)args;
    if (machine_output()) {
        json_t *doc = json_pack("{s:b, s:s?, s:s?, s:s, s:b}", "paired", cred != NULL, "installation_id", inst,
                                "server", json_string_value(json_object_get(cred, "server")), "connection", connection,
                                "connected", alive && state != NULL && strcmp(state, "connected") == 0);
        rl_cli_print_json(&cli, doc);
        json_decref(doc);
    } else if (cred == NULL) {
        printf("Not paired. Pair with: relay-bridge pair --server URL\n");
    } else {
        printf("Paired with %s as installation %s.\nBridge: %s", json_string_value(json_object_get(cred, "server")),
               inst != NULL ? inst : "?", connection);
        if (alive)
            printf(" (pid %d)", pid);
        printf("\n");
    }
    json_decref(cred);
    json_decref(st);
    return cred != NULL ? 0 : 3;
}

/* ---- sessions -------------------------------------------------------------------------------------- */

/*
 * The command that continues an agent's session at the desk, by the agent's
 * name (its ACP agentInfo.name contains the key): docs/bridge.md, "The
 * agent's sessions". An agent not here has none.
 */
static const struct {
    const char *agent, *command;
} desk_commands[] = {
    {"claude-agent-acp", "claude --resume"},
    {"codex-acp", "codex resume"},
};

/* text for a POSIX shell: as it is when it holds only safe bytes, else in single quotes. */
static void shell_word(rl_buf_t *out, const char *text)
{
    static const char safe[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-/:@+=,";

    if (*text != '\0' && strspn(text, safe) == strlen(text)) {
        rl_buf_append_str(out, text);
        return;
    }
    rl_buf_append_str(out, "'");
    for (; *text != '\0'; text++)
        rl_buf_append_str(out, *text == '\'' ? "'\\''" : (char[]){*text, '\0'});
    rl_buf_append_str(out, "'");
}

/* "cd CWD && COMMAND ID", or NULL when the agent has no desk command. A new string. */
static char *desk_command(const char *agent_name, const char *cwd, const char *agent_session_id)
{
    rl_buf_t out;
    size_t i;

    for (i = 0; agent_name != NULL && i < sizeof(desk_commands) / sizeof(desk_commands[0]); i++) {
        if (strstr(agent_name, desk_commands[i].agent) == NULL)
            continue;
        rl_buf_init(&out, 8192);
        rl_buf_append_str(&out, "cd ");
        shell_word(&out, cwd != NULL ? cwd : ".");
        rl_buf_printf(&out, " && %s ", desk_commands[i].command);
        shell_word(&out, agent_session_id);
        return rl_buf_take(&out, NULL);
    }
    return NULL;
}

/* Appends the bindings of one agent's state file (bridge-acp, bridge-acp-NAME) to list. */
static void add_bindings(const char *state_name, json_t *list)
{
    json_t *state = rl_credentials_load(state_name), *acp_id;
    const char *agent_name = json_string_value(json_object_get(state, "agent_name"));
    const char *agent = json_string_value(json_object_get(state, "agent_label"));
    const char *root = json_string_value(json_object_get(state, "cwd"));
    const char *relay_id;

    if (agent == NULL)
        agent = strcmp(state_name, "bridge-acp") == 0 ? "default" : state_name + strlen("bridge-acp-");
    json_object_foreach(json_object_get(state, "sessions"), relay_id, acp_id)
    {
        /* A session in a project of its own has its folder; the others run in the agent's. */
        const char *cwd = json_string_value(json_object_get(json_object_get(state, "cwds"), relay_id));
        char *command;
        if (!json_is_string(acp_id))
            continue;
        if (cwd == NULL)
            cwd = root;
        command = desk_command(agent_name, cwd, json_string_value(acp_id));
        json_array_append_new(list, json_pack("{s:s, s:s, s:O, s:s?, s:s?}", "session_id", relay_id, "agent", agent,
                                              "agent_session_id", acp_id, "cwd", cwd, "command", command));
        free(command);
    }
    json_decref(state);
}

static int run_sessions(const rl_cli_args_t *args)
{
    json_t *list = json_array(), *row;
    char path[PATH_MAX], *slash;
    DIR *dir;
    struct dirent *entry;
    size_t i;

    (void)args;
    /* Every agent's bindings: the old form's one agent keeps bridge-acp.json, another NAME bridge-acp-NAME.json. */
    add_bindings("bridge-acp", list);
    if (rl_credentials_path("bridge-acp", path, sizeof(path)) == 0 && (slash = strrchr(path, '/')) != NULL) {
        *slash = '\0';
        dir = opendir(path);
        while (dir != NULL && (entry = readdir(dir)) != NULL) {
            size_t len = strlen(entry->d_name);
            char name[256];
            if (strncmp(entry->d_name, "bridge-acp-", 11) != 0 || len <= 16 ||
                strcmp(entry->d_name + len - 5, ".json") != 0 || len - 5 >= sizeof(name))
                continue;
            snprintf(name, sizeof(name), "%.*s", (int)(len - 5), entry->d_name);
            add_bindings(name, list);
        }
        if (dir != NULL)
            closedir(dir);
    }
    if (machine_output()) {
        json_t *doc = json_pack("{s:O}", "sessions", list);
        rl_cli_print_json(&cli, doc);
        json_decref(doc);
    } else if (json_array_size(list) == 0) {
        printf("No relay session is bound to an agent session yet.\n");
    } else {
        printf("%-28s  %-12s  %-38s  %s\n", "RELAY SESSION", "AGENT", "AGENT SESSION", "CONTINUE AT THE DESK");
        json_array_foreach(list, i, row)
        {
            const char *command = json_string_value(json_object_get(row, "command"));
            printf("%-28s  %-12s  %-38s  %s\n", json_string_value(json_object_get(row, "session_id")),
                   json_string_value(json_object_get(row, "agent")),
                   json_string_value(json_object_get(row, "agent_session_id")),
                   command != NULL ? command : "(this agent has no command for it)");
        }
    }
    json_decref(list);
    return 0;
}

/* ---- run ------------------------------------------------------------------------------------------- */

/* agents.conf of the config folder, the text the options point into (kept until exit). */
#define AGENTS_CONF     "agents.conf"
#define AGENTS_CONF_MAX (64 * 1024)
static char *agents_conf_text;

/*
 * The agents and roots: --agent (repeatable, NAME=SPEC or the old bare SPEC),
 * or agents.conf when no --agent is given; --root adds to the file's roots and
 * --default-agent overrides its default. 0, or -1 with err set.
 */
static int agents_and_roots(const rl_cli_args_t *args, rl_bridge_options_t *o, char *err, size_t errsz)
{
    const char *values[RL_BRIDGE_AGENTS_MAX + RL_BRIDGE_ROOTS_MAX];
    char path[PATH_MAX];
    int n, i;

    n = rl_cli_values(args, "agent", values, RL_BRIDGE_AGENTS_MAX + 1);
    if (n > RL_BRIDGE_AGENTS_MAX) {
        snprintf(err, errsz, "at most %d --agent", RL_BRIDGE_AGENTS_MAX);
        return -1;
    }
    for (i = 0; i < n; i++)
        if (rl_agent_option(values[i], o, err, errsz) != 0)
            return -1;
    if (n == 0 && rl_credentials_path(AGENTS_CONF, path, sizeof(path)) == 0) {
        /* rl_credentials_path names NAME.json: the conf file sits beside it, under its own name. */
        char *dot = strrchr(path, '.');
        FILE *f;
        size_t len;
        if (dot != NULL && strcmp(dot, ".json") == 0)
            *dot = '\0';
        f = fopen(path, "r");
        if (f != NULL) {
            agents_conf_text = malloc(AGENTS_CONF_MAX + 1);
            len = agents_conf_text != NULL ? fread(agents_conf_text, 1, AGENTS_CONF_MAX + 1, f) : 0;
            fclose(f);
            if (agents_conf_text == NULL || len > AGENTS_CONF_MAX) {
                snprintf(err, errsz, "agents.conf in the config folder is larger than 64 KiB");
                return -1;
            }
            agents_conf_text[len] = '\0';
            if (rl_agents_conf_parse(agents_conf_text, o, err, errsz) != 0)
                return -1;
        }
    }
    n = rl_cli_values(args, "root", values, RL_BRIDGE_ROOTS_MAX + 1);
    for (i = 0; i < n; i++) {
        if (o->nroots == RL_BRIDGE_ROOTS_MAX) {
            snprintf(err, errsz, "at most %d --root", RL_BRIDGE_ROOTS_MAX);
            return -1;
        }
        o->roots[o->nroots++] = values[i];
    }
    if (rl_cli_value(args, "default-agent") != NULL)
        o->default_agent = rl_cli_value(args, "default-agent");
    o->plain_projects = rl_cli_value(args, "plain-projects") != NULL;
    return 0;
}

static int run_run(const rl_cli_args_t *args)
{
    json_t *cred = rl_credentials_load(CREDENTIALS);
    rl_bridge_options_t o = {.delta_window_ms = -1, .retry_window_ms = -1};
    const char *level = rl_cli_value(args, "log-level");
    char err[256];
    int result;

    if (cred == NULL) {
        if (errno == EPERM)
            return report(1, "the credentials file may be read by others: fix its mode (chmod 600)");
        return report(3, "not paired: run relay-bridge pair --server URL first");
    }
    o.server = json_string_value(json_object_get(cred, "server"));
    o.token = json_string_value(json_object_get(cred, "token"));
    o.installation_id = json_string_value(json_object_get(cred, "installation_id"));
    if (agents_and_roots(args, &o, err, sizeof(err)) != 0) {
        json_decref(cred);
        return report(2, err);
    }
    o.cwd = rl_cli_value(args, "cwd");
    o.no_e2e = rl_cli_value(args, "no-e2e") != NULL;
    o.files_url = rl_cli_value(args, "files-url");
    if (o.files_url != NULL && strncmp(o.files_url, "http://", 7) != 0 && strncmp(o.files_url, "https://", 8) != 0) {
        json_decref(cred);
        return report(2, "--files-url must be an http:// or https:// URL");
    }
    o.json = machine_output();
    o.label = json_string_value(json_object_get(cred, "host_label"));
    if (o.server == NULL || o.token == NULL) {
        json_decref(cred);
        return report(3, "the credentials file is incomplete: pair again");
    }
    if (o.nagents == 0) {
        json_decref(cred);
        return report(2, "run needs --agent exec:COMMAND, jsonl:COMMAND, acp:COMMAND or openai:URL (or agents in "
                         "agents.conf)");
    }
    if (parse_duration(rl_cli_value(args, "delta-window"), 3600000, &o.delta_window_ms) != 0 ||
        parse_duration(rl_cli_value(args, "backoff-first"), 3600000, &o.backoff_first_ms) != 0 ||
        parse_duration(rl_cli_value(args, "backoff-cap"), 3600000, &o.backoff_cap_ms) != 0 ||
        parse_duration(rl_cli_value(args, "retry-window"), 24L * 3600000L, &o.retry_window_ms) != 0) {
        json_decref(cred);
        return report(2, "durations are such as 30ms, 2s or 5m (a bare number is milliseconds), at most 1h (24h "
                         "for --retry-window)");
    }
    if (level != NULL) {
        rl_log_level_t parsed;
        if (rl_log_parse_level(level, &parsed) != 0) {
            json_decref(cred);
            return report(2, "--log-level is debug, info, warn or error");
        }
        rl_log_set_level(parsed);
    }
    result = rl_bridge_run(&o);
    json_decref(cred);
    return result;
}

/* ---- devices (docs/bridge.md, "Devices") ------------------------------------------------------------ */

/* The link that opens the app's verify screen with code filled in: a fragment, never sent to the relay. */
static void verify_link(char *out, size_t outsz, const char *server, const char *installation_id, const char *code)
{
    snprintf(out, outsz, "%s/#/verify/%s?enrol=%s", server, installation_id, code);
}

static void show_enrol_code(const char *code, const char *link, long long expires_at_ms)
{
    time_t until = (time_t)(expires_at_ms / 1000);
    char when[64];

    strftime(when, sizeof(when), "%Y-%m-%d %H:%M", localtime(&until));
    if (machine_output()) {
        json_t *doc = json_pack("{s:s, s:s, s:I}", "code", code, "link", link, "expires_at", (json_int_t)expires_at_ms);
        rl_cli_print_json(&cli, doc);
        json_decref(doc);
        return;
    }
    printf("To let a phone or browser read this machine's encrypted chats, open on it:\n\n");
    rl_qr_print(stdout, link);
    printf("%s\n\nor type this code when it asks (once, until %s):\n\n    %s%s%s\n\n", link, when,
           rl_term_style(&cli.out, RL_TERM_BOLD), code, rl_term_style(&cli.out, RL_TERM_RESET));
    printf("The relay never sees the code: whoever holds it can add a device, so show it to no one else.\n");
}

static int devices_add(const rl_cli_args_t *args)
{
    json_t *cred = rl_credentials_load(CREDENTIALS);
    const char *server = json_string_value(json_object_get(cred, "server"));
    const char *inst = json_string_value(json_object_get(cred, "installation_id"));
    long ttl_ms = RL_ENROL_TTL_MS;
    char code[RL_E2E_ENROL_TEXT], link[2048];
    int result;

    if (parse_duration(rl_cli_value(args, "ttl"), 30L * 24 * 3600 * 1000, &ttl_ms) != 0 || ttl_ms <= 0) {
        json_decref(cred);
        return report(2, "--ttl is a duration such as 10m or 24h, at most 30 days");
    }
    if (server == NULL || inst == NULL) {
        json_decref(cred);
        return report(3, "not paired: run relay-bridge pair --server URL first");
    }
    if (rl_enrol_code_new(ttl_ms, code) != 0) {
        json_decref(cred);
        return report(1, "could not save the code in the config folder");
    }
    verify_link(link, sizeof(link), server, inst, code);
    show_enrol_code(code, link, (long long)time(NULL) * 1000 + ttl_ms);
    result = 0;
    rl_e2e_wipe(code, sizeof(code));
    json_decref(cred);
    return result;
}

static void print_device_row(json_t *d)
{
    const char *state = json_string_value(json_object_get(d, "state"));
    const char *verified = json_string_value(json_object_get(d, "verified"));

    printf("  %s  %s (%s)", json_string_value(json_object_get(d, "device_id")),
           json_string_value(json_object_get(d, "label")), json_string_value(json_object_get(d, "platform")));
    if (strcmp(state, "accepted") == 0) {
        printf("  accepted, %s\n", verified != NULL && strcmp(verified, "code") == 0 ? "with a code from this machine"
                                                                                     : "confirmed on this machine");
        return;
    }
    printf("  shows %s  %s\n", json_string_value(json_object_get(d, "sas")),
           json_is_true(json_object_get(d, "reverify"))          ? "(accepted before this version: confirm it again)"
           : json_is_true(json_object_get(d, "phone_confirmed")) ? "(confirmed on the device, not here)"
                                                                 : "(not confirmed)");
}

static int devices_list(void)
{
    char err[256];
    rl_keyring_t *k = rl_keyring_peek(err, sizeof(err));
    json_t *list, *d;
    long long last = 0;
    size_t i, codes = rl_enrol_codes_live(&last), waiting = 0;

    if (k == NULL)
        return report(1, err);
    list = rl_keyring_devices(k);
    if (machine_output()) {
        json_t *doc = json_pack("{s:O, s:I}", "devices", list, "codes", (json_int_t)codes);
        rl_cli_print_json(&cli, doc);
        json_decref(doc);
    } else if (json_array_size(list) == 0) {
        printf("No device has asked for this machine's encrypted chats yet.\n");
    } else {
        printf("Devices of this machine's encrypted chats:\n");
        json_array_foreach(list, i, d)
        {
            print_device_row(d);
            waiting += strcmp(json_string_value(json_object_get(d, "state")), "waiting") == 0;
        }
        if (waiting > 0)
            printf("Confirm a waiting device that shows the same emoji: relay-bridge devices confirm DEVICE_ID\n");
    }
    if (!machine_output() && codes > 0)
        printf("%zu unused enrolment code%s (relay-bridge devices add).\n", codes, codes == 1 ? "" : "s");
    json_decref(list);
    rl_keyring_free(k);
    return 0;
}

/* The waiting (or accepted) row of device_id, or NULL. */
static json_t *find_device(json_t *list, const char *device_id)
{
    json_t *d;
    size_t i;

    json_array_foreach(list, i, d)
    {
        if (strcmp(json_string_value(json_object_get(d, "device_id")), device_id) == 0)
            return d;
    }
    return NULL;
}

/* Asks on the terminal whether the device shows sas. 1 for yes. */
static int ask_same_emoji(json_t *d)
{
    char answer[16] = "";

    printf("Device %s, \"%s\" (%s), must show: %s\nDoes it show these emoji? [y/N] ",
           json_string_value(json_object_get(d, "device_id")), json_string_value(json_object_get(d, "label")),
           json_string_value(json_object_get(d, "platform")), json_string_value(json_object_get(d, "sas")));
    fflush(stdout);
    if (fgets(answer, sizeof(answer), stdin) == NULL)
        return 0;
    return answer[0] == 'y' || answer[0] == 'Y';
}

static int devices_change(const rl_cli_args_t *args, int confirm)
{
    const char *device_id = args->npositional > 1 ? args->positional[1] : NULL;
    char err[256], message[512];
    rl_keyring_t *k;
    json_t *list, *d;
    int result = 0;

    if (device_id == NULL)
        return report(2, confirm ? "devices confirm needs a DEVICE_ID (relay-bridge devices lists them)"
                                 : "devices revoke needs a DEVICE_ID (relay-bridge devices lists them)");
    k = rl_keyring_peek(err, sizeof(err));
    if (k == NULL)
        return report(1, err);
    list = rl_keyring_devices(k);
    d = find_device(list, device_id);
    if (d == NULL) {
        snprintf(message, sizeof(message),
                 "no device %s has asked this machine (relay-bridge devices lists them; a device shows here once "
                 "relay-bridge run heard of it)",
                 device_id);
        result = report(1, message);
    } else if (!confirm) {
        result = rl_enrol_owner_revoke(device_id) == 0 ? 0 : report(1, "could not save in the config folder");
        if (result == 0 && !machine_output())
            printf("Device %s revoked on this machine: it gets no new keys, and its decisions no longer count.\n",
                   device_id);
    } else if (strcmp(json_string_value(json_object_get(d, "state")), "accepted") == 0) {
        if (!machine_output())
            printf("Device %s is already accepted.\n", device_id);
    } else if (rl_cli_value(args, "yes") == NULL && !(cli.out.tty && isatty(0))) {
        result = report(2, "not on a terminal: compare the emoji (relay-bridge devices), then confirm with --yes");
    } else if (rl_cli_value(args, "yes") == NULL && !ask_same_emoji(d)) {
        result = report(1, "not confirmed: nothing changed");
    } else if (rl_enrol_owner_confirm(device_id, json_string_value(json_object_get(d, "pubkey"))) != 0) {
        result = report(1, "could not save in the config folder");
    } else if (!machine_output()) {
        printf("Device %s confirmed on this machine: a running relay-bridge shares its chats' keys with it now.\n",
               device_id);
    }
    if (result == 0 && machine_output()) {
        json_t *doc = json_pack("{s:s, s:s}", "device_id", device_id, "state", confirm ? "confirmed" : "revoked");
        rl_cli_print_json(&cli, doc);
        json_decref(doc);
    }
    json_decref(list);
    rl_keyring_free(k);
    return result;
}

static int run_devices(const rl_cli_args_t *args)
{
    const char *verb = args->npositional > 0 ? args->positional[0] : "list";

    if (strcmp(verb, "list") == 0)
        return devices_list();
    if (strcmp(verb, "add") == 0)
        return devices_add(args);
    if (strcmp(verb, "confirm") == 0)
        return devices_change(args, 1);
    if (strcmp(verb, "revoke") == 0)
        return devices_change(args, 0);
    return report(2, "devices takes list, add, confirm DEVICE_ID or revoke DEVICE_ID");
}

/* ---- help, version, table ------------------------------------------------------------------------- */

static int run_version(const rl_cli_args_t *args)
{
    (void)args;
    printf("relay-bridge %s\n", BRIDGE_VERSION);
    return 0;
}

static const rl_cli_flag_t global_flags[] = {
    {"json", 0, NULL, "print JSON (the default when stdout is not a terminal)"},
    {"help", 'h', NULL, "show help for the command"},
    {NULL, 0, NULL, NULL},
};
static const rl_cli_flag_t pair_flags[] = {
    {"server", 's', "URL", "base URL of the relay (https://relay.example.com)"},
    {"name", 'n', "NAME", "how this machine is labelled in the app (default: the host name)"},
    {NULL, 0, NULL, NULL},
};
static const rl_cli_flag_t run_flags[] = {
    {"agent", 'a', "[NAME=]AGENT",
     "exec:COMMAND, jsonl:COMMAND, acp:COMMAND (Agent Client Protocol) or openai:URL; repeat as NAME=AGENT for "
     "several agents (default: agents.conf in the config folder)",
     1},
    {"default-agent", 0, "NAME", "the agent of a chat that names none (default: the first --agent)"},
    {"root", 0, "DIR",
     "a folder whose git repositories (two levels down) chats may run in, each in its own folder or a new git "
     "worktree; repeatable",
     1},
    {"plain-projects", 0, NULL,
     "answer a project list asked without a device in clear (by default it is sealed to the asking device)"},
    {"cwd", 0, "DIR",
     "the agents' working folder for chats without a project: the only one an acp agent's file reads and writes "
     "may touch (default: the current folder)"},
    {"no-e2e", 0, NULL,
     "no device key: plain sessions only (by default the bridge registers its device key and serves encrypted "
     "sessions of the devices you confirm with the emoji it prints)"},
    {"files-url", 0, "URL",
     "the relay's public URL (relayd's --public-url) when it is not the paired server URL: attachments are "
     "downloaded from the signed links of these two origins only"},
    {"log-level", 0, "LEVEL", "debug, info (default), warn or error"},
    {"delta-window", 0, "DURATION", "text delta batching window (default 30ms; 0: none)"},
    {"backoff-first", 0, "DURATION", "first reconnect delay (default 1s)"},
    {"backoff-cap", 0, "DURATION", "longest reconnect delay (default 30s)"},
    {"retry-window", 0, "DURATION",
     "how long a write is retried while the relay does not answer (default 30m, the follow-up window; 0: three "
     "retries)"},
    {NULL, 0, NULL, NULL},
};
static const rl_cli_flag_t devices_flags[] = {
    {"ttl", 0, "DURATION", "add: how long the code stays valid (default 24h, at most 30 days)"},
    {"yes", 'y', NULL, "confirm: the emoji were compared already (no question asked)"},
    {NULL, 0, NULL, NULL},
};
static const char *const devices_examples[] = {
    "relay-bridge devices",
    "relay-bridge devices add",
    "relay-bridge devices confirm dev_4fJk2LmQ9xZa7RtYb3Cd",
    NULL,
};
static const char *const pair_examples[] = {"relay-bridge pair --server https://relay.example.com --name laptop", NULL};
static const char *const run_examples[] = {
    "relay-bridge run --agent 'exec:ollama run llama3'",
    "relay-bridge run --agent 'jsonl:python3 examples/echo_agent.py'",
    "relay-bridge run --agent openai:http://127.0.0.1:11434",
    "relay-bridge run --cwd ~/project --agent 'acp:npx -y @zed-industries/claude-agent-acp'",
    "relay-bridge run --root ~/src --agent 'claude=acp:npx -y @zed-industries/claude-agent-acp' --agent "
    "'codex=acp:npx -y @zed-industries/codex-acp'",
    NULL,
};
static const char *const status_examples[] = {"relay-bridge status", "relay-bridge status --json", NULL};
static const char *const sessions_examples[] = {"relay-bridge sessions", "relay-bridge sessions --json", NULL};

static const rl_cli_command_t commands[] = {
    {"pair", "--server URL [--name NAME]", 0, 0, "pair this machine with a relay",
     "Shows a 7-letter code (and a QR code on a terminal) to claim from the app, waits until it is claimed, "
     "and "
     "saves the bridge token in the config folder with mode 0600. The token is never printed.",
     pair_flags, pair_examples, run_pair},
    {"status", "", 0, 0, "say whether this machine is paired and whether the bridge is connected",
     "Connected means a running relay-bridge (its pid alive) last wrote \"connected\" in its status file, "
     "which "
     "it updates on every connect and disconnect.",
     NULL, status_examples, run_status},
    {"run", "--agent AGENT", 0, 0, "connect to the relay and run the agent for each message",
     "Stops with exit status 3 when the relay revokes the installation or refuses its token: pair again.", run_flags,
     run_examples, run_run},
    {"devices", "[list|add|confirm DEVICE_ID|revoke DEVICE_ID]", 0, 2,
     "the devices that may read this machine's encrypted chats",
     "A device gets this machine's session keys only on evidence the relay cannot make: a one-time code from "
     "`devices add` typed or scanned on it, or the owner's `devices confirm` here after comparing its emoji. "
     "A running relay-bridge takes a confirmation or a revocation made here at once.",
     devices_flags, devices_examples, run_devices},
    {"sessions", "", 0, 0, "list the relay sessions bound to the agent's own sessions",
     "Each with the command that continues it at the desk, where the agent has one (claude --resume ID, codex resume "
     "ID), run in the session's folder. The bindings are the config folder's bridge-acp.json and "
     "bridge-acp-NAME.json (one per agent), which a running acp: bridge keeps.",
     NULL, sessions_examples, run_sessions},
    {"help", "[command]", 0, 1, "show help; with --json, a manifest of every command", NULL, NULL, NULL,
     rl_cli_run_help},
    {"version", "", 0, 0, "show the version", NULL, NULL, NULL, run_version},
};
static const rl_cli_env_t environment[] = {
    {"RELAY_CONFIG_DIR", "folder of the credentials and status files (default ~/.config/relay)"},
    {"HTTPS_PROXY", "proxy for the socket and the REST calls (read by libcurl)"},
    {"OPENAI_API_KEY", "bearer token sent to an openai: agent"},
    {"OPENAI_MODEL", "model name sent to an openai: agent (default \"default\")"},
    {"NO_COLOR", "no colours on a terminal"},
    {NULL, NULL},
};
static const rl_cli_exit_t exit_codes[] = {
    {0, "success (run: stopped by a signal)"},
    {1, "a runtime error"},
    {2, "a usage error"},
    {3, "not paired, or the relay revoked the installation: pair again"},
    {0, NULL},
};
static const rl_cli_program_t program = {
    "relay-bridge",
    BRIDGE_VERSION,
    "run your agent behind a Relay",
    commands,
    sizeof(commands) / sizeof(commands[0]),
    global_flags,
    environment,
    exit_codes,
    RL_CLI_ERRORS_ON_STDERR,
    NULL,
};

int main(int argc, char **argv)
{
    rl_client_t *warm = NULL;

    rl_log_set_text("relay-bridge");
    if (argc > 0 && argv[0] != NULL && argv[0][0] != '\0')
        invoked_as = argv[0];
    /* rl_client_new initialises libcurl, which must happen before any thread starts. */
    if (rl_client_new("http://127.0.0.1", NULL, &warm) == 0)
        rl_client_free(warm);
    return rl_cli_main(&cli, &program, argc, argv);
}
