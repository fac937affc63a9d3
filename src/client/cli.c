#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client/cli.h"

const rl_cli_command_t *rl_cli_find(const rl_cli_program_t *program, const char *name)
{
    size_t i;

    for (i = 0; i < program->ncommands; ++i) {
        if (strcmp(program->commands[i].name, name) == 0)
            return &program->commands[i];
    }
    return NULL;
}

static const rl_cli_flag_t *find_in(const rl_cli_flag_t *flags, const char *name, size_t len, char short_name)
{
    for (; flags != NULL && flags->name != NULL; ++flags) {
        if (short_name != 0 ? flags->short_name == short_name
                            : strlen(flags->name) == len && strncmp(flags->name, name, len) == 0)
            return flags;
    }
    return NULL;
}

static const rl_cli_flag_t *find_flag(const rl_cli_args_t *args, const char *name, size_t len, char short_name)
{
    const rl_cli_flag_t *flag = find_in(args->program->global_flags, name, len, short_name);

    if (flag == NULL && args->command != NULL)
        flag = find_in(args->command->flags, name, len, short_name);
    return flag;
}

static int add_flag(rl_cli_args_t *args, const rl_cli_flag_t *flag, const char *value, char *err, size_t errsz)
{
    int i;

    for (i = 0; i < args->nflags; ++i) {
        if (args->flags[i] == flag && !flag->repeat) {
            snprintf(err, errsz, "--%s is given twice", flag->name);
            return -1;
        }
    }
    if (args->nflags == RL_CLI_MAX_FLAGS) {
        snprintf(err, errsz, "too many flags");
        return -1;
    }
    args->flags[args->nflags] = flag;
    args->values[args->nflags++] = value;
    return 0;
}

/* Parses the flag at argv[*i]; may consume the next argument as its value. */
static int parse_flag(rl_cli_args_t *args, int argc, char **argv, int *i, char *err, size_t errsz)
{
    const char *arg = argv[*i], *value = NULL, *name;
    const rl_cli_flag_t *flag;
    size_t len;
    char shown[64];

    if (arg[1] == '-') {
        const char *eq = strchr(arg + 2, '=');
        name = arg + 2;
        len = eq != NULL ? (size_t)(eq - name) : strlen(name);
        value = eq != NULL ? eq + 1 : NULL;
        flag = find_flag(args, name, len, 0);
        snprintf(shown, sizeof(shown), "--%.*s", (int)(len < 40 ? len : 40), name);
    } else {
        flag = find_flag(args, NULL, 0, arg[1]);
        value = arg[2] != '\0' ? arg + 2 : NULL;
        snprintf(shown, sizeof(shown), "-%c", arg[1]);
    }
    if (flag == NULL) {
        if (args->command != NULL)
            snprintf(err, errsz, "unknown flag %s for '%s' (see %s help %s)", shown, args->command->name,
                     args->program->name, args->command->name);
        else
            snprintf(err, errsz, "unknown flag %s (see %s help)", shown, args->program->name);
        return -1;
    }
    if (flag->value == NULL) {
        if (value != NULL) {
            snprintf(err, errsz, "%s takes no value", shown);
            return -1;
        }
        return add_flag(args, flag, "", err, errsz);
    }
    if (value == NULL) {
        if (*i + 1 >= argc) {
            snprintf(err, errsz, "%s needs a value: %s %s", shown, shown, flag->value);
            return -1;
        }
        value = argv[++*i];
    }
    return add_flag(args, flag, value, err, errsz);
}

/* Arguments that may be empty: free text ("" clears a title, an empty value is a value). Any other is a name. */
/* Free text, and a pairing code, which its command checks itself and says what a code is (7 letters). */
static const char *const may_be_empty[] = {"text", "title", "value", "query", "code", NULL};

/*
 * An empty name ("" for a session id, say) would reach the server as a path
 * with a hole in it, and come back as "no such route": it is refused here,
 * before any request, saying which argument was empty. The usage string says
 * what each argument is: the n-th word, when it is a whole <name> or [name].
 */
static int empty_argument(const rl_cli_command_t *command, const rl_cli_args_t *args, char *err, size_t errsz)
{
    const char *word = command->usage;
    size_t len, k;
    int n;

    for (n = 0; n < args->npositional && *word != '\0'; ++n) {
        while (*word == ' ')
            ++word;
        len = strcspn(word, " ");
        if (len > 2 && args->positional[n][0] == '\0' &&
            ((word[0] == '<' && word[len - 1] == '>') || (word[0] == '[' && word[len - 1] == ']')) &&
            strcspn(word, "|") >= len) {
            for (k = 0; may_be_empty[k] != NULL; ++k) {
                if (strlen(may_be_empty[k]) == len - 2 && strncmp(word + 1, may_be_empty[k], len - 2) == 0)
                    break;
            }
            if (may_be_empty[k] == NULL) {
                snprintf(err, errsz, "%s: the %.*s argument is empty: give one (nothing was sent)", command->name,
                         (int)len, word);
                return 1;
            }
        }
        word += len;
    }
    return 0;
}

