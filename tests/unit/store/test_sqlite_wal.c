/*
 * The SQLite backend keeps its WAL bounded under writes that never pause
 * (src/store/sqlite.c, checkpoint_main). A WAL restarts only when a write
 * begins while every frame is already copied; a worker with batches queued
 * begins the next transaction microseconds after its commit, so a
 * checkpointer that waited for a gap would never find one, and the WAL
 * would hold every frame written. Here one connection commits back to back,
 * as that worker does, and writes four times the WAL's limit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "store/store.h"

#define WAL_LIMIT    (64LL << 20) /* WAL_FRAMES_MAX pages of 4 KiB */
#define ROWS         8            /* per transaction */
#define ROW_BYTES    6000         /* two overflow pages each */
#define WRITTEN_GOAL (4 * WAL_LIMIT)

static long long file_size(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

static void test_the_wal_stays_bounded_under_writes_that_never_pause(void **state)
{
    char folder[] = "/tmp/rl-sqlite-wal-XXXXXX", location[96], wal[96], cmd[128], message_id[16];
    static char text[ROW_BYTES];
    long long peak = 0, written = 0, size;
    rl_arena_t arena;
    rl_txn_t *txn = NULL;
    int i, commits = 0;

    (void)state;
    memset(&arena, 0, sizeof(arena));
    memset(text, 'x', sizeof(text));
    assert_non_null(mkdtemp(folder));
    snprintf(location, sizeof(location), "sqlite:%s/relay.db", folder);
    snprintf(wal, sizeof(wal), "%s/relay.db-wal", folder);
    assert_int_equal(rl_store__backend_open(location, &txn), 0);
    txn->arena = &arena;
    txn->writing = 1;
    /* The same rows rewritten: the database stays small, every commit adds frames to the WAL. */
    while (written < WRITTEN_GOAL) {
        assert_int_equal(rl_txn_begin(txn), 0);
        for (i = 0; i < ROWS; ++i) {
            rl_delta_run_row_t run = {message_id, 1, 1, text, sizeof(text), "[]"};
            snprintf(message_id, sizeof(message_id), "msg_%d", i);
            assert_int_equal(RL_TXN(txn, delta_runs_delete, message_id), 0);
            assert_int_equal(RL_TXN(txn, delta_run_insert, &run), 0);
        }
        assert_int_equal(rl_txn_commit(txn), 0);
        rl_arena_free(&arena);
        written += ROWS * 3 * 4096; /* at least: a leaf and two overflow pages per row */
        /* Looked at every few commits only: the gap between two transactions stays as short as the worker's. */
        if (++commits % 8 == 0 && (size = file_size(wal)) > peak)
            peak = size;
    }
    rl_txn_close(txn);
    print_message("%d commits, at least %lld MiB of frames written, WAL peak %lld MiB\n", commits, written >> 20,
                  peak >> 20);
    /* Restarted: never all of what was written; at most the limit and what came while it restarted. */
    assert_true(peak > 0);
    assert_true(peak < 2 * WAL_LIMIT);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", folder);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_wal_stays_bounded_under_writes_that_never_pause),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
