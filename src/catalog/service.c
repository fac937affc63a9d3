/*
 * catalogd's routes. Every answer carries the spec's hour of caching, an
 * ETag answered with 304 on If-None-Match, and gzip when the client accepts
 * it (the HTTP core's compress filter); every error is relayd's envelope,
 * {"ok": false, "error": {"code", "message", "details"?}}, with a row of
 * common/error.h, so that the HTTP core's own refusals (unknown route, wrong
 * method) and the catalog's read the same.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog/import.h"
#include "catalog/service.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"

/* No catalog route reads a body; anything larger is refused by the core before it is read. */
#define MAX_BODY           4096
#define REQUEST_TIMEOUT_MS 10000

static const char json_mime[] = "application/json; charset=utf-8";

static rl_catalog_t *catalog_of(rl_call_t *call)
{
    return ((rl_catalog_service_t *)call->app)->catalog;
}

static void add_common_headers(rl_call_t *call, int cacheable)
{
    const char *cache = cacheable ? RL_CATALOG_CACHE_CONTROL : "no-store";

    rl_call_add_header(call, "cache-control", cache, strlen(cache));
    /* A public read-only API: any web page may read it. */
    rl_call_add_header(call, "access-control-allow-origin", "*", 1);
    rl_call_add_header(call, "x-content-type-options", "nosniff", 7);
}

static void fail(rl_call_t *call, int err, const char *message, json_t *details)
{
    int status = rl_error_status(err);
    json_t *error = json_pack("{s:s, s:s}", "code", rl_error_code(err), "message",
                              message != NULL ? message : rl_error_message(err));
    json_t *envelope;
    char *text;

    if (details != NULL)
        json_object_set_new(error, "details", details);
    envelope = json_pack("{s:b, s:o}", "ok", 0, "error", error);
    text = json_dumps(envelope, JSON_COMPACT);
    json_decref(envelope);
    if (text == NULL) {
        static const char fallback[] = "{\"ok\":false,\"error\":{\"code\":\"internal_error\"}}";
        add_common_headers(call, 0);
        rl_call_send(call, 500, json_mime, fallback, sizeof(fallback) - 1);
        return;
    }
    /*
     * spec: responses are cached for an hour. The catalog's refusals change only on import, like its
     * answers, so they are cached too; its faults are not.
     */
    add_common_headers(call, status < 500);
    rl_call_send(call, status, json_mime, text, strlen(text));
    free(text);
}

static void reply(rl_call_t *call, const rl_catalog_body_t *body, const char *filename)
{
    size_t len = 0;
    const char *if_none_match = rl_call_header(call, "if-none-match", &len);

    add_common_headers(call, 1);
    rl_call_add_header(call, "etag", body->etag, strlen(body->etag));
    rl_call_add_header(call, "vary", "accept-encoding", 15);
    if (filename != NULL) {
        char disposition[160];
        int n = snprintf(disposition, sizeof(disposition), "inline; filename=\"%s\"", filename);
        rl_call_add_header(call, "content-disposition", disposition, (size_t)n);
    }
    if (if_none_match != NULL && rl_catalog_etag_matches(if_none_match, len, body->etag)) {
        rl_call_send(call, 304, NULL, NULL, 0);
        return;
    }
    rl_call_send(call, 200, body->content_type, body->bytes, body->len);
}

/* Copies path parameter index into buf; an over-long one comes out empty and matches nothing. */
static void param(rl_call_t *call, size_t index, char *buf, size_t bufsz)
{
    if (rl_call_param(call, index, buf, bufsz) != 0)
        buf[0] = '\0';
}

static void fail_unknown_type(rl_call_t *call, const char *name)
{
    json_t *types = json_array();
    char message[200];
    int type;

    for (type = 0; type < RL_CATALOG_TYPE_COUNT; ++type)
        json_array_append_new(types, json_string(rl_catalog_types[type].plural));
    snprintf(message, sizeof(message),
             "no entity type '%.60s'; the types are evals, models, tools, leaderboards, "
             "organizations, people, capabilities and papers",
             name);
    fail(call, RL_E_TYPE_NOT_FOUND, message, json_pack("{s:o}", "types", types));
}

