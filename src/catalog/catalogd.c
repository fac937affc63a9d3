/*
 * catalogd: the read-only catalog API. `catalogd --import` rebuilds the
 * SQLite catalog from the source folder and exits; otherwise catalogd imports
 * when the catalog is missing or older than its sources, then serves it until
 * SIGTERM or SIGINT.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog/dataset.h"
#include "catalog/import.h"
#include "catalog/service.h"
#include "http/stop.h"
#include "common/log.h"
#include "rl_version.h"

#ifndef RL_CATALOG_SOURCE_DEFAULT
#define RL_CATALOG_SOURCE_DEFAULT "catalog"
#endif
#define CATALOGD_VERSION RL_VERSION

typedef struct setting {
    const char *flag; /* "--listen" */
    const char *env;  /* "CATALOGD_LISTEN" */
    size_t offset;    /* of the char array in rl_catalog_settings_t */
    size_t size;
    const char *fallback;
    const char *help;
} setting_t;

#define SETTING(flag_, env_, field_, fallback_, help_)                                                                 \
    {                                                                                                                  \
        flag_, env_, offsetof(rl_catalog_settings_t, field_), sizeof(((rl_catalog_settings_t *)0)->field_), fallback_, \
            help_                                                                                                      \
    }

static const setting_t settings_table[] = {
    SETTING("--listen", "CATALOGD_LISTEN", listen, RL_CATALOG_LISTEN_DEFAULT, "HOST:PORT to listen on"),
    SETTING("--data", "CATALOGD_DATA", data, "data", "folder that holds catalog.db"),
    SETTING("--source", "CATALOGD_SOURCE", source, RL_CATALOG_SOURCE_DEFAULT, "dataset folder to import"),
    SETTING("--public-url", "CATALOGD_PUBLIC_URL", public_url, "",
            "base of the absolute links in llms.txt (default http(s)://<listen address>)"),
    SETTING("--log-level", "CATALOGD_LOG_LEVEL", log_level, "info", "debug, info, warn or error"),
    SETTING("--tls-cert", "CATALOGD_TLS_CERT", tls_cert, "",
            "PEM certificate chain: serve HTTPS (HTTP/2 and 1.1); SIGHUP reloads it"),
    SETTING("--tls-key", "CATALOGD_TLS_KEY", tls_key, "", "PEM private key of --tls-cert"),
};
#define NSETTINGS (sizeof(settings_table) / sizeof(settings_table[0]))

static void usage(FILE *out)
{
    size_t i;

    fprintf(out, "usage: catalogd [--import] [settings...]\n\n"
                 "Serves the catalog API (/api/v1, /llms.txt). With --import, rebuilds DATA/catalog.db from the\n"
                 "source folder and exits; otherwise imports first when the catalog is missing or older than\n"
                 "its sources.\n\nsettings (each also read from the environment variable shown):\n");
    for (i = 0; i < NSETTINGS; ++i)
        fprintf(out, "  %-14s %-20s %s (default: %s)\n", settings_table[i].flag, settings_table[i].env,
                settings_table[i].help, settings_table[i].fallback[0] != '\0' ? settings_table[i].fallback : "none");
    fprintf(out, "  --import                            rebuild the catalog and exit\n"
                 "  --help, --version\n");
}

static int set_value(rl_catalog_settings_t *settings, const setting_t *setting, const char *value)
{
    char *field = (char *)settings + setting->offset;

    if (strlen(value) >= setting->size) {
        fprintf(stderr, "catalogd: %s is too long\n", setting->flag);
        return -1;
    }
    memcpy(field, value, strlen(value) + 1);
    return 0;
}

