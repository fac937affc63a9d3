/*
 * relayd: the relay server, and its one-shot commands: `relayd token USER`
 * prints a user token signed by the embedded issuer; `relayd backup` and
 * `relayd restore` (backup.c); `relayd migrate --from ... --to ...` copies a
 * SQLite store into PostgreSQL (store/migrate.c), and `relayd migrate
 * --check` says what a start would do to the store's schema.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "common/args.h"
#include "common/clock.h"
#include "common/duration.h"
#include "common/log.h"
#include "http/stop.h"
#include "relay/identity/login.h"
#include "relay/core/auth.h"
#include "relayd/backup.h"
#include "store/postgres.h"
#include "auth/jwt.h"
#include "relay/keys.h"
#include "relay/core/relay.h"
#include "relayd/config.h"
#include "relayd/metrics.h"
#include "rl_version.h"
#include "store/migrate.h"
#include "store/sqlite.h"

#define TOKEN_USAGE "usage: relayd token USER [--data DIR] [--store URL] [--ttl DURATION]\n"

static int token_command(int argc, char **argv)
{
    const char *user = NULL, *data = "data", *ttl_text = "30d", *location = getenv("RELAY_STORE");
    rl_jwt_issuer_t *issuer = NULL;
    rl_store_t *store = NULL;
    int64_t ttl_ms;
    char *token;
    int i;

    if (getenv("RELAY_DATA") != NULL)
        data = getenv("RELAY_DATA");
    for (i = 2; i < argc; ++i) {
        if (rl_arg_value(argc, argv, &i, "--data", &data) || rl_arg_value(argc, argv, &i, "--store", &location) ||
            rl_arg_value(argc, argv, &i, "--ttl", &ttl_text))
            continue;
        if (argv[i][0] != '-' && user == NULL)
            user = argv[i];
        else {
            fprintf(stderr, TOKEN_USAGE);
            return 2;
        }
    }
    if (user == NULL) {
        fprintf(stderr, TOKEN_USAGE);
        return 2;
    }
    if (rl_duration_parse(ttl_text, &ttl_ms) != 0 || ttl_ms < 1000) {
        fprintf(stderr, "relayd token: --ttl needs a duration of at least 1s, such as 30d or 12h\n");
        return 2;
    }
    if (mkdir(data, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "relayd token: cannot create %s: %s\n", data, strerror(errno));
        return 1;
    }
    /* The issuer's key is the one every node of this relay shares: the store's (keys.c). */
    if (rl_store_open_inline(location != NULL && location[0] != '\0' ? location : data, &store) != 0)
        return 1;
    i = rl_keys_sync(store, data);
    rl_store_close(store);
    if (i != 0 || rl_jwt_issuer_open(data, &issuer) != 0)
        return 1;
    token = rl_jwt_issuer_sign(issuer, RL_EMBEDDED_ISSUER, RL_EMBEDDED_AUDIENCE, user, rl_clock_now_ms() / 1000,
                               ttl_ms / 1000);
    rl_jwt_issuer_free(issuer);
    if (token == NULL) {
        fprintf(stderr, "relayd token: cannot sign a token for '%s' (user ids are printable ASCII without spaces)\n",
                user);
        return 1;
    }
    printf("%s\n", token);
    free(token);
    return 0;
}

#define MIGRATE_CHECK_USAGE "usage: relayd migrate --check [--data DIR] [--store sqlite:PATH|postgres://...]\n"

/*
 * relayd migrate --check: what a start of this relayd would do to the
 * store's schema (docs/operations.md, "Upgrades"), without changing
 * anything. Exit status 0 when a start would go ahead (with or without
 * migrating), 1 when it would be refused or the store cannot be read.
 */
/* `relayd migrate` with --check and no --from: what a start would do, not a copy. */
static int migrate_wants_check(int argc, char **argv)
{
    int i, check = 0;

    for (i = 2; i < argc; ++i) {
        if (strcmp(argv[i], "--check") == 0)
            check = 1;
        else if (strcmp(argv[i], "--from") == 0 || strncmp(argv[i], "--from=", 7) == 0)
            return 0;
    }
    return check;
}

/*
 * What a start would do to a store at schema version (of target), in words
 * for the operator: store names it ("the store at PATH", "the store database
 * D on H"), nodes is 1 when several nodes may start on it together. The exit
 * status: 1 when a start would be refused.
 */
static int migrate_verdict(const char *store, int version, int target, int nodes)
{
    if (version > target) {
        printf("%s is at schema version %d, newer than this relayd (%d): a start would be refused. Run the relayd "
               "that wrote it, or restore the backup taken before the upgrade\n",
               store, version, target);
        return 1;
    }
    if (version == target)
        printf("%s is at schema version %d, this relayd's: a start changes nothing\n", store, version);
    else
        printf("%s is at schema version %d: a start migrates it to %d (%d migration%s, one transaction each%s; no "
               "relayd older than this one can open it afterwards)\n",
               store, version, target, target - version, target - version == 1 ? "" : "s",
               nodes ? ", the nodes starting together migrating once" : "");
    return 0;
}

