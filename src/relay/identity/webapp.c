/*
 * Serving the web client. Its files are compiled into relayd (web/embed.c),
 * so the app and the API always come from the same build and the same
 * origin, which is what lets the Content-Security-Policy allow nothing but
 * 'self'.
 *
 * Caching: files under /app/<version>/ never change (a new build has a new
 * version, hence new URLs), so browsers keep them for a year; the page, the
 * service worker and the manifest keep their URLs and are revalidated with
 * their ETag on every load (a 304 costs a round trip and no body).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/error.h"
#include "common/log.h"
#include "relay/push/push.h"
#include "relay/core/feature.h"
#include "relay/identity/identity.h"
#include "relay/identity/webapp.h"

#define CSP_MAX 2048

struct rl_webapp {
    char csp[CSP_MAX];
};

/*
 * No inline script or style, no eval, no third-party origin: whatever text an
 * agent or a user manages to get rendered cannot run. Images may be blob:
 * (a picture being uploaded, shown before it is sent) and data: (icons).
 */
static const char csp_head[] = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
                               "media-src 'self' blob:; manifest-src 'self'; worker-src 'self'; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; connect-src 'self'";

const rl_web_asset_t *rl_webapp_find(const char *path, size_t len)
{
    size_t i;

    for (i = 0; i < rl_web_nassets; ++i) {
        if (strlen(rl_web_assets[i].path) == len && memcmp(rl_web_assets[i].path, path, len) == 0)
            return &rl_web_assets[i];
    }
    return NULL;
}

/* scheme://host[:port] of an absolute http(s) URL into out; 0, or -1 when it is not one. */
static int origin_of(const char *url, char *out, size_t outsz)
{
    const char *host, *end;

    if (strncasecmp(url, "https://", 8) == 0)
        host = url + 8;
    else if (strncasecmp(url, "http://", 7) == 0)
        host = url + 7;
    else
        return -1;
    end = host + strcspn(host, "/?#");
    if (end == host || (size_t)(end - url) >= outsz || memchr(url, ' ', (size_t)(end - url)) != NULL ||
        memchr(url, ';', (size_t)(end - url)) != NULL || memchr(url, '\'', (size_t)(end - url)) != NULL)
        return -1;
    memcpy(out, url, (size_t)(end - url));
    out[end - url] = '\0';
    return 0;
}

int rl_webapp_open(const rl_config_t *config, rl_webapp_t **out)
{
    rl_webapp_t *webapp = calloc(1, sizeof(*webapp));
    char origin[512], *csp;
    size_t used;

    *out = NULL;
    if (webapp == NULL)
        return -1;
    csp = webapp->csp;
    used = (size_t)snprintf(csp, CSP_MAX, "%s", csp_head);
    /* The browser fetches the provider's discovery document and token endpoint itself (PKCE). */
    if (config->oidc_client_id[0] != '\0' && origin_of(config->jwt_issuer, origin, sizeof(origin)) == 0)
        used += (size_t)snprintf(csp + used, CSP_MAX - used, " %s", origin);
    if (config->web_connect_src[0] != '\0') {
        char list[sizeof(config->web_connect_src)], *save = NULL, *item;
        snprintf(list, sizeof(list), "%s", config->web_connect_src);
        for (item = strtok_r(list, " ,", &save); item != NULL; item = strtok_r(NULL, " ,", &save)) {
            if (origin_of(item, origin, sizeof(origin)) != 0) {
                rl_log_error("--web-connect-src: '%s' is not an http(s) origin", item);
                free(webapp);
                return -1;
            }
            if (used < CSP_MAX)
                used += (size_t)snprintf(csp + used, CSP_MAX - used, " %s", origin);
        }
    }
    if (used >= CSP_MAX) {
        rl_log_error("--web-connect-src: too many origins");
        free(webapp);
        return -1;
    }
    *out = webapp;
    return 0;
}

void rl_webapp_close(rl_webapp_t *webapp)
{
    free(webapp);
}

/* Whether Accept-Encoding admits gzip (a "gzip;q=0" refuses it). */
static int accepts_gzip(rl_call_t *call)
{
    size_t len, i;
    const char *value = rl_call_header(call, "accept-encoding", &len);

    if (value == NULL)
        return 0;
    for (i = 0; i + 4 <= len; ++i) {
        if (strncasecmp(value + i, "gzip", 4) == 0) {
            const char *rest = value + i + 4, *end = value + len;
            while (rest < end && *rest == ' ')
                ++rest;
            if (rest < end && *rest == ';') {
                const char *q = rest + 1;
                while (q < end && *q == ' ')
                    ++q;
                if (end - q >= 3 && strncasecmp(q, "q=0", 3) == 0 && (end - q == 3 || q[3] != '.'))
                    return 0;
                if (end - q >= 4 && strncasecmp(q, "q=0.", 4) == 0) {
                    const char *d = q + 4;
                    while (d < end && *d == '0')
                        ++d;
                    if (d == end || *d < '1' || *d > '9')
                        return 0;
                }
            }
            return 1;
        }
    }
    return 0;
}

