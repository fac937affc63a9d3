/*
 * The web client (docs/web.md): its files, embedded in relayd at build time
 * by web/embed.c, served from relayd's own origin with a strict
 * Content-Security-Policy, and the public settings the app starts from.
 * Loop thread only.
 */
#ifndef RL_RELAY_WEBAPP_H
#define RL_RELAY_WEBAPP_H

#include <stddef.h>

#include "http/call.h"
#include "relay/core/config.h"

/* One embedded file; generated data (webapp_assets.c in the build folder). */
typedef struct rl_web_asset {
    const char *path; /* the URL path it is served at */
    const char *content_type;
    const unsigned char *body;
    size_t len;
    const unsigned char *gzip; /* a gzip copy, or NULL when it would not save enough */
    size_t gzip_len;
    const char *etag; /* quoted, of the body */
    int immutable;    /* under /app/<version>/: cached for a year */
} rl_web_asset_t;

extern const rl_web_asset_t rl_web_assets[];
extern const size_t rl_web_nassets;
/* The app's version: part of every versioned URL and of the service worker's cache name. */
extern const char rl_web_version[];

typedef struct rl_webapp rl_webapp_t;

/*
 * Builds the Content-Security-Policy from the settings (an external
 * provider's origin joins connect-src). Startup; 0 or -1 with the cause logged.
 */
int rl_webapp_open(const rl_config_t *config, rl_webapp_t **out);
void rl_webapp_close(rl_webapp_t *webapp);

/* GET /, /pair, /login: the app's page (the app reads the path, query and fragment). */
int rl_webapp_page(rl_call_t *call);
/* GET /sw.js, /manifest.webmanifest, /app/:version/:name: one embedded file. */
int rl_webapp_file(rl_call_t *call);
/* GET /v1/web/config: how to sign in, and the push key. No auth. */
int rl_webapp_config(rl_call_t *call);

/* The embedded file served at path, or NULL. */
const rl_web_asset_t *rl_webapp_find(const char *path, size_t len);

#endif
