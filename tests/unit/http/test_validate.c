/*
 * Unit tests of src/http/validate.c: every field type and code, nesting and
 * paths, parse failures, the empty-body rule and the limits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/error.h"
#include "http/validate.h"

/* Nonzero unless every byte is visible ASCII. */
static int check_key(const char *s, size_t len)
{
    size_t i;

    for (i = 0; i < len; ++i) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x21 || c > 0x7E)
            return 1;
    }
    return 0;
}

static int check_never(const char *s, size_t len)
{
    return 1;
}

static const char *const severity_values[] = {"low", "medium", "high", NULL};

static const rl_field_t usage_fields[] = {
    RL_FIELD_INTEGER_MIN("input_tokens", 0, 0),
    RL_FIELD_NUMBER_MIN("estimated_cost_usd", 0, 0),
    RL_FIELD_STRING("model", 0, 0, 200),
    RL_FIELD_END,
};
static const rl_schema_t usage_schema = RL_SCHEMA(usage_fields);

static const rl_field_t attachment_fields[] = {
    RL_FIELD_STRING("key", RL_F_REQUIRED, 1, 512),
    RL_FIELD_STRING("mime", RL_F_REQUIRED, 1, 255),
    RL_FIELD_INTEGER_RANGE("size", RL_F_REQUIRED, 0, 26214400),
    RL_FIELD_STRING("name", RL_F_NULLABLE, 0, 255),
    RL_FIELD_END,
};
static const rl_schema_t attachment_schema = RL_SCHEMA(attachment_fields);
static const rl_field_t attachment_item = RL_FIELD_OBJECT(NULL, 0, &attachment_schema);
static const rl_field_t tag_item = RL_FIELD_STRING(NULL, 0, 1, 8);

static const rl_field_t task_fields[] = {
    RL_FIELD_STRING("task_id", RL_F_REQUIRED, 1, 256),
    RL_FIELD_STRING("title", RL_F_NULLABLE, 0, 200),
    RL_FIELD_ENUM("severity", RL_F_REQUIRED, severity_values),
    RL_FIELD_STRING_CHECK("idempotency_key", 0, 1, 128, check_key, "Invalid idempotency key"),
    RL_FIELD_NUMBER_RANGE("progress_percent", 0, 0, 100),
    RL_FIELD_INTEGER("count", 0),
    RL_FIELD_BOOLEAN("final", 0),
    RL_FIELD_OBJECT("usage", 0, &usage_schema),
    RL_FIELD_OBJECT("args", 0, NULL),
    RL_FIELD_ARRAY("attachments", 0, 0, 3, &attachment_item),
    RL_FIELD_ARRAY("tags", 0, 1, 0, &tag_item),
    RL_FIELD_ANY("result", 0),
    RL_FIELD_END,
};
static const rl_schema_t task_schema = RL_SCHEMA(task_fields);

static const rl_field_t optional_fields[] = {
    RL_FIELD_STRING("note", 0, 0, 10),
    RL_FIELD_END,
};
static const rl_schema_t optional_schema = RL_SCHEMA(optional_fields);

/* The prefix every valid task body in these tests starts with. */
#define TASK_OK "{\"task_id\":\"t1\",\"severity\":\"low\""

/*
 * Validates text with rl_validate_body (empty body is not {}); returns the
 * result and leaves the errors array in *errors for the caller to free.
 */
static int run(const rl_schema_t *schema, const char *text, json_t **errors)
{
    json_t *body = NULL;
    int result;

    *errors = json_array();
    assert_non_null(*errors);
    result = rl_validate_body(schema, text, strlen(text), 0, &body, *errors);
    if (result == 0) {
        assert_non_null(body);
        assert_int_equal(json_array_size(*errors), 0);
    } else {
        assert_null(body);
    }
    json_decref(body);
    return result;
}

/* Expects text to be valid against schema. */
#define assert_valid(schema, text) assert_valid_at(schema, text, __FILE__, __LINE__)
static void assert_valid_at(const rl_schema_t *schema, const char *text, const char *file, int line)
{
    json_t *errors;
    int result = run(schema, text, &errors);

    if (result != 0) {
        char *dump = json_dumps(errors, JSON_COMPACT);
        print_error("unexpected problems for %s: %s\n", text, dump != NULL ? dump : "?");
        free(dump);
    }
    _assert_int_equal(result, 0, file, line);
    json_decref(errors);
}

#define assert_problem(errors, index, path, code, message)                                                             \
    assert_problem_at(errors, index, path, code, message, __FILE__, __LINE__)
static void assert_problem_at(const json_t *errors, size_t index, const char *path, const char *code,
                              const char *message, const char *file, int line)
{
    const json_t *item = json_array_get(errors, index);

    _assert_true(item != NULL, "problem present", file, line);
    _assert_int_equal(json_object_size(item), 3, file, line);
    _assert_string_equal(json_string_value(json_object_get(item, "path")), path, file, line);
    _assert_string_equal(json_string_value(json_object_get(item, "code")), code, file, line);
    _assert_string_equal(json_string_value(json_object_get(item, "message")), message, file, line);
}