/* Resolves the :type and :slug parameters; answers 404 itself and returns NULL when either is unknown. */
static const rl_catalog_entity_t *find_entity(rl_call_t *call, int fixed_type)
{
    char name[64], slug[RL_CATALOG_SLUG_MAX + 2], message[200];
    const rl_catalog_entity_t *entity;
    int type = fixed_type;

    if (type < 0) {
        param(call, 0, name, sizeof(name));
        type = rl_catalog_type_parse(name, strlen(name));
        if (type < 0) {
            fail_unknown_type(call, name);
            return NULL;
        }
    }
    param(call, fixed_type < 0 ? 1 : 0, slug, sizeof(slug));
    entity = rl_catalog_find(catalog_of(call), type, slug);
    if (entity == NULL) {
        snprintf(message, sizeof(message), "no %s has the slug '%.80s'", rl_catalog_types[type].singular, slug);
        fail(call, RL_E_ENTITY_NOT_FOUND, message,
             json_pack("{s:s, s:s}", "type", rl_catalog_types[type].plural, "slug", slug));
    }
    return entity;
}

static int on_index(rl_call_t *call)
{
    reply(call, rl_catalog_index(catalog_of(call)), NULL);
    return 0;
}

static int on_search(rl_call_t *call)
{
    h2o_req_t *req = call->req;
    rl_catalog_search_t search;
    rl_catalog_body_t body;
    char message[200];
    const char *query = "";
    size_t query_len = 0;
    char *bytes = NULL;
    int result;

    if (req->query_at != SIZE_MAX) {
        query = req->path.base + req->query_at + 1;
        query_len = req->path.len - req->query_at - 1;
    }
    result = rl_catalog_query_parse(query, query_len, &search, message, sizeof(message));
    if (result != 0) {
        fail(call, result, message, NULL);
        return 0;
    }
    result = rl_catalog_search(catalog_of(call), &search, &bytes, &body.len);
    if (result != 0) {
        fail(call, result, NULL, NULL);
        return 0;
    }
    body.content_type = json_mime;
    body.bytes = bytes;
    rl_catalog_etag(bytes, body.len, body.etag);
    reply(call, &body, NULL);
    free(bytes);
    return 0;
}

static int on_listing(rl_call_t *call)
{
    char name[64];
    int type;

    param(call, 0, name, sizeof(name));
    type = rl_catalog_type_parse(name, strlen(name));
    if (type < 0)
        fail_unknown_type(call, name);
    else
        reply(call, rl_catalog_listing(catalog_of(call), type), NULL);
    return 0;
}

static int on_entity(rl_call_t *call)
{
    const rl_catalog_entity_t *entity = find_entity(call, -1);

    if (entity != NULL)
        reply(call, &entity->document, NULL);
    return 0;
}

/* spec: a paper's text or PDF only where its licence permits redistribution and the file exists. */
static void paper_file(rl_call_t *call, const char *format)
{
    const rl_catalog_entity_t *entity = find_entity(call, RL_CATALOG_TYPE_PAPER);
    const rl_catalog_paper_t *paper;
    const rl_catalog_body_t *body;
    char message[400], filename[RL_CATALOG_SLUG_MAX + 8];
    json_t *details;

    if (entity == NULL)
        return;
    paper = entity->paper;
    details = json_pack("{s:s, s:s, s:b}", "licence", paper->licence_id, "licence_title", paper->licence_title,
                        "redistributable", paper->redistributable);
    if (paper->read_at != NULL)
        json_object_set_new(details, "read_at", json_string(paper->read_at));
    if (!paper->redistributable) {
        snprintf(message, sizeof(message),
                 "the catalog cannot serve this paper's %s because its licence does not permit redistribution "
                 "(licence: %s)%s%s",
                 format, paper->licence_title, paper->read_at != NULL ? "; read it at " : "",
                 paper->read_at != NULL ? paper->read_at : "");
        fail(call, RL_E_NOT_REDISTRIBUTABLE, message, details);
        return;
    }
    body = strcmp(format, "pdf") == 0 ? paper->pdf : paper->text;
    if (body == NULL) {
        snprintf(message, sizeof(message),
                 "the licence permits redistribution, but the catalog holds no %s of this paper%s%s",
                 strcmp(format, "pdf") == 0 ? "PDF" : "text", paper->read_at != NULL ? "; read it at " : "",
                 paper->read_at != NULL ? paper->read_at : "");
        fail(call, RL_E_FILE_NOT_FOUND, message, details);
        return;
    }
    json_decref(details);
    snprintf(filename, sizeof(filename), "%s.%s", entity->slug, strcmp(format, "pdf") == 0 ? "pdf" : "txt");
    reply(call, body, filename);
}

