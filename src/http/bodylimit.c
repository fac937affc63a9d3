/*
 * Per-route request body limits on top of h2o 2.2.5.
 *
 * h2o checks a request's Content-Length against one global
 * max_request_entity_size right after it parses the request head, and offers
 * no hook in between. JSON routes must refuse anything over 1 MB before
 * reading it, while attachment uploads take 25 MB. The head parser of the
 * shim (h2o_shim.c) calls rl__http_bodylimit_apply with every head it
 * parsed, which sets the global limit for the route that head names.
 * Because parsing and the check happen in the same call on the loop thread,
 * the limit is exactly the route's. The main loop puts the limit back to the
 * JSON default after every turn (rl_http_server_after_turn), so HTTP/2
 * streams and chunked bodies see the strict default; uploads larger than
 * that need HTTP/1.1 with a Content-Length. The shim's start-up check makes
 * sure the parser hook is in force: a server does not start without it.
 */
#include <stddef.h>

#include "http/server.h"

static rl_http_server_t *limited_server;

void rl__http_bodylimit_attach(rl_http_server_t *server)
{
    limited_server = server;
}

void rl__http_bodylimit_apply(const char *method, size_t method_len, const char *path, size_t path_len,
                              const struct phr_header *headers, size_t num_headers)
{
    if (limited_server != NULL)
        rl__http_server_limit_for(limited_server, method, method_len, path, path_len, headers, num_headers);
}
