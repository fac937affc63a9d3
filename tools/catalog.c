/*
 * catalog: the command-line client of the catalog API.
 *
 * A readable summary on a terminal, JSON when stdout is not a terminal or
 * with --json; in JSON mode an error is {"error": "..."} on stdout. Exit
 * status 0 on success, 1 on a runtime or remote error, 2 on a usage error.
 * CATALOG_BASE points it at another host; the default is a build setting.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog/type.h"
#include "client/cli.h"
#include "client/client.h"
#include "client/term.h"
#include "rl_version.h"

#ifndef RL_CATALOG_BASE_DEFAULT
#define RL_CATALOG_BASE_DEFAULT "http://127.0.0.1:8090"
#endif
#define CATALOG_VERSION RL_VERSION

enum { EXIT_OK = RL_CLI_EXIT_OK, EXIT_RUNTIME = RL_CLI_EXIT_RUNTIME, EXIT_USAGE = RL_CLI_EXIT_USAGE };

static rl_cli_t cli;
static const char *base; /* the catalog's base URL */

static int report(int status, const char *message, json_t *extra)
{
    return rl_cli_report(&cli, status, message, extra);
}

static void print_json(json_t *value)
{
    rl_cli_print_json(&cli, value);
}

static const char *style(rl_term_style_t s)
{
    return rl_cli_style(&cli, s);
}

/* ---- requests ---- */

/*
 * GETs path. On success returns 0 with the response in *response (to be
 * freed); otherwise reports the failure and returns the exit status.
 */
