/*
 * Declarative body validation: walks a JSON value alongside a const field
 * table and reports problems in zod's codes and words, because the spec's
 * errors[] passes validator codes through unchanged (invalid_type, too_big,
 * too_small, invalid_string) and those are zod's.
 */
#include "http/validate.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Room for the longest message: an enum list, or jansson's 160-byte error text plus position. */
#define MESSAGE_MAX 512
/* A received enum value longer than this is cut in the message: the message echoes peer input. */
#define ECHO_MAX 64

typedef struct validation {
    json_t *errors; /* NULL: count only */
    int count;
    int depth;
    size_t path_len;
    char path[RL_VALIDATE_PATH_MAX];
} validation_t;

/*
 * Length of the longest prefix of s[0..n) that does not end inside a UTF-8
 * sequence, for cutting text at a byte limit without making it invalid.
 */
static size_t utf8_clip(const char *s, size_t n)
{
    size_t start = n;
    unsigned char lead;
    size_t need;

    while (start > 0 && ((unsigned char)s[start - 1] & 0xC0) == 0x80)
        --start;
    if (start == 0)
        return 0;
    lead = (unsigned char)s[start - 1];
    need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return n - (start - 1) < need ? start - 1 : n;
}

/* Length of the longest prefix of s (len bytes) that fits in max bytes, cut at a character boundary. */
static size_t utf8_prefix(const char *s, size_t len, size_t max)
{
    return len <= max ? len : utf8_clip(s, max);
}

/* Code points of valid UTF-8, which jansson guarantees for every string it holds. */
static size_t utf8_count(const char *s, size_t len)
{
    size_t i, count = 0;

    for (i = 0; i < len; ++i)
        count += ((unsigned char)s[i] & 0xC0) != 0x80;
    return count;
}

static int is_full(const validation_t *v)
{
    return v->count >= RL_VALIDATE_MAX_ERRORS;
}