/* Expects exactly one problem for text. */
#define assert_one(schema, text, path, code, message) assert_one_at(schema, text, path, code, message, __LINE__)
static void assert_one_at(const rl_schema_t *schema, const char *text, const char *path, const char *code,
                          const char *message, int line)
{
    json_t *errors;

    _assert_int_equal(run(schema, text, &errors), RL_E_INVALID_REQUEST, __FILE__, line);
    _assert_int_equal(json_array_size(errors), 1, __FILE__, line);
    assert_problem_at(errors, 0, path, code, message, __FILE__, line);
    json_decref(errors);
}

static const char *message_of(const json_t *errors, size_t index)
{
    return json_string_value(json_object_get(json_array_get(errors, index), "message"));
}

static void test_valid_body_is_returned(void **state)
{
    const char *text = TASK_OK ",\"title\":null,\"idempotency_key\":\"k-1\",\"progress_percent\":12.5,"
                               "\"count\":-4,\"final\":false,\"usage\":{\"input_tokens\":0,\"estimated_cost_usd\":0.25,"
                               "\"model\":\"m\"},\"args\":{\"any\":[1,\"x\"]},\"attachments\":[{\"key\":\"k\","
                               "\"mime\":\"image/png\",\"size\":26214400,\"name\":null}],\"tags\":[\"a\"],"
                               "\"result\":{\"deep\":[[[]]]},\"unknown\":{\"ignored\":true}}";
    json_t *errors = json_array();
    json_t *body = NULL;

    assert_int_equal(rl_validate_body(&task_schema, text, strlen(text), 0, &body, errors), 0);
    assert_non_null(body);
    assert_int_equal(body->refcount, 1);
    assert_string_equal(json_string_value(json_object_get(body, "task_id")), "t1");
    assert_true(json_is_object(json_object_get(body, "unknown")));
    assert_int_equal(json_array_size(errors), 0);
    assert_int_equal(rl_validate_json(&task_schema, body, errors), 0);
    json_decref(body);
    json_decref(errors);
}

/* issue 26: an unknown key ending in _ct is refused by name, at any depth with a schema; other unknown keys pass. */
static void test_unknown_encrypted_field_is_refused(void **state)
{
    json_t *errors;

    (void)state;
    assert_valid(&task_schema, TASK_OK ",\"other\":1,\"_ct\":2,\"ct\":3}");
    assert_int_equal(run(&task_schema, TASK_OK ",\"args_ct\":\"AA==\",\"result_ct\":\"x\"}", &errors),
                     RL_E_INVALID_REQUEST);
    assert_int_equal(json_array_size(errors), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(errors, 0), "code")), "unrecognized_keys");
    assert_string_equal(json_string_value(json_object_get(json_array_get(errors, 0), "path")), "args_ct");
    assert_string_equal(json_string_value(json_object_get(json_array_get(errors, 1), "path")), "result_ct");
    json_decref(errors);
    assert_int_equal(run(&task_schema, TASK_OK ",\"usage\":{\"model_ct\":\"x\"}}", &errors), RL_E_INVALID_REQUEST);
    assert_string_equal(json_string_value(json_object_get(json_array_get(errors, 0), "path")), "usage.model_ct");
    json_decref(errors);
}

/* A key required unless its sibling is there: either name will do, and neither is "Required" at the first. */
static void test_required_unless_sibling(void **state)
{
    static const rl_field_t fields[] = {
        {.name = "connector_type", .type = RL_FT_STRING, .flags = RL_F_REQUIRED, .unless = "connector_type_id"},
        RL_FIELD_STRING("connector_type_id", 0, 1, 64),
        RL_FIELD_END,
    };
    static const rl_schema_t schema = RL_SCHEMA(fields);
    json_t *errors;

    (void)state;
    assert_valid(&schema, "{\"connector_type\":\"a\"}");
    assert_valid(&schema, "{\"connector_type_id\":\"a\"}");
    assert_int_equal(run(&schema, "{}", &errors), RL_E_INVALID_REQUEST);
    assert_string_equal(json_string_value(json_object_get(json_array_get(errors, 0), "path")), "connector_type");
    json_decref(errors);
}

/* issue 34: a plain field's null beside its ciphertext is taken, and removed, so the handler sees it absent. */
static void test_null_taken_as_absent(void **state)
{
    static const rl_field_t fields[] = {
        RL_FIELD_STRING("text", RL_F_NULL_ABSENT, 0, 10),
        RL_FIELD_STRING("label", RL_F_NULLABLE, 0, 10),
        RL_FIELD_END,
    };
    static const rl_schema_t schema = RL_SCHEMA(fields);
    const char *text = "{\"text\":null,\"label\":null}";
    json_t *errors = json_array(), *body = NULL;

    (void)state;
    assert_int_equal(rl_validate_body(&schema, text, strlen(text), 0, &body, errors), 0);
    assert_null(json_object_get(body, "text"));
    /* A nullable field keeps its null: there it may mean something (a PATCH clears). */
    assert_true(json_is_null(json_object_get(body, "label")));
    json_decref(body);
    json_decref(errors);
    assert_int_equal(run(&schema, "{\"text\":1}", &errors), RL_E_INVALID_REQUEST);
    json_decref(errors);
}

