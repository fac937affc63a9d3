/* Hexadecimal digits: the value of one, and bytes spelt as lowercase hex. Pure functions, any thread. */
#ifndef RL_COMMON_HEX_H
#define RL_COMMON_HEX_H

#include <stddef.h>

/* The value of a hex digit of either case, 0 to 15; -1 for anything else. */
int rl_hex_value(int c);
/* Writes the len bytes as 2 * len lowercase hex digits and a NUL; out needs 2 * len + 1 bytes. */
void rl_hex_encode(const void *bytes, size_t len, char *out);

#endif