static void add_problem(validation_t *v, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void add_problem(validation_t *v, const char *code, const char *fmt, ...)
{
    char message[MESSAGE_MAX];
    va_list ap;
    int written;
    json_t *item;

    if (is_full(v))
        return;
    /* Counted before anything can fail, so that an allocation failure still refuses the body. */
    ++v->count;
    if (v->errors == NULL)
        return;

    va_start(ap, fmt);
    written = vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    if (written < 0)
        message[0] = '\0';
    else if ((size_t)written >= sizeof(message))
        message[utf8_clip(message, sizeof(message) - 1)] = '\0';

    item = json_object();
    if (item == NULL)
        return;
    if (json_object_set_new(item, "path", json_string(v->path)) != 0 ||
        json_object_set_new(item, "code", json_string(code)) != 0 ||
        json_object_set_new(item, "message", json_string(message)) != 0) {
        json_decref(item);
        return;
    }
    json_array_append_new(v->errors, item);
}

/*
 * Appends ".segment" (no dot at the root) and returns the length to restore
 * with path_pop. What does not fit is cut at a character boundary, so the
 * reported path is then a prefix of the real one, never an overflow.
 */
static size_t path_push(validation_t *v, const char *segment, size_t len)
{
    size_t mark = v->path_len;
    size_t room;

    if (mark > 0 && mark < sizeof(v->path) - 1)
        v->path[v->path_len++] = '.';
    room = sizeof(v->path) - 1 - v->path_len;
    len = utf8_prefix(segment, len, room);
    memcpy(v->path + v->path_len, segment, len);
    v->path_len += len;
    v->path[v->path_len] = '\0';
    return mark;
}

static size_t path_push_index(validation_t *v, size_t index)
{
    char digits[24];
    int len = snprintf(digits, sizeof(digits), "%zu", index);

    return path_push(v, digits, (size_t)len);
}

static void path_pop(validation_t *v, size_t mark)
{
    v->path_len = mark;
    v->path[mark] = '\0';
}

static int enter(validation_t *v)
{
    if (v->depth >= RL_VALIDATE_MAX_DEPTH) {
        add_problem(v, "too_big", "Nesting must be at most %d level(s)", RL_VALIDATE_MAX_DEPTH);
        return 0;
    }
    ++v->depth;
    return 1;
}

static void leave(validation_t *v)
{
    --v->depth;
}

/* zod's name for the type of a received value. */
static const char *received_name(const json_t *value)
{
    static const char *const names[] = {
        [JSON_OBJECT] = "object", [JSON_ARRAY] = "array",  [JSON_STRING] = "string", [JSON_INTEGER] = "number",
        [JSON_REAL] = "number",   [JSON_TRUE] = "boolean", [JSON_FALSE] = "boolean", [JSON_NULL] = "null",
    };

    return names[json_typeof(value)];
}

/* Writes "'a' | 'b' | 'c'"; a list too long for the buffer ends in "...". */
static void format_enum_list(const char *const *values, char *buf, size_t size)
{
    size_t used = 0;
    size_t i;

    buf[0] = '\0';
    for (i = 0; values[i] != NULL; ++i) {
        int written = snprintf(buf + used, size - used, "%s'%s'", i > 0 ? " | " : "", values[i]);
        if (written < 0 || (size_t)written >= size - used) {
            used = utf8_prefix(buf, strlen(buf), size - 4);
            snprintf(buf + used, size - used, "...");
            return;
        }
        used += (size_t)written;
    }
}

/*
 * A bound for a message, written the way JavaScript would: integers in full
 * ("26214400", not "2.62144e+07"), fractions with the fewest digits that
 * read back as the same double ("0.1", not "0.10000000000000001").
 */
static void format_bound(double bound, char *buf, size_t size)
{
    double magnitude = bound < 0 ? -bound : bound;
    int precision;

    /* Every double from 2^53 up is an integer; below, the cast is in range and exact. */
    if (magnitude < 1e21 && (magnitude >= 0x1p53 || bound == (double)(long long)bound)) {
        snprintf(buf, size, "%.0f", bound);
        return;
    }
    for (precision = 15; precision < 17; ++precision) {
        snprintf(buf, size, "%.*g", precision, bound);
        if (strtod(buf, NULL) == bound)
            return;
    }
    snprintf(buf, size, "%.17g", bound);
}

/*
 * Exact comparisons of an integer with a double bound. Casting the integer
 * to double would round above 2^53; instead the bound is rounded to the
 * nearest integer on the inside (v < 2.5 is v < 3), which is exact below
 * 2^63. A NaN bound, a schema bug, is never crossed.
 */
static int int_below(json_int_t v, double bound)
{
    long long ceiling;

    if (isnan(bound) || bound <= -0x1p63)
        return 0;
    if (bound >= 0x1p63)
        return 1;
    ceiling = (long long)bound;
    if ((double)ceiling < bound)
        ++ceiling;
    return v < ceiling;
}

static int int_above(json_int_t v, double bound)
{
    long long floored;

    if (isnan(bound) || bound >= 0x1p63)
        return 0;
    if (bound < -0x1p63)
        return 1;
    floored = (long long)bound;
    if ((double)floored > bound)
        --floored;
    return v > floored;
}

static void check_value(validation_t *v, const rl_field_t *field, const json_t *value);

/* Whether the schema lists key. */
static int listed(const rl_schema_t *schema, const char *key)
{
    const rl_field_t *field;

    for (field = schema->fields; field->name != NULL; ++field)
        if (strcmp(field->name, key) == 0)
            return 1;
    return 0;
}

/*
 * issue 26: a key ending in _ct is an encrypted field. Ignoring one the
 * schema does not list would lose data nobody but its sender can rebuild
 * (the relay cannot read it), so it is refused by name; other unknown keys
 * stay ignored, for newer clients and bridges.
 */
static void check_unknown_ciphertext(validation_t *v, const rl_schema_t *schema, const json_t *object)
{
    const char *key;
    json_t *value;

    json_object_foreach((json_t *)object, key, value)
    {
        size_t len = strlen(key), mark;
        if (is_full(v))
            break;
        if (len <= 3 || strcmp(key + len - 3, "_ct") != 0 || listed(schema, key))
            continue;
        mark = path_push(v, key, len);
        add_problem(v, "unrecognized_keys", "Unrecognized encrypted field '%s': it would be lost", key);
        path_pop(v, mark);
    }
}

static void check_object(validation_t *v, const rl_schema_t *schema, const json_t *object)
{
    const rl_field_t *field;

    if (schema == NULL || schema->fields == NULL)
        return;
    if (!enter(v))
        return;
    for (field = schema->fields; field->name != NULL && !is_full(v); ++field) {
        size_t mark;
        if (field->unless != NULL && json_object_get(object, field->name) == NULL &&
            json_object_get(object, field->unless) != NULL)
            continue;
        mark = path_push(v, field->name, strlen(field->name));
        check_value(v, field, json_object_get(object, field->name));
        path_pop(v, mark);
    }
    if (json_is_object(object))
        check_unknown_ciphertext(v, schema, object);
    leave(v);
}

static void check_enum(validation_t *v, const rl_field_t *field, const char *s, size_t len)
{
    char expected[MESSAGE_MAX / 2];
    size_t i, shown;

    for (i = 0; field->enum_values[i] != NULL; ++i) {
        if (strlen(field->enum_values[i]) == len && memcmp(field->enum_values[i], s, len) == 0)
            return;
    }
    format_enum_list(field->enum_values, expected, sizeof(expected));
    shown = utf8_prefix(s, len, ECHO_MAX);
    add_problem(v, "invalid_enum_value", "Invalid enum value. Expected %s, received '%.*s%s'", expected, (int)shown, s,
                shown < len ? "..." : "");
}

static void refine_string(validation_t *v, const rl_field_t *field, const json_t *value)
{
    const char *s = json_string_value(value);
    size_t len = json_string_length(value);
    size_t chars;

    if (field->enum_values != NULL) {
        check_enum(v, field, s, len);
        return;
    }
    chars = utf8_count(s, len);
    if (chars < field->min_len)
        add_problem(v, "too_small", "String must contain at least %zu character(s)", field->min_len);
    if (field->max_len != 0 && chars > field->max_len)
        add_problem(v, "too_big", "String must contain at most %zu character(s)", field->max_len);
    if (field->check != NULL && field->check(s, len) != 0)
        add_problem(v, "invalid_string", "%s", field->check_message != NULL ? field->check_message : "Invalid");
}

static void report_bounds(validation_t *v, const rl_field_t *field, int below, int above)
{
    char bound[32];

    if (below) {
        format_bound(field->min, bound, sizeof(bound));
        add_problem(v, "too_small", "Number must be greater than or equal to %s", bound);
    }
    if (above) {
        format_bound(field->max, bound, sizeof(bound));
        add_problem(v, "too_big", "Number must be less than or equal to %s", bound);
    }
}

static void refine_integer(validation_t *v, const rl_field_t *field, const json_t *value)
{
    json_int_t n = json_integer_value(value);

    report_bounds(v, field, field->has_min && int_below(n, field->min), field->has_max && int_above(n, field->max));
}

static void refine_number(validation_t *v, const rl_field_t *field, const json_t *value)
{
    double d = json_number_value(value);

    report_bounds(v, field, field->has_min && d < field->min, field->has_max && d > field->max);
}

static void refine_object(validation_t *v, const rl_field_t *field, const json_t *value)
{
    check_object(v, field->object, value);
}

static void refine_array(validation_t *v, const rl_field_t *field, const json_t *value)
{
    size_t count = json_array_size(value);
    size_t i;

    if (count < field->min_len)
        add_problem(v, "too_small", "Array must contain at least %zu element(s)", field->min_len);
    if (field->max_len != 0 && count > field->max_len)
        add_problem(v, "too_big", "Array must contain at most %zu element(s)", field->max_len);
    if (field->items == NULL)
        return;
    if (!enter(v))
        return;
    for (i = 0; i < count && !is_full(v); ++i) {
        size_t mark = path_push_index(v, i);
        check_value(v, field->items, json_array_get(value, i));
        path_pop(v, mark);
    }
    leave(v);
}

static int accepts_string(const json_t *value)
{
    return json_is_string(value);
}

static int accepts_integer(const json_t *value)
{
    return json_is_integer(value);
}

static int accepts_number(const json_t *value)
{
    return json_is_number(value);
}

static int accepts_boolean(const json_t *value)
{
    return json_is_boolean(value);
}

static int accepts_object(const json_t *value)
{
    return json_is_object(value);
}

static int accepts_array(const json_t *value)
{
    return json_is_array(value);
}

static int accepts_any(const json_t *value)
{
    return 1;
}

static const struct field_type {
    const char *name; /* zod's name in "Expected <name>, received ..." */
    int (*accepts)(const json_t *value);
    void (*refine)(validation_t *v, const rl_field_t *field, const json_t *value);
} field_types[] = {
    [RL_FT_STRING] = {"string", accepts_string, refine_string},
    [RL_FT_INTEGER] = {"integer", accepts_integer, refine_integer},
    [RL_FT_NUMBER] = {"number", accepts_number, refine_number},
    [RL_FT_BOOLEAN] = {"boolean", accepts_boolean, NULL},
    [RL_FT_OBJECT] = {"object", accepts_object, refine_object},
    [RL_FT_ARRAY] = {"array", accepts_array, refine_array},
    [RL_FT_ANY] = {"any", accepts_any, NULL},
};

static void report_type(validation_t *v, const struct field_type *type, const rl_field_t *field, const json_t *value)
{
    const char *received = received_name(value);
    char expected[MESSAGE_MAX / 2];

    /* zod tells a fraction apart from an integer only when an integer was asked for. */
    if (field->type == RL_FT_INTEGER && json_is_real(value))
        received = "float";
    if (field->type == RL_FT_STRING && field->enum_values != NULL)
        format_enum_list(field->enum_values, expected, sizeof(expected));
    else
        snprintf(expected, sizeof(expected), "%s", type->name);
    add_problem(v, "invalid_type", "Expected %s, received %s", expected, received);
}

static void check_value(validation_t *v, const rl_field_t *field, const json_t *value)
{
    const struct field_type *type;

    if (value == NULL) {
        if (field->flags & RL_F_REQUIRED)
            add_problem(v, "invalid_type", "Required");
        return;
    }
    if ((unsigned)field->type >= ARRAY_SIZE(field_types)) {
        /* A schema bug; refusing the value beats passing it unchecked. */
        add_problem(v, "invalid_type", "Unsupported field type in schema");
        return;
    }
    type = &field_types[field->type];
    if (json_is_null(value) && ((field->flags & (RL_F_NULLABLE | RL_F_NULL_ABSENT)) || field->type == RL_FT_ANY))
        return;
    if (!type->accepts(value)) {
        report_type(v, type, field, value);
        return;
    }
    if (type->refine != NULL)
        type->refine(v, field, value);
}

int rl_validate_json(const rl_schema_t *schema, const json_t *body, json_t *errors)
{
    const rl_field_t root = RL_FIELD_OBJECT("", RL_F_REQUIRED, schema);
    validation_t v = {.errors = errors};

    check_value(&v, &root, body);
    return v.count;
}

/* ---- flat bodies: the same rules, a verdict without words ---- */

static int flat_string_ok(const rl_field_t *field, const rl_json_flat_member_t *member)
{
    size_t chars, i;

    if (field->enum_values != NULL) {
        for (i = 0; field->enum_values[i] != NULL; ++i)
            if (strlen(field->enum_values[i]) == member->len &&
                memcmp(field->enum_values[i], member->string, member->len) == 0)
                return 1;
        return 0;
    }
    chars = utf8_count(member->string, member->len);
    if (chars < field->min_len || (field->max_len != 0 && chars > field->max_len))
        return 0;
    return field->check == NULL || field->check(member->string, member->len) == 0;
}

/* Whether a present member meets its field's row, as check_value would find it. */
static int flat_value_ok(const rl_field_t *field, const rl_json_flat_member_t *member)
{
    /* A null taken as absent goes the generic way, which removes it (rl_validate_body). */
    if (member->type == RL_JSON_FLAT_NULL)
        return (field->flags & RL_F_NULLABLE) != 0 || field->type == RL_FT_ANY;
    switch (field->type) {
    case RL_FT_STRING:
        return member->type == RL_JSON_FLAT_STRING && flat_string_ok(field, member);
    case RL_FT_INTEGER:
        return member->type == RL_JSON_FLAT_INTEGER && !(field->has_min && int_below(member->integer, field->min)) &&
               !(field->has_max && int_above(member->integer, field->max));
    case RL_FT_NUMBER:
        /* refine_number compares json_number_value, the integer as a double. */
        return member->type == RL_JSON_FLAT_INTEGER && !(field->has_min && (double)member->integer < field->min) &&
               !(field->has_max && (double)member->integer > field->max);
    case RL_FT_BOOLEAN:
        return member->type == RL_JSON_FLAT_TRUE || member->type == RL_JSON_FLAT_FALSE;
    case RL_FT_ANY:
        return 1;
    default:
        return 0; /* an object or an array: a flat body has none */
    }
}

int rl_validate_flat(const rl_schema_t *schema, const rl_json_flat_t *body)
{
    const rl_field_t *field;
    size_t i;

    if (schema == NULL || schema->fields == NULL)
        return 0;
    for (field = schema->fields; field->name != NULL; ++field) {
        const rl_json_flat_member_t *member = rl_json_flat_get(body, field->name);
        if (member == NULL) {
            if ((field->flags & RL_F_REQUIRED) &&
                (field->unless == NULL || rl_json_flat_get(body, field->unless) == NULL))
                return 1;
            continue;
        }
        if (!flat_value_ok(field, member))
            return 1;
    }
    /* check_unknown_ciphertext's rule. */
    for (i = 0; i < body->count; ++i) {
        const rl_json_flat_member_t *member = &body->members[i];
        if (member->key_len > 3 && memcmp(member->key + member->key_len - 3, "_ct", 3) == 0 &&
            !listed(schema, member->key))
            return 1;
    }
    return 0;
}

/* The members of a valid body whose null stands for absent (RL_F_NULL_ABSENT) are removed. */
static void drop_null_absent(const rl_schema_t *schema, json_t *body)
{
    const rl_field_t *field;

    if (schema == NULL || schema->fields == NULL || !json_is_object(body))
        return;
    for (field = schema->fields; field->name != NULL; ++field)
        if ((field->flags & RL_F_NULL_ABSENT) && json_is_null(json_object_get(body, field->name)))
            json_object_del(body, field->name);
}

static int is_blank(const char *bytes, size_t len)
{
    size_t i;

    for (i = 0; i < len; ++i) {
        if (bytes[i] != ' ' && bytes[i] != '\t' && bytes[i] != '\n' && bytes[i] != '\r')
            return 0;
    }
    return 1;
}

/*
 * jansson quotes the offending token, which may hold invalid UTF-8 or control
 * bytes from the peer; only printable ASCII goes back into the response.
 */
static void report_parse_error(json_t *errors, const json_error_t *jerr)
{
    validation_t v = {.errors = errors};
    char text[sizeof(jerr->text)];
    size_t i;

    for (i = 0; i < sizeof(text) - 1 && jerr->text[i] != '\0'; ++i) {
        unsigned char c = (unsigned char)jerr->text[i];
        text[i] = c >= 0x20 && c < 0x7F ? (char)c : '?';
    }
    text[i] = '\0';
    /* jansson's own text for this case names its decoder flag, which means nothing to a client. */
    if (json_error_code(jerr) == json_error_null_character)
        snprintf(text, sizeof(text), "\\u0000 is not allowed in strings");
    if (jerr->line > 0)
        add_problem(&v, "invalid_json", "Invalid JSON at line %d, column %d: %s", jerr->line, jerr->column, text);
    else
        add_problem(&v, "invalid_json", "Invalid JSON: %s", text);
}

static int parse_body(const char *bytes, size_t len, json_t **body, json_t *errors)
{
    json_error_t jerr;

    /* JSON_DECODE_ANY lets a scalar root parse, so that it is reported as the wrong type at "". */
    *body = json_loadb(bytes, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (*body != NULL)
        return 0;
    if (json_error_code(&jerr) == json_error_out_of_memory)
        return RL_E_INTERNAL;
    report_parse_error(errors, &jerr);
    return RL_E_INVALID_REQUEST;
}

int rl_validate_body(const rl_schema_t *schema, const char *bytes, size_t len, int empty_is_object, json_t **out,
                     json_t *errors)
{
    json_t *body = NULL;
    int result;

    *out = NULL;
    if (!is_blank(bytes, len)) {
        result = parse_body(bytes, len, &body, errors);
        if (result != 0)
            goto out;
    } else if (empty_is_object) {
        body = json_object();
        if (body == NULL) {
            result = RL_E_INTERNAL;
            goto out;
        }
    }
    /* A blank body not standing for {} is still NULL here and is reported as "Required". */
    if (rl_validate_json(schema, body, errors) != 0) {
        result = RL_E_INVALID_REQUEST;
        goto out;
    }
    drop_null_absent(schema, body);
    *out = body;
    body = NULL;
    result = 0;
out:
    json_decref(body);
    return result;
}
