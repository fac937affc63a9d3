/*
 * Every error catalogd can answer with: one X-macro table of internal name,
 * HTTP status, machine code and default message.
 *
 * The body of every catalog error is the same envelope as relayd's /v1
 * errors, {"ok": false, "error": {"code", "message", "details"?}}, so that the
 * HTTP core's own refusals (unknown route, wrong method, malformed request)
 * and the catalog's read the same, and one client decoder serves both.
 * Codes shared with src/common/error.h (not_found, method_not_allowed,
 * internal_error) keep the same spelling and status. not_found for an
 * unknown route and method_not_allowed are answered by the HTTP core itself;
 * they are rows here so that this table names every code a client can see.
 */
#ifndef RL_CATALOG_ERROR_H
#define RL_CATALOG_ERROR_H

#define RL_CATALOG_ERROR_MAP(X)                                                                                        \
    X(INVALID_QUERY, 400, "invalid_query", "the search query is missing or cannot be searched")                        \
    X(INVALID_PARAMETER, 400, "invalid_parameter", "a query parameter has a value outside its range")                  \
    X(NOT_REDISTRIBUTABLE, 403, "not_redistributable",                                                                 \
      "the paper's licence does not permit the catalog to redistribute it")                                            \
    X(NOT_FOUND, 404, "not_found", "no such route")                                                                    \
    X(TYPE_NOT_FOUND, 404, "type_not_found", "no such entity type")                                                    \
    X(ENTITY_NOT_FOUND, 404, "entity_not_found", "no entity of this type has this slug")                               \
    X(FILE_NOT_FOUND, 404, "file_not_found", "the catalog holds no such file for this paper")                          \
    X(METHOD_NOT_ALLOWED, 405, "method_not_allowed", "this route does not accept that method")                         \
    X(INTERNAL, 500, "internal_error", "internal server error")

typedef enum rl_catalog_error {
    RL_CATALOG_OK = 0,
#define RL__CATALOG_ERROR_ENUM(name, status, code, message) RL_CATALOG_E_##name,
    RL__CATALOG_ERROR_FIRST = -2000,
    RL_CATALOG_ERROR_MAP(RL__CATALOG_ERROR_ENUM)
#undef RL__CATALOG_ERROR_ENUM
        RL__CATALOG_ERROR_LAST
} rl_catalog_error_t;

/* HTTP status of an error; 500 for anything outside the table. */
int rl_catalog_error_status(int err);
/* Machine code ("entity_not_found"); "internal_error" for anything outside the table. */
const char *rl_catalog_error_code(int err);
/* Default human message. */
const char *rl_catalog_error_message(int err);

#endif