static void test_missing_required(void **state)
{
    json_t *errors;

    assert_int_equal(run(&task_schema, "{}", &errors), RL_E_INVALID_REQUEST);
    assert_int_equal(json_array_size(errors), 2);
    assert_problem(errors, 0, "task_id", "invalid_type", "Required");
    assert_problem(errors, 1, "severity", "invalid_type", "Required");
    json_decref(errors);
    assert_valid(&optional_schema, "{}");
}

static void test_type_mismatch_names(void **state)
{
    assert_one(&task_schema, "{\"task_id\":5,\"severity\":\"low\"}", "task_id", "invalid_type",
               "Expected string, received number");
    assert_one(&task_schema, TASK_OK ",\"title\":1.5}", "title", "invalid_type", "Expected string, received number");
    assert_one(&task_schema, TASK_OK ",\"title\":true}", "title", "invalid_type", "Expected string, received boolean");
    assert_one(&task_schema, TASK_OK ",\"title\":[]}", "title", "invalid_type", "Expected string, received array");
    assert_one(&task_schema, TASK_OK ",\"title\":{}}", "title", "invalid_type", "Expected string, received object");
    assert_one(&task_schema, TASK_OK ",\"progress_percent\":\"50\"}", "progress_percent", "invalid_type",
               "Expected number, received string");
    assert_one(&task_schema, TASK_OK ",\"final\":\"yes\"}", "final", "invalid_type",
               "Expected boolean, received string");
    assert_one(&task_schema, TASK_OK ",\"args\":[]}", "args", "invalid_type", "Expected object, received array");
    assert_one(&task_schema, TASK_OK ",\"attachments\":{}}", "attachments", "invalid_type",
               "Expected array, received object");
    assert_valid(&task_schema, TASK_OK ",\"final\":true,\"result\":\"anything\"}");
}

static void test_null_vs_nullable(void **state)
{
    assert_one(&task_schema, "{\"task_id\":null,\"severity\":\"low\"}", "task_id", "invalid_type",
               "Expected string, received null");
    assert_one(&task_schema, TASK_OK ",\"usage\":null}", "usage", "invalid_type", "Expected object, received null");
    assert_one(&task_schema, TASK_OK ",\"count\":null}", "count", "invalid_type", "Expected integer, received null");
    assert_valid(&task_schema, TASK_OK ",\"title\":null}");
    assert_valid(&task_schema, TASK_OK ",\"result\":null}");
    assert_valid(&task_schema, TASK_OK ",\"attachments\":[{\"key\":\"k\",\"mime\":\"m\",\"size\":1,\"name\":null}]}");
}

static void test_string_length_counts_code_points(void **state)
{
    char text[2048];
    char title[1024];
    size_t i;

    assert_one(&task_schema, "{\"task_id\":\"\",\"severity\":\"low\"}", "task_id", "too_small",
               "String must contain at least 1 character(s)");

    /* 200 two-byte characters are 400 bytes but within a 200-character bound. */
    title[0] = '\0';
    for (i = 0; i < 200; ++i)
        strcat(title, "\xc3\xa9");
    snprintf(text, sizeof(text), TASK_OK ",\"title\":\"%s\"}", title);
    assert_valid(&task_schema, text);
    strcat(title, "\xc3\xa9");
    snprintf(text, sizeof(text), TASK_OK ",\"title\":\"%s\"}", title);
    assert_one(&task_schema, text, "title", "too_big", "String must contain at most 200 character(s)");

    /* Four-byte characters, and escapes that decode to them, count once each. */
    title[0] = '\0';
    for (i = 0; i < 200; ++i)
        strcat(title, "\xf0\x9f\x98\x80");
    snprintf(text, sizeof(text), TASK_OK ",\"title\":\"%s\"}", title);
    assert_valid(&task_schema, text);
    assert_valid(&optional_schema, "{\"note\":\"\\ud83d\\ude00\\ud83d\\ude00\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9x"
                                   "yz\"}");
    assert_one(&optional_schema, "{\"note\":\"\\ud83d\\ude00abcdefghij\"}", "note", "too_big",
               "String must contain at most 10 character(s)");
}

