/*
 * relayd's settings: one table, read from flags (--name value or
 * --name=value), then the environment (RELAY_ + NAME in capitals, dashes as
 * underscores), then the default. Durations carry a unit ("250ms", "3s").
 * The settings themselves are the relay's (relay/config.h).
 */
#ifndef RL_RELAYD_CONFIG_H
#define RL_RELAYD_CONFIG_H

#include <stdio.h>

#include "relay/core/config.h"

/*
 * Fills config from defaults, the environment and argv[first..argc). Stops
 * at the first argument that is not a setting and stores its index in
 * *rest (argc when all were consumed). Returns 0, 1 when --help was asked
 * (usage printed to stdout), or -1 on a bad setting (message on stderr).
 * Start-up only.
 */
int rl_config_load(rl_config_t *config, int argc, char **argv, int first, int *rest);
/* Prints every setting with its default and its environment name. */
void rl_config_usage(FILE *out);

#endif