int rl_cli_parse(const rl_cli_program_t *program, int argc, char **argv, rl_cli_args_t *args, char *err, size_t errsz)
{
    int i, flags_done = 0;

    memset(args, 0, sizeof(*args));
    args->program = program;
    for (i = 1; i < argc; ++i) {
        const char *arg = argv[i];
        if (!flags_done && strcmp(arg, "--") == 0) {
            flags_done = 1;
            continue;
        }
        if (!flags_done && arg[0] == '-' && arg[1] != '\0') {
            if (parse_flag(args, argc, argv, &i, err, errsz) != 0)
                return -1;
            continue;
        }
        if (args->command == NULL) {
            args->command = rl_cli_find(program, arg);
            if (args->command == NULL) {
                snprintf(err, errsz, "unknown command '%.60s' (see %s help)", arg, program->name);
                return -1;
            }
            continue;
        }
        if (args->npositional == RL_CLI_MAX_ARGS) {
            snprintf(err, errsz, "too many arguments");
            return -1;
        }
        args->positional[args->npositional++] = arg;
    }
    if (args->command == NULL) {
        if (args->nflags == 0) {
            snprintf(err, errsz, "no command given (see %s help)", program->name);
            return -1;
        }
        return 0;
    }
    /* Asking for help is never wrong, whatever else is missing. */
    if (rl_cli_value(args, "help") != NULL)
        return 0;
    if (args->npositional < args->command->min_args ||
        (args->command->max_args >= 0 && args->npositional > args->command->max_args)) {
        snprintf(err, errsz, "usage: %s %s%s%s", program->name, args->command->name,
                 args->command->usage[0] != '\0' ? " " : "", args->command->usage);
        return -1;
    }
    if (empty_argument(args->command, args, err, errsz))
        return -1;
    return 0;
}

const char *rl_cli_value(const rl_cli_args_t *args, const char *name)
{
    int i;

    for (i = 0; i < args->nflags; ++i) {
        if (strcmp(args->flags[i]->name, name) == 0)
            return args->values[i];
    }
    return NULL;
}

int rl_cli_values(const rl_cli_args_t *args, const char *name, const char **out, int max)
{
    int i, n = 0;

    for (i = 0; i < args->nflags; ++i) {
        if (strcmp(args->flags[i]->name, name) != 0)
            continue;
        if (n < max)
            out[n] = args->values[i];
        n++;
    }
    return n;
}

static void help_flags(FILE *out, const rl_term_t *term, const rl_cli_flag_t *flags)
{
    for (; flags != NULL && flags->name != NULL; ++flags) {
        char spec[64];
        if (flags->short_name != 0)
            snprintf(spec, sizeof(spec), "-%c, --%s%s%s", flags->short_name, flags->name, flags->value ? " " : "",
                     flags->value ? flags->value : "");
        else
            snprintf(spec, sizeof(spec), "    --%s%s%s", flags->name, flags->value ? " " : "",
                     flags->value ? flags->value : "");
        fprintf(out, "  %s%-22s%s %s\n", rl_term_style(term, RL_TERM_BOLD), spec, rl_term_style(term, RL_TERM_RESET),
                flags->help);
    }
}

static void help_command(FILE *out, const rl_term_t *term, const rl_cli_program_t *program,
                         const rl_cli_command_t *command)
{
    const char *const *example;

    fprintf(out, "%susage:%s %s %s%s%s\n\n%s\n", rl_term_style(term, RL_TERM_BOLD), rl_term_style(term, RL_TERM_RESET),
            program->name, command->name, command->usage[0] != '\0' ? " " : "", command->usage, command->summary);
    if (command->details != NULL) {
        fputc('\n', out);
        rl_term_wrap(out, term, command->details, 0);
    }
    if (command->flags != NULL && command->flags->name != NULL) {
        fprintf(out, "\nflags:\n");
        help_flags(out, term, command->flags);
    }
    fprintf(out, "\nglobal flags:\n");
    help_flags(out, term, program->global_flags);
    if (command->examples != NULL && *command->examples != NULL) {
        fprintf(out, "\nexamples:\n");
        for (example = command->examples; *example != NULL; ++example)
            fprintf(out, "  %s\n", *example);
    }
}