static int fetch(const char *path, rl_client_response_t *response)
{
    rl_client_options_t options = {5000, 30000, 64u * 1024u * 1024u, "catalog/" CATALOG_VERSION};
    rl_client_t *client = NULL;
    char message[512];
    int result = rl_client_new(base, &options, &client);

    if (result != 0) {
        snprintf(message, sizeof(message), "CATALOG_BASE must be an http:// or https:// URL, not '%.200s'", base);
        return report(EXIT_USAGE, message, NULL);
    }
    result = rl_client_get(client, path, NULL, response);
    rl_client_free(client);
    if (result != 0) {
        report(EXIT_RUNTIME, response->error, NULL);
        rl_client_response_free(response);
        return EXIT_RUNTIME;
    }
    if (response->status != 200) {
        char err[256];
        json_t *body = rl_client_json(response, err, sizeof(err));
        const char *said = rl_client_error_message(body), *code = rl_client_error_code(body);
        json_t *extra = json_pack("{s:i}", "status", (int)response->status);
        if (code != NULL)
            json_object_set_new(extra, "code", json_string(code));
        snprintf(message, sizeof(message), "%s (HTTP %ld)", said != NULL ? said : "the catalog refused the request",
                 response->status);
        report(EXIT_RUNTIME, message, extra);
        json_decref(body);
        rl_client_response_free(response);
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}

static int fetch_json(const char *path, json_t **out)
{
    rl_client_response_t response;
    char err[256];
    int status = fetch(path, &response);

    if (status != EXIT_OK)
        return status;
    *out = rl_client_json(&response, err, sizeof(err));
    rl_client_response_free(&response);
    return *out != NULL ? EXIT_OK : report(EXIT_RUNTIME, err, NULL);
}

/* ---- search ---- */

static void show_search(const json_t *answer)
{
    const json_t *results = json_object_get(answer, "results"), *group, *hit;
    const char *type;
    size_t i;

    printf("%s%lld result%s%s for \"%s\"%s\n", style(RL_TERM_BOLD),
           (long long)json_integer_value(json_object_get(answer, "total")),
           json_integer_value(json_object_get(answer, "total")) == 1 ? "" : "s",
           strcmp(rl_cli_str(answer, "match"), "any") == 0 ? " matching any word" : "", rl_cli_str(answer, "query"),
           style(RL_TERM_RESET));
    json_object_foreach((json_t *)results, type, group)
    {
        int t = rl_catalog_type_parse(type, strlen(type));
        printf("\n%s%s%s (%zu of %lld)\n", style(RL_TERM_CYAN), t >= 0 ? rl_catalog_types[t].heading : type,
               style(RL_TERM_RESET), json_array_size(json_object_get(group, "hits")),
               (long long)json_integer_value(json_object_get(group, "total")));
        json_array_foreach(json_object_get(group, "hits"), i, hit)
        {
            printf("  %s%s%s  %s%s/%s%s\n", style(RL_TERM_BOLD), rl_cli_str(hit, "title"), style(RL_TERM_RESET),
                   style(RL_TERM_DIM), rl_cli_str(hit, "type"), rl_cli_str(hit, "slug"), style(RL_TERM_RESET));
            rl_term_wrap_marked(stdout, &cli.out, rl_cli_str(hit, "snippet"), 4, RL_TERM_YELLOW);
        }
    }
}

static int run_search(const rl_cli_args_t *args)
{
    const char *type = rl_cli_value(args, "type"), *per = rl_cli_value(args, "per");
    char query[512] = "", path[2048], message[200];
    char *escaped;
    json_t *answer;
    int i, status;

    for (i = 0; i < args->npositional; ++i) {
        if (strlen(query) + strlen(args->positional[i]) + 2 > sizeof(query))
            return report(EXIT_USAGE, "the query is too long", NULL);
        if (i > 0)
            strcat(query, " ");
        strcat(query, args->positional[i]);
    }
    if (type != NULL && rl_catalog_type_parse(type, strlen(type)) < 0) {
        snprintf(message, sizeof(message),
                 "--type must be a catalog type, singular or plural (see catalog help search), not '%.40s'", type);
        return report(EXIT_USAGE, message, NULL);
    }
    if (per != NULL) {
        char *end;
        long n = strtol(per, &end, 10);
        if (per[0] == '\0' || *end != '\0' || n < 1 || n > 30)
            return report(EXIT_USAGE, "--per must be an integer from 1 to 30", NULL);
    }
    escaped = rl_client_escape(query);
    if (escaped == NULL)
        return report(EXIT_RUNTIME, "out of memory", NULL);
    snprintf(path, sizeof(path), "/api/v1/search?q=%s%s%s%s%s", escaped, type != NULL ? "&type=" : "",
             type != NULL ? rl_catalog_types[rl_catalog_type_parse(type, strlen(type))].plural : "",
             per != NULL ? "&per=" : "", per != NULL ? per : "");
    free(escaped);
    status = fetch_json(path, &answer);
    if (status != EXIT_OK)
        return status;
    if (cli.json)
        print_json(answer);
    else
        show_search(answer);
    json_decref(answer);
    return EXIT_OK;
}

/* ---- get ---- */

static void show_label(const char *key)
{
    putchar(key[0] >= 'a' && key[0] <= 'z' ? key[0] - 'a' + 'A' : key[0]);
    for (++key; *key != '\0'; ++key)
        putchar(*key == '_' ? ' ' : *key);
}

static void show_value(const json_t *value)
{
    size_t i;
    json_t *item;

    if (json_is_string(value))
        fputs(json_string_value(value), stdout);
    else if (json_is_integer(value))
        printf("%lld", (long long)json_integer_value(value));
    else if (json_is_real(value))
        printf("%g", json_real_value(value));
    else if (json_is_boolean(value))
        fputs(json_is_true(value) ? "yes" : "no", stdout);
    json_array_foreach(value, i, item)
    {
        fputs(i > 0 ? ", " : "", stdout);
        show_value(item);
    }
}

static void show_scores(const json_t *scores)
{
    const json_t *row;
    size_t i;

    printf("\n%sScores%s (%zu)\n", style(RL_TERM_CYAN), style(RL_TERM_RESET), json_array_size(scores));
    json_array_foreach(scores, i, row)
    {
        const json_t *model = json_object_get(row, "model"), *eval = json_object_get(row, "eval");
        char subject[160], value[48];
        snprintf(subject, sizeof(subject), "%s%s%s", model != NULL ? rl_cli_str(model, "title") : "",
                 model != NULL && eval != NULL ? " on " : "", eval != NULL ? rl_cli_str(eval, "title") : "");
        snprintf(value, sizeof(value), "%g%s%s", json_number_value(json_object_get(row, "value")),
                 strcmp(rl_cli_str(row, "unit"), "%") == 0 ? "" : " ", rl_cli_str(row, "unit"));
        printf("  %-40s %s%11s%s  %s\n", subject, style(RL_TERM_BOLD), value, style(RL_TERM_RESET),
               rl_cli_str(row, "setting"));
        printf("  %s%s%s\n", style(RL_TERM_DIM), rl_cli_str(row, "source_url"), style(RL_TERM_RESET));
    }
}

static void show_entity(const json_t *doc)
{
    const json_t *value, *list, *ref, *licence = json_object_get(doc, "licence");
    const char *key;
    size_t i;

    printf("%s%s%s  %s%s/%s%s\n", style(RL_TERM_BOLD), rl_cli_str(doc, "title"), style(RL_TERM_RESET),
           style(RL_TERM_DIM), rl_cli_str(doc, "type"), rl_cli_str(doc, "slug"), style(RL_TERM_RESET));
    rl_term_wrap(stdout, &cli.out, rl_cli_str(doc, "summary"), 0);
    if (json_object_get(doc, "description") != NULL) {
        putchar('\n');
        rl_term_wrap(stdout, &cli.out, rl_cli_str(doc, "description"), 0);
    }
    putchar('\n');
    if (json_array_size(json_object_get(doc, "aliases")) > 0) {
        printf("  Also known as: ");
        show_value(json_object_get(doc, "aliases"));
        putchar('\n');
    }
    json_object_foreach((json_t *)json_object_get(doc, "attributes"), key, value)
    {
        printf("  ");
        show_label(key);
        printf(": ");
        show_value(value);
        putchar('\n');
    }
    if (licence != NULL)
        printf("  Licence: %s%s\n", rl_cli_str(licence, "title"),
               json_is_true(json_object_get(licence, "redistributable")) ? " (redistributable)" : "");
    json_object_foreach((json_t *)json_object_get(doc, "files"), key, value)
    {
        printf("  Full %s: catalog paper %s --%s\n", key, rl_cli_str(doc, "slug"), key);
    }
    json_object_foreach((json_t *)json_object_get(doc, "links"), key, value)
    {
        printf("  ");
        show_label(key);
        printf(": %s\n", json_string_value(value));
    }
    if (json_object_size(json_object_get(doc, "relationships")) > 0)
        printf("\n%sRelated%s\n", style(RL_TERM_CYAN), style(RL_TERM_RESET));
    json_object_foreach((json_t *)json_object_get(doc, "relationships"), key, list)
    {
        printf("  ");
        show_label(key);
        printf(":\n");
        json_array_foreach(list, i, ref)
        {
            printf("    %s  %s%s/%s%s\n", rl_cli_str(ref, "title"), style(RL_TERM_DIM), rl_cli_str(ref, "type"),
                   rl_cli_str(ref, "slug"), style(RL_TERM_RESET));
        }
    }
    if (json_array_size(json_object_get(doc, "scores")) > 0)
        show_scores(json_object_get(doc, "scores"));
}

static int run_get(const rl_cli_args_t *args)
{
    const char *name = args->positional[0];
    int type = rl_catalog_type_parse(name, strlen(name)), status;
    char path[512], message[200];
    char *slug;
    json_t *doc;

    if (type < 0) {
        snprintf(message, sizeof(message),
                 "'%.40s' is not a catalog type; use one of eval, model, tool, leaderboard, organization, person, "
                 "capability, paper (or their plurals)",
                 name);
        return report(EXIT_USAGE, message, NULL);
    }
    slug = rl_client_escape(args->positional[1]);
    if (slug == NULL)
        return report(EXIT_RUNTIME, "out of memory", NULL);
    snprintf(path, sizeof(path), "/api/v1/%s/%.300s", rl_catalog_types[type].plural, slug);
    free(slug);
    status = fetch_json(path, &doc);
    if (status != EXIT_OK)
        return status;
    if (cli.json)
        print_json(doc);
    else
        show_entity(doc);
    json_decref(doc);
    return EXIT_OK;
}

/* ---- paper ---- */

static int write_file(const char *target, const char *bytes, size_t len)
{
    FILE *fp = strcmp(target, "-") == 0 ? stdout : fopen(target, "wb");
    char message[600];
    int ok;

    if (fp == NULL) {
        snprintf(message, sizeof(message), "cannot write %.400s: %s", target, strerror(errno));
        return report(EXIT_RUNTIME, message, NULL);
    }
    ok = fwrite(bytes, 1, len, fp) == len;
    ok = (fp == stdout ? fflush(fp) : fclose(fp)) == 0 && ok;
    if (!ok) {
        snprintf(message, sizeof(message), "cannot write %.400s: %s", target, strerror(errno));
        return report(EXIT_RUNTIME, message, NULL);
    }
    return EXIT_OK;
}

static int run_paper(const rl_cli_args_t *args)
{
    const char *text = rl_cli_value(args, "text"), *pdf = rl_cli_value(args, "pdf");
    const char *output = rl_cli_value(args, "output"), *format = pdf != NULL ? "pdf" : "text";
    rl_client_response_t response;
    char path[512];
    char *slug;
    int status;

    if ((text != NULL) == (pdf != NULL))
        return report(EXIT_USAGE, "paper needs exactly one of --text and --pdf", NULL);
    /*
     * The text itself is this command's output, so that `catalog paper SLUG --text > paper.txt` holds the
     * paper: raw, with errors on stderr, unless --json asks for the JSON object. A summary of a file written
     * with -o follows the program's usual mode.
     */
    if (text != NULL && output == NULL && !cli.json_flag)
        cli.json = 0;
    if (pdf != NULL && output == NULL)
        return report(EXIT_USAGE, "--pdf needs -o FILE (or -o - to write the PDF to stdout)", NULL);
    slug = rl_client_escape(args->positional[0]);
    if (slug == NULL)
        return report(EXIT_RUNTIME, "out of memory", NULL);
    snprintf(path, sizeof(path), "/api/v1/papers/%.300s/%s", slug, format);
    free(slug);
    status = fetch(path, &response);
    if (status != EXIT_OK)
        return status;
    if (output != NULL) {
        status = write_file(output, response.body, response.len);
        if (status == EXIT_OK && strcmp(output, "-") != 0) {
            if (cli.json) {
                json_t *summary =
                    json_pack("{s:s, s:s, s:s, s:I, s:s}", "slug", args->positional[0], "format", format,
                              "content_type", response.content_type, "bytes", (json_int_t)response.len, "path", output);
                print_json(summary);
                json_decref(summary);
            } else {
                printf("wrote %zu bytes (%s) to %s\n", response.len, response.content_type, output);
            }
        }
    } else if (cli.json) {
        json_t *answer = json_pack("{s:s, s:s, s:s, s:I, s:s#}", "slug", args->positional[0], "format", format,
                                   "content_type", response.content_type, "bytes", (json_int_t)response.len, "text",
                                   response.body, (int)response.len);
        if (answer == NULL)
            status = report(EXIT_RUNTIME, "the paper's text is not valid UTF-8", NULL);
        else
            print_json(answer);
        json_decref(answer);
    } else {
        fwrite(response.body, 1, response.len, stdout);
        if (response.len > 0 && response.body[response.len - 1] != '\n')
            putchar('\n');
    }
    rl_client_response_free(&response);
    return status;
}

/* ---- api, help, version ---- */

static int run_api(const rl_cli_args_t *args)
{
    const json_t *row;
    json_t *index;
    size_t i;
    int status = fetch_json("/api/v1", &index);

    if (status != EXIT_OK)
        return status;
    if (cli.json) {
        print_json(index);
        json_decref(index);
        return EXIT_OK;
    }
    printf("%s%s%s at %s (API %s)\n", style(RL_TERM_BOLD), rl_cli_str(index, "name"), style(RL_TERM_RESET), base,
           rl_cli_str(index, "api_version"));
    rl_term_wrap(stdout, &cli.out, rl_cli_str(index, "description"), 0);
    printf("\n%sEndpoints%s\n", style(RL_TERM_CYAN), style(RL_TERM_RESET));
    json_array_foreach(json_object_get(index, "endpoints"), i, row)
    {
        printf("  %s%s %s%s\n", style(RL_TERM_BOLD), rl_cli_str(row, "method"), rl_cli_str(row, "path"),
               style(RL_TERM_RESET));
        rl_term_wrap(stdout, &cli.out, rl_cli_str(row, "description"), 4);
    }
    printf("\n%sTypes%s\n", style(RL_TERM_CYAN), style(RL_TERM_RESET));
    json_array_foreach(json_object_get(index, "types"), i, row)
    {
        printf("  %-16s %5lld  %s\n", rl_cli_str(row, "type"),
               (long long)json_integer_value(json_object_get(row, "count")), rl_cli_str(row, "url"));
    }
    json_decref(index);
    return EXIT_OK;
}

static int run_version(const rl_cli_args_t *args)
{
    if (cli.json) {
        json_t *version = json_pack("{s:s, s:s, s:s, s:s, s:s}", "name", "catalog", "version", CATALOG_VERSION, "api",
                                    "v1", "base", base, "base_default", RL_CATALOG_BASE_DEFAULT);
        print_json(version);
        json_decref(version);
    } else {
        printf("catalog %s (catalog API v1; base %s)\n", CATALOG_VERSION, base);
    }
    return EXIT_OK;
}

/* ---- the command table ---- */

static const rl_cli_flag_t global_flags[] = {
    {"json", 0, NULL, "print JSON (the default when stdout is not a terminal)"},
    {"help", 'h', NULL, "show help for the command"},
    {NULL, 0, NULL, NULL},
};
static const rl_cli_flag_t search_flags[] = {
    {"type", 't', "TYPE",
     "only this type: eval, model, tool, leaderboard, organization, person, capability, paper "
     "(singular or plural)"},
    {"per", 'n', "N", "results per type, 1 to 30 (default 5)"},
    {NULL, 0, NULL, NULL},
};
static const rl_cli_flag_t paper_flags[] = {
    {"text", 0, NULL, "the paper's full text"},
    {"pdf", 0, NULL, "the paper's PDF (needs -o)"},
    {"output", 'o', "FILE", "write the content to FILE instead ('-' is stdout, raw)"},
    {NULL, 0, NULL, NULL},
};
static const char *const search_examples[] = {
    "catalog search swe bench",
    "catalog search \"graduate level\" --type evals",
    "catalog search llama --type model --per 10 --json",
    NULL,
};
static const char *const get_examples[] = {
    "catalog get eval gpqa-diamond",
    "catalog get models llama-3.1-405b-instruct --json",
    "catalog get person dan-hendrycks",
    NULL,
};
static const char *const paper_examples[] = {
    "catalog paper relay-catalog-test-paper --text",
    "catalog paper relay-catalog-test-paper --pdf -o paper.pdf",
    NULL,
};
static const char *const api_examples[] = {"catalog api", "catalog api --json", NULL};
static const char *const help_examples[] = {"catalog help search", "catalog help --json", NULL};
static const char *const version_examples[] = {"catalog version", NULL};

static const rl_cli_command_t commands[] = {
    {"search", "<query>", 1, -1, "search every type of the catalog",
     "Every word must match, the last one as a prefix; when nothing matches every word, any word may. "
     "Results "
     "come grouped by type, best first, with a snippet that marks the matched words.",
     search_flags, search_examples, run_search},
    {"get", "<type> <slug>", 2, 2, "show one entity with its scores and relationships",
     "The type is eval, model, tool, leaderboard, organization, person, capability or paper, singular or "
     "plural (evals, models, tools, leaderboards, organizations, people, capabilities, papers).",
     NULL, get_examples, run_get},
    {"paper", "<slug> --text|--pdf [-o FILE]", 1, 1, "fetch a paper's full text or PDF",
     "Only papers whose licence permits redistribution have them; for the others the catalog says why and "
     "where to read the paper. --text writes the text to stdout, piped or not, and errors to stderr (with "
     "--json, a JSON object holding the text, or the error); --pdf needs -o FILE.",
     paper_flags, paper_examples, run_paper},
    {"api", "", 0, 0, "list the API's endpoints and the entity types", NULL, NULL, api_examples, run_api},
    {"help", "[command]", 0, 1, "show help; with --json, a manifest of every command, flag and example", NULL, NULL,
     help_examples, rl_cli_run_help},
    {"version", "", 0, 0, "show the client's version and the base URL it uses", NULL, NULL, version_examples,
     run_version},
};

static const rl_cli_env_t environment[] = {
    {"CATALOG_BASE", "base URL of the catalog (default " RL_CATALOG_BASE_DEFAULT ")"},
    {"NO_COLOR", "when set to anything but the empty string, no colour"},
    {NULL, NULL},
};

static const rl_cli_exit_t exit_codes[] = {
    {EXIT_OK, "success"},
    {EXIT_RUNTIME, "runtime or remote error (unreachable host, HTTP error, unwritable file)"},
    {EXIT_USAGE, "usage error (unknown command or flag, wrong arguments)"},
    {0, NULL},
};

/* help --json also gives the default base and the types, singular and plural. */
static void extend_manifest(json_t *manifest)
{
    json_t *types = json_array();

    json_object_set_new(manifest, "base_default", json_string(RL_CATALOG_BASE_DEFAULT));
    for (int t = 0; t < RL_CATALOG_TYPE_COUNT; ++t)
        json_array_append_new(types, json_pack("{s:s, s:s}", "plural", rl_catalog_types[t].plural, "singular",
                                               rl_catalog_types[t].singular));
    json_object_set_new(manifest, "types", types);
}

static const rl_cli_program_t program = {
    "catalog",
    CATALOG_VERSION,
    "the command-line client of the catalog of AI evaluations",
    commands,
    sizeof(commands) / sizeof(commands[0]),
    global_flags,
    environment,
    exit_codes,
    RL_CLI_JSON_WHEN_PIPED | RL_CLI_PRETTY_JSON,
    extend_manifest,
};

int main(int argc, char **argv)
{
    const char *env_base = getenv("CATALOG_BASE");

    base = env_base != NULL && env_base[0] != '\0' ? env_base : RL_CATALOG_BASE_DEFAULT;
    return rl_cli_main(&cli, &program, argc, argv);
}
