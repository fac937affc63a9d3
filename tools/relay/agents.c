/*
 * relay: what a bridge offers to start a session with (issue 36): projects
 * and agent-sessions. Both are asked of the bridge live, through relayd.
 * When this terminal confirmed the installation's bridge, the request names
 * this device and the bridge seals its answer to it: opened here, so the
 * list reads the same either way; a list sealed to another device is shown
 * as such.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "relay.h"

/* GET path (its query so far in query, may be empty) with device_id when this terminal can open the answer. */
static int ask(const char *installation, const char *what, const char *query, json_t **list)
{
    char device[96], path[1200], *escaped = rl_client_escape(installation);
    json_t *devices = NULL, *answer = NULL, *opened;
    rl_api_error_t error;
    int status = relay_need_login();

    *list = NULL;
    if (status == EXIT_OK)
        status = relay_e2e_list_device(installation, device, sizeof(device), &devices);
    if (status != EXIT_OK || escaped == NULL) {
        free(escaped);
        json_decref(devices);
        return status != EXIT_OK ? status : relay_report(EXIT_RUNTIME, "out of memory", NULL);
    }
    snprintf(path, sizeof(path), "/v1/me/installations/%s/%s%s%s%s%s", escaped, what, query[0] != '\0' ? "?" : "",
             query, device[0] != '\0' ? (query[0] != '\0' ? "&device_id=" : "?device_id=") : "", device);
    free(escaped);
    if (relay_call("GET", path, NULL, &answer, &error) != 0) {
        json_decref(devices);
        return relay_report_api(&error);
    }
    if (json_object_get(answer, "sealed") != NULL) {
        opened = relay_e2e_open_list(answer, devices, installation);
        if (opened != NULL) {
            json_decref(answer);
            answer = opened;
        }
    }
    json_decref(devices);
    *list = answer;
    return EXIT_OK;
}

/* A list still sealed: to another device, or one this terminal could not open. EXIT_OK when it printed it. */
static int show_sealed(const json_t *answer)
{
    if (json_object_get(answer, "sealed") == NULL)
        return -1;
    if (relay.cli.json)
        relay_print_json(answer);
    else
        printf("sealed to device %s (this terminal cannot open it)\n", rl_cli_str(answer, "to_device_id"));
    return EXIT_OK;
}

int relay_run_projects(const rl_cli_args_t *args)
{
    json_t *answer;
    const json_t *p, *agent;
    size_t i, j;
    int status = ask(args->positional[0], "projects", "", &answer);

    if (status != EXIT_OK)
        return status;
    if (show_sealed(answer) == EXIT_OK) {
        json_decref(answer);
        return EXIT_OK;
    }
    if (relay.cli.json) {
        relay_print_json(answer);
    } else {
        if (json_array_size(json_object_get(answer, "projects")) == 0)
            printf("no projects\n");
        json_array_foreach(json_object_get(answer, "projects"), i, p)
        {
            printf("%s%s%s  %s  %s%s%s%s%s", relay_style(RL_TERM_BOLD), rl_cli_str(p, "id"), relay_style(RL_TERM_RESET),
                   rl_cli_str(p, "name"), relay_style(RL_TERM_DIM), rl_cli_str(p, "path"),
                   rl_cli_str(p, "branch")[0] != '\0' ? "  on " : "", rl_cli_str(p, "branch"),
                   relay_style(RL_TERM_RESET));
            json_array_foreach(json_object_get(p, "agents_used"), j, agent)
            {
                printf("%s%s", j == 0 ? "  agents: " : ", ", json_string_value(agent) ? json_string_value(agent) : "");
            }
            printf("\n");
        }
    }
    json_decref(answer);
    return EXIT_OK;
}

int relay_run_agent_sessions(const rl_cli_args_t *args)
{
    const char *agent = rl_cli_value(args, "agent"), *project = rl_cli_value(args, "project");
    char query[600], *a, *p;
    json_t *answer;
    const json_t *s;
    size_t i;
    int status;

    if (agent == NULL || project == NULL)
        return relay_report(EXIT_USAGE, "agent-sessions needs --agent NAME and --project ID (see relay projects)",
                            NULL);
    a = rl_client_escape(agent);
    p = rl_client_escape(project);
    if (a == NULL || p == NULL || strlen(a) + strlen(p) + 32 > sizeof(query)) {
        free(a);
        free(p);
        return relay_report(EXIT_USAGE, "--agent or --project is too long", NULL);
    }
    snprintf(query, sizeof(query), "agent=%s&project_id=%s", a, p);
    free(a);
    free(p);
    status = ask(args->positional[0], "agent-sessions", query, &answer);
    if (status != EXIT_OK)
        return status;
    if (show_sealed(answer) == EXIT_OK) {
        json_decref(answer);
        return EXIT_OK;
    }
    if (relay.cli.json) {
        relay_print_json(answer);
    } else {
        if (json_array_size(json_object_get(answer, "sessions")) == 0)
            printf("no sessions of %s in that project\n", agent);
        json_array_foreach(json_object_get(answer, "sessions"), i, s)
        {
            const char *bound = rl_cli_str(s, "bound_session_id");
            printf("%s%s%s  %s  %s%s%s%s%s\n", relay_style(RL_TERM_BOLD), rl_cli_str(s, "agent_session_id"),
                   relay_style(RL_TERM_RESET),
                   rl_cli_str(s, "title")[0] != '\0' ? rl_cli_str(s, "title") : "(untitled)", relay_style(RL_TERM_DIM),
                   rl_cli_str(s, "updated_at"), bound[0] != '\0' ? "  in " : "", bound, relay_style(RL_TERM_RESET));
        }
    }
    json_decref(answer);
    return EXIT_OK;
}
