#include <stdint.h>
#include <stdlib.h>

#include "common/clock.h"
#include "relay/turn/approvals.h"
#include "relay/media/attachments.h"
#include "relay/turn/bridge.h"
#include "relay/media/capabilities.h"
#include "relay/media/media.h"
#include "relay/core/relay.h"
#include "relay/turn/turn.h"
#include "relay/sweeps.h"

#define PERIOD_MS 1000
/* One node runs the sweeps; if it goes, another takes over within this long. */
#define LEASE_MS 3000

/* Each sweep takes its feature's context (media.h, turn.h). */
static rl_store_op_t *approvals_expiry(rl_relay_t *relay, int64_t now)
{
    return rl_approvals_expiry(relay->features[RL_FEATURE_TURN], now);
}

static void approvals_expired(rl_relay_t *relay, rl_store_op_t *op)
{
    rl_approvals_expired(relay->features[RL_FEATURE_TURN], op);
}

static rl_store_op_t *messages_lapse(rl_relay_t *relay, int64_t now)
{
    return rl_messages_lapse_due(relay->features[RL_FEATURE_TURN], now);
}

static rl_store_op_t *messages_lapse_next(rl_relay_t *relay, rl_store_op_t *op)
{
    return rl_messages_lapse_next(relay->features[RL_FEATURE_TURN], op, rl_clock_now_ms());
}

static void messages_lapsed(rl_relay_t *relay, rl_store_op_t *op)
{
    rl_messages_lapsed(relay->features[RL_FEATURE_TURN], op);
}

static rl_store_op_t *capabilities_expiry(rl_relay_t *relay, int64_t now)
{
    return rl_capabilities_expiry(relay->features[RL_FEATURE_MEDIA], now);
}

static void capabilities_expired(rl_relay_t *relay, rl_store_op_t *op)
{
    rl_capabilities_expired(relay->features[RL_FEATURE_MEDIA], op);
}

static rl_store_op_t *attachments_sweep(rl_relay_t *relay, int64_t now)
{
    return rl_attachments_sweep(relay->features[RL_FEATURE_MEDIA], now);
}

static void attachments_swept(rl_relay_t *relay, rl_store_op_t *op)
{
    rl_attachments_swept(relay->features[RL_FEATURE_MEDIA], op);
}

/*
 * One row per sweep: the operation it submits, what follows its commit on
 * the loop, and (optional) the next step: an operation to submit after that
 * one, or NULL when the sweep is through.
 */
static const struct {
    const char *name;
    rl_store_op_t *(*start)(rl_relay_t *relay, int64_t now);
    void (*done)(rl_relay_t *relay, rl_store_op_t *op);
    rl_store_op_t *(*next)(rl_relay_t *relay, rl_store_op_t *op);
} sweeps_table[] = {
    {"approval expiry", approvals_expiry, approvals_expired, NULL},
    {"capability request expiry", capabilities_expiry, capabilities_expired, NULL},
    {"messages left open", messages_lapse, messages_lapsed, messages_lapse_next},
    {"deleted sessions and unreferenced attachments", attachments_sweep, attachments_swept, NULL},
};

#define NSWEEPS (sizeof(sweeps_table) / sizeof(sweeps_table[0]))

struct rl_sweeps {
    rl_relay_t *relay;
    h2o_timeout_t period;
    h2o_timeout_entry_t tick;
    int asking;    /* a lease answer is awaited: it holds the struct */
    int stopped;   /* shutdown: no new sweep */
    uint64_t done; /* sweep operations finished on this node (relay_sweeps_total) */
    struct sweep_run {
        rl_sweeps_t *sweeps;
        size_t index;
        int running;
    } runs[NSWEEPS];
};

static void on_swept(rl_store_op_t *op)
{
    struct sweep_run *run = op->arg;
    rl_sweeps_t *sweeps = run->sweeps;
    rl_store_op_t *next = NULL;

    sweeps_table[run->index].done(sweeps->relay, op);
    if (sweeps_table[run->index].next != NULL && !sweeps->stopped)
        next = sweeps_table[run->index].next(sweeps->relay, op);
    if (next != NULL) {
        rl_store_submit(sweeps->relay->store, next, on_swept, run);
        return;
    }
    /* A sweep is counted once, when its last step is through (relay_sweeps_total: rounds of every sweep). */
    run->running = 0;
    sweeps->done++;
}

/* The sweeps change what every node shares: one node at a time runs them (the bus's lease). */
static void on_lease(int held, void *arg)
{
    rl_sweeps_t *sweeps = arg;
    rl_relay_t *relay = sweeps->relay;
    int64_t now = rl_clock_now_ms();
    size_t i;

    sweeps->asking = 0;
    if (!held || sweeps->stopped)
        return;
    for (i = 0; i < NSWEEPS; ++i) {
        if (sweeps->runs[i].running)
            continue;
        sweeps->runs[i].running = 1;
        rl_store_submit(relay->store, sweeps_table[i].start(relay, now), on_swept, &sweeps->runs[i]);
    }
}

static void on_tick(h2o_timeout_entry_t *entry)
{
    rl_sweeps_t *sweeps = H2O_STRUCT_FROM_MEMBER(rl_sweeps_t, tick, entry);
    rl_relay_t *relay = sweeps->relay;

    if (!sweeps->asking) {
        sweeps->asking = 1;
        rl_bus_lease(relay->bus, "sweeps", relay->node_id, LEASE_MS, on_lease, sweeps);
    }
    h2o_timeout_link(relay->loop, &sweeps->period, &sweeps->tick);
}

rl_sweeps_t *rl_sweeps_start(rl_relay_t *relay)
{
    rl_sweeps_t *sweeps = calloc(1, sizeof(*sweeps));
    size_t i;

    if (sweeps == NULL)
        return NULL;
    sweeps->relay = relay;
    for (i = 0; i < NSWEEPS; ++i) {
        sweeps->runs[i].sweeps = sweeps;
        sweeps->runs[i].index = i;
    }
    h2o_timeout_init(relay->loop, &sweeps->period, PERIOD_MS);
    sweeps->tick.cb = on_tick;
    h2o_timeout_link(relay->loop, &sweeps->period, &sweeps->tick);
    return sweeps;
}

uint64_t rl_sweeps_done(const rl_sweeps_t *sweeps)
{
    return sweeps != NULL ? sweeps->done : 0;
}

void rl_sweeps_stop(rl_sweeps_t *sweeps)
{
    if (sweeps == NULL)
        return;
    sweeps->stopped = 1;
    if (h2o_timeout_is_linked(&sweeps->tick))
        h2o_timeout_unlink(&sweeps->tick);
}

void rl_sweeps_free(rl_sweeps_t *sweeps)
{
    if (sweeps == NULL)
        return;
    rl_sweeps_stop(sweeps);
    h2o_timeout_dispose(sweeps->relay->loop, &sweeps->period);
    free(sweeps);
}
