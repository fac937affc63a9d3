/*
 * A real store for the tests of the relay's operations: SQLite in a
 * temporary folder, inline (operations run during the flush on this thread)
 * or behind the worker thread, as relayd runs it.
 */
#ifndef RL_TEST_STORE_FIXTURE_H
#define RL_TEST_STORE_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <unistd.h>

#include "common/log.h"
#include "store/store.h"

static char fixture_folder[64];
static int fixture_threaded;

static rl_store_t *fixture_open(void)
{
    rl_store_t *store = NULL;

    if ((fixture_threaded ? rl_store_open : rl_store_open_inline)(fixture_folder, &store) != 0)
        return NULL;
    return store;
}

static int fixture_setup(void **state, int threaded)
{
    /*
     * On tmpfs when there is one: a store's open runs its migrations, and
     * their fsyncs on a disk were most of a test's time.
     */
    strcpy(fixture_folder, access("/dev/shm", W_OK) == 0 ? "/dev/shm/rl-ops-test-XXXXXX" : "/tmp/rl-ops-test-XXXXXX");
    if (mkdtemp(fixture_folder) == NULL)
        return -1;
    fixture_threaded = threaded;
    /* The store's migrations say what they do at info on every open. */
    rl_log_set_level(RL_LOG_WARN);
    *state = fixture_open();
    return *state != NULL ? 0 : -1;
}

static inline int setup_inline(void **state)
{
    return fixture_setup(state, 0);
}

static inline int setup_threaded(void **state)
{
    return fixture_setup(state, 1);
}

/*
 * Removes the store's folder: its files one by one, without a shell per
 * test; rm -rf only when that is not enough (a subfolder).
 */
static int teardown(void **state)
{
    char path[sizeof(fixture_folder) + 256];
    struct dirent *entry;
    DIR *dir;

    rl_store_close(*state);
    if ((dir = opendir(fixture_folder)) != NULL) {
        while ((entry = readdir(dir)) != NULL) {
            if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
                continue;
            snprintf(path, sizeof(path), "%s/%s", fixture_folder, entry->d_name);
            unlink(path);
        }
        closedir(dir);
    }
    if (rmdir(fixture_folder) == 0)
        return 0;
    snprintf(path, sizeof(path), "rm -rf %s", fixture_folder);
    return system(path) == 0 ? 0 : -1;
}

/* Runs one operation to its end; returns its result. The operation is freed. */
static int fixture_result;
static void fixture_done(rl_store_op_t *op)
{
    void (*check)(rl_store_op_t *) = (void (*)(rl_store_op_t *))op->arg;

    fixture_result = op->result;
    if (check != NULL)
        check(op);
}

static int run_op(rl_store_t *store, void *op, void (*check)(rl_store_op_t *))
{
    fixture_result = 1;
    rl_store_submit(store, op, fixture_done, (void *)check);
    rl_store_drain(store);
    return fixture_result;
}

#define BOTH(test)                                                                                                     \
    cmocka_unit_test_setup_teardown(test, setup_inline, teardown),                                                     \
        cmocka_unit_test_setup_teardown(test, setup_threaded, teardown)

/*
 * Runs fn(txn, arg) as one writing operation of its own (its own savepoint
 * and commit): seeding rows and reading them back from a test. Rows read
 * live in the operation's arena, so fn copies out what it keeps.
 */
struct fixture_call {
    rl_store_op_t base;
    int (*fn)(rl_txn_t *txn, void *arg);
    void *arg;
};

static int fixture_call_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct fixture_call *call = (struct fixture_call *)base;

    return call->fn(txn, call->arg);
}

static const rl_store_op_type_t fixture_call_type = {"fixture_call", 1, fixture_call_run, NULL};

static inline int in_txn(rl_store_t *store, int (*fn)(rl_txn_t *txn, void *arg), void *arg)
{
    struct fixture_call *call = rl_store_op_new(&fixture_call_type, sizeof(*call));

    call->fn = fn;
    call->arg = arg;
    return run_op(store, call, NULL);
}

/* The world most rules need: a user, a live installation of theirs, and a session on it. */
#define FIX_USER         "alice"
#define FIX_INSTALLATION "inst_aaaaaaaaaaaaaaaa"
#define FIX_SESSION      "ses_aaaaaaaaaaaaaaaaaaaa"

static inline int seed_user(rl_txn_t *txn, const char *user_id)
{
    rl_user_row_t user = {user_id, 1000};

    return RL_TXN(txn, user_insert_ignore, &user);
}

static inline int seed_installation(rl_txn_t *txn, const char *id, const char *user_id)
{
    rl_installation_row_t row = {.id = id,
                                 .user_id = user_id,
                                 .token_hash = id, /* unique, unused here */
                                 .token_env = "live",
                                 .connector_type = "exec",
                                 .host_label = "laptop",
                                 .state = "live",
                                 .manifest = NULL,
                                 .created_at = 1000,
                                 .revoked_at = RL_NO_TIME};
    int result = seed_user(txn, user_id);

    return result != 0 ? result : RL_TXN(txn, installation_insert, &row);
}

static inline int seed_session(rl_txn_t *txn, const char *id, const char *user_id, const char *installation_id)
{
    rl_session_row_t row = {id, user_id, installation_id, "a title", "active", 1000, 1000, RL_NO_TIME};

    return RL_TXN(txn, session_insert, &row);
}

static inline int seed_interaction(rl_txn_t *txn, const char *id, const char *session_id, int64_t created_at)
{
    rl_interaction_row_t row = {id, session_id, created_at};

    return RL_TXN(txn, interaction_insert, &row);
}

static inline int seed_world_run(rl_txn_t *txn, void *arg)
{
    int result = seed_installation(txn, FIX_INSTALLATION, FIX_USER);

    (void)arg;
    return result != 0 ? result : seed_session(txn, FIX_SESSION, FIX_USER, FIX_INSTALLATION);
}

static inline int seed_world(rl_store_t *store)
{
    return in_txn(store, seed_world_run, NULL);
}

/* The installation's queued updates after after_id (none older than since), as "type" strings joined by commas. */
struct fixture_updates {
    const char *installation_id;
    int64_t after_id, since;
    char types[512];
    int64_t last_id;
};

static int read_updates_run(rl_txn_t *txn, void *arg)
{
    struct fixture_updates *u = arg;
    rl_update_row_t *rows;
    size_t count, i, at = 0;
    int result = RL_TXN(txn, updates_after, u->installation_id, u->after_id, u->since, 100, &rows, &count);

    u->types[0] = '\0';
    u->last_id = 0;
    for (i = 0; i < count && result == 0; ++i) {
        at += (size_t)snprintf(u->types + at, sizeof(u->types) - at, "%s%s", i > 0 ? "," : "", rows[i].type);
        u->last_id = rows[i].update_id;
        if (at >= sizeof(u->types))
            return -1;
    }
    return result;
}

static inline const char *queued_updates(rl_store_t *store, const char *installation_id, int64_t after_id,
                                         int64_t since)
{
    static struct fixture_updates u;

    u = (struct fixture_updates){.installation_id = installation_id, .after_id = after_id, .since = since};
    if (in_txn(store, read_updates_run, &u) != 0)
        return "(error)";
    return u.types;
}

#define INLINE(test) cmocka_unit_test_setup_teardown(test, setup_inline, teardown)

#endif