static int on_paper_text(rl_call_t *call)
{
    paper_file(call, "text");
    return 0;
}

static int on_paper_pdf(rl_call_t *call)
{
    paper_file(call, "pdf");
    return 0;
}

static int on_llms(rl_call_t *call)
{
    reply(call, rl_catalog_llms(catalog_of(call), 0), NULL);
    return 0;
}

static int on_llms_full(rl_call_t *call)
{
    reply(call, rl_catalog_llms(catalog_of(call), 1), NULL);
    return 0;
}

/* Order matters where patterns overlap: the first row whose pattern and method match wins. */
const rl_route_t rl_catalog_routes[] = {
    {"GET", "/api/v1", on_index, 0, NULL, NULL, 0},
    {"GET", "/api/v1/search", on_search, 0, NULL, NULL, 0},
    {"GET", "/api/v1/:type", on_listing, 0, NULL, NULL, 0},
    {"GET", "/api/v1/:type/:slug", on_entity, 0, NULL, NULL, 0},
    {"GET", "/api/v1/papers/:slug/text", on_paper_text, 0, NULL, NULL, 0},
    {"GET", "/api/v1/papers/:slug/pdf", on_paper_pdf, 0, NULL, NULL, 0},
    {"GET", "/llms.txt", on_llms, 0, NULL, NULL, 0},
    {"GET", "/llms-full.txt", on_llms_full, 0, NULL, NULL, 0},
};
const size_t rl_catalog_nroutes = sizeof(rl_catalog_routes) / sizeof(rl_catalog_routes[0]);

const rl_catalog_endpoint_t rl_catalog_endpoints[] = {
    {"/api/v1", "this index: every endpoint, the entity types and their counts"},
    {"/api/v1/search?q={query}&type={type}&per={per}",
     "full-text search over every type; type (singular or plural) narrows it, per (1-30, default 5) caps the "
     "hits "
     "of each type; the last word matches as a prefix"},
    {"/api/v1/{type}", "every entity of one type with its summary"},
    {"/api/v1/{type}/{slug}", "one entity: metadata, scores and relationships resolved to slugs and titles"},
    {"/api/v1/papers/{slug}/text", "a paper's full text, where its licence permits redistribution"},
    {"/api/v1/papers/{slug}/pdf", "a paper's PDF, on the same condition"},
    {"/llms.txt", "a plain-text map of the catalog for language models (llms.txt convention)"},
    {"/llms-full.txt", "the same map with descriptions, top scores and relationships inlined"},
};
const size_t rl_catalog_nendpoints = sizeof(rl_catalog_endpoints) / sizeof(rl_catalog_endpoints[0]);

static void log_problems(json_t *problems)
{
    json_t *problem;
    size_t i;

    json_array_foreach(problems, i, problem)
    {
        json_t *fields = json_deep_copy(problem);
        json_object_set_new(fields, "msg", json_string("invalid catalog source"));
        rl_log_fields(RL_LOG_ERROR, fields);
    }
}

