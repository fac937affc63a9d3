/* Unit tests of src/client/cli.c: argument parsing, help and the manifest, from one command table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client/cli.h"

static int run_nothing(const rl_cli_args_t *args)
{
    return 0;
}

static const rl_cli_flag_t globals[] = {{"json", 0, NULL, "JSON"}, {"help", 'h', NULL, "help"}, {NULL, 0, NULL, NULL}};
static const rl_cli_flag_t search_flags[] = {{"type", 't', "TYPE", "a type"},
                                             {"per", 0, "N", "how many"},
                                             {"tag", 0, "TAG", "a tag; repeatable", 1},
                                             {NULL, 0, NULL, NULL}};
static const char *const search_examples[] = {"tool search x", NULL};
static const rl_cli_command_t commands[] = {
    {"search", "<query>", 1, -1, "search", NULL, search_flags, search_examples, run_nothing},
    {"get", "<type> <slug>", 2, 2, "get one", "More about get.", NULL, NULL, run_nothing},
    {"version", "", 0, 0, "version", NULL, NULL, NULL, run_nothing},
};
static const rl_cli_env_t env[] = {{"TOOL_BASE", "where"}, {NULL, NULL}};
static const rl_cli_exit_t codes[] = {{0, "ok"}, {2, "usage"}, {0, NULL}};
static const rl_cli_program_t program = {"tool", "1.2.3", "a tool", commands, 3, globals, env, codes};

static int parse(rl_cli_args_t *args, char *err, ...)
{
    char *argv[32];
    int argc = 0;
    va_list ap;

    argv[argc++] = "tool";
    va_start(ap, err);
    while ((argv[argc] = va_arg(ap, char *)) != NULL)
        ++argc;
    va_end(ap);
    return rl_cli_parse(&program, argc, argv, args, err, 200);
}

static void test_parse_accepts(void **state)
{
    rl_cli_args_t args;
    char err[200];

    assert_int_equal(parse(&args, err, "search", "swe", "bench", "--type", "evals", "--per=3", "--json", NULL), 0);
    assert_string_equal(args.command->name, "search");
    assert_int_equal(args.npositional, 2);
    assert_string_equal(args.positional[1], "bench");
    assert_string_equal(rl_cli_value(&args, "type"), "evals");
    assert_string_equal(rl_cli_value(&args, "per"), "3");
    assert_string_equal(rl_cli_value(&args, "json"), "");
    assert_null(rl_cli_value(&args, "help"));

    /* Global flags before the command, short flags glued or not, "--" ending flags. */
    assert_int_equal(parse(&args, err, "--json", "search", "-tmodels", "--", "--not-a-flag", NULL), 0);
    assert_string_equal(rl_cli_value(&args, "type"), "models");
    assert_string_equal(args.positional[0], "--not-a-flag");
    assert_int_equal(parse(&args, err, "search", "-t", "evals", "x", NULL), 0);
    assert_string_equal(rl_cli_value(&args, "type"), "evals");
    assert_int_equal(parse(&args, err, "search", "-", NULL), 0); /* a lone dash is an argument */

    /* Flags alone, without a command. */
    assert_int_equal(parse(&args, err, "--help", NULL), 0);
    assert_null(args.command);
    assert_int_equal(parse(&args, err, "get", "model", "x", "-h", NULL), 0);
    assert_int_equal(parse(&args, err, "get", "-h", NULL), 0); /* help needs no arguments */

    /* A repeatable flag keeps every value, in order; the count says how many were given. */
    {
        const char *tags[2];
        assert_int_equal(parse(&args, err, "search", "x", "--tag", "a", "--tag=b", "--tag", "c", NULL), 0);
        assert_int_equal(rl_cli_values(&args, "tag", tags, 2), 3);
        assert_string_equal(tags[0], "a");
        assert_string_equal(tags[1], "b");
        assert_string_equal(rl_cli_value(&args, "tag"), "a");
        assert_int_equal(rl_cli_values(&args, "per", tags, 2), 0);
    }
}