static void test_integer(void **state)
{
    assert_one(&task_schema, TASK_OK ",\"count\":3.0}", "count", "invalid_type", "Expected integer, received float");
    assert_one(&task_schema, TASK_OK ",\"count\":1.5}", "count", "invalid_type", "Expected integer, received float");
    assert_one(&task_schema, TASK_OK ",\"count\":1e2}", "count", "invalid_type", "Expected integer, received float");
    assert_one(&task_schema, TASK_OK ",\"count\":\"3\"}", "count", "invalid_type", "Expected integer, received string");
    assert_valid(&task_schema, TASK_OK ",\"count\":9223372036854775807}");
    assert_valid(&task_schema, TASK_OK ",\"count\":-9223372036854775808}");
    assert_valid(&task_schema, TASK_OK ",\"count\":-0}");

    assert_valid(&task_schema, TASK_OK ",\"attachments\":[{\"key\":\"k\",\"mime\":\"m\",\"size\":0}]}");
    assert_valid(&task_schema, TASK_OK ",\"attachments\":[{\"key\":\"k\",\"mime\":\"m\",\"size\":26214400}]}");
    assert_one(&task_schema, TASK_OK ",\"attachments\":[{\"key\":\"k\",\"mime\":\"m\",\"size\":26214401}]}",
               "attachments.0.size", "too_big", "Number must be less than or equal to 26214400");
    assert_one(&task_schema, TASK_OK ",\"attachments\":[{\"key\":\"k\",\"mime\":\"m\",\"size\":-1}]}",
               "attachments.0.size", "too_small", "Number must be greater than or equal to 0");
}

static void test_integer_bounds_are_exact(void **state)
{
    static const rl_field_t fraction_fields[] = {
        RL_FIELD_INTEGER_RANGE("n", RL_F_REQUIRED, 2.5, 7.5),
        RL_FIELD_END,
    };
    static const rl_schema_t fraction_schema = RL_SCHEMA(fraction_fields);
    static const rl_field_t wide_fields[] = {
        RL_FIELD_INTEGER_RANGE("n", RL_F_REQUIRED, -1e19, 1e19),
        RL_FIELD_END,
    };
    static const rl_schema_t wide_schema = RL_SCHEMA(wide_fields);
    static const rl_field_t big_fields[] = {
        /* 2^53 + 1 is not a double; a cast of the value to double would call it equal to the bound. */
        {.name = "n", .type = RL_FT_INTEGER, .has_max = 1, .max = 9007199254740992.0},
        RL_FIELD_END,
    };
    static const rl_schema_t big_schema = RL_SCHEMA(big_fields);

    assert_one(&fraction_schema, "{\"n\":2}", "n", "too_small", "Number must be greater than or equal to 2.5");
    assert_valid(&fraction_schema, "{\"n\":3}");
    assert_valid(&fraction_schema, "{\"n\":7}");
    assert_one(&fraction_schema, "{\"n\":8}", "n", "too_big", "Number must be less than or equal to 7.5");
    assert_valid(&wide_schema, "{\"n\":9223372036854775807}");
    assert_valid(&wide_schema, "{\"n\":-9223372036854775808}");
    assert_valid(&big_schema, "{\"n\":9007199254740992}");
    assert_one(&big_schema, "{\"n\":9007199254740993}", "n", "too_big",
               "Number must be less than or equal to 9007199254740992");
}

static void test_number(void **state)
{
    static const rl_field_t ratio_fields[] = {
        RL_FIELD_NUMBER_RANGE("ratio", RL_F_REQUIRED, 0.1, 0.3),
        RL_FIELD_END,
    };
    static const rl_schema_t ratio_schema = RL_SCHEMA(ratio_fields);

    /* Bounds print with the fewest digits that read back as the same double. */
    assert_one(&ratio_schema, "{\"ratio\":0.05}", "ratio", "too_small", "Number must be greater than or equal to 0.1");
    assert_one(&ratio_schema, "{\"ratio\":1}", "ratio", "too_big", "Number must be less than or equal to 0.3");
    assert_valid(&ratio_schema, "{\"ratio\":0.3}");
    assert_valid(&task_schema, TASK_OK ",\"progress_percent\":0}");
    assert_valid(&task_schema, TASK_OK ",\"progress_percent\":100}");
    assert_valid(&task_schema, TASK_OK ",\"progress_percent\":99.99}");
    assert_valid(&task_schema, TASK_OK ",\"progress_percent\":1e1}");
    assert_one(&task_schema, TASK_OK ",\"progress_percent\":100.5}", "progress_percent", "too_big",
               "Number must be less than or equal to 100");
    assert_one(&task_schema, TASK_OK ",\"progress_percent\":-0.1}", "progress_percent", "too_small",
               "Number must be greater than or equal to 0");
}

static void test_enum(void **state)
{
    char text[512];
    json_t *errors;
    const char *message;

    assert_valid(&task_schema, "{\"task_id\":\"t\",\"severity\":\"high\"}");
    assert_one(&task_schema, "{\"task_id\":\"t\",\"severity\":\"x\"}", "severity", "invalid_enum_value",
               "Invalid enum value. Expected 'low' | 'medium' | 'high', received 'x'");
    assert_one(&task_schema, "{\"task_id\":\"t\",\"severity\":\"\"}", "severity", "invalid_enum_value",
               "Invalid enum value. Expected 'low' | 'medium' | 'high', received ''");
    assert_one(&task_schema, "{\"task_id\":\"t\",\"severity\":\"LOW\"}", "severity", "invalid_enum_value",
               "Invalid enum value. Expected 'low' | 'medium' | 'high', received 'LOW'");
    assert_one(&task_schema, "{\"task_id\":\"t\",\"severity\":3}", "severity", "invalid_type",
               "Expected 'low' | 'medium' | 'high', received number");
    assert_one(&task_schema, "{\"task_id\":\"t\",\"severity\":null}", "severity", "invalid_type",
               "Expected 'low' | 'medium' | 'high', received null");

    /* A long received value is echoed only in part, cut at a character boundary. */
    snprintf(text, sizeof(text), "{\"task_id\":\"t\",\"severity\":\"%s\"}",
             "a\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
             "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
             "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9");
    assert_int_equal(run(&task_schema, text, &errors), RL_E_INVALID_REQUEST);
    message = message_of(errors, 0);
    assert_non_null(message);
    assert_non_null(strstr(message, "received 'a\xc3\xa9"));
    assert_non_null(strstr(message, "\xc3\xa9...'"));
    assert_true(strlen(message) < 64 + 80);
    json_decref(errors);
}