void rl_cli_help(FILE *out, const rl_term_t *term, const rl_cli_program_t *program, const rl_cli_command_t *command)
{
    const rl_cli_env_t *env;
    const rl_cli_exit_t *code;
    size_t i;

    if (command != NULL) {
        help_command(out, term, program, command);
        return;
    }
    fprintf(out, "%s %s: %s\n\n%susage:%s %s <command> [arguments] [flags]\n\ncommands:\n", program->name,
            program->version, program->summary, rl_term_style(term, RL_TERM_BOLD), rl_term_style(term, RL_TERM_RESET),
            program->name);
    for (i = 0; i < program->ncommands; ++i) {
        char spec[64];
        snprintf(spec, sizeof(spec), "%s %s", program->commands[i].name, program->commands[i].usage);
        fprintf(out, "  %s%-30s%s %s\n", rl_term_style(term, RL_TERM_BOLD), spec, rl_term_style(term, RL_TERM_RESET),
                program->commands[i].summary);
    }
    fprintf(out, "\nglobal flags:\n");
    help_flags(out, term, program->global_flags);
    if (program->env != NULL && program->env->name != NULL) {
        fprintf(out, "\nenvironment:\n");
        for (env = program->env; env->name != NULL; ++env)
            fprintf(out, "  %-22s %s\n", env->name, env->help);
    }
    if (program->exit_codes != NULL && program->exit_codes->meaning != NULL) {
        fprintf(out, "\nexit status:\n");
        for (code = program->exit_codes; code->meaning != NULL; ++code)
            fprintf(out, "  %d  %s\n", code->code, code->meaning);
    }
    fprintf(out, "\n'%s help <command>' tells more; '%s help --json' prints all of this as JSON.\n", program->name,
            program->name);
}

static json_t *flags_json(const rl_cli_flag_t *flags)
{
    json_t *list = json_array();

    for (; flags != NULL && flags->name != NULL; ++flags) {
        json_t *flag = json_pack("{s:s}", "name", flags->name);
        char spelled[64];
        snprintf(spelled, sizeof(spelled), "--%s", flags->name);
        json_object_set_new(flag, "flag", json_string(spelled));
        if (flags->short_name != 0) {
            snprintf(spelled, sizeof(spelled), "-%c", flags->short_name);
            json_object_set_new(flag, "short", json_string(spelled));
        }
        if (flags->value != NULL)
            json_object_set_new(flag, "value", json_string(flags->value));
        json_object_set_new(flag, "help", json_string(flags->help));
        json_array_append_new(list, flag);
    }
    return list;
}

static json_t *command_json(const rl_cli_program_t *program, const rl_cli_command_t *command)
{
    json_t *examples = json_array();
    const char *const *example;
    char usage[200];
    json_t *object;

    for (example = command->examples; example != NULL && *example != NULL; ++example)
        json_array_append_new(examples, json_string(*example));
    snprintf(usage, sizeof(usage), "%s %s%s%s", program->name, command->name, command->usage[0] != '\0' ? " " : "",
             command->usage);
    object = json_pack("{s:s, s:s, s:s}", "name", command->name, "usage", usage, "summary", command->summary);
    if (command->details != NULL)
        json_object_set_new(object, "details", json_string(command->details));
    json_object_set_new(object, "arguments",
                        json_pack("{s:i, s:o}", "min", command->min_args, "max",
                                  command->max_args >= 0 ? json_integer(command->max_args) : json_null()));
    json_object_set_new(object, "flags", flags_json(command->flags));
    json_object_set_new(object, "examples", examples);
    return object;
}

json_t *rl_cli_manifest(const rl_cli_program_t *program, const rl_cli_command_t *command)
{
    json_t *commands, *env, *codes, *manifest;
    const rl_cli_env_t *e;
    const rl_cli_exit_t *code;
    char usage[128];
    size_t i;

    if (command != NULL)
        return command_json(program, command);
    commands = json_array();
    env = json_array();
    codes = json_array();
    for (i = 0; i < program->ncommands; ++i)
        json_array_append_new(commands, command_json(program, &program->commands[i]));
    for (e = program->env; e != NULL && e->name != NULL; ++e)
        json_array_append_new(env, json_pack("{s:s, s:s}", "name", e->name, "help", e->help));
    for (code = program->exit_codes; code != NULL && code->meaning != NULL; ++code)
        json_array_append_new(codes, json_pack("{s:i, s:s}", "code", code->code, "meaning", code->meaning));
    snprintf(usage, sizeof(usage), "%s <command> [arguments] [flags]", program->name);
    manifest = json_pack("{s:s, s:s, s:s, s:s}", "name", program->name, "version", program->version, "summary",
                         program->summary, "usage", usage);
    json_object_set_new(manifest, "global_flags", flags_json(program->global_flags));
    json_object_set_new(manifest, "commands", commands);
    json_object_set_new(manifest, "environment", env);
    json_object_set_new(manifest, "exit_codes", codes);
    return manifest;
}

