/*
 * The relay's store operations (store.h) share this head: most of them
 * answer with one JSON value built by their run on the worker (a view), and
 * many queue one bridge update. Helpers for the loop side too.
 */
#ifndef RL_RELAY_OPS_H
#define RL_RELAY_OPS_H

#include <jansson.h>

#include "http/call.h"
#include "store/store.h"

typedef struct rl_op {
    rl_store_op_t base;
    json_t *value;     /* the result; released with the operation */
    int64_t update_id; /* the bridge update the operation queued, or 0 */
} rl_op_t;

/* The dispose of an operation whose struct starts with rl_op_t. */
void rl_op_dispose(rl_store_op_t *op);
#define RL_OP_TYPE(op_name, op_writes, op_run)                                                                         \
    {                                                                                                                  \
        .name = #op_name, .writes = op_writes, .run = op_run, .dispose = rl_op_dispose                                 \
    }

/* A new operation of type (its struct is size bytes and starts with rl_op_t). */
static inline void *rl_op_new(const rl_store_op_type_t *type, size_t size)
{
    return rl_store_op_new(type, size);
}
/* A copy of text in the operation's arena. */
static inline const char *rl_op_str(void *op, const char *text)
{
    return rl_arena_strdup(&((rl_store_op_t *)op)->arena, text);
}
/* A string field of the call's body, or NULL. */
static inline const char *rl_body_string(const rl_call_t *call, const char *key)
{
    return json_string_value(json_object_get(call->body, key));
}
/* Path parameter i into buf; an id longer than any the relay mints cannot exist: not_found. */
static inline int rl_path_id(const rl_call_t *call, size_t i, char *buf, size_t bufsz, int not_found)
{
    return rl_call_param(call, i, buf, bufsz) == 0 ? 0 : not_found;
}
/*
 * Submits an operation for a call: the call is held until done has run
 * (done must release it). When the store is too far behind, the operation is
 * freed and the call answered 503 at once instead (done does not run).
 */
void rl_op_submit_for(rl_call_t *call, void *op, rl_store_done_cb done);

#endif