static void test_custom_check(void **state)
{
    static const rl_field_t plain_fields[] = {
        RL_FIELD_STRING_CHECK("code", 0, 0, 0, check_never, NULL),
        RL_FIELD_END,
    };
    static const rl_schema_t plain_schema = RL_SCHEMA(plain_fields);
    json_t *errors;

    assert_valid(&task_schema, TASK_OK ",\"idempotency_key\":\"abc-123\"}");
    assert_one(&task_schema, TASK_OK ",\"idempotency_key\":\"a b\"}", "idempotency_key", "invalid_string",
               "Invalid idempotency key");
    assert_one(&task_schema, TASK_OK ",\"idempotency_key\":\"\"}", "idempotency_key", "too_small",
               "String must contain at least 1 character(s)");
    assert_one(&plain_schema, "{\"code\":\"x\"}", "code", "invalid_string", "Invalid");

    /* Like zod, the length rule and the check are both reported. */
    assert_int_equal(run(&task_schema,
                         TASK_OK ",\"idempotency_key\":\"\\u00e9xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                                 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}",
                         &errors),
                     RL_E_INVALID_REQUEST);
    assert_int_equal(json_array_size(errors), 2);
    assert_problem(errors, 0, "idempotency_key", "too_big", "String must contain at most 128 character(s)");
    assert_problem(errors, 1, "idempotency_key", "invalid_string", "Invalid idempotency key");
    json_decref(errors);
}

static void test_nested_object_paths(void **state)
{
    json_t *errors;

    assert_int_equal(run(&task_schema, TASK_OK ",\"usage\":{\"model\":5,\"input_tokens\":-1,\"x\":1}}", &errors),
                     RL_E_INVALID_REQUEST);
    assert_int_equal(json_array_size(errors), 2);
    assert_problem(errors, 0, "usage.input_tokens", "too_small", "Number must be greater than or equal to 0");
    assert_problem(errors, 1, "usage.model", "invalid_type", "Expected string, received number");
    json_decref(errors);
    assert_valid(&task_schema, TASK_OK ",\"usage\":{},\"args\":{\"a\":{\"b\":[1,{}]}}}");
}

static void test_array_of_objects_paths(void **state)
{
    json_t *errors;

    assert_int_equal(run(&task_schema,
                         TASK_OK ",\"attachments\":[{\"key\":\"k\",\"mime\":\"m\",\"size\":1},"
                                 "{\"key\":\"k\",\"mime\":5,\"size\":1},{\"key\":\"k\",\"mime\":\"m\"}]}",
                         &errors),
                     RL_E_INVALID_REQUEST);
    assert_int_equal(json_array_size(errors), 2);
    assert_problem(errors, 0, "attachments.1.mime", "invalid_type", "Expected string, received number");
    assert_problem(errors, 1, "attachments.2.size", "invalid_type", "Required");
    json_decref(errors);

    assert_one(&task_schema, TASK_OK ",\"attachments\":[7]}", "attachments.0", "invalid_type",
               "Expected object, received number");

    assert_valid(&task_schema, TASK_OK ",\"attachments\":[]}");
    assert_one(&task_schema, TASK_OK ",\"attachments\":[null]}", "attachments.0", "invalid_type",
               "Expected object, received null");
}

static void test_array_bounds_and_scalar_items(void **state)
{
    json_t *errors;

    assert_one(&task_schema, TASK_OK ",\"tags\":[]}", "tags", "too_small", "Array must contain at least 1 element(s)");
    assert_valid(&task_schema, TASK_OK ",\"tags\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\"]}");

    /* Like zod, the size problem comes first and the items are still checked. */
    assert_int_equal(
        run(&task_schema, TASK_OK ",\"attachments\":[{\"key\":\"k\",\"mime\":\"m\",\"size\":1},{},{},{}]}", &errors),
        RL_E_INVALID_REQUEST);
    assert_int_equal(json_array_size(errors), 1 + 3 * 3);
    assert_problem(errors, 0, "attachments", "too_big", "Array must contain at most 3 element(s)");
    assert_problem(errors, 1, "attachments.1.key", "invalid_type", "Required");
    assert_problem(errors, 9, "attachments.3.size", "invalid_type", "Required");
    json_decref(errors);

    assert_int_equal(run(&task_schema, TASK_OK ",\"tags\":[\"ok\",7,\"\",\"123456789\"]}", &errors),
                     RL_E_INVALID_REQUEST);
    assert_int_equal(json_array_size(errors), 3);
    assert_problem(errors, 0, "tags.1", "invalid_type", "Expected string, received number");
    assert_problem(errors, 1, "tags.2", "too_small", "String must contain at least 1 character(s)");
    assert_problem(errors, 2, "tags.3", "too_big", "String must contain at most 8 character(s)");
    json_decref(errors);
}

