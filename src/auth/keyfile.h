/*
 * Private keys kept in the data folder (one PEM PKCS#8 file each, mode 0600),
 * created on first use. Creation is atomic (a synced temporary file, then
 * link), so relays starting together on one folder end with the same key.
 * Startup thread; never logs key material.
 */
#ifndef RL_RELAY_KEYFILE_H
#define RL_RELAY_KEYFILE_H

#include <openssl/evp.h>

/* Files longer than this are refused. */
#define RL_KEYFILE_MAX 16384

/*
 * Loads DIR/NAME, or creates it with generate() when it does not exist. The
 * key must be of type (an OpenSSL name such as "EC"); a file readable by
 * group or others, not a regular file, encrypted or of another type is
 * refused. Returns 0 and *out (the caller frees it), or -1 with the cause
 * logged under label.
 */
int rl_keyfile_open(const char *dir, const char *name, const char *type, const char *label, EVP_PKEY *(*generate)(void),
                    EVP_PKEY **out);

#endif
