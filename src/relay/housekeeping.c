#include <stdlib.h>

#include "common/clock.h"
#include "common/log.h"
#include "relay/core/auth.h"
#include "relay/turn/deltas.h"
#include "relay/housekeeping.h"
#include "relay/identity/identity.h"
#include "relay/core/ops.h"
#include "relay/core/ratelimit.h"
#include "relay/core/relay.h"

#define PERIOD_MS 60000
/*
 * What this node keeps in memory (rate buckets, event rings, token and
 * /v1/me caches, open-message records) is swept a sixtieth every second,
 * each entry still once a minute: swept whole once a minute, 12 000 users'
 * worth held the loop for 60 ms (29 ms of rate buckets, 26 ms of /v1/me
 * entries), the streaming p99 of one round in three in the benchmark.
 */
#define TICK_MS         1000
#define TICK_PARTS      (PERIOD_MS / TICK_MS)
#define PAIRING_KEEP_MS (3600 * 1000) /* a late poll still gets a clear answer for an hour */

struct rl_housekeeping {
    rl_relay_t *relay;
    h2o_timeout_t period;
    h2o_timeout_entry_t entry;
    unsigned ticks; /* the store's purge runs every TICK_PARTS of them (PERIOD_MS) */
};

struct purge {
    rl_op_t op;
    int64_t now, idempotency_ttl, replay_window;
};

static int purge_run(rl_txn_t *txn, rl_store_op_t *base)
{
    struct purge *op = (void *)base;
    int result;

    /* Sessions past their delete grace go every second, with their attachments (attachments.c). */
    if ((result = RL_TXN(txn, pairings_purge, op->now - PAIRING_KEEP_MS)) != 0 ||
        /* spec: idempotency keys are unique for 24 hours, then recycled. */
        (result = RL_TXN(txn, idempotency_purge, op->now - op->idempotency_ttl)) != 0 ||
        (result = RL_TXN(txn, delta_keys_purge, op->now - op->idempotency_ttl)) != 0 ||
        /* spec: updates older than the replay window are never replayed; the history covers them. */
        (result = RL_TXN(txn, updates_purge, op->now - op->replay_window)) != 0 ||
        /* The web client's sign-in codes live minutes (docs/web.md). */
        (result = RL_TXN(txn, login_codes_purge, op->now)) != 0)
        return result;
    /* Tasks are kept as long as their session, which takes them when it is purged (attachments.c). */
    return 0;
}

static const rl_store_op_type_t purge_type = RL_OP_TYPE(purge, 1, purge_run);

static void on_purged(rl_store_op_t *base)
{
    if (base->result != 0)
        rl_log_warn("store purge failed");
}

/* The purge changes what every node shares: one node runs it (the bus's lease). */
static void on_lease(int held, void *arg)
{
    rl_housekeeping_t *housekeeping = arg;
    rl_relay_t *relay = housekeeping->relay;
    struct purge *op;

    if (!held)
        return;
    op = rl_op_new(&purge_type, sizeof(*op));
    op->now = rl_clock_now_ms();
    op->idempotency_ttl = relay->config.idempotency_ttl;
    op->replay_window = relay->config.replay_window;
    rl_store_submit(relay->store, &op->op.base, on_purged, housekeeping);
}

static void on_period(h2o_timeout_entry_t *entry)
{
    rl_housekeeping_t *housekeeping = H2O_STRUCT_FROM_MEMBER(rl_housekeeping_t, entry, entry);
    rl_relay_t *relay = housekeeping->relay;
    int64_t now = rl_clock_now_ms();

    /* What this node keeps for itself is trimmed here, on every node, a share each tick. */
    rl_bus_sweep_part(relay->bus, now, TICK_PARTS);
    rl_auth_sweep(relay->auth, now, TICK_PARTS);
    rl_deltas_sweep(relay->deltas, now, TICK_PARTS);
    rl_identity_sweep(relay->features[RL_FEATURE_IDENTITY], now, TICK_PARTS);
    if (++housekeeping->ticks % TICK_PARTS == 0)
        rl_bus_lease(relay->bus, "housekeeping", relay->node_id, 2 * PERIOD_MS, on_lease, housekeeping);
    h2o_timeout_link(relay->loop, &housekeeping->period, &housekeeping->entry);
}

rl_housekeeping_t *rl_housekeeping_start(rl_relay_t *relay)
{
    rl_housekeeping_t *housekeeping = calloc(1, sizeof(*housekeeping));

    if (housekeeping == NULL)
        return NULL;
    housekeeping->relay = relay;
    h2o_timeout_init(relay->loop, &housekeeping->period, TICK_MS);
    housekeeping->entry.cb = on_period;
    h2o_timeout_link(relay->loop, &housekeeping->period, &housekeeping->entry);
    return housekeeping;
}

void rl_housekeeping_stop(rl_housekeeping_t *housekeeping)
{
    if (housekeeping == NULL)
        return;
    if (h2o_timeout_is_linked(&housekeeping->entry))
        h2o_timeout_unlink(&housekeeping->entry);
    h2o_timeout_dispose(housekeeping->relay->loop, &housekeeping->period);
    free(housekeeping);
}
