#include "common/error.h"
#include "relay/me.h"
#include "relay/ops.h"
#include "relay/relay.h"
#include "relay/views.h"

struct me {
    rl_op_t op;
    const char *user_id;
    int has_user;
    rl_user_row_t user;
    rl_installation_row_t *installations;
    size_t ninstallations;
    rl_session_row_t *sessions;
    size_t nsessions;
};

static int me_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct me *op = (void *)base;
    int result = RL_TXN(txn, user_get, op->user_id, &op->user);

    if (result != 0 && result != RL_E_NOT_FOUND)
        return result;
    op->has_user = result == 0;
    if ((result = RL_TXN(txn, installations_of_user, op->user_id, &op->installations, &op->ninstallations)) != 0)
        return result;
    /* Deleted sessions are left out (brief): they are reached by their id until purged. */
    return RL_TXN(txn, sessions_of_user, op->user_id, &op->sessions, &op->nsessions);
}

static const rl_store_op_type_t me_type = RL_OP_TYPE(me_get, 0, me_run);

static void on_me(rl_store_op_t *base)
{
    struct me *op = (void *)base;
    rl_call_t *call = base->arg;
    rl_relay_t *relay = call->app;
    json_t *installations, *sessions;
    size_t i;

    if (base->result != 0) {
        rl_call_fail(call, base->result, NULL);
        rl_call_release(call);
        return;
    }
    installations = json_array();
    sessions = json_array();
    for (i = 0; i < op->ninstallations; ++i)
        json_array_append_new(
            installations,
            rl_view_installation(&op->installations[i], rl_bus_presence_get(relay->bus, op->installations[i].id)));
    for (i = 0; i < op->nsessions; ++i)
        json_array_append_new(sessions, rl_view_session(&op->sessions[i], relay->config.delete_grace));
    rl_call_reply(call, json_pack("{s:o, s:o, s:o}", "user", op->has_user ? rl_view_user(&op->user) : json_null(),
                                  "installations", installations, "sessions", sessions));
    rl_call_release(call);
}

int rl_me_get(rl_call_t *call)
{
    struct me *op = rl_op_new(&me_type, sizeof(*op));

    op->user_id = rl_op_str(op, call->principal);
    rl_op_submit_for(call, op, on_me);
    return 0;
}