static void test_parse_refuses(void **state)
{
    rl_cli_args_t args;
    char err[200];

    assert_int_equal(parse(&args, err, NULL), -1);
    assert_non_null(strstr(err, "no command"));
    assert_int_equal(parse(&args, err, "frob", NULL), -1);
    assert_non_null(strstr(err, "unknown command 'frob'"));
    assert_int_equal(parse(&args, err, "search", NULL), -1);
    assert_string_equal(err, "usage: tool search <query>");
    assert_int_equal(parse(&args, err, "get", "a", "b", "c", NULL), -1);
    assert_int_equal(parse(&args, err, "version", "x", NULL), -1);
    assert_int_equal(parse(&args, err, "search", "x", "--bogus", NULL), -1);
    assert_non_null(strstr(err, "unknown flag --bogus for 'search'"));
    assert_int_equal(parse(&args, err, "search", "x", "--type", NULL), -1);
    assert_non_null(strstr(err, "needs a value"));
    assert_int_equal(parse(&args, err, "search", "x", "--json=yes", NULL), -1);
    assert_non_null(strstr(err, "takes no value"));
    assert_int_equal(parse(&args, err, "search", "x", "--per", "1", "--per", "2", NULL), -1);
    assert_non_null(strstr(err, "given twice"));
    /* A command's flag before the command is not known yet. */
    assert_int_equal(parse(&args, err, "--type", "x", "search", "y", NULL), -1);
    assert_int_equal(parse(&args, err, "get", "--type", "x", "a", "b", NULL), -1);
    /* An empty name would make a path with a hole in it: refused, naming the argument (issue 35, item 9). */
    assert_int_equal(parse(&args, err, "get", "model", "", NULL), -1);
    assert_string_equal(err, "get: the <slug> argument is empty: give one (nothing was sent)");
    assert_int_equal(parse(&args, err, "get", "", "x", NULL), -1);
    assert_non_null(strstr(err, "the <type> argument is empty"));
    /* Free text may be empty. */
    assert_int_equal(parse(&args, err, "search", "", NULL), 0);
}

static void test_help_and_manifest(void **state)
{
    rl_term_t plain = {0, 0, 80};
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    json_t *manifest, *search;

    rl_cli_help(out, &plain, &program, NULL);
    rl_cli_help(out, &plain, &program, &commands[1]);
    fclose(out);
    assert_non_null(strstr(text, "tool 1.2.3: a tool"));
    assert_non_null(strstr(text, "search <query>"));
    assert_non_null(strstr(text, "TOOL_BASE"));
    assert_non_null(strstr(text, "  2  usage"));
    assert_non_null(strstr(text, "usage: tool get <type> <slug>"));
    assert_non_null(strstr(text, "More about get."));
    assert_null(strstr(text, "\033["));
    free(text);

    manifest = rl_cli_manifest(&program, NULL);
    assert_string_equal(json_string_value(json_object_get(manifest, "version")), "1.2.3");
    assert_int_equal(json_array_size(json_object_get(manifest, "commands")), 3);
    search = json_array_get(json_object_get(manifest, "commands"), 0);
    assert_string_equal(json_string_value(json_object_get(search, "usage")), "tool search <query>");
    assert_true(json_is_null(json_object_get(json_object_get(search, "arguments"), "max")));
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(search, "flags"), 0), "short")), "-t");
    assert_string_equal(json_string_value(json_array_get(json_object_get(search, "examples"), 0)), "tool search x");
    assert_int_equal(
        json_integer_value(json_object_get(json_array_get(json_object_get(manifest, "exit_codes"), 1), "code")), 2);
    assert_int_equal(json_array_size(json_object_get(manifest, "global_flags")), 2);
    json_decref(manifest);
    manifest = rl_cli_manifest(&program, &commands[2]);
    assert_string_equal(json_string_value(json_object_get(manifest, "name")), "version");
    json_decref(manifest);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_accepts),
        cmocka_unit_test(test_parse_refuses),
        cmocka_unit_test(test_help_and_manifest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
