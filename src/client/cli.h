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
#define RL_CLI_MAX_FLAGS 48

typedef struct rl_cli_flag {
    const char *name;  /* "type" for --type; NULL ends a table */
    char short_name;   /* 't' for -t, or 0 */
    const char *value; /* placeholder of its value ("TYPE"), or NULL for a switch */
    const char *help;
    int repeat; /* may be given more than once (each value kept, in order: rl_cli_values) */
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

/* How a program writes: see rl_cli_main. */
enum {
    RL_CLI_JSON_WHEN_PIPED = 1, /* JSON output when stdout is not a terminal, not only with --json */
    RL_CLI_PRETTY_JSON = 2,     /* JSON written to a terminal is indented */
    RL_CLI_ERRORS_ON_STDERR = 4 /* errors are text on stderr even in JSON mode (stdout carries data lines) */
};

typedef struct rl_cli_program {
    const char *name;
    const char *version;
    const char *summary;
    const rl_cli_command_t *commands;
    size_t ncommands;
    const rl_cli_flag_t *global_flags;         /* accepted by every command, ended by {NULL} */
    const rl_cli_env_t *env;                   /* documented environment variables, or NULL */
    const rl_cli_exit_t *exit_codes;           /* ended by {0, NULL}; or NULL */
    int output;                                /* RL_CLI_* flags */
    void (*extend_manifest)(json_t *manifest); /* adds program facts to `help --json`, or NULL */
} rl_cli_program_t;

struct rl_cli;

typedef struct rl_cli_args {
    const rl_cli_program_t *program;
    const rl_cli_command_t *command;
    const char *positional[RL_CLI_MAX_ARGS];
    int npositional;
    const rl_cli_flag_t *flags[RL_CLI_MAX_FLAGS]; /* flags given, in order */
    const char *values[RL_CLI_MAX_FLAGS];         /* their values; "" for switches */
    int nflags;
    struct rl_cli *cli; /* set by rl_cli_main; NULL after rl_cli_parse alone */
} rl_cli_args_t;

/* The output side of a running program, shared by its commands. */
typedef struct rl_cli {
    const rl_cli_program_t *program;
    int json;      /* results as JSON: --json, or a pipe under RL_CLI_JSON_WHEN_PIPED */
    int json_flag; /* --json was given */
    rl_term_t out; /* stdout */
    rl_term_t err; /* stderr */
} rl_cli_t;

/* Exit statuses every program shares; a program's own start at 3. */
enum { RL_CLI_EXIT_OK = 0, RL_CLI_EXIT_RUNTIME = 1, RL_CLI_EXIT_USAGE = 2 };

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

/*
 * The values of a repeatable flag, in the order given: up to max of them in
 * out. The number given (which may exceed max).
 */
int rl_cli_values(const rl_cli_args_t *args, const char *name, const char **out, int max);

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

/*
 * The main of a program: looks at the terminals, settles the output mode
 * (before parsing, so that a usage error already comes out in the right
 * form), parses argv, answers --help and the `help` command, and runs the
 * command. Returns the exit status. cli lives as long as the program (commands reach it through
 * args->cli).
 */
int rl_cli_main(rl_cli_t *cli, const rl_cli_program_t *program, int argc, char **argv);
/*
 * The `help [command]` command, for a program's table: text, piped or not
 * (help is read, often through a pager), or the manifest with --json.
 */
int rl_cli_run_help(const rl_cli_args_t *args);

/* Writes value as one JSON line on stdout (indented on a terminal under RL_CLI_PRETTY_JSON) and flushes. */
void rl_cli_print_json(const rl_cli_t *cli, const json_t *value);
/*
 * Reports an error and returns status: {"error": message, ...extra} on
 * stdout in JSON mode, else "program: message" on stderr. Steals extra (more
 * JSON fields, or NULL).
 */
int rl_cli_report(const rl_cli_t *cli, int status, const char *message, json_t *extra);
/* A note for people on stderr, dimmed on a terminal; never in the JSON of stdout. */
void rl_cli_note(const rl_cli_t *cli, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The escape sequence of a style on stdout, or "". */
const char *rl_cli_style(const rl_cli_t *cli, rl_term_style_t style);
/* The string member key of object, or "" when it is absent or not a string. */
const char *rl_cli_str(const json_t *object, const char *key);

#endif
