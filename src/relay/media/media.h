/*
 * Media (docs/internals/layout.md, "The relay by feature"): attachments
 * (attachments.c: uploads, signed downloads, the sweep of what nothing
 * references) and device capability requests (capabilities.c). The
 * feature's context holds what it uses of the relay and nothing more; its
 * handlers reach it through rl_feature_of(call, RL_FEATURE_MEDIA), its
 * sweeps and hooks are handed it by relay.c. Loop thread only.
 */
#ifndef RL_RELAY_MEDIA_H
#define RL_RELAY_MEDIA_H

#include <h2o.h>
#include <stdint.h>

#include "bus/bus.h"
#include "relay/core/config.h"
#include "store/store.h"

struct rl_hub;
struct rl_auth;
struct rl_deltas;
struct rl_strmap;

/* What media uses of the relay, filled by relay.c; each must outlive the feature. */
typedef struct rl_media_ctx {
    const rl_config_t *config;
    rl_store_t *store;
    rl_bus_t *bus;               /* a capability's answer or expiry wakes the bridge (updates.h) */
    struct rl_hub *hub;          /* capability events to the user */
    struct rl_auth *auth;        /* whose upload it is, from its head alone (the quota's early 413) */
    struct rl_deltas *deltas;    /* a purge of sessions drops the records of their open messages */
    h2o_loop_t *loop;            /* an upload writes a slice of its body each loop turn */
    h2o_timeout_t *zero_timeout; /* the next loop turn */
    int shared;                  /* other nodes share the store: what one node learns of usage lapses */
} rl_media_ctx_t;

/* The feature: its context, and what it keeps. */
typedef struct rl_media {
    rl_media_ctx_t ctx;
    char folder[1024];         /* the attachments folder: --attachments, else DATA/attachments */
    unsigned char url_key[32]; /* signs download URLs */
    struct rl_strmap *usage;   /* each user's attachment bytes as this node last saw them */
    int full;                  /* the attachments folder's disk refused the last upload (ENOSPC) */
    uint64_t full_refusals;    /* uploads refused for a full disk since the start */
} rl_media_t;

/*
 * Copies ctx, creates the attachments folder (and DATA/tmp for h2o's
 * file-backed bodies) and loads (or makes) the URL signing key. Startup; 0
 * or -1 with the cause logged.
 */
int rl_media_open(const rl_media_ctx_t *ctx, rl_media_t **out);
/* Frees what rl_media_open made. NULL is ignored. */
void rl_media_close(rl_media_t *media);
/* Whether the attachments folder's disk is full, and *refusals the uploads it refused (the metrics); 0 for NULL. */
int rl_media_disk_full(const rl_media_t *media, uint64_t *refusals);

#endif
