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
    strcpy(fixture_folder, "/tmp/rl-ops-test-XXXXXX");
    if (mkdtemp(fixture_folder) == NULL)
        return -1;
    fixture_threaded = threaded;
    *state = fixture_open();
    return *state != NULL ? 0 : -1;
}

static int setup_inline(void **state)
{
    return fixture_setup(state, 0);
}

static int setup_threaded(void **state)
{
    return fixture_setup(state, 1);
}

static int teardown(void **state)
{
    char cmd[128];

    rl_store_close(*state);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", fixture_folder);
    return system(cmd) == 0 ? 0 : -1;
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

#endif