static int import_if_stale(rl_catalog_service_t *service)
{
    json_t *problems, *summary = NULL;
    int result;

    if (!rl_catalog_import_is_stale(service->settings.source, service->db_path))
        return 0;
    rl_log_fields(RL_LOG_INFO, json_pack("{s:s, s:s, s:s}", "msg", "importing the catalog", "source",
                                         service->settings.source, "db", service->db_path));
    problems = json_array();
    result = rl_catalog_import(service->settings.source, service->db_path, problems, &summary);
    if (result == 1)
        log_problems(problems);
    json_decref(problems);
    if (result != 0) {
        rl_log_error("the catalog could not be imported from %s", service->settings.source);
        return -1;
    }
    rl_log_fields(RL_LOG_INFO, json_pack("{s:s, s:o}", "msg", "imported the catalog", "summary", summary));
    return 0;
}

int rl_catalog_service_start(rl_catalog_service_t *service, h2o_loop_t *loop)
{
    rl_catalog_settings_t *settings = &service->settings;
    char bound[300], base[512];

    if (mkdir(settings->data, 0700) != 0 && errno != EEXIST) {
        rl_log_error("cannot create the data folder %s: %s", settings->data, strerror(errno));
        return -1;
    }
    snprintf(service->db_path, sizeof(service->db_path), "%s/catalog.db", settings->data);
    if (import_if_stale(service) != 0)
        return -1;

    service->http.routes = rl_catalog_routes;
    service->http.nroutes = rl_catalog_nroutes;
    /* The HTTP core's own refusals (404, 405, 413) get the envelope everywhere: the whole site is the API. */
    service->http.api_prefix = "/";
    service->http.max_body = MAX_BODY;
    service->http.request_timeout_ms = REQUEST_TIMEOUT_MS;
    service->http.compress = 1;
    service->http.app = service;
    service->http.tls_cert = settings->tls_cert;
    service->http.tls_key = settings->tls_key;
    service->loop = loop;
    if (rl_http_server_create(loop, &service->http, &service->server) != 0 ||
        rl_http_server_listen(service->server, settings->listen, bound, sizeof(bound)) != 0)
        return -1;
    snprintf(base, sizeof(base), "%s", settings->public_url);
    if (base[0] == '\0')
        snprintf(base, sizeof(base), "%s://%s", rl_http_server_tls(service->server) ? "https" : "http", bound);
    else if (base[strlen(base) - 1] == '/')
        base[strlen(base) - 1] = '\0';
    /* The llms files carry absolute links, so the catalog is loaded once the address is known. */
    if (rl_catalog_open(service->db_path, base, rl_catalog_endpoints, rl_catalog_nendpoints, &service->catalog) != 0)
        return -1;
    rl_log_fields(RL_LOG_INFO, json_pack("{s:s, s:s, s:s, s:s}", "msg", "listening", "address", bound, "base_url", base,
                                         "db", service->db_path));
    return 0;
}

/*
 * h2o 2.2.5 keeps an idle HTTP/1 keep-alive connection until its request
 * timeout, and disposing of the context with one still open aborts on an
 * assertion. Expiring the timeouts closes idle connections on the next loop
 * turn; requests in progress finish, up to the deadline.
 */
static void drain(rl_catalog_service_t *service)
{
    h2o_context_t *ctx = rl_http_server_context(service->server);
    int64_t deadline = rl_clock_mono_us() + (int64_t)RL_CATALOG_DRAIN_MS * 1000;

    h2o_context_request_shutdown(ctx);
    ctx->http1.req_timeout.timeout = 0;
    ctx->http2.idle_timeout.timeout = 0;
    while ((!h2o_linklist_is_empty(&ctx->http1._conns) || !h2o_linklist_is_empty(&ctx->http2._conns)) &&
           rl_clock_mono_us() < deadline)
        h2o_evloop_run(service->loop, 10);
    /* The HTTP/2 shutdown links a GOAWAY resend timer, which must be gone before the context is. */
    if (h2o_timeout_is_linked(&ctx->http2._graceful_shutdown_timeout))
        h2o_timeout_unlink(&ctx->http2._graceful_shutdown_timeout);
}

void rl_catalog_service_stop(rl_catalog_service_t *service)
{
    if (service->server != NULL) {
        rl_http_server_stop_listening(service->server);
        drain(service);
    }
    rl_http_server_free(service->server);
    service->server = NULL;
    rl_catalog_close(service->catalog);
    service->catalog = NULL;
}
