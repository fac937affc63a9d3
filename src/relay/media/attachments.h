/* Attachments: upload, signed download URLs, hydration. Loop thread only. */
#ifndef RL_RELAY_ATTACHMENTS_H
#define RL_RELAY_ATTACHMENTS_H

#include <jansson.h>

#include "http/call.h"
#include "http/server.h"
#include "http/validate.h"
#include "store/store.h"

struct rl_media;

#define RL_ATTACHMENT_MAX (25 * 1024 * 1024)

/* One item of an "attachments" array in a send or sendMessage body: {key, mime?, size?, name?}. */
extern const rl_field_t rl_attachment_ref_item;

/*
 * The server's head_limit check (http/server.h; relay.c's hook hands it
 * media's context) for the upload routes: when
 * this node knows the caller's credential and how many bytes of attachments
 * their user keeps (learnt from their last upload here; with other nodes
 * sharing the store, in the last minute), it lowers the body limit to what
 * is left of --attachment-quota, so that an upload declared past it is
 * refused 413 quota_exceeded before its body is read. Otherwise the body is
 * read and the upload's transaction counts (as it always does anyway).
 */
int rl_attachments_head_limit(struct rl_media *media, const rl_route_t *route, const char *authorization, size_t len,
                              rl_http_head_limit_t *limit);
/* Adds "url" and "url_expires_at" to every {key, ...} item of an attachments array, in place. */
void rl_attachments_sign(const struct rl_media *media, json_t *attachments);
/* How the attachments of a session are sent (issue 26, docs/api.md "Encrypted sessions"). */
typedef enum {
    RL_ATTACHMENTS_PLAIN,       /* a plain session: meta_ct refused */
    RL_ATTACHMENTS_SEALED,      /* a message of an encrypted one: sealed bytes, each item's meta_ct required */
    RL_ATTACHMENTS_SEALED_BYTES /* a capability answer of an encrypted one: sealed bytes, described by answer_ct */
} rl_attachment_sealing_t;

/*
 * In a transaction: resolves a message's attachment references (the items
 * of refs) against the user's uploads; the stored mime and size win over
 * what the sender claimed, and the stored name unless the item gives one;
 * an item's meta_ct is kept as given. *resolved is a new array.
 * RL_E_NOT_FOUND for a key that is not one of the user's uploads (or is
 * being removed); RL_E_INVALID_REQUEST, with *problem set to a static
 * message for the field "attachments", for an item that breaks sealing's rule.
 */
int rl_attachments_resolve(rl_txn_t *txn, const char *user_id, json_t *refs, rl_attachment_sealing_t sealing,
                           json_t **resolved, const char **problem);
/*
 * In a writing transaction: records that session_id references each
 * attachment of resolved (an array from rl_attachments_resolve), which keeps
 * them as long as the session. 0 or an error.
 */
int rl_attachments_use(rl_txn_t *txn, json_t *resolved, const char *session_id, int64_t now);
/*
 * The sweep of sessions past their delete grace and of attachments nothing
 * references any more (sweeps.c runs it every second): the operation to
 * submit, and what follows its commit on the loop (the files are unlinked,
 * then their rows deleted).
 */
rl_store_op_t *rl_attachments_sweep(struct rl_media *media, int64_t now);
void rl_attachments_swept(struct rl_media *media, rl_store_op_t *op);
/* POST /v1/me/attachments: the raw body is the file, Content-Type its mime, ?name= its name. */
int rl_attachment_upload(rl_call_t *call);
/* The same upload on behalf of user_id (a bridge uploads for its installation's user). */
int rl_attachment_upload_for(rl_call_t *call, const char *user_id);
/* GET /v1/files/:key?exp=&sig=: the file, while the signed link is valid. */
int rl_attachment_download(rl_call_t *call);

#endif
