/*
 * Declarative validation of JSON request bodies.
 *
 * Each route describes its body with one const table of rl_field_t rows, one
 * row per key, and gets back the spec's errors[] items ({path, code, message})
 * with the codes and wording of the zod library, which clients already know:
 *
 *   invalid_type        wrong JSON type, null where not nullable, or "Required"
 *   too_small/too_big   string length, array size or number outside its bounds
 *   invalid_string      a string failed the field's custom check
 *   invalid_enum_value  a string outside the field's list of allowed values
 *   invalid_json        the body does not parse (rl_validate_body only)
 *   unrecognized_keys   a key ending in _ct that the schema does not list
 *
 * Unknown keys are ignored, so that a newer client sending a key this server
 * does not know yet is still served; except a key ending in "_ct" (an
 * encrypted field, issue 26), which is refused as unrecognized_keys rather
 * than lost: the relay cannot read it, so nobody could notice the loss.
 *
 * A table reads like this:
 *
 *   static const char *const severity_values[] = {"low", "medium", "high", NULL};
 *   static const rl_field_t approval_fields[] = {
 *       RL_FIELD_STRING("approval_id", RL_F_REQUIRED, 1, 256),
 *       RL_FIELD_ENUM("severity", RL_F_REQUIRED, severity_values),
 *       RL_FIELD_STRING("agent_id", RL_F_NULLABLE, 0, 0),
 *       RL_FIELD_END,
 *   };
 *   static const rl_schema_t approval_schema = RL_SCHEMA(approval_fields);
 *
 * Everything here is reentrant and keeps no global state: any thread may call
 * it, and schemas are const data shared by all of them.
 */
#ifndef RL_HTTP_VALIDATE_H
#define RL_HTTP_VALIDATE_H

#include <stddef.h>
#include <jansson.h>

#include "common/json_flat.h"

/* One call reports at most this many problems; later ones are dropped. */
#define RL_VALIDATE_MAX_ERRORS 50
/*
 * Containers (the root object included) are descended at most this deep.
 * Only a schema that refers to itself can reach the limit; the value below it
 * is then refused with too_big rather than passed through unchecked.
 */
#define RL_VALIDATE_MAX_DEPTH 32
/* Bytes of a reported path, NUL included; a longer path is cut at a character boundary. */
#define RL_VALIDATE_PATH_MAX 256

typedef enum rl_field_type {
    RL_FT_STRING,
    RL_FT_INTEGER, /* a JSON number without fraction or exponent: 3.0 is a float, not an integer */
    RL_FT_NUMBER,  /* any JSON number */
    RL_FT_BOOLEAN,
    RL_FT_OBJECT,
    RL_FT_ARRAY,
    RL_FT_ANY /* any value, null included */
} rl_field_type_t;

#define RL_F_REQUIRED 0x1u /* absent -> invalid_type "Required" */
#define RL_F_NULLABLE 0x2u /* JSON null accepted */
/*
 * JSON null accepted and taken as absent: rl_validate_body removes the
 * member (top level), so the handler never sees it. For a plain content
 * field beside its *_ct twin (docs/api.md, "Ciphertext fields").
 */
#define RL_F_NULL_ABSENT 0x4u

typedef struct rl_field rl_field_t;

typedef struct rl_schema {
    const rl_field_t *fields; /* terminated by an entry whose name is NULL (RL_FIELD_END) */
} rl_schema_t;

struct rl_field {
    const char *name; /* key in the enclosing object; ignored for array items */
    rl_field_type_t type;
    unsigned flags; /* RL_F_* */
    /* Strings: length in Unicode code points. Arrays: item count. max_len 0 means unbounded. */
    size_t min_len, max_len;
    /* Integers and numbers: inclusive bounds, each active only when its has_ flag is set. */
    int has_min, has_max;
    double min, max;
    /* Strings only: NULL-terminated list of the allowed values; length bounds and check are then unused. */
    const char *const *enum_values;
    /* Strings only: extra check on the UTF-8 bytes; nonzero means invalid_string. */
    int (*check)(const char *s, size_t len);
    const char *check_message; /* message of a failed check; NULL gives "Invalid" */
    const rl_schema_t *object; /* RL_FT_OBJECT: schema of the value; NULL accepts any object */
    const rl_field_t *items;   /* RL_FT_ARRAY: descriptor of every item; NULL accepts any items */
    /* With RL_F_REQUIRED: the key may be absent when this sibling key is present (one of two names). */
    const char *unless;
};

/*
 * Row builders, so that a table stays one line per key. Each expands to a
 * brace initializer; write a designated initializer by hand for anything
 * they do not cover (an integer with only a maximum, say).
 */
