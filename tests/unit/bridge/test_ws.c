/* The WebSocket handshake's Sec-WebSocket-Accept (client/ws.c), with RFC 6455's own example. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "client/ws.h"

static void test_accept_matches_rfc_6455(void **state)
{
    char accept[29];

    (void)state;
    rl_ws_accept_for("dGhlIHNhbXBsZSBub25jZQ==", accept);
    assert_string_equal(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_accept_matches_rfc_6455)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
