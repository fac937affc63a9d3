/*
 * Credentials of the command-line programs, one JSON file per program in the
 * user's config folder ($XDG_CONFIG_HOME/relay, else ~/.config/relay),
 * written atomically with mode 0600 in a folder of mode 0700. Secrets never
 * leave these files: callers print only what is not secret.
 */
#ifndef RL_CLIENT_CREDENTIALS_H
#define RL_CLIENT_CREDENTIALS_H

#include <jansson.h>
#include <stddef.h>

/* The file's path for name ("bridge", "client"); RELAY_CONFIG_DIR overrides the folder. 0 or -1. */
int rl_credentials_path(const char *name, char *out, size_t outsz);
/* Writes doc (not stolen) to the file, replacing it atomically. 0, or -1 with errno set. */
int rl_credentials_save(const char *name, const json_t *doc);
/*
 * Reads the file: a new reference, or NULL when it does not exist (errno
 * ENOENT) or cannot be read or parsed. A file that group or others may read
 * is refused (errno EPERM): fix its mode rather than trust it.
 */
json_t *rl_credentials_load(const char *name);
/* Removes the file; 0 when it is gone. */
int rl_credentials_remove(const char *name);

#endif