static void test_root_not_object(void **state)
{
    assert_one(&task_schema, "[]", "", "invalid_type", "Expected object, received array");
    assert_one(&task_schema, "[{\"task_id\":\"t\",\"severity\":\"low\"}]", "", "invalid_type",
               "Expected object, received array");
    assert_one(&task_schema, "\"text\"", "", "invalid_type", "Expected object, received string");
    assert_one(&task_schema, "42", "", "invalid_type", "Expected object, received number");
    assert_one(&task_schema, "true", "", "invalid_type", "Expected object, received boolean");
    assert_one(&task_schema, "null", "", "invalid_type", "Expected object, received null");
}

/* Expects exactly one invalid_json problem at "" whose message contains fragment. */
#define assert_invalid_json(text, fragment) assert_invalid_json_at(text, strlen(text), fragment, __LINE__)
static void assert_invalid_json_at(const char *text, size_t len, const char *fragment, int line)
{
    json_t *errors = json_array();
    json_t *body = (json_t *)&body; /* must be overwritten with NULL */
    const char *message;

    _assert_int_equal(rl_validate_body(&task_schema, text, len, 1, &body, errors), RL_E_INVALID_REQUEST, __FILE__,
                      line);
    _assert_true(body == NULL, "body == NULL", __FILE__, line);
    _assert_int_equal(json_array_size(errors), 1, __FILE__, line);
    _assert_string_equal(json_string_value(json_object_get(json_array_get(errors, 0), "path")), "", __FILE__, line);
    _assert_string_equal(json_string_value(json_object_get(json_array_get(errors, 0), "code")), "invalid_json",
                         __FILE__, line);
    message = message_of(errors, 0);
    _assert_true(message != NULL && strstr(message, fragment) != NULL, fragment, __FILE__, line);
    for (; *message != '\0'; ++message)
        _assert_true(*message >= 0x20 && *message < 0x7F, "message is printable ASCII", __FILE__, line);
    json_decref(errors);
}

static void test_malformed_json(void **state)
{
    const char *truncated = "{\"task_id\":\"t\",\n\"severity\":";

    assert_invalid_json(truncated, "Invalid JSON at line 2, column ");
    assert_invalid_json("{\"task_id\"", "Invalid JSON at line 1, column ");
    assert_invalid_json("{\"task_id\":\"t\",\"severity\":\"low\"} {}", "end of file expected");
    assert_invalid_json("{'task_id':'t'}", "Invalid JSON");
    assert_invalid_json("{\"a\":1,}", "Invalid JSON");
    assert_invalid_json("{\"a\":NaN}", "Invalid JSON");
    assert_invalid_json("\x01{}", "Invalid JSON");
    /* A NUL byte ends nothing: the body is len bytes, and the NUL is not JSON. */
    assert_invalid_json_at("{}\0{}", 5, "Invalid JSON", __LINE__);
    /* jansson refuses numbers it cannot hold instead of rounding them. */
    assert_invalid_json("{\"task_id\":\"t\",\"severity\":\"low\",\"count\":99999999999999999999}", "too big");
    assert_invalid_json("{\"task_id\":\"t\",\"severity\":\"low\",\"progress_percent\":1e400}", "overflow");
}

static void test_duplicate_keys(void **state)
{
    const char *text = "{\"task_id\":\"t\",\"severity\":\"low\",\"task_id\":\"u\"}";

    assert_invalid_json(text, "duplicate object key");
}

static void test_invalid_utf8(void **state)
{
    const char *bad_string = "{\"task_id\":\"\xff\xfe\",\"severity\":\"low\"}";
    const char *bad_key = "{\"\xc3\":1}";
    const char *overlong = "{\"task_id\":\"\xc0\xaf\",\"severity\":\"low\"}";
    const char *surrogate = "{\"task_id\":\"\xed\xa0\x80\",\"severity\":\"low\"}";
    const char *nul_escape = "{\"task_id\":\"a\\u0000b\",\"severity\":\"low\"}";

    assert_invalid_json(bad_string, "Invalid JSON");
    assert_invalid_json(bad_key, "Invalid JSON");
    assert_invalid_json(overlong, "Invalid JSON");
    assert_invalid_json(surrogate, "Invalid JSON");
    assert_invalid_json(nul_escape, "\\u0000 is not allowed");
}

