/*
 * What every fuzz target that runs a body through a schema (src/http/validate.c) asks of the errors
 * it gets: each a {path, code, message} of strings, and the array encodable, as a 422's details are.
 * Aborts otherwise, which the fuzzer reports.
 */
#ifndef RL_FUZZ_CHECK_ERRORS_H
#define RL_FUZZ_CHECK_ERRORS_H

#include <stdlib.h>

#include <jansson.h>

static inline void fuzz_check_errors(const json_t *errors)
{
    json_t *item;
    size_t i;
    char *encoded;

    json_array_foreach(errors, i, item)
    {
        if (!json_is_string(json_object_get(item, "path")) || !json_is_string(json_object_get(item, "code")) ||
            !json_is_string(json_object_get(item, "message")))
            abort();
    }
    encoded = json_dumps(errors, JSON_COMPACT);
    if (encoded == NULL)
        abort();
    free(encoded);
}

#endif
