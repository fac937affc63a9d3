/*
 * Work for the end of the loop turn: a queue of callbacks run by a
 * zero-length h2o timeout, after the I/O callbacks of the turn have
 * returned. Two uses: answers that a caller must never receive inside its
 * own call (the buses' reads, signals, presence answers), and objects that
 * must never be freed inside their own callback (a stream is marked, and
 * reaped here; redis's freeClientAsync, libuv's close_cb).
 *
 * Items are intrusive: the caller embeds an rl_later_item_t in its own
 * struct, sets run, and owns the memory (run usually frees it). Items run in
 * the order they were added; an item added while the queue runs goes to the
 * next run. An item is in at most one queue at a time (rl_later_pending).
 * Loop thread only.
 */
#ifndef RL_HTTP_LATER_H
#define RL_HTTP_LATER_H

#include <h2o.h>

typedef struct rl_later_item rl_later_item_t;
struct rl_later_item {
    void (*run)(rl_later_item_t *item);
    rl_later_item_t *_next; /* the queue's */
    int _queued;
};

typedef struct rl_later {
    h2o_loop_t *loop;
    h2o_timeout_t zero;
    h2o_timeout_entry_t entry;
    rl_later_item_t *head, **tail;
} rl_later_t;

/* Binds the queue to loop. */
void rl_later_init(rl_later_t *later, h2o_loop_t *loop);
/* Queues item (run must be set) for the end of this turn; an item already queued stays where it is. */
void rl_later_add(rl_later_t *later, rl_later_item_t *item);
/* Whether item waits in a queue. */
static inline int rl_later_pending(const rl_later_item_t *item)
{
    return item->_queued;
}
/*
 * Unbinds the queue without running it: each item still queued is handed to
 * drop (NULL: left alone), which may free it.
 */
void rl_later_dispose(rl_later_t *later, void (*drop)(rl_later_item_t *item));

#endif