/* clang-format would break each of these one-line initializers into five lines. */
/* clang-format off */
#define RL_SCHEMA(fields_) {.fields = (fields_)}
#define RL_FIELD_END {.name = NULL}
#define RL_FIELD_STRING(name_, flags_, min_len_, max_len_) \
    {.name = (name_), .type = RL_FT_STRING, .flags = (flags_), .min_len = (min_len_), .max_len = (max_len_)}
#define RL_FIELD_STRING_CHECK(name_, flags_, min_len_, max_len_, check_, message_) \
    {.name = (name_), .type = RL_FT_STRING, .flags = (flags_), .min_len = (min_len_), .max_len = (max_len_), \
     .check = (check_), .check_message = (message_)}
#define RL_FIELD_ENUM(name_, flags_, values_) \
    {.name = (name_), .type = RL_FT_STRING, .flags = (flags_), .enum_values = (values_)}
#define RL_FIELD_INTEGER(name_, flags_) {.name = (name_), .type = RL_FT_INTEGER, .flags = (flags_)}
#define RL_FIELD_INTEGER_MIN(name_, flags_, min_) \
    {.name = (name_), .type = RL_FT_INTEGER, .flags = (flags_), .has_min = 1, .min = (min_)}
#define RL_FIELD_INTEGER_RANGE(name_, flags_, min_, max_) \
    {.name = (name_), .type = RL_FT_INTEGER, .flags = (flags_), .has_min = 1, .has_max = 1, .min = (min_), \
     .max = (max_)}
#define RL_FIELD_NUMBER(name_, flags_) {.name = (name_), .type = RL_FT_NUMBER, .flags = (flags_)}
#define RL_FIELD_NUMBER_MIN(name_, flags_, min_) \
    {.name = (name_), .type = RL_FT_NUMBER, .flags = (flags_), .has_min = 1, .min = (min_)}
#define RL_FIELD_NUMBER_RANGE(name_, flags_, min_, max_) \
    {.name = (name_), .type = RL_FT_NUMBER, .flags = (flags_), .has_min = 1, .has_max = 1, .min = (min_), \
     .max = (max_)}
#define RL_FIELD_BOOLEAN(name_, flags_) {.name = (name_), .type = RL_FT_BOOLEAN, .flags = (flags_)}
#define RL_FIELD_OBJECT(name_, flags_, schema_) \
    {.name = (name_), .type = RL_FT_OBJECT, .flags = (flags_), .object = (schema_)}
#define RL_FIELD_ARRAY(name_, flags_, min_items_, max_items_, item_) \
    {.name = (name_), .type = RL_FT_ARRAY, .flags = (flags_), .min_len = (min_items_), \
     .max_len = (max_items_), .items = (item_)}
#define RL_FIELD_ANY(name_, flags_) {.name = (name_), .type = RL_FT_ANY, .flags = (flags_)}
/* clang-format on */

/*
 * Validates a parsed body against schema. The body must be an object: NULL
 * (no body) gives invalid_type "Required" and any other type gives
 * invalid_type "Expected object, received <type>", both with path "".
 * schema NULL accepts any object.
 *
 * Appends one new {"path", "code", "message"} object per problem to errors, a
 * JSON array owned by the caller (NULL: count only), in schema order and
 * depth first, stopping after RL_VALIDATE_MAX_ERRORS. body is not modified.
 *
 * Returns the number of problems found (0 = valid). Should an allocation
 * fail, an item may be missing from errors but is still counted, so a
 * nonzero return always means the body must be refused.
 */
int rl_validate_json(const rl_schema_t *schema, const json_t *body, json_t *errors);

/*
 * The same rules over a body the flat reader read: 0 when rl_validate_json
 * would find no problem in the same body, nonzero otherwise (no errors[]
 * are written: a caller with a nonzero answer takes the generic path,
 * whose errors are the answer). A field of a type a flat body cannot hold
 * (object, array) is a problem when present.
 */
int rl_validate_flat(const rl_schema_t *schema, const rl_json_flat_t *body);

/*
 * Parses len bytes as exactly one JSON value and validates it with
 * rl_validate_json. Parsing refuses trailing data, invalid UTF-8, \u0000
 * and duplicate keys. A body of zero bytes or only JSON whitespace stands for
 * {} when empty_is_object is set; otherwise it is "Required" at path "".
 * bytes may be NULL only when len is 0.
 *
 * Returns 0 and stores a new reference to the parsed body in *out when the
 * body is valid. Otherwise *out is NULL and the result is
 * RL_E_INVALID_REQUEST with the problems appended to errors (a parse failure
 * is one invalid_json item at path "" naming jansson's line and column), or
 * RL_E_INTERNAL when memory ran out before anything could be said.
 */
int rl_validate_body(const rl_schema_t *schema, const char *bytes, size_t len, int empty_is_object, json_t **out,
                     json_t *errors);

#endif
