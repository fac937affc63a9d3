/*
 * Fuzz target for request-body validation: arbitrary bytes go through
 * rl_validate_body with a schema shaped like the bridge's sendMessage and
 * requestApproval bodies (nested object, array of objects, enums, bounds, a
 * custom check, a schema that refers to itself). Besides the sanitizers, it
 * checks the contract: a valid body has no errors, an invalid one has at
 * least one and at most RL_VALIDATE_MAX_ERRORS, each a {path, code, message}
 * of strings that encodes back to JSON.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "http/validate.h"
#include "check_errors.h"

/* Nonzero unless every byte is visible ASCII, like an idempotency key. */
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

static const char *const severity_values[] = {"low", "medium", "high", NULL};
static const char *const finish_values[] = {"stop", "length", "content_filter", "tool_call", NULL};

static const rl_field_t usage_fields[] = {
    RL_FIELD_INTEGER_MIN("input_tokens", 0, 0),
    RL_FIELD_INTEGER_MIN("output_tokens", 0, 0),
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

/* A tree whose schema names itself, so that input depth, not schema depth, drives the walk. */
static const rl_schema_t node_schema;
static const rl_field_t node_item = RL_FIELD_OBJECT(NULL, 0, &node_schema);
static const rl_field_t node_fields[] = {
    RL_FIELD_STRING("label", 0, 0, 16),
    RL_FIELD_ARRAY("children", 0, 0, 4, &node_item),
    RL_FIELD_END,
};
static const rl_schema_t node_schema = RL_SCHEMA(node_fields);

static const rl_field_t tag_item = RL_FIELD_STRING(NULL, 0, 1, 32);

static const rl_field_t body_fields[] = {
    RL_FIELD_STRING("text", RL_F_REQUIRED, 1, 4000),
    RL_FIELD_STRING_CHECK("idempotency_key", 0, 1, 128, check_key, "Invalid idempotency key"),
    RL_FIELD_STRING("reply_to", RL_F_NULLABLE, 0, 0),
    RL_FIELD_ENUM("severity", 0, severity_values),
    RL_FIELD_ENUM("finish_reason", RL_F_NULLABLE, finish_values),
    RL_FIELD_ARRAY("attachments", 0, 0, 20, &attachment_item),
    RL_FIELD_ARRAY("tags", 0, 1, 8, &tag_item),
    RL_FIELD_OBJECT("usage", 0, &usage_schema),
    RL_FIELD_OBJECT("tree", 0, &node_schema),
    RL_FIELD_NUMBER_RANGE("progress_percent", 0, 0, 100),
    RL_FIELD_BOOLEAN("final", 0),
    RL_FIELD_OBJECT("args", 0, NULL),
    RL_FIELD_ANY("result", 0),
    RL_FIELD_END,
};
static const rl_schema_t body_schema = RL_SCHEMA(body_fields);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *errors = json_array();
    json_t *body = NULL;
    int result;

    if (errors == NULL)
        return 0;
    /* The parity of the size picks the empty-body rule, so that both are reached deterministically. */
    result = rl_validate_body(&body_schema, (const char *)data, size, size % 2, &body, errors);
    if (result == 0 && (body == NULL || json_array_size(errors) != 0))
        abort();
    if (result == RL_E_INVALID_REQUEST &&
        (body != NULL || json_array_size(errors) == 0 || json_array_size(errors) > RL_VALIDATE_MAX_ERRORS))
        abort();
    fuzz_check_errors(errors);
    json_decref(body);
    json_decref(errors);
    return 0;
}
