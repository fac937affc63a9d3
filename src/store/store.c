#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "store/store.h"

/* The relay's store: the backend on a thread of its own (store_worker.c). */
static int open_on_worker(const char *path, rl_store_t **out)
{
    rl_store_t *inner;

    if (rl_store__sqlite_open(path, &inner) != 0)
        return -1;
    return rl_store__worker_open(inner, out);
}

int rl_store_open(const char *location, rl_store_t **out)
{
    char path[4096];

    if (strncmp(location, "sqlite:", 7) == 0)
        return open_on_worker(location + 7, out);
    if (strstr(location, "://") != NULL) {
        rl_log_error("unsupported store '%s': only the embedded SQLite store is available", location);
        return -1;
    }
    if ((size_t)snprintf(path, sizeof(path), "%s/relay.db", location) >= sizeof(path)) {
        rl_log_error("data folder path too long");
        return -1;
    }
    return open_on_worker(path, out);
}

void rl_store_drain(rl_store_t *store)
{
    while (rl_store_pending(store)) {
        int fd = rl_store_wake_fd(store);
        if (fd >= 0) {
            struct pollfd wait = {.fd = fd, .events = POLLIN};
            if (poll(&wait, 1, -1) < 0 && errno != EINTR)
                break;
        }
        rl_store_flush(store);
    }
}

rl_delta_batch_t *rl_delta_batch_new(void)
{
    rl_delta_batch_t *batch = calloc(1, sizeof(*batch));

    if (batch != NULL)
        batch->tail = &batch->head;
    return batch;
}

/* Copies `len` bytes and a NUL to *at, returns where they went. */
static const char *put(char **at, const char *text, size_t len)
{
    char *start = *at;

    memcpy(start, text, len);
    start[len] = '\0';
    *at += len + 1;
    return start;
}

int rl_delta_batch_add(rl_delta_batch_t *batch, const char *message_id, int64_t seq, const char *delta,
                       size_t delta_len, const char *owner, const char *scope, const char *key, const char *body_hash)
{
    size_t lens[5] = {strlen(message_id), strlen(owner), strlen(scope), strlen(key), strlen(body_hash)};
    rl_delta_row_t *row = malloc(sizeof(*row) + lens[0] + lens[1] + lens[2] + lens[3] + lens[4] + delta_len + 6);
    char *at;

    if (row == NULL)
        return -1;
    at = row->text;
    row->next = NULL;
    row->seq = seq;
    row->message_id = put(&at, message_id, lens[0]);
    row->owner = put(&at, owner, lens[1]);
    row->scope = put(&at, scope, lens[2]);
    row->key = put(&at, key, lens[3]);
    row->body_hash = put(&at, body_hash, lens[4]);
    row->delta = put(&at, delta, delta_len);
    row->delta_len = delta_len;
    *batch->tail = row;
    batch->tail = &row->next;
    ++batch->count;
    return 0;
}

void rl_delta_batch_free(rl_delta_batch_t *batch)
{
    rl_delta_row_t *row, *next;

    if (batch == NULL)
        return;
    for (row = batch->head; row != NULL; row = next) {
        next = row->next;
        free(row);
    }
    free(batch);
}
