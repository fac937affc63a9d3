/*
 * A flat JSON object: one object whose values are strings, integers, true,
 * false or null, read without building a tree, and the small writer that
 * encodes JSON the way jansson's compact dump does.
 *
 * The reader serves hot routes (POST /v1/bridge/sendMessageDelta): it takes
 * only what it can read exactly as jansson would (json_loadb with
 * JSON_REJECT_DUPLICATES) and says "not flat" for everything else, nested
 * values and reals included, and for every body jansson would refuse
 * (invalid UTF-8, a lone surrogate, \u0000, a control byte, a duplicate key,
 * an integer past int64, trailing bytes). The caller then takes its generic
 * path, whose answers, errors included, stay what they are.
 *
 * The writer escapes a string as jansson's dump does without
 * JSON_ENSURE_ASCII or JSON_ESCAPE_SLASH: '"' and '\\', \b \f \n \r \t by
 * their short forms, other bytes below 0x20 as \u00XX (upper-case hex),
 * everything else as it is (valid UTF-8 is assumed, as jansson guarantees
 * of the strings it holds). rl_json_flat_canonical writes an object as
 * json_dumps(JSON_COMPACT | JSON_SORT_KEYS) does, byte for byte: the bytes
 * an idempotency body hash is taken of (tests/unit/common/test_json_flat.c
 * holds the comparison with jansson).
 *
 * Pure functions, no global state: any thread.
 */
#ifndef RL_COMMON_JSON_FLAT_H
#define RL_COMMON_JSON_FLAT_H

#include <stddef.h>
#include <stdint.h>

/* Members one flat object may have; a body with more is "not flat". */
#define RL_JSON_FLAT_MEMBERS_MAX 16

typedef enum rl_json_flat_type {
    RL_JSON_FLAT_STRING,
    RL_JSON_FLAT_INTEGER,
    RL_JSON_FLAT_TRUE,
    RL_JSON_FLAT_FALSE,
    RL_JSON_FLAT_NULL,
} rl_json_flat_type_t;

typedef struct rl_json_flat_member {
    const char *key; /* decoded, NUL-terminated (a key never holds a NUL: \u0000 is refused) */
    size_t key_len;
    rl_json_flat_type_t type;
    const char *string; /* RL_JSON_FLAT_STRING: decoded UTF-8, NUL-terminated; else NULL */
    size_t len;         /* its length in bytes */
    int64_t integer;    /* RL_JSON_FLAT_INTEGER */
} rl_json_flat_member_t;

typedef struct rl_json_flat {
    size_t count; /* members, in the body's order */
    rl_json_flat_member_t members[RL_JSON_FLAT_MEMBERS_MAX];
} rl_json_flat_t;

/*
 * Reads len bytes as one flat object into *out. Decoded keys and strings go
 * to scratch, which must hold at least len bytes (a decoded string and its
 * NUL never take more than its quoted form); *out points into it. 0, or -1
 * ("not flat") for anything the reader does not take: the caller falls back
 * to jansson. Allocates nothing.
 */
int rl_json_flat_parse(const char *bytes, size_t len, char *scratch, size_t scratch_len, rl_json_flat_t *out);
/* Whether len bytes are UTF-8 as jansson's json_string takes it (no NUL check: len is given). */
int rl_json_utf8_valid(const char *text, size_t len);
/* The member named key, or NULL. */
const rl_json_flat_member_t *rl_json_flat_get(const rl_json_flat_t *object, const char *key);
/* The string value of key, or NULL when it is absent or not a string. */
const char *rl_json_flat_string(const rl_json_flat_t *object, const char *key);

/*
 * A JSON text being written: bytes kept on the stack up to a size, then on
 * the heap. A failed allocation marks the writer failed and drops everything
 * after it (checked once, at the end).
 */
typedef struct rl_json_out {
    char *bytes; /* local, or malloc'd once it outgrew it */
    size_t len, cap;
    int failed;
    char local[512];
} rl_json_out_t;

void rl_json_out_init(rl_json_out_t *out);
/* Gives back the heap memory, if any. */
void rl_json_out_free(rl_json_out_t *out);
/* Appends len bytes as they are (punctuation, a JSON text already encoded). */
void rl_json_out_raw(rl_json_out_t *out, const char *bytes, size_t len);
/* Appends a quoted, escaped string of len bytes of valid UTF-8. */
void rl_json_out_string(rl_json_out_t *out, const char *text, size_t len);
/* Appends an integer as jansson writes one ("%lld"). */
void rl_json_out_integer(rl_json_out_t *out, int64_t value);
/* Appends a member's value. */
void rl_json_out_member_value(rl_json_out_t *out, const rl_json_flat_member_t *member);
/* Appends the object with its keys sorted and no whitespace, as json_dumps(JSON_COMPACT | JSON_SORT_KEYS). */
void rl_json_flat_canonical(const rl_json_flat_t *object, rl_json_out_t *out);

#endif
