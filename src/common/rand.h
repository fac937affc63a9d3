/*
 * Randomness for identifiers and secrets. Everything here draws from the
 * kernel CSPRNG (getrandom); a failure there aborts the process, because no
 * caller could do anything sensible with a predictable id.
 */
#ifndef RL_COMMON_RAND_H
#define RL_COMMON_RAND_H

#include <stddef.h>
#include <stdint.h>

void rl_rand_bytes(void *out, size_t len);
/* Writes len characters of [0-9A-Za-z] (unbiased) and a NUL; out needs len + 1 bytes. */
void rl_rand_base62(char *out, size_t len);
/* Writes len lowercase hex characters and a NUL; out needs len + 1 bytes. */
void rl_rand_hex(char *out, size_t len);
/* Writes len characters of [A-Z] (unbiased) and a NUL; out needs len + 1 bytes. */
void rl_rand_upper(char *out, size_t len);
/*
 * Mints prefix + n base62 characters into out (size outsz); returns 0, or -1
 * when it does not fit.
 */
int rl_rand_id(char *out, size_t outsz, const char *prefix, size_t n);

#endif
