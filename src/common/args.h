/* Command-line options of the one-shot commands: "--name VALUE" and "--name=VALUE" alike. */
#ifndef RL_COMMON_ARGS_H
#define RL_COMMON_ARGS_H

/*
 * Whether argv[*i] is the option name with a value, as "NAME VALUE" (then
 * *i moves onto VALUE) or "NAME=VALUE"; if so, *value points at the value.
 * A NAME with nothing after it is not a match (the caller's usage error).
 */
int rl_arg_value(int argc, char **argv, int *i, const char *name, const char **value);

#endif