/* The answer of migrate --check for a PostgreSQL store. */
static int migrate_check_postgres(const char *conninfo)
{
    int version = 0, target = rl_store_postgres_target_version();
    char where[512], store[600], why[1024];

    if (rl_store_postgres_version(conninfo, &version, where, sizeof(where), why, sizeof(why)) != 0) {
        fprintf(stderr, "relayd migrate --check: %s\n", why);
        return 1;
    }
    if (version == 0) {
        printf("the store %s holds no relay schema yet: a start creates it at schema version %d\n", where, target);
        return 0;
    }
    snprintf(store, sizeof(store), "the store %s", where);
    return migrate_verdict(store, version, target, 1);
}

static int migrate_check_command(int argc, char **argv)
{
    const char *data = getenv("RELAY_DATA") != NULL ? getenv("RELAY_DATA") : "data";
    const char *location = getenv("RELAY_STORE") != NULL ? getenv("RELAY_STORE") : "";
    int i, check = 0, version = 0, err_no = 0, target = rl_store_sqlite_target_version();
    char path[4200], store[4300], why[4400];

    for (i = 2; i < argc; ++i) {
        if (strcmp(argv[i], "--check") == 0)
            check = 1;
        else if (!rl_arg_value(argc, argv, &i, "--data", &data) && !rl_arg_value(argc, argv, &i, "--store", &location))
            check = -1;
    }
    if (check != 1) {
        fputs(MIGRATE_CHECK_USAGE, stderr);
        return 2;
    }
    if (strncmp(location, "postgres://", 11) == 0 || strncmp(location, "postgresql://", 13) == 0)
        return migrate_check_postgres(location);
    if (location[0] == '\0')
        snprintf(path, sizeof(path), "%s/relay.db", data);
    else if (strncmp(location, "sqlite:", 7) == 0 && location[7] != '\0')
        snprintf(path, sizeof(path), "%s", location + 7);
    else {
        fprintf(stderr,
                "relayd migrate --check: unsupported store '%.*s:...' (sqlite:PATH, postgres://..., or the data "
                "folder's)\n",
                (int)strcspn(location, ":"), location);
        return 2;
    }
    if (rl_store_sqlite_version(path, &version, &err_no, why, sizeof(why)) != 0) {
        if (err_no == ENOENT) {
            printf("no store at %s yet: a start creates it at schema version %d\n", path, target);
            return 0;
        }
        fprintf(stderr, "relayd migrate --check: %s\n", why);
        return 1;
    }
    snprintf(store, sizeof(store), "the store at %s", path);
    return migrate_verdict(store, version, target, 0);
}

/*
 * Every file relayd creates is its own (the umask in main). The folder itself
 * may have come from an operator or a volume with looser modes; then other
 * local users could list it, and reach any file an older relayd made
 * readable, so say so once at start.
 */
static void check_data_folder(const char *path)
{
    struct stat st;
    char mode[8];

    if (stat(path, &st) != 0 || (st.st_mode & 077) == 0)
        return;
    snprintf(mode, sizeof(mode), "%04o", (unsigned)(st.st_mode & 07777));
    rl_log_fields(RL_LOG_WARN, json_pack("{s:s, s:s, s:s}", "msg",
                                         "the data folder is open to other local users; make it private with chmod 700",
                                         "path", path, "mode", mode));
}

/*
 * Every stream and bridge socket is a descriptor, and the soft limit a shell
 * hands down (often 1024) is far below what the relay is built to hold; the
 * hard limit is what the operator allows, so take all of it.
 */
static void raise_descriptor_limit(void)
{
    struct rlimit limit;
    rlim_t was;

    if (getrlimit(RLIMIT_NOFILE, &limit) != 0)
        return;
    was = limit.rlim_cur;
    if (limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
            rl_log_warn("cannot raise the descriptor limit from %llu to %llu: %s", (unsigned long long)was,
                        (unsigned long long)limit.rlim_max, strerror(errno));
            limit.rlim_cur = was;
        }
    }
    rl_log_fields(RL_LOG_INFO, json_pack("{s:s, s:I, s:I}", "msg", "descriptor limit", "nofile",
                                         (json_int_t)limit.rlim_cur, "was", (json_int_t)was));
}

