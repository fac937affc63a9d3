/*
 * Internal to src/http: checks of an HTTP/1 request head that h2o 2.2.5 does
 * not make, run inside the phr_parse_request wrapper (h2o_shim.c) right
 * after h2o's parser, before h2o decides how the body is framed.
 *
 * A head that must be refused (RFC 9112: Content-Length with
 * Transfer-Encoding, Content-Length twice, Transfer-Encoding in HTTP/1.0, no
 * Host or two in HTTP/1.1; or a head h2o's parser rejects) is rewritten into
 * a bodiless request carrying "connection: close" and an internal marker
 * header; on_req (server.c) finds the marker and answers 400 with the
 * envelope, and h2o closes the connection after it. Loop thread only.
 */
#ifndef RL_HTTP_HEAD_H
#define RL_HTTP_HEAD_H

#include <h2o.h>
#include <stddef.h>

/* picohttpparser's header entry, as h2o 2.2.5 passes it (its header is not installed). */
struct phr_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};

/*
 * Called with the arguments and the result of h2o's phr_parse_request (len is
 * the bytes h2o offered, capacity the number of header slots it passed).
 * Returns the result h2o must see: the same one, or the length of a rewritten
 * head when the request is refused.
 */
int rl__http_head_check(const char *buf, size_t len, const char **method, size_t *method_len, const char **path,
                        size_t *path_len, int *minor_version, struct phr_header *headers, size_t *num_headers,
                        size_t capacity, int result);
/* The reason an HTTP/1 request was refused by rl__http_head_check, or NULL. */
const char *rl__http_head_refusal(h2o_req_t *req);

#endif