/* Returns 0 to go on, 1 to exit 0 (help, version), 2 on a usage error. */
static int parse_args(int argc, char **argv, rl_catalog_settings_t *settings, int *import_only)
{
    size_t i;
    int arg;

    for (i = 0; i < NSETTINGS; ++i) {
        const char *env = getenv(settings_table[i].env);
        if (set_value(settings, &settings_table[i], env != NULL ? env : settings_table[i].fallback) != 0)
            return 2;
    }
    for (arg = 1; arg < argc; ++arg) {
        const char *a = argv[arg];
        int matched = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 1;
        }
        if (strcmp(a, "--version") == 0) {
            printf("catalogd %s (catalog API v1)\n", CATALOGD_VERSION);
            return 1;
        }
        if (strcmp(a, "--import") == 0) {
            *import_only = 1;
            continue;
        }
        for (i = 0; i < NSETTINGS && !matched; ++i) {
            size_t n = strlen(settings_table[i].flag);
            if (strncmp(a, settings_table[i].flag, n) != 0 || (a[n] != '\0' && a[n] != '='))
                continue;
            matched = 1;
            if (a[n] == '=') {
                if (set_value(settings, &settings_table[i], a + n + 1) != 0)
                    return 2;
            } else if (arg + 1 < argc) {
                if (set_value(settings, &settings_table[i], argv[++arg]) != 0)
                    return 2;
            } else {
                fprintf(stderr, "catalogd: %s needs a value (see catalogd --help)\n", a);
                return 2;
            }
        }
        if (!matched) {
            fprintf(stderr, "catalogd: unknown argument '%s' (see catalogd --help)\n", a);
            return 2;
        }
    }
    return 0;
}

/* catalogd --import: plain lines for a person editing the dataset. */
static int import_command(const rl_catalog_settings_t *settings)
{
    char db_path[PATH_MAX + 16], line[1024];
    json_t *problems = json_array(), *summary = NULL, *problem;
    size_t i;
    int result;

    if (mkdir(settings->data, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "catalogd: cannot create %s: %s\n", settings->data, strerror(errno));
        return 1;
    }
    snprintf(db_path, sizeof(db_path), "%s/catalog.db", settings->data);
    result = rl_catalog_import(settings->source, db_path, problems, &summary);
    json_array_foreach(problems, i, problem)
    {
        rl_catalog_problem_format(problem, line, sizeof(line));
        fprintf(stderr, "%s\n", line);
    }
    if (result == 0) {
        char *text = json_dumps(summary, JSON_COMPACT);
        printf("imported %s into %s: %s\n", settings->source, db_path, text != NULL ? text : "");
        free(text);
    } else {
        fprintf(stderr, "catalogd: the catalog was not imported%s\n",
                result == 1 ? "; fix the problems above and run catalogd --import again" : "");
    }
    json_decref(summary);
    json_decref(problems);
    return result == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    /*
     * Static, so that they stay reachable until exit: h2o 2.2.5 has
     * h2o_evloop_destroy, but its context leaves a queue behind that only
     * the loop still points to.
     */
    static rl_catalog_service_t service;
    static h2o_loop_t *loop;
    int import_only = 0, result;
    rl_log_level_t level;

    signal(SIGPIPE, SIG_IGN);
    result = parse_args(argc, argv, &service.settings, &import_only);
    if (result != 0)
        return result == 1 ? 0 : 2;
    if (rl_log_parse_level(service.settings.log_level, &level) != 0) {
        fprintf(stderr, "catalogd: --log-level must be debug, info, warn or error\n");
        return 2;
    }
    rl_log_set_level(level);
    if (import_only)
        return import_command(&service.settings);

    loop = h2o_evloop_create();
    if (rl_stop_install(loop) != 0) {
        perror("catalogd: signal pipe");
        return 1;
    }
    if (rl_catalog_service_start(&service, loop) != 0) {
        rl_catalog_service_stop(&service);
        return 1;
    }
    while (!rl_stop_requested()) {
        h2o_evloop_run(loop, INT32_MAX);
        if (rl_reload_requested())
            rl_http_server_reload_tls(service.server);
    }
    rl_log_info("stopping");
    rl_stop_remove();
    rl_catalog_service_stop(&service);
    rl_log_info("stopped");
    return 0;
}