/* relayd migrate --from sqlite:PATH --to postgres://...: the copy is src/store/migrate.c's. */
static int migrate_command(int argc, char **argv)
{
    static const char usage[] = "usage: relayd migrate --from sqlite:PATH --to postgres://USER:PASSWORD@HOST/DB\n";
    const char *from = NULL, *to = NULL;
    int i;

    for (i = 2; i < argc; ++i) {
        if (!rl_arg_value(argc, argv, &i, "--from", &from) && !rl_arg_value(argc, argv, &i, "--to", &to))
            break;
    }
    if (i < argc || from == NULL || to == NULL || strncmp(from, "sqlite:", 7) != 0 || from[7] == '\0' ||
        (strncmp(to, "postgres://", 11) != 0 && strncmp(to, "postgresql://", 13) != 0)) {
        /* Neither form matched: both are shown (a mistyped --check lands here too). */
        fputs(usage, stderr);
        fputs(MIGRATE_CHECK_USAGE, stderr);
        return 2;
    }
    return rl_store_migrate(from + 7, to);
}

/*
 * On a terminal, once it listens: where, and where its data is. Short, as
 * make run's greeting (scripts/run.sh) comes just before it with the rest.
 */
static void print_banner(const rl_relay_t *relay)
{
    char cwd[1024];
    const char *data = relay->config.data;

    if (!isatty(STDOUT_FILENO))
        return;
    while (data[0] == '.' && data[1] == '/')
        data += 2;
    if (data[0] != '/' && getcwd(cwd, sizeof(cwd)) != NULL)
        printf("relayd is running at %s\n  data folder: %s/%s\n", relay->config.public_url, cwd, data);
    else
        printf("relayd is running at %s\n  data folder: %s\n", relay->config.public_url, data);
    printf("What to do next: README.md, \"A two-minute tour\". Stop it with Ctrl-C.\n\n");
    fflush(stdout);
}

/* One turn of the loop, as long as the relay runs and while it stops. */
#define RETIRE_WAIT_MS 500 /* how long a stop waits for the bus to take back this node's leases */

static void on_bus_retired(void *arg)
{
    *(int *)arg = 1;
}

static void turn(rl_relay_t *relay, h2o_loop_t *loop, int32_t max_wait)
{
    rl_relay_before_turn(relay);
    h2o_evloop_run(loop, max_wait);
    rl_http_server_after_turn(relay->server);
}

/*
 * SIGTERM: no new connections, bridges told to reconnect elsewhere (1012),
 * then the loop runs on until what was under way has ended, or
 * --shutdown-timeout has passed; only then is the store drained and closed.
 */
static void shut_down(rl_relay_t *relay, h2o_loop_t *loop)
{
    int64_t deadline = rl_clock_mono_us() / 1000 + relay->config.shutdown_timeout;
    int64_t left;

    rl_log_info("stopping");
    rl_metrics_shutdown();
    rl_relay_shutdown_begin(relay);
    while (!rl_relay_quiet(relay) && (left = deadline - rl_clock_mono_us() / 1000) > 0)
        turn(relay, loop, left < 100 ? (int32_t)left : 100);
    if (!rl_relay_quiet(relay))
        rl_log_warn("--shutdown-timeout (%lld ms) passed: closing what is still open",
                    (long long)relay->config.shutdown_timeout);
    rl_stop_remove();
    /*
     * What this node holds of the shared bus (its leases of rate bucket
     * shares) goes back now rather than lapse, so that a node restarted in
     * its place (or its peers) has the whole bucket at once.
     */
    if (relay->bus != NULL) {
        int retired = 0;
        int64_t until = rl_clock_mono_us() / 1000 + RETIRE_WAIT_MS;
        rl_bus_retire(relay->bus, on_bus_retired, &retired);
        while (!retired && (left = until - rl_clock_mono_us() / 1000) > 0)
            turn(relay, loop, left < 10 ? (int32_t)left : 10);
    }
    rl_relay_stop(relay);
    rl_log_info("stopped");
}

/* A one-shot command: its name after relayd, what --help prints, and the function that runs it. */
struct command {
    const char *name;
    const char *help;
    int (*run)(int argc, char **argv);
};

/* `migrate --check` is this file's; `migrate --from ... --to ...` copies a store (store/migrate.c). */
static int migrate_either(int argc, char **argv)
{
    return migrate_wants_check(argc, argv) ? migrate_check_command(argc, argv) : migrate_command(argc, argv);
}

