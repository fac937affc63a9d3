/* relay: approvals answered from anywhere: approvals, approve, deny. */
#include <stdio.h>
#include <string.h>

#include "client/chat.h"
#include "relay.h"

int relay_run_approvals(const rl_cli_args_t *args)
{
    rl_api_error_t error;
    const json_t *approval;
    json_t *snapshot;
    size_t i;
    int status = relay_need_login();

    if (status != EXIT_OK)
        return status;
    if (relay_call("GET", "/v1/me/snapshot", NULL, &snapshot, &error) != 0)
        return relay_report_api(&error);
    if (relay.cli.json) {
        json_t *out = json_pack("{s:O}", "pending_approvals", json_object_get(snapshot, "pending_approvals"));
        relay_print_json(out);
        json_decref(out);
    } else {
        if (json_array_size(json_object_get(snapshot, "pending_approvals")) == 0)
            printf("no pending approvals\n");
        json_array_foreach(json_object_get(snapshot, "pending_approvals"), i, approval)
            rl_chat_print_approval(stdout, &relay.cli.out, approval);
    }
    json_decref(snapshot);
    return EXIT_OK;
}

static const char *const scopes[] = {"session", "tool", "domain", "all", NULL};

int relay_run_decide(const rl_cli_args_t *args)
{
    int deny = strcmp(args->command->name, "deny") == 0, always = rl_cli_value(args, "always") != NULL;
    const char *scope = rl_cli_value(args, "scope"), *value = rl_cli_value(args, "value");
    char path[512];
    rl_api_error_t error;
    json_t *body, *result;
    int status, i, known = scope == NULL;

    if ((scope != NULL || value != NULL) && !always)
        return relay_report(EXIT_USAGE, "--scope and --value go with --always", NULL);
    for (i = 0; scopes[i] != NULL && scope != NULL; ++i)
        known |= strcmp(scopes[i], scope) == 0;
    if (!known)
        return relay_report(EXIT_USAGE, "--scope must be session, tool, domain or all", NULL);
    /*
     * spec, decision mapping: "always approve this command" is approve_always with scope tool, what the
     * chat's a does; the relay's own default for a missing scope is all, a much wider grant.
     */
    if (always && scope == NULL)
        scope = "tool";
    status = relay_need_login();
    if (status != EXIT_OK)
        return status;
    body = json_pack("{s:s}", "decision", deny ? "deny" : always ? "approve_always" : "approve");
    if (scope != NULL)
        json_object_set_new(body, "scope", json_string(scope));
    if (value != NULL)
        json_object_set_new(body, "scope_value", json_string(value));
    status = relay_e2e_sign(body, args->positional[0], rl_cli_value(args, "session"));
    if (status != EXIT_OK) {
        json_decref(body);
        return status;
    }
    rl_api_path(path, sizeof(path), "/v1/me/approvals/%s", args->positional[0]);
    status = relay_call("POST", path, body, &result, &error);
    json_decref(body);
    if (status != 0)
        return relay_report_api(&error);
    if (relay.cli.json) {
        relay_print_json(result);
    } else {
        printf("%s: %s%s%s%s%s%s%s%s\n", args->positional[0], relay_style(deny ? RL_TERM_RED : RL_TERM_GREEN),
               rl_cli_str(result, "decision"), relay_style(RL_TERM_RESET),
               rl_cli_str(result, "scope")[0] != '\0' ? ", scope " : "", rl_cli_str(result, "scope"),
               rl_cli_str(result, "scope_value")[0] != '\0' ? " " : "", rl_cli_str(result, "scope_value"),
               json_is_true(json_object_get(result, "idempotent")) ? " (already decided)"
               : json_is_true(json_object_get(result, "forwarded"))
                   ? " (another device decided first; yours went to the bridge too)"
                   : "");
    }
    json_decref(result);
    return EXIT_OK;
}

/* The permanent grants approve_always made (GET /v1/me/grants), and their revocation (docs/web.md). */
static void show_grant(const json_t *grant)
{
    printf("%s  %s  %s %s  %s\n", json_string_value(json_object_get(grant, "id")),
           json_string_value(json_object_get(grant, "action")), json_string_value(json_object_get(grant, "scope")),
           json_string_value(json_object_get(grant, "scope_value")),
           json_string_value(json_object_get(grant, "installation_id")));
}

int relay_run_grants(const rl_cli_args_t *args)
{
    rl_api_error_t error;
    const json_t *grant;
    json_t *result;
    size_t i;
    int status = relay_need_login();

    if (status != EXIT_OK)
        return status;
    if (relay_call("GET", "/v1/me/grants", NULL, &result, &error) != 0)
        return relay_report_api(&error);
    if (relay.cli.json) {
        relay_print_json(result);
    } else {
        if (json_array_size(json_object_get(result, "grants")) == 0)
            printf("no grants\n");
        json_array_foreach(json_object_get(result, "grants"), i, grant) show_grant(grant);
    }
    json_decref(result);
    return EXIT_OK;
}

int relay_run_grant(const rl_cli_args_t *args)
{
    char path[512];
    int status = relay_need_login();

    if (status != EXIT_OK)
        return status;
    if (strcmp(args->positional[0], "revoke") != 0)
        return relay_report(EXIT_USAGE, "grant takes revoke <grant id>", NULL);
    rl_api_path(path, sizeof(path), "/v1/me/grants/%s", args->positional[1]);
    return relay_call_and_show("DELETE", path, NULL, "revoked: ", "grant", show_grant);
}
