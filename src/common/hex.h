/* Hexadecimal digits: the value of one, and bytes spelt as lowercase hex. Pure functions, any thread. */
#ifndef RL_COMMON_HEX_H
#define RL_COMMON_HEX_H

#include <stddef.h>

/* The value of a hex digit of either case, 0 to 15; -1 for anything else. */
int rl_hex_value(int c);
/* Writes the len bytes as 2 * len lowercase hex digits and a NUL; out needs 2 * len + 1 bytes. */
void rl_hex_encode(const void *bytes, size_t len, char *out);
/* Decodes exactly outlen bytes from 2 * outlen hex digits (either case); 0, or -1 when in is anything else. */
int rl_hex_decode(const char *in, size_t inlen, unsigned char *out, size_t outlen);

#endif
