/* Fuzz target: the X-Request-ID acceptance rule. */
#include <stdint.h>
#include <string.h>

#include "http/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int valid = rl_request_id_is_valid((const char *)data, size);
    size_t i;

    /* Cross-check against the rule written out plainly: [A-Za-z0-9._:-]{1,64}. */
    int expected = size >= 1 && size <= 64;
    for (i = 0; expected && i < size; ++i)
        expected = strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-", data[i]) != NULL &&
                   data[i] != '\0';
    if (valid != expected)
        __builtin_trap();
    return 0;
}
