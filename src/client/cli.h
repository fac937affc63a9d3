/*
 * Command-line programs as tables: each program is one const table of
 * commands, each command one row with its arguments, flags, summary and
 * examples (redis's command table, applied to a CLI). From that one table
 * come the argument parser, `help` and `help --json`, so that the three can
 * never disagree.
 *
 * Flags are --name, --name=value, --name value, -x value or -xvalue; they may
 * come before or after the command's positional arguments; "--" ends them.
 * A flag given twice, an unknown flag, a missing value and a wrong number of
 * arguments are usage errors; with a flag named "help" the number of
 * arguments is not checked.
 */
#ifndef RL_CLIENT_CLI_H
#define RL_CLIENT_CLI_H

#include <jansson.h>
#include <stdio.h>

#include "client/term.h"

#define RL_CLI_MAX_ARGS  16
#define RL_CLI_MAX_FLAGS 16

typedef struct rl_cli_flag {
    const char *name;  /* "type" for --type; NULL ends a table */
    char short_name;   /* 't' for -t, or 0 */
    const char *value; /* placeholder of its value ("TYPE"), or NULL for a switch */
    const char *help;
} rl_cli_flag_t;

struct rl_cli_args;

typedef struct rl_cli_command {
    const char *name;
    const char *usage;           /* positional arguments as shown: "<type> <slug>" */
    int min_args, max_args;      /* max_args -1: any number */
    const char *summary;         /* one line */
    const char *details;         /* more lines for `help <command>`, or NULL */
    const rl_cli_flag_t *flags;  /* its own flags, ended by {NULL}; may be NULL */
    const char *const *examples; /* ended by NULL; may be NULL */
    int (*run)(const struct rl_cli_args *args);
} rl_cli_command_t;

typedef struct rl_cli_env {
    const char *name; /* NULL ends a table */
    const char *help;
} rl_cli_env_t;

typedef struct rl_cli_exit {
    int code;
    const char *meaning; /* NULL ends a table */
} rl_cli_exit_t;

typedef struct rl_cli_program {
    const char *name;
    const char *version;
    const char *summary;
    const rl_cli_command_t *commands;
    size_t ncommands;
    const rl_cli_flag_t *global_flags; /* accepted by every command, ended by {NULL} */
    const rl_cli_env_t *env;           /* documented environment variables, or NULL */
    const rl_cli_exit_t *exit_codes;   /* ended by {0, NULL}; or NULL */
} rl_cli_program_t;

typedef struct rl_cli_args {
    const rl_cli_program_t *program;
    const rl_cli_command_t *command;
    const char *positional[RL_CLI_MAX_ARGS];
    int npositional;
    const rl_cli_flag_t *flags[RL_CLI_MAX_FLAGS]; /* flags given, in order */
    const char *values[RL_CLI_MAX_FLAGS];         /* their values; "" for switches */
    int nflags;
} rl_cli_args_t;

/* Finds a command by name, or NULL. */
const rl_cli_command_t *rl_cli_find(const rl_cli_program_t *program, const char *name);

/*
 * Parses argv[1..argc-1]: global flags, then a command name, then its
 * arguments and flags. Returns 0, or -1 with a message in err (errsz bytes).
 * Without a command name, args->command is NULL and 0 is returned only when
 * flags alone were given (say --help). Strings point into argv.
 */
int rl_cli_parse(const rl_cli_program_t *program, int argc, char **argv, rl_cli_args_t *args, char *err, size_t errsz);

/* The value of flag name ("" for a switch), or NULL when it was not given. */
const char *rl_cli_value(const rl_cli_args_t *args, const char *name);

/* Writes help for one command, or for the whole program when command is NULL. */
void rl_cli_help(FILE *out, const rl_term_t *term, const rl_cli_program_t *program, const rl_cli_command_t *command);

/*
 * The machine-readable manifest: {"name", "version", "summary", "usage",
 * "global_flags": [...], "commands": [{"name", "usage", "summary", "details"?,
 * "arguments": {"min", "max"}, "flags": [{"name", "short"?, "value"?, "help"}],
 * "examples": [...]}], "environment": [{"name", "help"}], "exit_codes": [{"code", "meaning"}]}; with a
 * command, that command's object alone. A new reference.
 */
json_t *rl_cli_manifest(const rl_cli_program_t *program, const rl_cli_command_t *command);

#endif
