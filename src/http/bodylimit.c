/*
 * Per-route request body limits on top of h2o 2.2.5, and the hook that the
 * head checks of head.c run in.
 *
 * h2o checks a request's Content-Length against one global
 * max_request_entity_size right after it parses the request head, and offers
 * no hook in between. JSON routes must refuse anything over 1 MB before
 * reading it, while attachment uploads take 25 MB. h2o parses every HTTP/1
 * head with its bundled phr_parse_request, called through the PLT; relayd
 * exports a function of that name (see CMakeLists.txt), which calls h2o's own
 * and then sets the global limit for the route that head names. Because
 * parsing and the check happen in the same call on the loop thread, the
 * limit is exactly the route's. The main loop puts the limit back to the
 * JSON default after every turn (rl_http_server_after_turn), so HTTP/2
 * streams and chunked bodies see the strict default; uploads larger than
 * that need HTTP/1.1 with a Content-Length. When the export is missing the
 * wrapper is never called and every body keeps the default limit.
 */
#include <dlfcn.h>
#include <stddef.h>

#include "common/log.h"
#include "http/head.h"
#include "http/server.h"

typedef int (*parse_request_fn)(const char *buf, size_t len, const char **method, size_t *method_len, const char **path,
                                size_t *path_len, int *minor_version, struct phr_header *headers, size_t *num_headers,
                                size_t last_len);

static rl_http_server_t *limited_server;
static int wrapper_seen;

void rl__http_bodylimit_attach(rl_http_server_t *server)
{
    limited_server = server;
}

int rl__http_bodylimit_active(void)
{
    return wrapper_seen;
}

int phr_parse_request(const char *buf, size_t len, const char **method, size_t *method_len, const char **path,
                      size_t *path_len, int *minor_version, struct phr_header *headers, size_t *num_headers,
                      size_t last_len)
{
    static parse_request_fn next;
    size_t capacity = *num_headers;
    int result;

    if (next == NULL) {
        next = (parse_request_fn)dlsym(RTLD_NEXT, "phr_parse_request");
        if (next == NULL) {
            rl_log_error("phr_parse_request: h2o's parser not found");
            return -1;
        }
    }
    wrapper_seen = 1;
    result = next(buf, len, method, method_len, path, path_len, minor_version, headers, num_headers, last_len);
    /* The same hook serves the head checks against request smuggling (head.c). */
    result = rl__http_head_check(buf, len, method, method_len, path, path_len, minor_version, headers, num_headers,
                                 capacity, result);
    if (result > 0 && limited_server != NULL)
        rl__http_server_limit_for(limited_server, *method, *method_len, *path, *path_len, headers, *num_headers);
    return result;
}
