/*
 * catalogd's service: its settings, its route table over the shared HTTP
 * core, and starting and stopping it on an h2o loop.
 */
#ifndef RL_CATALOG_SERVICE_H
#define RL_CATALOG_SERVICE_H

#include <h2o.h>
#include <limits.h>

#include "catalog/catalog.h"
#include "http/server.h"

/* brief: its own listener; 8080 is relayd's. */
#define RL_CATALOG_LISTEN_DEFAULT "127.0.0.1:8090"

typedef struct rl_catalog_settings {
    char listen[300];      /* HOST:PORT */
    char data[PATH_MAX];   /* folder of catalog.db */
    char source[PATH_MAX]; /* the dataset folder imported into it */
    char public_url[512];  /* base of absolute links; empty = http://<bound address> */
    char log_level[16];
    char tls_cert[PATH_MAX]; /* PEM chain: serve HTTPS; empty = plain HTTP */
    char tls_key[PATH_MAX];
} rl_catalog_settings_t;

typedef struct rl_catalog_service {
    rl_catalog_settings_t settings;
    char db_path[PATH_MAX + 16];
    rl_http_config_t http;
    h2o_loop_t *loop;
    rl_http_server_t *server;
    rl_catalog_t *catalog;
} rl_catalog_service_t;

/* The service's routes and the endpoint descriptions that GET /api/v1 lists. */
extern const rl_route_t rl_catalog_routes[];
extern const size_t rl_catalog_nroutes;
extern const rl_catalog_endpoint_t rl_catalog_endpoints[];
extern const size_t rl_catalog_nendpoints;

/*
 * Imports the dataset when settings.data holds no catalog or an outdated one,
 * loads it, and starts listening on loop. Returns 0, or -1 with the reason
 * logged (dataset problems are logged one line each).
 */
int rl_catalog_service_start(rl_catalog_service_t *service, h2o_loop_t *loop);
/*
 * Stops listening, lets open connections finish (idle keep-alive ones are
 * closed at once, busy ones get up to RL_CATALOG_DRAIN_MS), then frees
 * everything. Safe after a failed start.
 */
#define RL_CATALOG_DRAIN_MS 2000
void rl_catalog_service_stop(rl_catalog_service_t *service);

#endif