/* Whether If-None-Match names etag (or is "*"). */
static int not_modified(rl_call_t *call, const char *etag)
{
    size_t len, elen = strlen(etag);
    const char *value = rl_call_header(call, "if-none-match", &len), *end;

    if (value == NULL)
        return 0;
    end = value + len;
    while (value < end) {
        const char *comma = memchr(value, ',', (size_t)(end - value)), *item_end = comma != NULL ? comma : end;
        while (value < item_end && *value == ' ')
            ++value;
        if (item_end - value >= 2 && memcmp(value, "W/", 2) == 0)
            value += 2;
        while (item_end > value && item_end[-1] == ' ')
            --item_end;
        if (((size_t)(item_end - value) == elen && memcmp(value, etag, elen) == 0) ||
            (item_end - value == 1 && *value == '*'))
            return 1;
        value = comma != NULL ? comma + 1 : end;
    }
    return 0;
}

static void send_asset(rl_call_t *call, const rl_web_asset_t *asset)
{
    const rl_identity_t *identity = rl_feature_of(call, RL_FEATURE_IDENTITY);
    int gzip = asset->gzip != NULL && accepts_gzip(call);
    char etag[64];
    int html = strncmp(asset->content_type, "text/html", 9) == 0;

    /* Each encoding is its own representation, with its own validator. */
    if (gzip)
        snprintf(etag, sizeof(etag), "%.*s-gz\"", (int)strlen(asset->etag) - 1, asset->etag);
    else
        snprintf(etag, sizeof(etag), "%s", asset->etag);
    rl_call_add_header(call, "etag", etag, strlen(etag));
    if (asset->immutable)
        rl_call_add_header(call, "cache-control", "public, max-age=31536000, immutable", 35);
    else
        rl_call_add_header(call, "cache-control", "no-cache", 8);
    if (asset->gzip != NULL)
        rl_call_add_header(call, "vary", "Accept-Encoding", 15);
    rl_call_add_header(call, "x-content-type-options", "nosniff", 7);
    rl_call_add_header(call, "referrer-policy", "no-referrer", 11);
    /* A service worker's own policy comes from its script's response, so sw.js gets it too. */
    if (html || strcmp(asset->path, "/sw.js") == 0) {
        rl_call_add_header(call, "content-security-policy", identity->webapp->csp, strlen(identity->webapp->csp));
        rl_call_add_header(call, "x-frame-options", "DENY", 4);
    }
    if (not_modified(call, etag)) {
        rl_call_send(call, 304, NULL, NULL, 0);
        return;
    }
    if (gzip) {
        rl_call_add_header(call, "content-encoding", "gzip", 4);
        rl_call_send(call, 200, asset->content_type, asset->gzip, asset->gzip_len);
    } else {
        rl_call_send(call, 200, asset->content_type, asset->body, asset->len);
    }
}

int rl_webapp_page(rl_call_t *call)
{
    const rl_web_asset_t *index = rl_webapp_find("/", 1);

    if (index == NULL)
        return RL_E_NOT_FOUND;
    send_asset(call, index);
    return 0;
}

int rl_webapp_file(rl_call_t *call)
{
    const rl_web_asset_t *asset;
    h2o_iovec_t path = call->req->path_normalized;

    /* A trailing slash names the same route, not the same file. */
    if (path.len > 1 && path.base[path.len - 1] == '/')
        return RL_E_NOT_FOUND;
    asset = rl_webapp_find(path.base, path.len);
    if (asset == NULL)
        return RL_E_NOT_FOUND;
    send_asset(call, asset);
    return 0;
}

int rl_webapp_config(rl_call_t *call)
{
    const rl_identity_t *identity = rl_feature_of(call, RL_FEATURE_IDENTITY);
    const rl_config_t *config = identity->ctx.config;
    const char *vapid = rl_push_public_key(identity->ctx.push);
    json_t *auth;

    if (config->oidc_client_id[0] != '\0')
        auth = json_pack("{s:s, s:s, s:s, s:s, s:s}", "mode", "oidc", "issuer", config->jwt_issuer, "client_id",
                         config->oidc_client_id, "scope", config->oidc_scope, "token",
                         strcmp(config->jwt_audience, config->oidc_client_id) == 0 ? "id_token" : "access_token");
    else if (config->jwks_file[0] != '\0' || config->jwks_url[0] != '\0')
        auth = json_pack("{s:s}", "mode", "external");
    else
        auth = json_pack("{s:s}", "mode", "embedded");
    rl_call_reply(call, json_pack("{s:s, s:o, s:{s:s?}}", "version", rl_web_version, "auth", auth, "push",
                                  "vapid_public_key", vapid));
    return 0;
}