static const struct command commands[] = {
    {"token",
     TOKEN_USAGE "\nPrints a user token signed by the embedded issuer (the data folder's key, shared through the\n"
                 "store), valid --ttl (default 30d). Clients sign in with it: relay login --token TOKEN.\n",
     token_command},
    {"login-link",
     "usage: relayd login-link USER [--data DIR] [--store URL] [--ttl DURATION] [--public-url URL]\n"
     "                         [--listen HOST:PORT]\n"
     "\nPrints a one-time sign-in link for the web client, and its QR code on a terminal; it is\n"
     "valid --ttl (default 10m, at most 24h) and is exchanged for a user token (docs/web.md).\n"
     "The link points at --public-url, else http://--listen, else the address the relayd on the\n"
     "data folder serves (DATA/relayd.url), else RELAY_PUBLIC_URL or RELAY_LISTEN, else\n"
     "http://127.0.0.1:8080.\n",
     rl_login_link_command},
    {"backup",
     "usage: relayd backup DEST [--data DIR] [--store sqlite:PATH] [--attachments DIR]\n"
     "\nCopies the store, the keys and the attachments into the new folder DEST, online, while relayd\n"
     "runs (docs/operations.md, \"Backups\").\n",
     rl_backup_command},
    {"restore",
     "usage: relayd restore SRC [--data DIR] [--attachments DIR]\n"
     "\nPuts a backup made by relayd backup into an empty data folder; start relayd on it afterwards.\n",
     rl_restore_command},
    {"migrate",
     "usage: relayd migrate --from sqlite:PATH --to postgres://USER:PASSWORD@HOST/DB\n"
     "       relayd migrate --check [--data DIR] [--store sqlite:PATH]\n"
     "\nThe first copies a SQLite store into an empty PostgreSQL database; the second says what a\n"
     "start of this relayd would do to the store's schema, changing nothing (docs/operations.md).\n",
     migrate_either},
};

/* Whether the command's arguments ask for its help: anywhere, as every other program takes it. */
static int wants_help(int argc, char **argv)
{
    int i;

    for (i = 2; i < argc; ++i) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    }
    return 0;
}

/*
 * The one-shot commands open the store too, and a first one migrates it: a
 * person at a terminal reads those lines as text, like relayd's own.
 */
static void set_command_log_format(void)
{
    const char *text = getenv("RELAY_LOG_FORMAT");
    rl_log_format_t format;

    if (rl_log_parse_format(text != NULL && text[0] != '\0' ? text : "auto", STDERR_FILENO, &format) == 0)
        rl_log_set_format(format);
}

int main(int argc, char **argv)
{
    static rl_relay_t relay;
    rl_log_level_t level;
    rl_log_format_t format;
    h2o_loop_t *loop;
    size_t c;
    int rest, result;

    signal(SIGPIPE, SIG_IGN);
    /* The store, its WAL, keys and uploads hold every chat: nothing relayd creates is for other users. */
    umask(077);
    /* libsodium picks its fastest BLAKE2b for this CPU here (idempotency.c); it fails only without randomness. */
    if (sodium_init() < 0) {
        fprintf(stderr, "relayd: libsodium cannot start (no source of randomness)\n");
        return 1;
    }
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        printf("relayd %s\n", RL_VERSION);
        return 0;
    }
    for (c = 0; argc > 1 && c < sizeof(commands) / sizeof(commands[0]); ++c) {
        if (strcmp(argv[1], commands[c].name) != 0)
            continue;
        if (wants_help(argc, argv)) {
            fputs(commands[c].help, stdout);
            return 0;
        }
        set_command_log_format();
        return commands[c].run(argc, argv);
    }
    result = rl_config_load(&relay.config, argc, argv, 1, &rest);
    if (result != 0)
        return result > 0 ? 0 : 2;
    if (rest < argc) {
        fprintf(stderr, "relayd: unexpected argument '%s' (see relayd --help)\n", argv[rest]);
        return 2;
    }
    if (rl_log_parse_level(relay.config.log_level, &level) != 0) {
        fprintf(stderr, "relayd: --log-level must be debug, info, warn or error\n");
        return 2;
    }
    rl_log_set_level(level);
    /* Checked by rl_config_load already. */
    rl_log_parse_format(relay.config.log_format, STDERR_FILENO, &format);
    rl_log_set_format(format);
    raise_descriptor_limit();

    loop = h2o_evloop_create();
    if (rl_stop_install(loop) != 0) {
        perror("relayd: signal pipe");
        return 1;
    }
    if (rl_relay_start(&relay, loop) != 0 || rl_metrics_open(&relay) != 0) {
        rl_relay_stop(&relay);
        return 1;
    }
    rl_log_fields(RL_LOG_INFO, json_pack("{s:s, s:s, s:s, s:s}", "msg", "listening", "address", relay.address, "data",
                                         relay.config.data, "version", RL_VERSION));
    check_data_folder(relay.config.data);
    print_banner(&relay);

    while (!rl_stop_requested()) {
        turn(&relay, loop, INT32_MAX);
        /* SIGHUP: a renewed certificate is picked up without dropping a connection. */
        if (rl_reload_requested())
            rl_http_server_reload_tls(relay.server);
    }
    shut_down(&relay, loop);
    return 0;
}