static void test_empty_body(void **state)
{
    json_t *errors = json_array();
    json_t *body = NULL;

    /* Standing for {}: a schema without required keys accepts it and gets a fresh object. */
    assert_int_equal(rl_validate_body(&optional_schema, "", 0, 1, &body, errors), 0);
    assert_true(json_is_object(body));
    assert_int_equal(json_object_size(body), 0);
    json_decref(body);
    assert_int_equal(rl_validate_body(&optional_schema, NULL, 0, 1, &body, errors), 0);
    json_decref(body);
    assert_int_equal(rl_validate_body(&optional_schema, " \r\n\t", 4, 1, &body, errors), 0);
    json_decref(body);
    assert_int_equal(json_array_size(errors), 0);

    /* ...and the required keys of a stricter schema are then reported one by one. */
    assert_int_equal(rl_validate_body(&task_schema, "", 0, 1, &body, errors), RL_E_INVALID_REQUEST);
    assert_null(body);
    assert_int_equal(json_array_size(errors), 2);
    assert_problem(errors, 0, "task_id", "invalid_type", "Required");
    assert_problem(errors, 1, "severity", "invalid_type", "Required");
    json_array_clear(errors);

    /* Not standing for {}: the body itself is missing. */
    assert_int_equal(rl_validate_body(&optional_schema, "", 0, 0, &body, errors), RL_E_INVALID_REQUEST);
    assert_null(body);
    assert_int_equal(json_array_size(errors), 1);
    assert_problem(errors, 0, "", "invalid_type", "Required");
    json_array_clear(errors);
    assert_int_equal(rl_validate_body(&optional_schema, "\n", 1, 0, &body, errors), RL_E_INVALID_REQUEST);
    assert_int_equal(json_array_size(errors), 1);
    assert_problem(errors, 0, "", "invalid_type", "Required");
    json_decref(errors);
}

static void test_multiple_errors_in_schema_order(void **state)
{
    json_t *errors;

    /* Keys arrive in another order than the schema's; problems follow the schema. */
    assert_int_equal(run(&task_schema,
                         "{\"final\":1,\"count\":\"c\",\"severity\":\"none\",\"title\":7,"
                         "\"usage\":{\"estimated_cost_usd\":-1},\"tags\":[1]}",
                         &errors),
                     RL_E_INVALID_REQUEST);
    assert_int_equal(json_array_size(errors), 7);
    assert_problem(errors, 0, "task_id", "invalid_type", "Required");
    assert_problem(errors, 1, "title", "invalid_type", "Expected string, received number");
    assert_problem(errors, 2, "severity", "invalid_enum_value",
                   "Invalid enum value. Expected 'low' | 'medium' | 'high', received 'none'");
    assert_problem(errors, 3, "count", "invalid_type", "Expected integer, received string");
    assert_problem(errors, 4, "final", "invalid_type", "Expected boolean, received number");
    assert_problem(errors, 5, "usage.estimated_cost_usd", "too_small", "Number must be greater than or equal to 0");
    assert_problem(errors, 6, "tags.0", "invalid_type", "Expected string, received number");
    json_decref(errors);
}

static void test_max_errors_cap(void **state)
{
    static const rl_field_t number_item = RL_FIELD_INTEGER(NULL, 0);
    static const rl_field_t list_fields[] = {
        RL_FIELD_ARRAY("list", 0, 0, 0, &number_item),
        RL_FIELD_STRING("after", RL_F_REQUIRED, 0, 0),
        RL_FIELD_END,
    };
    static const rl_schema_t list_schema = RL_SCHEMA(list_fields);
    json_t *body = json_object();
    json_t *list = json_array();
    json_t *errors = json_array();
    json_t *prefilled = json_array();
    size_t i;

    for (i = 0; i < 100; ++i)
        json_array_append_new(list, json_string("x"));
    json_object_set_new(body, "list", list);

    assert_int_equal(rl_validate_json(&list_schema, body, errors), RL_VALIDATE_MAX_ERRORS);
    assert_int_equal(json_array_size(errors), RL_VALIDATE_MAX_ERRORS);
    assert_problem(errors, 0, "list.0", "invalid_type", "Expected integer, received string");
    assert_problem(errors, RL_VALIDATE_MAX_ERRORS - 1, "list.49", "invalid_type", "Expected integer, received string");

    /* The cap is per call: problems already in the array do not count against it. */
    json_array_append_new(prefilled, json_string("earlier"));
    assert_int_equal(rl_validate_json(&list_schema, body, prefilled), RL_VALIDATE_MAX_ERRORS);
    assert_int_equal(json_array_size(prefilled), 1 + RL_VALIDATE_MAX_ERRORS);

    /* Without an array, problems are only counted. */
    assert_int_equal(rl_validate_json(&list_schema, body, NULL), RL_VALIDATE_MAX_ERRORS);
    json_array_clear(list);
    json_array_append_new(list, json_true());
    assert_int_equal(rl_validate_json(&list_schema, body, NULL), 2);

    json_decref(prefilled);
    json_decref(errors);
    json_decref(body);
}

