/*
 * The catalog's eight entity types and the rules for slugs. Shared by
 * catalogd and the catalog command-line client, so that both accept the same
 * names; this module depends on nothing but libc.
 */
#ifndef RL_CATALOG_TYPE_H
#define RL_CATALOG_TYPE_H

#include <stddef.h>

typedef enum rl_catalog_type {
    RL_CATALOG_TYPE_EVAL,
    RL_CATALOG_TYPE_MODEL,
    RL_CATALOG_TYPE_TOOL,
    RL_CATALOG_TYPE_LEADERBOARD,
    RL_CATALOG_TYPE_ORGANIZATION,
    RL_CATALOG_TYPE_PERSON,
    RL_CATALOG_TYPE_CAPABILITY,
    RL_CATALOG_TYPE_PAPER,
    RL_CATALOG_TYPE_COUNT
} rl_catalog_type_t;

typedef struct rl_catalog_type_row {
    const char *plural;   /* "people": the API path segment, the section name in source files */
    const char *singular; /* "person" */
    const char *heading;  /* "People": section heading in llms.txt and in the client's output */
} rl_catalog_type_row_t;

/* Indexed by rl_catalog_type_t, in the order the spec lists the types. */
extern const rl_catalog_type_row_t rl_catalog_types[RL_CATALOG_TYPE_COUNT];

/*
 * Parses a type name given in its singular or plural form, ASCII case
 * ignored ("model", "Models", "people", "person"). Returns the type, or -1
 * for anything else.
 */
int rl_catalog_type_parse(const char *name, size_t len);

/* Longest slug accepted anywhere. */
#define RL_CATALOG_SLUG_MAX 80

/*
 * A slug is 1 to RL_CATALOG_SLUG_MAX characters of [a-z0-9.-], starting and
 * ending with a letter or digit, without two punctuation marks in a row
 * ("llama-3.1-405b"). Returns 1 when s (len bytes, not necessarily
 * NUL-terminated) is one.
 */
int rl_catalog_slug_is_valid(const char *s, size_t len);

#endif
