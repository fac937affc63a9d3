/*
 * Fuzz target for a device capability answer (src/relay/capabilities.c):
 * arbitrary bytes through rl_validate_body with the answer's schema, then,
 * for a valid body, rl_capability_answer_given. Besides the sanitizers, it
 * checks the contract: what is given is one of the three answers or none,
 * and a location given is three numbers within their bounds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "relay/media/capabilities.h"

static void check_location(json_t *location)
{
    double latitude = json_number_value(json_object_get(location, "latitude"));
    double longitude = json_number_value(json_object_get(location, "longitude"));

    if (!json_is_number(json_object_get(location, "accuracy")) || latitude < -90 || latitude > 90 || longitude < -180 ||
        longitude > 180 || json_number_value(json_object_get(location, "accuracy")) < 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *errors = json_array(), *body = NULL;
    const char *given;
    int result;

    if (errors == NULL)
        return 0;
    result = rl_validate_body(&rl_capability_answer_schema, (const char *)data, size, 0, &body, errors);
    if ((result == 0) != (body != NULL))
        abort();
    if (body != NULL) {
        given = rl_capability_answer_given(body);
        if (given != NULL && strcmp(given, "location") != 0 && strcmp(given, "attachment_key") != 0 &&
            strcmp(given, "refused") != 0)
            abort();
        if (given != NULL && strcmp(given, "location") == 0)
            check_location(json_object_get(body, "location"));
        if (given != NULL && strcmp(given, "attachment_key") == 0 &&
            !json_is_string(json_object_get(body, "attachment_key")))
            abort();
    }
    json_decref(body);
    json_decref(errors);
    return 0;
}