static const rl_schema_t node_schema;
static const rl_field_t node_fields[] = {
    RL_FIELD_OBJECT("child", 0, &node_schema),
    RL_FIELD_END,
};
static const rl_schema_t node_schema = RL_SCHEMA(node_fields);

#define LONG_NAME "child_with_a_rather_long_name"
static const rl_schema_t long_node_schema;
static const rl_field_t long_node_fields[] = {
    RL_FIELD_OBJECT(LONG_NAME, 0, &long_node_schema),
    RL_FIELD_END,
};
static const rl_schema_t long_node_schema = RL_SCHEMA(long_node_fields);

/* {"<name>":{"<name>":...{}...}} nested levels deep below the root. */
static json_t *nest(const char *name, int levels)
{
    json_t *node = json_object();
    int i;

    for (i = 0; i < levels; ++i) {
        json_t *parent = json_object();
        json_object_set_new(parent, name, node);
        node = parent;
    }
    return node;
}

static void test_depth_limit_of_recursive_schema(void **state)
{
    char path[RL_VALIDATE_PATH_MAX];
    json_t *errors = json_array();
    json_t *body;
    int i;

    /* Within the limit: the root and 31 nested objects. */
    body = nest("child", RL_VALIDATE_MAX_DEPTH - 1);
    assert_int_equal(rl_validate_json(&node_schema, body, errors), 0);
    json_decref(body);

    body = nest("child", 40);
    assert_int_equal(rl_validate_json(&node_schema, body, errors), 1);
    path[0] = '\0';
    for (i = 0; i < RL_VALIDATE_MAX_DEPTH; ++i)
        strcat(path, i > 0 ? ".child" : "child");
    assert_problem(errors, 0, path, "too_big", "Nesting must be at most 32 level(s)");
    json_decref(body);
    json_decref(errors);
}

static void test_long_path_is_truncated(void **state)
{
    char full[RL_VALIDATE_MAX_DEPTH * sizeof(LONG_NAME) + 1];
    json_t *errors = json_array();
    json_t *body = nest(LONG_NAME, 40);
    const char *path;
    int i;

    assert_int_equal(rl_validate_json(&long_node_schema, body, errors), 1);
    full[0] = '\0';
    for (i = 0; i < RL_VALIDATE_MAX_DEPTH; ++i)
        strcat(full, i > 0 ? "." LONG_NAME : LONG_NAME);
    assert_true(strlen(full) > RL_VALIDATE_PATH_MAX);
    path = json_string_value(json_object_get(json_array_get(errors, 0), "path"));
    assert_non_null(path);
    assert_int_equal(strlen(path), RL_VALIDATE_PATH_MAX - 1);
    assert_memory_equal(path, full, RL_VALIDATE_PATH_MAX - 1);
    json_decref(body);
    json_decref(errors);
}

static void test_deep_input_under_any(void **state)
{
    char text[4096];
    size_t len = 0;
    int i;

    /* Deep input where the schema has no shape is accepted without being walked. */
    len += (size_t)snprintf(text, sizeof(text), TASK_OK ",\"result\":");
    for (i = 0; i < 1000; ++i)
        text[len++] = '[';
    for (i = 0; i < 1000; ++i)
        text[len++] = ']';
    text[len++] = '}';
    text[len] = '\0';
    assert_valid(&task_schema, text);
}

static void test_schema_without_fields(void **state)
{
    json_t *object = json_pack("{s:i}", "a", 1);
    json_t *array = json_array();

    assert_int_equal(rl_validate_json(NULL, object, NULL), 0);
    assert_int_equal(rl_validate_json(NULL, array, NULL), 1);
    assert_int_equal(rl_validate_json(NULL, NULL, NULL), 1);
    json_decref(array);
    json_decref(object);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_body_is_returned),
        cmocka_unit_test(test_missing_required),
        cmocka_unit_test(test_type_mismatch_names),
        cmocka_unit_test(test_null_vs_nullable),
        cmocka_unit_test(test_string_length_counts_code_points),
        cmocka_unit_test(test_integer),
        cmocka_unit_test(test_integer_bounds_are_exact),
        cmocka_unit_test(test_number),
        cmocka_unit_test(test_enum),
        cmocka_unit_test(test_custom_check),
        cmocka_unit_test(test_nested_object_paths),
        cmocka_unit_test(test_array_of_objects_paths),
        cmocka_unit_test(test_array_bounds_and_scalar_items),
        cmocka_unit_test(test_root_not_object),
        cmocka_unit_test(test_malformed_json),
        cmocka_unit_test(test_duplicate_keys),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_empty_body),
        cmocka_unit_test(test_multiple_errors_in_schema_order),
        cmocka_unit_test(test_max_errors_cap),
        cmocka_unit_test(test_depth_limit_of_recursive_schema),
        cmocka_unit_test(test_long_path_is_truncated),
        cmocka_unit_test(test_deep_input_under_any),
        cmocka_unit_test(test_schema_without_fields),
        cmocka_unit_test(test_unknown_encrypted_field_is_refused),
        cmocka_unit_test(test_required_unless_sibling),
        cmocka_unit_test(test_null_taken_as_absent),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