/* ---- the main of a program ---- */

/* Whether --json comes before "--": settled before parsing, so that even a usage error comes out in the right form. */
static int wants_json(int argc, char **argv)
{
    int i;

    for (i = 1; i < argc && strcmp(argv[i], "--") != 0; ++i) {
        if (strcmp(argv[i], "--json") == 0)
            return 1;
    }
    return 0;
}

int rl_cli_main(rl_cli_t *cli, const rl_cli_program_t *program, int argc, char **argv)
{
    rl_cli_args_t args;
    char err[300];

    memset(cli, 0, sizeof(*cli));
    cli->program = program;
    rl_term_detect(STDOUT_FILENO, &cli->out);
    rl_term_detect(STDERR_FILENO, &cli->err);
    cli->json_flag = wants_json(argc, argv);
    cli->json = cli->json_flag || ((program->output & RL_CLI_JSON_WHEN_PIPED) && !cli->out.tty);
    /* `PROGRAM --version`, as every program of the project answers it, is the version command. */
    if (argc >= 2 && strcmp(argv[1], "--version") == 0 && rl_cli_find(program, "version") != NULL) {
        static char version_command[] = "version";
        argv[1] = version_command;
    }
    if (rl_cli_parse(program, argc, argv, &args, err, sizeof(err)) != 0)
        return rl_cli_report(cli, RL_CLI_EXIT_USAGE, err, NULL);
    args.cli = cli;
    if (rl_cli_value(&args, "help") != NULL) {
        rl_cli_args_t help = args;
        help.command = rl_cli_find(program, "help");
        help.npositional = 0;
        if (args.command != NULL && strcmp(args.command->name, "help") != 0) {
            help.positional[0] = args.command->name;
            help.npositional = 1;
        }
        return rl_cli_run_help(&help);
    }
    if (args.command == NULL) {
        snprintf(err, sizeof(err), "no command given (see %s help)", program->name);
        return rl_cli_report(cli, RL_CLI_EXIT_USAGE, err, NULL);
    }
    return args.command->run(&args);
}

int rl_cli_run_help(const rl_cli_args_t *args)
{
    const rl_cli_t *cli = args->cli;
    const rl_cli_command_t *command = NULL;
    char message[200];

    if (args->npositional > 0) {
        command = rl_cli_find(cli->program, args->positional[0]);
        if (command == NULL) {
            snprintf(message, sizeof(message), "no command '%.60s' (see %s help)", args->positional[0],
                     cli->program->name);
            return rl_cli_report(cli, RL_CLI_EXIT_USAGE, message, NULL);
        }
    }
    /* Help is for reading, piped into a pager too: the manifest only when --json asks for it. */
    if (cli->json_flag) {
        json_t *manifest = rl_cli_manifest(cli->program, command);
        if (command == NULL && cli->program->extend_manifest != NULL)
            cli->program->extend_manifest(manifest);
        rl_cli_print_json(cli, manifest);
        json_decref(manifest);
        return RL_CLI_EXIT_OK;
    }
    rl_cli_help(stdout, &cli->out, cli->program, command);
    return RL_CLI_EXIT_OK;
}

/* ---- output ---- */

void rl_cli_print_json(const rl_cli_t *cli, const json_t *value)
{
    size_t flags = JSON_REAL_PRECISION(12);

    flags |= (cli->program->output & RL_CLI_PRETTY_JSON) && cli->out.tty ? JSON_INDENT(2) : JSON_COMPACT;
    json_dumpf(value, stdout, flags);
    fputc('\n', stdout);
    fflush(stdout);
}

int rl_cli_report(const rl_cli_t *cli, int status, const char *message, json_t *extra)
{
    if (cli->json && !(cli->program->output & RL_CLI_ERRORS_ON_STDERR)) {
        json_t *error = json_pack("{s:s}", "error", message);
        if (extra != NULL)
            json_object_update(error, extra);
        rl_cli_print_json(cli, error);
        json_decref(error);
    } else {
        fprintf(stderr, "%s%s:%s %s\n", rl_term_style(&cli->err, RL_TERM_RED), cli->program->name,
                rl_term_style(&cli->err, RL_TERM_RESET), message);
    }
    json_decref(extra);
    return status;
}

void rl_cli_note(const rl_cli_t *cli, const char *fmt, ...)
{
    va_list ap;

    fputs(rl_term_style(&cli->err, RL_TERM_DIM), stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", rl_term_style(&cli->err, RL_TERM_RESET));
}

const char *rl_cli_style(const rl_cli_t *cli, rl_term_style_t style)
{
    return rl_term_style(&cli->out, style);
}

const char *rl_cli_str(const json_t *object, const char *key)
{
    const char *value = json_string_value(json_object_get(object, key));

    return value != NULL ? value : "";
}
