#include "http/later.h"

static void run_queue(h2o_timeout_entry_t *entry)
{
    rl_later_t *later = H2O_STRUCT_FROM_MEMBER(rl_later_t, entry, entry);
    rl_later_item_t *item = later->head, *next;

    /* Detached first: what these items queue in turn waits for the next run. */
    later->head = NULL;
    later->tail = &later->head;
    for (; item != NULL; item = next) {
        next = item->_next;
        item->_next = NULL;
        item->_queued = 0;
        item->run(item);
    }
}

void rl_later_init(rl_later_t *later, h2o_loop_t *loop)
{
    later->loop = loop;
    later->head = NULL;
    later->tail = &later->head;
    h2o_timeout_init(loop, &later->zero, 0);
    later->entry = (h2o_timeout_entry_t){0};
    later->entry.cb = run_queue;
}

void rl_later_add(rl_later_t *later, rl_later_item_t *item)
{
    if (item->_queued)
        return;
    item->_queued = 1;
    item->_next = NULL;
    *later->tail = item;
    later->tail = &item->_next;
    if (!h2o_timeout_is_linked(&later->entry))
        h2o_timeout_link(later->loop, &later->zero, &later->entry);
}

void rl_later_dispose(rl_later_t *later, void (*drop)(rl_later_item_t *item))
{
    rl_later_item_t *item = later->head, *next;

    if (h2o_timeout_is_linked(&later->entry))
        h2o_timeout_unlink(&later->entry);
    later->head = NULL;
    later->tail = &later->head;
    for (; item != NULL; item = next) {
        next = item->_next;
        item->_next = NULL;
        item->_queued = 0;
        if (drop != NULL)
            drop(item);
    }
    h2o_timeout_dispose(later->loop, &later->zero);
}
