#ifndef RL_COMMON_BASE64_H
#define RL_COMMON_BASE64_H

#include <stddef.h>

/* Size of the buffer rl_base64url_encode needs for len input bytes (with NUL). */
#define RL_BASE64URL_ENCODED_SIZE(len) (((len) + 2) / 3 * 4 + 1)

/* Encodes without padding; out must hold RL_BASE64URL_ENCODED_SIZE(len). Returns the length written. */
size_t rl_base64url_encode(const void *in, size_t len, char *out);
/*
 * Decodes unpadded (or padded) base64url. out must hold len * 3 / 4 + 3 bytes.
 * Returns the decoded length, or -1 on a character outside the alphabet or an
 * impossible length.
 */
long rl_base64url_decode(const char *in, size_t len, unsigned char *out);

/* Size of the buffer rl_base64_encode needs for len input bytes (padded, with NUL). */
#define RL_BASE64_ENCODED_SIZE(len) (((len) + 2) / 3 * 4 + 1)

/*
 * Standard base64 (RFC 4648 section 4, '+' and '/', '=' padding): what the
 * encrypted wire (docs/api.md, "Encrypted sessions") carries. out must hold
 * RL_BASE64_ENCODED_SIZE(len). Returns the length written.
 */
size_t rl_base64_encode(const void *in, size_t len, char *out);
/*
 * Decodes standard base64; padding is required (len a multiple of 4, at most
 * two '=' at the end). out must hold len / 4 * 3 bytes. Returns the decoded
 * length, or -1 on anything else.
 */
long rl_base64_decode(const char *in, size_t len, unsigned char *out);
/*
 * Checks standard padded base64 without decoding it: the decoded length, or
 * -1 as rl_base64_decode would refuse it; *first (when not NULL and the
 * length is not 0) receives the first decoded byte. For values a peer sends
 * that are only carried, never opened (the encrypted wire's envelopes).
 */
long rl_base64_check(const char *in, size_t len, int *first);

#endif
